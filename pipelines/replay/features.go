package replay

// Resetting the feature processor's state, for a replay that recomputes the aggregates from the
// retained enriched log (backflow replay --reset-state). The replay command moves the group's
// offsets first; the reset runs only while the group has no live member.
//
// What makes up the state, and what the reset does to each part:
//
//   - the group table's changelog topic <group>-table: deleted and created again, empty, with
//     the same partition count, replication and topic configs;
//   - goka's local copy of that table (LevelDB folders <group>-table.<partition> under the
//     sink's --storage-dir): deleted where this process can see them. goka trusts a local copy
//     whose offset is at or above the new, empty changelog's end and would serve the old state,
//     so every host that runs the sink must lose its copy: see LocalStorageGuidance;
//   - the aggregate rows in Redis (entities tenant, (tenant, user) and model of the project):
//     deleted, so a tenant that no longer appears in the retained log does not keep its old
//     totals. Request rows (request_features) are left: each is rewritten by the replay.
//
// The loopback topic <group>-loop is not touched here; the replay moves the group's offset on
// it to its end, because deltas waiting there belong to the state being thrown away.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/internal/retry"
	"github.com/backflowhq/backflow/processors/features"
)

// ResetReport says what ResetFeatures removed.
type ResetReport struct {
	TableTopic   string
	Partitions   int32
	Replication  int16
	StorageDirs  []string // local table folders deleted
	RedisDeleted int      // aggregate rows deleted
}

// ResetFeatures deletes the aggregator's state: it re-creates the table changelog empty, deletes
// the local table folders under storageDir ("" skips that step) and the aggregate rows of
// cfg.Project in rdb. It is safe to run again after a partial failure.
func ResetFeatures(ctx context.Context, adm *kadm.Client, rdb redis.UniversalClient, cfg features.Config, storageDir string) (ResetReport, error) {
	cfg = cfg.WithDefaults()
	rep := ResetReport{TableTopic: cfg.TableTopic()}
	var err error
	if rep.Partitions, rep.Replication, err = recreateTopic(ctx, adm, rep.TableTopic); err != nil {
		return rep, err
	}
	if storageDir != "" {
		if rep.StorageDirs, err = DeleteLocalTable(storageDir, rep.TableTopic); err != nil {
			return rep, err
		}
	}
	if rep.RedisDeleted, err = DeleteAggregates(ctx, rdb, cfg.Project); err != nil {
		return rep, err
	}
	return rep, nil
}

// LocalStorageGuidance is what an operator must do on hosts this process cannot reach.
func LocalStorageGuidance(cfg features.Config) string {
	return fmt.Sprintf("on every other host that runs sink-features for group %s, delete %s.* under its --storage-dir before it starts",
		cfg.WithDefaults().Group, cfg.TableTopic())
}

// recreateTopic deletes topic and creates it again, empty, with the partitions, replication
// and non-default configs it had. A topic that does not exist is an error: the group table is
// created by the first run of the sink, and a reset of a group that never ran is a mistake.
func recreateTopic(ctx context.Context, adm *kadm.Client, topic string) (int32, int16, error) {
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("replay: reset features: describe %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, 0, fmt.Errorf("replay: reset features: table topic %s does not exist (has the sink ever run with this group?)", topic)
	}
	if d.Err != nil {
		return 0, 0, fmt.Errorf("replay: reset features: describe %s: %w", topic, d.Err)
	}
	parts := int32(len(d.Partitions))
	repl := int16(d.Partitions.NumReplicas())
	conf := map[string]*string{}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var c kadm.ResourceConfig
		if c, err = rc.On(topic, nil); err == nil {
			err = c.Err
			for _, kv := range c.Configs {
				if kv.Source == kmsg.ConfigSourceDynamicTopicConfig && kv.Value != nil {
					conf[kv.Key] = kv.Value
				}
			}
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("replay: reset features: configs of %s: %w", topic, err)
	}
	if _, ok := conf["cleanup.policy"]; !ok {
		conf["cleanup.policy"] = kadm.StringPtr("compact")
	}
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return 0, 0, fmt.Errorf("replay: reset features: delete %s: %w", topic, err)
	}
	// Deletion is asynchronous: create again, every 200ms until ctx ends, while the broker still
	// reports the topic as existing or being deleted.
	deleting := func(err error) bool { return errors.Is(err, kerr.TopicAlreadyExists) || kerr.IsRetriable(err) }
	err = retry.Do(ctx, retry.Policy{Min: 200 * time.Millisecond, Max: 200 * time.Millisecond}, deleting, nil, func() error {
		cr, err := adm.CreateTopic(ctx, parts, repl, conf, topic)
		if err == nil {
			err = cr.Err
		}
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("replay: reset features: create %s: %w", topic, err)
	}
	return parts, repl, nil
}

// DeleteLocalTable deletes goka's local folders of table (<table>.<partition>) under dir and
// returns them. A missing dir is not an error.
func DeleteLocalTable(dir, table string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay: reset features: local storage: %w", err)
	}
	var out []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), table+".")
		if !ok || !e.IsDir() || rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return out, fmt.Errorf("replay: reset features: local storage: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// DeleteAggregates deletes the Redis rows of project's aggregate entities (features.AggregateEntities)
// and returns how many it deleted. Request rows stay.
func DeleteAggregates(ctx context.Context, rdb redis.UniversalClient, project string) (int, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return deleteAggregatesOn(ctx, rdb, project, false)
	}
	// SCAN walks one node's keys: on a Redis Cluster, walk every master.
	var mu sync.Mutex
	n := 0
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		d, err := deleteAggregatesOn(ctx, node, project, true)
		mu.Lock()
		n += d
		mu.Unlock()
		return err
	})
	return n, err
}

// deleteAggregatesOn deletes the aggregate rows of project on one Redis server. A cluster node
// refuses a DEL of keys in different slots (CROSSSLOT), so there each key is its own DEL, in
// one pipeline.
func deleteAggregatesOn(ctx context.Context, rdb redis.Cmdable, project string, perKey bool) (int, error) {
	n := 0
	for _, jks := range features.AggregateEntities {
		pattern := globEscape(entityKeyPrefix(jks...)) + "*" + globEscape(project)
		var cursor uint64
		for {
			keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return n, fmt.Errorf("replay: reset features: scan redis: %w", err)
			}
			// The pattern's "*" could swallow a longer project name's tail: keep exact ends.
			var del []string
			for _, k := range keys {
				if strings.HasSuffix(k, project) && isEntityKey(k[:len(k)-len(project)], jks) {
					del = append(del, k)
				}
			}
			if len(del) > 0 {
				d, err := deleteKeys(ctx, rdb, del, perKey)
				if err != nil {
					return n, fmt.Errorf("replay: reset features: delete redis rows: %w", err)
				}
				n += d
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return n, nil
}

func deleteKeys(ctx context.Context, rdb redis.Cmdable, keys []string, perKey bool) (int, error) {
	if !perKey {
		d, err := rdb.Del(ctx, keys...).Result()
		return int(d), err
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Del(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cmds {
		n += int(c.Val())
	}
	return n, nil
}

// entityKeyPrefix is the part of a serialized entity key (feast.SerializeEntityKey) that names the
// join keys: every key of that entity starts with it.
func entityKeyPrefix(joinKeys ...string) string {
	vals := make([]feast.EntityValue, len(joinKeys))
	size := 4
	for i, jk := range joinKeys {
		vals[i] = feast.StringEntity(jk, "")
		size += 8 + len(jk)
	}
	return string(feast.SerializeEntityKey(vals...)[:size])
}

// isEntityKey reports whether b is a serialized entity key of exactly the join keys jks with
// string values (the prefix matched, and the values part has one string per key, nothing over).
func isEntityKey(b string, jks []string) bool {
	p := entityKeyPrefix(jks...)
	if !strings.HasPrefix(b, p) {
		return false
	}
	rest := []byte(b[len(p):])
	for range jks {
		if len(rest) < 8 || rest[0] != feast.ValueTypeString || rest[1] != 0 || rest[2] != 0 || rest[3] != 0 {
			return false
		}
		l := int(uint32(rest[4]) | uint32(rest[5])<<8 | uint32(rest[6])<<16 | uint32(rest[7])<<24)
		if len(rest) < 8+l {
			return false
		}
		rest = rest[8+l:]
	}
	return len(rest) == 0
}

// globEscape escapes Redis glob characters.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range []byte(s) {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(r)
	}
	return b.String()
}
