// Package stackclean removes what tests make on the shared local stack (Kafka topics and
// consumer groups, registry subjects, ClickHouse databases, Redis keys), and finds what they
// left behind.
//
// Every name a test makes carries an ID: a tag followed by the time it was made in
// nanoseconds, a run of 19 digits (inf-run1767225600000000000, it_pt1767225600000000000). The
// stack's own names (model-inference-result, backflow.enriched, backflow-ingest, default) have
// none, so a name with a stamp is a test's, and the stamp says when it was made. test/leftovers
// lists them after `make test`.
package stackclean

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

var lastID atomic.Int64

// ID returns tag followed by the time in nanoseconds, unique in this process (two calls in
// the same nanosecond get successive numbers). tag is short, lower-case letters and digits
// (names end up in ClickHouse identifiers, too).
func ID(tag string) string {
	for {
		last, now := lastID.Load(), time.Now().UnixNano()
		if now <= last {
			now = last + 1
		}
		if lastID.CompareAndSwap(last, now) {
			return tag + strconv.FormatInt(now, 10)
		}
	}
}

// Stamp returns the time of the first ID in name: a run of exactly 19 digits (nanoseconds
// since 1970, from 2001 to 2286).
func Stamp(name string) (time.Time, bool) {
	for i := 0; i < len(name); {
		if !isDigit(name[i]) {
			i++
			continue
		}
		j := i
		for j < len(name) && isDigit(name[j]) {
			j++
		}
		if j-i == 19 {
			if n, err := strconv.ParseInt(name[i:j], 10, 64); err == nil {
				return time.Unix(0, n), true
			}
		}
		i = j
	}
	return time.Time{}, false
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// BenchmarkTag starts the names a benchmark makes (bench-dashboard's scratch databases,
// bench_dash_10m_new_1767225600000000000). A benchmark may run beside the tests and drops what
// it made when it ends, so test/leftovers shows its names apart and does not count them.
const BenchmarkTag = "bench_"

// IsBenchmark reports whether name is a benchmark's (see BenchmarkTag).
func IsBenchmark(name string) bool { return strings.HasPrefix(name, BenchmarkTag) }

// Match selects test names: those with a stamp at or after Since (and before Until, when set),
// containing Contains when it is set (one test's ID: what that test made).
type Match struct {
	Contains     string
	Since, Until time.Time
}

// OK reports whether name is selected.
func (m Match) OK(name string) bool {
	if m.Contains != "" && !strings.Contains(name, m.Contains) {
		return false
	}
	at, ok := Stamp(name)
	return ok && !at.Before(m.Since) && (m.Until.IsZero() || at.Before(m.Until))
}

// Kinds of Item.
const (
	KindTopic    = "topic"
	KindGroup    = "group"
	KindSubject  = "subject"
	KindDatabase = "database"
	KindTable    = "table" // in ClickHouse's default database
	KindRedisKey = "redis key"
)

// Item is one thing a test made.
type Item struct {
	Kind, Name string
}

// Created is the time of the item's stamp.
func (i Item) Created() time.Time {
	at, _ := Stamp(i.Name)
	return at
}

func (i Item) String() string {
	return fmt.Sprintf("%-9s %q (made %s)", i.Kind, i.Name, i.Created().Format(time.RFC3339))
}

// Stack is the connections to one stack's services; Find and Remove skip a nil one.
type Stack struct {
	Kafka    *kgo.Client
	Registry *sr.Client
	CH       driver.Conn
	Redis    goredis.UniversalClient
}

// Find lists what on s has a name m selects.
func Find(ctx context.Context, s Stack, m Match) ([]Item, error) {
	var items []Item
	var errs []error
	add := func(kind string, names []string) {
		for _, n := range names {
			if m.OK(n) {
				items = append(items, Item{kind, n})
			}
		}
	}
	if s.Kafka != nil {
		adm := kadm.NewClient(s.Kafka)
		if td, err := adm.ListTopics(ctx); err != nil {
			errs = append(errs, fmt.Errorf("list topics: %w", err))
		} else {
			add(KindTopic, td.Names())
		}
		if gs, err := adm.ListGroups(ctx); err != nil {
			errs = append(errs, fmt.Errorf("list groups: %w", err))
		} else {
			add(KindGroup, gs.Groups())
		}
	}
	if s.Registry != nil {
		if subs, err := s.Registry.Subjects(ctx); err != nil {
			errs = append(errs, fmt.Errorf("list subjects: %w", err))
		} else {
			add(KindSubject, subs)
		}
	}
	if s.CH != nil {
		for _, q := range []struct{ kind, sql string }{
			{KindDatabase, "SELECT name FROM system.databases"},
			{KindTable, "SELECT name FROM system.tables WHERE database = 'default'"},
		} {
			names, err := strings1(ctx, s.CH, q.sql)
			if err != nil {
				errs = append(errs, fmt.Errorf("clickhouse %s: %w", q.sql, err))
			}
			add(q.kind, names)
		}
	}
	if s.Redis != nil {
		pattern := "*"
		if m.Contains != "" {
			pattern = "*" + m.Contains + "*"
		}
		keys, err := scan(ctx, s.Redis, pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("redis scan: %w", err))
		}
		add(KindRedisKey, keys)
	}
	slices.SortFunc(items, func(a, b Item) int { return strings.Compare(a.Kind+"\x00"+a.Name, b.Kind+"\x00"+b.Name) })
	return items, errors.Join(errs...)
}

func strings1(ctx context.Context, conn driver.Conn, sql string) ([]string, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// scan lists the keys matching pattern; on a Redis Cluster, on every master (SCAN walks one
// node's keys).
func scan(ctx context.Context, rdb goredis.UniversalClient, pattern string) ([]string, error) {
	if cc, ok := rdb.(*goredis.ClusterClient); ok {
		var mu sync.Mutex
		var out []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
			keys, err := scan(ctx, node, pattern)
			mu.Lock()
			out = append(out, keys...)
			mu.Unlock()
			return err
		})
		return out, err
	}
	var out []string
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return out, err
		}
		out = append(out, keys...)
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// Remove deletes items from s: groups first (they may still be waiting for a killed member's
// session to time out), then topics, subjects, databases, tables and keys.
func Remove(ctx context.Context, s Stack, items []Item) error {
	by := map[string][]string{}
	for _, it := range items {
		by[it.Kind] = append(by[it.Kind], it.Name)
	}
	var errs []error
	if s.Kafka != nil {
		errs = append(errs, DeleteGroups(ctx, s.Kafka, by[KindGroup]...), DeleteTopics(ctx, s.Kafka, by[KindTopic]...))
	}
	if s.Registry != nil {
		errs = append(errs, DeleteSubjects(ctx, s.Registry, by[KindSubject]...))
	}
	if s.CH != nil {
		for _, db := range by[KindDatabase] {
			errs = append(errs, DropDatabase(ctx, s.CH, db))
		}
		for _, tbl := range by[KindTable] {
			errs = append(errs, s.CH.Exec(ctx, "DROP TABLE IF EXISTS default."+quoteIdent(tbl)))
		}
	}
	if s.Redis != nil {
		errs = append(errs, del(ctx, s.Redis, by[KindRedisKey]))
	}
	return errors.Join(errs...)
}

// Sweep removes what on s has a name m selects, and returns what it found.
func Sweep(ctx context.Context, s Stack, m Match) ([]Item, error) {
	items, err := Find(ctx, s, m)
	return items, errors.Join(err, Remove(ctx, s, items))
}

// DeleteTopics deletes topics; one that does not exist is no error.
func DeleteTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// DeleteGroups deletes consumer groups; one that does not exist is no error. A group that
// still has members (a stage killed without leaving stays a member until its session times
// out, 45 s at most with franz-go's default) is tried again every second until ctx ends.
func DeleteGroups(ctx context.Context, cl *kgo.Client, groups ...string) error {
	adm := kadm.NewClient(cl)
	var failed []error
	for left := groups; len(left) > 0; {
		resp, err := adm.DeleteGroups(ctx, left...)
		var retry []string
		var why error
		for _, g := range left {
			r, ok := resp[g]
			switch {
			case !ok && err != nil:
				retry, why = append(retry, g), err
			case !ok, r.Err == nil, errors.Is(r.Err, kerr.GroupIDNotFound):
			case errors.Is(r.Err, kerr.NonEmptyGroup), errors.Is(r.Err, kerr.CoordinatorLoadInProgress),
				errors.Is(r.Err, kerr.CoordinatorNotAvailable), errors.Is(r.Err, kerr.NotCoordinator):
				retry, why = append(retry, g), r.Err
			default:
				failed = append(failed, fmt.Errorf("delete group %s: %w", g, r.Err))
			}
		}
		if left = retry; len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(append(failed, fmt.Errorf("groups %v not deleted (%v): %w", left, why, ctx.Err()))...)
		case <-time.After(time.Second):
		}
	}
	return errors.Join(failed...)
}

// DeleteSubjects deletes registry subjects for good (a soft delete, then the permanent one);
// one that does not exist is no error.
func DeleteSubjects(ctx context.Context, reg *sr.Client, subjects ...string) error {
	var errs []error
	for _, sub := range subjects {
		for _, how := range []sr.DeleteHow{sr.SoftDelete, sr.HardDelete} {
			if _, err := reg.DeleteSubject(ctx, sub, how); err != nil && !notFound(err) {
				errs = append(errs, fmt.Errorf("delete subject %s: %w", sub, err))
				break
			}
		}
	}
	return errors.Join(errs...)
}

func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// DropDatabase drops ClickHouse database db if it exists.
func DropDatabase(ctx context.Context, conn driver.Conn, db string) error {
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(db)); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	return nil
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "\\`") + "`" }

// DeleteRedisKeys deletes the keys that match pattern (a SCAN pattern), and returns how many.
func DeleteRedisKeys(ctx context.Context, rdb goredis.UniversalClient, pattern string) (int, error) {
	keys, err := scan(ctx, rdb, pattern)
	return len(keys), errors.Join(err, del(ctx, rdb, keys))
}

// del deletes keys, 1000 to a command; on a Redis Cluster one key to a command in a pipeline,
// since a multi-key DEL must stay within one slot (the client splits the pipeline per node).
func del(ctx context.Context, rdb goredis.UniversalClient, keys []string) error {
	if _, ok := rdb.(*goredis.ClusterClient); ok {
		pipe := rdb.Pipeline()
		for _, k := range keys {
			pipe.Del(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && len(keys) > 0 {
			return fmt.Errorf("redis del: %w", err)
		}
		return nil
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("redis del: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}
