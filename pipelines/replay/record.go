package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/backflowhq/backflow/internal/control"
	"github.com/backflowhq/backflow/internal/kafka"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

// Record is what an executed replay leaves behind: who moved which group's offsets, when, with
// which spec, from where to where, and what the stage actions did.
type Record struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	By     string    `json:"by"`
	Group  string    `json:"group"`
	Spec   string    `json:"spec"`
	Reason string    `json:"reason,omitempty"`
	// Actions say what the stage actions did, one line each.
	Actions []string `json:"actions,omitempty"`
	// Epoch is set when the replay bumped ingest's epoch.
	Epoch      *EpochChange `json:"epoch,omitempty"`
	Partitions []Move       `json:"partitions"`
}

// EpochChange is an epoch bump.
type EpochChange struct {
	From int32 `json:"from"`
	To   int32 `json:"to"`
}

// Move is one partition's offset move; From is -1 when the group had no committed offset.
type Move struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
}

// NewRecord is the record of plan executed now by by.
func NewRecord(p *Plan, by, reason string) Record {
	var b [4]byte
	_, _ = rand.Read(b[:])
	now := time.Now().UTC()
	r := Record{ID: now.Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:]), Time: now, By: by, Group: p.Group,
		Spec: p.Spec.String(), Reason: reason}
	for _, row := range p.Rows {
		r.Partitions = append(r.Partitions, Move{Topic: row.Topic, Partition: row.Partition, From: row.Current, To: row.Target})
	}
	return r
}

// Who names the operator: user@host.
func Who() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// Recorder keeps executed replays. Apply calls Check before it changes anything (so a replay
// that could not be recorded is not executed), then Record once the offsets moved. Neither is
// called concurrently.
type Recorder interface {
	Name() string
	Check(ctx context.Context) error
	Record(ctx context.Context, r Record) error
}

// RecordKeyPrefix is the control-topic key prefix of group's replay records:
// "replay/<group>/"; the record's id follows. Every key is new, so compaction keeps them all.
func RecordKeyPrefix(group string) string { return "replay/" + group + "/" }

// ControlTopic records replays in the compacted control topic (internal/control), the topic
// that also holds ingest's epoch.
type ControlTopic struct {
	Client *kgo.Client
	Topic  string
	// Replication of the topic if Check has to create it. Default 1.
	Replication int16
}

// Name implements Recorder.
func (c ControlTopic) Name() string { return "control topic " + c.Topic }

// Check creates the control topic (compacted, one partition) when it is missing.
func (c ControlTopic) Check(ctx context.Context) error {
	if err := kafka.EnsureTopics(ctx, c.Client, kafka.TopicSpec{Name: c.Topic, Partitions: 1, Replication: c.Replication,
		Configs: map[string]string{"cleanup.policy": "compact"}}); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// Record implements Recorder: one JSON record under RecordKeyPrefix(group)+id, acknowledged
// by all in-sync replicas.
func (c ControlTopic) Record(ctx context.Context, r Record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := c.Client.ProduceSync(ctx, &kgo.Record{Topic: c.Topic, Key: []byte(RecordKeyPrefix(r.Group) + r.ID), Value: v}).FirstErr(); err != nil {
		return fmt.Errorf("replay: record in %s: %w", c.Topic, err)
	}
	return nil
}

// ReadRecords returns group's replay records from the control topic, oldest first ("" group:
// every group's). It reads the topic to its end as of the call; a control topic that does not
// exist holds no records (nothing was ever recorded there).
func ReadRecords(ctx context.Context, cl *kgo.Client, topic, group string) ([]Record, error) {
	prefix := "replay/"
	if group != "" {
		prefix = RecordKeyPrefix(group)
	}
	var out []Record
	err := control.Scan(ctx, cl, topic, false, func(r *kgo.Record) {
		if strings.HasPrefix(string(r.Key), prefix) && r.Value != nil {
			var rec Record
			if json.Unmarshal(r.Value, &rec) == nil {
				out = append(out, rec)
			}
		}
	})
	if errors.Is(err, control.ErrNoTopic) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// ReplayLogRow is one partition of one executed replay in ClickHouse's replay_log table
// (migration 0007; the dashboards read it). Field tags name the columns.
type ReplayLogRow struct {
	ReplayID   string    `ch:"replay_id"`
	ReplayedAt time.Time `ch:"replayed_at"`
	Who        string    `ch:"who"`
	Group      string    `ch:"consumer_group"`
	Spec       string    `ch:"spec"`
	Reason     string    `ch:"reason"`
	Actions    []string  `ch:"actions"`
	EpochFrom  int32     `ch:"epoch_from"` // -1: no epoch change
	EpochTo    int32     `ch:"epoch_to"`
	Topic      string    `ch:"topic"`
	Partition  int32     `ch:"partition"`
	FromOffset int64     `ch:"from_offset"` // -1: no committed offset before
	ToOffset   int64     `ch:"to_offset"`
}

// ClickHouseLog records replays in ClickHouse's replay_log table, one row per partition.
type ClickHouseLog struct {
	Conn driver.Conn
}

// Name implements Recorder.
func (c ClickHouseLog) Name() string { return "ClickHouse " + chschema.TableReplayLog }

// Check implements Recorder: the table must exist.
func (c ClickHouseLog) Check(ctx context.Context) error {
	return chschema.CheckTable(ctx, c.Conn, chschema.TableReplayLog)
}

// Record implements Recorder.
func (c ClickHouseLog) Record(ctx context.Context, r Record) error {
	ef, et := int32(-1), int32(-1)
	if r.Epoch != nil {
		ef, et = r.Epoch.From, r.Epoch.To
	}
	rows := make([]ReplayLogRow, len(r.Partitions))
	for i, m := range r.Partitions {
		rows[i] = ReplayLogRow{ReplayID: r.ID, ReplayedAt: r.Time, Who: r.By, Group: r.Group, Spec: r.Spec, Reason: r.Reason,
			Actions: append([]string{}, r.Actions...), EpochFrom: ef, EpochTo: et, Topic: m.Topic, Partition: m.Partition, FromOffset: m.From, ToOffset: m.To}
	}
	return InsertReplayLog(ctx, c.Conn, rows)
}

// InsertReplayLog writes the rows of one replay to replay_log in one batch.
func InsertReplayLog(ctx context.Context, conn driver.Conn, rows []ReplayLogRow) error {
	for i := range rows {
		if rows[i].Actions == nil {
			rows[i].Actions = []string{}
		}
	}
	return chschema.InsertRows(ctx, conn, chschema.TableReplayLog, rows)
}
