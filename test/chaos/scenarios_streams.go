package chaos

// The scenarios of a declared stream: a Protobuf stream with the broker leading its topic
// killed and restarted (25). The table of every scenario is scenarios.go.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/stackclean"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// streamSpec is a declared stream of a scenario's private pipeline, with the example schema
// its records are written with (a file of deploy/streams) and a DLQ topic of its own.
type streamSpec struct {
	Name, Topic, Group, Table, Key, Time, Schema, DLQ string
}

// protoStream is the shop-order example (a Protobuf subject whose schema imports another) on
// private names.
func (e *Env) protoStream() streamSpec {
	return streamSpec{Name: "shop-order", Topic: "shop-" + e.ID, Group: "stream-shop-" + e.ID, Table: "shop_order",
		Key: "order_id", Time: "created", Schema: "shop-order.proto", DLQ: "sdlq-" + e.ID}
}

// extra is Config's extra keys for a process running s's stage alone: the streams list
// declaring s, the DLQ of its own, and no rollup marks (no rollup loop reads them here).
func (s streamSpec) extra() map[string]string {
	return map[string]string{
		"streams":         fmt.Sprintf("[{name: %s, topic: %s, group: %s, dedupe_key: %s, event_time: %s}]", s.Name, s.Topic, s.Group, s.Key, s.Time),
		"sink_clickhouse": "dlq_topic: " + s.DLQ + ", rollups: false",
	}
}

// streamTraffic is records of s over about seconds, with duplicates (a quarter of them to
// another partition) and 1 % poison of every stream kind.
func (r *Run) streamTraffic(s streamSpec, records int, seconds float64) (loadgen.StreamConfig, error) {
	dir := filepath.Join(RepoRoot(), "deploy", "streams")
	text, err := os.ReadFile(filepath.Join(dir, s.Schema))
	if err != nil {
		return loadgen.StreamConfig{}, err
	}
	cfg := loadgen.StreamConfig{Topic: s.Topic, Schema: string(text), KeyField: s.Key, TimeField: s.Time,
		ImportPaths: []string{dir}, ReferencePrefix: r.ID + "-", Records: records,
		DuplicateRate: 0.02, CrossPartitionShare: 0.25, PoisonRate: 0.01, Seed: uint64(100 + r.Scenario.ID)}
	switch filepath.Ext(s.Schema) {
	case ".proto":
		cfg.SchemaType = sr.TypeProtobuf
	case ".json":
		cfg.SchemaType = sr.TypeJSON
	}
	if seconds > 0 {
		cfg.Rate = float64(records) / (seconds * r.Opts.Scale)
	}
	return cfg, nil
}

// LoadStream sends a declared stream's traffic with the real registry and returns its
// manifest; suffix sets the run id apart from another load's.
func (e *Env) LoadStream(ctx context.Context, cfg loadgen.StreamConfig, suffix string) (*loadgen.Manifest, loadgen.Stats, error) {
	return e.load(ctx, suffix, func(prod *kgo.Client, opts loadgen.Options) (loadgen.Stats, error) {
		return loadgen.RunStream(ctx, cfg, prod, e.Registry, opts)
	})
}

// startStream makes s's topic and DLQ, registers its schema with a first load of 100
// records (the stage derives its table from the subject), and starts its stage.
func (r *Run) startStream(ctx context.Context, s streamSpec) (*Proc, error) {
	r.StreamGroups = map[string][]string{s.Group: {s.Topic}}
	r.measure = func(ctx context.Context, ms []*loadgen.Manifest) (Counts, error) { return r.MeasureStream(ctx, s, ms) }
	if err := loadgen.EnsureTopics(ctx, r.Admin, 3, r.Replication, s.Topic, s.DLQ); err != nil {
		return nil, err
	}
	// Before the sweep of every name with the env's ID, and in order: the referencing subject
	// first, so the one it references can go.
	r.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := stackclean.DeleteSubjects(ctx, r.Registry, s.Topic+"-value", r.ID+"-shop-common.proto"); err != nil {
			r.Logf("removing the stream's subjects: %v", err)
		}
	})
	cfg, err := r.streamTraffic(s, 100, 0)
	if err != nil {
		return nil, err
	}
	m, st, err := r.LoadStream(ctx, cfg, "-first")
	if err != nil {
		return nil, fmt.Errorf("first load: %w", err)
	}
	r.AddManifest(m)
	r.Logf("  loadgen: %v", st)
	p, err := r.StartRun("stream", "stream-"+s.Name, s.extra())
	if err != nil {
		return nil, err
	}
	return p, p.Ready(ctx, 3*time.Minute)
}

// 25
func protobufStreamBrokerRestart(ctx context.Context, r *Run) error {
	s := r.protoStream()
	p, err := r.startStream(ctx, s)
	if err != nil {
		return err
	}
	cfg, err := r.streamTraffic(s, r.Records, 60)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		m, st, err := r.LoadStream(ctx, cfg, "")
		if err == nil {
			r.AddManifest(m)
			r.Logf("  loadgen: %v", st)
		}
		done <- err
	}()
	sleep(ctx, r.Dur(15*time.Second))
	if err := r.killLeaderOf(ctx, s.Topic); err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	if !p.Running() {
		r.Fail("the stream's stage exited during the broker restart:\n%s", tail(p.Log(), 1500))
	}
	return nil
}

// MeasureStream counts a declared stream's manifests against its deduplicated view, its raw
// table and its DLQ topic (read from Kafka: no mirror runs beside the stage): lost are
// valid keys in neither the view nor the DLQ; dup is count() - uniqExact(key) through the view
// (and rows of one source record written twice in the raw table, reported); misrouted are valid records in the DLQ, rows of no valid
// record, and poison missing from the DLQ or there with another class.
func (e *Env) MeasureStream(ctx context.Context, s streamSpec, ms []*loadgen.Manifest) (Counts, error) {
	var c Counts
	example := func(format string, args ...any) {
		if len(c.Examples) < 12 {
			c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
		}
	}
	want := map[string]bool{}
	locs := map[loadgen.Location]loadgen.Entry{}
	for _, m := range ms {
		for _, en := range m.Entries {
			c.Records++
			locs[loadgen.Location{Topic: en.Topic, Partition: en.Partition, Offset: en.Offset}] = en
			if en.Valid() {
				want[en.RequestID] = true
			} else {
				c.Poison++
			}
		}
	}
	c.Valid = len(want)
	got := map[string]bool{}
	rows, err := e.CH.Query(ctx, fmt.Sprintf("SELECT toString(%s) FROM v_%s", s.Key, s.Table))
	if err != nil {
		return c, err
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return c, err
		}
		got[k] = true
		if !want[k] {
			c.BadInTables++
			example("row of no valid generated record in v_%s: %s", s.Table, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c, err
	}
	dlqAt := map[loadgen.Location][]string{} // classes, one per DLQ position
	if err := dlq.Scan(ctx, e.Kafka, s.DLQ, func(r *kgo.Record) error {
		en, err := dlq.Decode(r)
		if err != nil {
			return err
		}
		loc := loadgen.Location{Topic: en.Origin.Topic, Partition: en.Origin.Partition, Offset: en.Origin.Offset}
		dlqAt[loc] = append(dlqAt[loc], en.Class)
		return nil
	}); err != nil {
		return c, fmt.Errorf("read the DLQ %s: %w", s.DLQ, err)
	}
	validDLQ := map[string]bool{}
	for loc, classes := range dlqAt {
		en, ok := locs[loc]
		switch {
		case !ok:
			c.BadInTables++
			example("DLQ entry of no generated record: %+v", loc)
		case en.Valid():
			c.ValidInDLQ++
			validDLQ[en.RequestID] = true
			example("valid record in the DLQ (%s): %+v %s", classes[0], loc, en.RequestID)
		default:
			if classes[0] != en.Class {
				c.PoisonWrong++
				example("poison %s at %+v dead-lettered as %s, want %s", en.Poison, loc, classes[0], en.Class)
			}
			if len(classes) > 1 {
				c.PoisonTwice++
			}
		}
	}
	for loc, en := range locs {
		if _, ok := dlqAt[loc]; !en.Valid() && !ok {
			c.PoisonMissing++
			example("poison %s at %+v is not in the DLQ", en.Poison, loc)
		}
	}
	for k := range want {
		if !got[k] && !validDLQ[k] {
			c.Lost++
			example("lost: %s", k)
		}
	}
	c.Misrouted = c.ValidInDLQ + c.BadInTables + c.PoisonMissing + c.PoisonWrong
	// Through the view, rows per key; in the raw table, rows per source record (a duplicate
	// loadgen sent is a record of its own, which the view collapses).
	for _, q := range []struct {
		table, key string
		dup        *int
	}{{"v_" + s.Table, s.Key, &c.DupDedup}, {s.Table, chschema.ColPartition + ", " + chschema.ColOffset, &c.DupRaw}} {
		var n int64
		if err := e.CH.QueryRow(ctx, fmt.Sprintf("SELECT toInt64(count()) - toInt64(uniqExact(%s)) FROM %s", q.key, q.table)).Scan(&n); err != nil {
			return c, fmt.Errorf("dup %s: %w", q.table, err)
		}
		*q.dup = int(n)
	}
	return c, nil
}
