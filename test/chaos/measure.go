package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/backflowhq/backflow/internal/feast"
	"github.com/backflowhq/backflow/processors/features"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Counts are reliability.md's three numbers for one run, and what they are made of. The
// manifests of every load in the run are the oracle.
type Counts struct {
	Records int `json:"records"` // acknowledged source records, every kind
	Valid   int `json:"valid"`   // distinct (topic, requestId, phase) slots of valid records
	Poison  int `json:"poison"`

	// Lost: valid slots in neither ClickHouse nor the DLQ, plus requests the feature store
	// counts fewer times than ClickHouse holds their RESPONSE (per tenant).
	Lost        int `json:"lost"`
	FeatureLost int `json:"featureLost"`
	// DupDedup: count() - uniqExact(key) through the deduplicating views (inference results,
	// gateway logs, moderation hits), plus requests the feature store counts more than once.
	// Must be 0.
	DupDedup   int `json:"dupDedup"`
	FeatureDup int `json:"featureDup"`
	// DupRaw: the same over the raw tables, the DLQ mirror's too: rows written more than once
	// (reported, bounded).
	DupRaw int `json:"dupRaw"`
	// Misrouted: valid records in the DLQ, bad records (or rows of no generated record) in
	// the tables, and poison records missing from the DLQ or there with the wrong class.
	Misrouted       int `json:"misrouted"`
	ValidInDLQ      int `json:"validInDlq"`
	AllowedInDLQ    int `json:"allowedInDlq"`
	BadInTables     int `json:"badInTables"`
	PoisonMissing   int `json:"poisonMissing"`
	PoisonWrong     int `json:"poisonWrongClass"`
	PoisonTwice     int `json:"poisonTwice"`     // poison dead-lettered at more than one DLQ position
	SinkRejected    int `json:"sinkRejected"`    // valid slots a sink dead-lettered (expected only where the scenario says)
	UnmoderatedRows int `json:"unmoderatedRows"` // rows sunk with moderation_status UNAVAILABLE
	WrongVerdicts   int `json:"wrongVerdicts"`   // rows whose hits disagree with the words loadgen planted

	Examples []string `json:"examples,omitempty"` // a few of what went wrong
}

// MeasureOptions say what a scenario expects beyond the defaults.
type MeasureOptions struct {
	// SinkRejects: valid records the ClickHouse sink dead-letters are expected (a schema
	// mismatch), not misrouted; each must be in the DLQ exactly once.
	SinkRejects bool
	// AllowDLQClasses: valid records dead-lettered with one of these classes are allowed
	// (for example moderation_mismatch when the service keeps answering wrong), and counted
	// as AllowedInDLQ, not misrouted.
	AllowDLQClasses []string
}

type slot struct{ topic, id, phase string }

func (s slot) String() string { return s.topic + "/" + s.id + "/" + s.phase }

// Measure reads ClickHouse (the private database), the DLQ mirror and Redis, and counts
// against the manifests. Call it once every group has caught up.
func (e *Env) Measure(ctx context.Context, ms []*loadgen.Manifest, opt MeasureOptions) (Counts, error) {
	var c Counts
	example := func(format string, args ...any) {
		if len(c.Examples) < 12 {
			c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
		}
	}
	want := map[slot]bool{}
	sensitive := map[slot]bool{}
	locs := map[loadgen.Location]loadgen.Entry{}
	for _, m := range ms {
		for _, en := range m.Entries {
			c.Records++
			locs[loadgen.Location{Topic: en.Topic, Partition: en.Partition, Offset: en.Offset}] = en
			if !en.Valid() {
				c.Poison++
				continue
			}
			s := e.slotOf(en.Topic, en.RequestID, en.Phase)
			want[s] = true
			if en.Sensitive {
				sensitive[s] = true
			}
		}
	}
	c.Valid = len(want)

	// What landed, through the deduplicating views.
	got := map[slot]bool{}
	hits := map[slot]bool{}
	for _, q := range []string{
		"SELECT source_topic, request_id, '', moderation_status, hit_count FROM v_inference_results",
		"SELECT source_topic, request_id, phase, moderation_status, hit_count FROM v_gateway_logs",
	} {
		rows, err := e.CH.Query(ctx, q)
		if err != nil {
			return c, fmt.Errorf("%s: %w", q, err)
		}
		for rows.Next() {
			var s slot
			var status string
			var hitCount uint16
			if err := rows.Scan(&s.topic, &s.id, &s.phase, &status, &hitCount); err != nil {
				rows.Close()
				return c, err
			}
			got[s] = true
			if hitCount > 0 {
				hits[s] = true
			}
			if !want[s] {
				c.BadInTables++
				example("row of no valid generated record in ClickHouse: %v", s)
			}
			if status == "UNAVAILABLE" {
				c.UnmoderatedRows++
				example("row %v has moderation status %s", s, status)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return c, err
		}
	}
	for s := range got {
		if want[s] && hits[s] != sensitive[s] {
			c.WrongVerdicts++
			example("row %v: hits %v, planted word %v", s, hits[s], sensitive[s])
		}
	}

	// The DLQ mirror, every entry at its own DLQ position.
	type origin struct {
		loc   loadgen.Location
		stage string
	}
	dlqAt := map[origin][]string{} // classes, one per DLQ position
	sinkDLQ := map[string]int{}    // request id -> entries a sink dead-lettered
	rows, err := e.CH.Query(ctx, "SELECT origin_topic, origin_partition, origin_offset, stage, class, record_key FROM dlq_entries FINAL")
	if err != nil {
		return c, err
	}
	for rows.Next() {
		var o origin
		var class, key string
		if err := rows.Scan(&o.loc.Topic, &o.loc.Partition, &o.loc.Offset, &o.stage, &class, &key); err != nil {
			rows.Close()
			return c, err
		}
		if o.loc.Topic == e.Inf || o.loc.Topic == e.GW {
			dlqAt[o] = append(dlqAt[o], class)
		} else {
			sinkDLQ[key]++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c, err
	}
	validDLQ := map[slot]bool{}
	for o, classes := range dlqAt {
		en, ok := locs[o.loc]
		switch {
		case !ok:
			c.BadInTables++
			example("DLQ entry of no generated record: %+v", o)
		case en.Valid() && slices.Contains(opt.AllowDLQClasses, classes[0]):
			c.AllowedInDLQ++
			validDLQ[e.slotOf(en.Topic, en.RequestID, en.Phase)] = true
		case en.Valid():
			c.ValidInDLQ++
			validDLQ[e.slotOf(en.Topic, en.RequestID, en.Phase)] = true
			example("valid record in the DLQ (%s): %s/%d/%d %s", classes[0], en.Topic, en.Partition, en.Offset, en.RequestID)
		default:
			if classes[0] != en.Class {
				c.PoisonWrong++
				example("poison %s at %s/%d/%d dead-lettered as %s, want %s", en.Poison, en.Topic, en.Partition, en.Offset, classes[0], en.Class)
			}
			if len(classes) > 1 {
				c.PoisonTwice++
			}
		}
	}
	for loc, en := range locs {
		if en.Valid() {
			continue
		}
		if _, ok := dlqAt[origin{loc, "ingest"}]; !ok {
			c.PoisonMissing++
			example("poison %s at %s/%d/%d is not in the DLQ", en.Poison, loc.Topic, loc.Partition, loc.Offset)
		}
	}
	for s := range want {
		switch {
		case got[s] || validDLQ[s]:
		case sinkDLQ[s.id] > 0:
			c.SinkRejected++
			if !opt.SinkRejects {
				c.ValidInDLQ++
				example("valid record dead-lettered by a sink: %v", s)
			} else if sinkDLQ[s.id] > 1 {
				c.ValidInDLQ++
				example("rejected record in the DLQ %d times: %v", sinkDLQ[s.id], s)
			}
		default:
			c.Lost++
			example("lost: %v", s)
		}
	}
	c.Misrouted = c.ValidInDLQ + c.BadInTables + c.PoisonMissing + c.PoisonWrong

	// Duplicates: deduplicated and raw.
	for _, q := range []struct {
		table, key string
		raw        bool
	}{
		{"v_inference_results", "source_topic, request_id", false}, {"v_gateway_logs", "source_topic, request_id, phase", false},
		{"v_moderation_hits", "source_topic, request_id, phase, start", false},
		{"inference_results", "source_topic, request_id", true}, {"gateway_logs", "source_topic, request_id, phase", true},
		{"moderation_hits", "source_topic, request_id, phase, start", true}, {"dlq_entries", "dlq_topic, dlq_partition, dlq_offset", true},
	} {
		var n int64
		if err := e.CH.QueryRow(ctx, fmt.Sprintf("SELECT toInt64(count()) - toInt64(uniqExact(%s)) FROM %s", q.key, q.table)).Scan(&n); err != nil {
			return c, fmt.Errorf("dup %s: %w", q.table, err)
		}
		if q.raw {
			c.DupRaw += int(n)
		} else {
			c.DupDedup += int(n)
		}
	}

	// The feature store: every tenant's request_count against ClickHouse's RESPONSE rows.
	trows, err := e.CH.Query(ctx, "SELECT tenant_id, toInt64(count()) FROM v_gateway_logs WHERE phase = 'RESPONSE' GROUP BY tenant_id")
	if err != nil {
		return c, err
	}
	perTenant := map[string]int64{}
	for trows.Next() {
		var t string
		var n int64
		if err := trows.Scan(&t, &n); err != nil {
			trows.Close()
			return c, err
		}
		perTenant[t] = n
	}
	trows.Close()
	tenants := make([]string, 0, len(perTenant))
	for t := range perTenant {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		n := perTenant[t]
		got, err := e.Int64Feature(ctx, feast.RedisKey(e.Project, feast.StringEntity(features.TenantEntity, t)), features.TenantView, "request_count")
		if err != nil && !strings.Contains(err.Error(), "redis: nil") {
			return c, fmt.Errorf("tenant %s: %w", t, err)
		}
		switch {
		case got < n:
			c.FeatureLost += int(n - got)
			example("tenant %s: request_count %d in Redis, %d RESPONSE rows", t, got, n)
		case got > n:
			c.FeatureDup += int(got - n)
			example("tenant %s: request_count %d in Redis, %d RESPONSE rows", t, got, n)
		}
	}
	c.Lost += c.FeatureLost
	c.DupDedup += c.FeatureDup
	return c, nil
}

// slotOf is the key a record collapses by: gateway logs by phase too.
func (e *Env) slotOf(topic, id, phase string) slot {
	if topic != e.GW {
		phase = ""
	}
	return slot{topic, id, phase}
}

// Int64Feature reads an Int64 feature of an entity's Redis hash (Feast's layout).
func (e *Env) Int64Feature(ctx context.Context, key, view, feat string) (int64, error) {
	b, err := e.Redis.HGet(ctx, key, feast.FieldKey(view, feat)).Bytes()
	if err != nil {
		return 0, err
	}
	return feast.DecodeInt64Value(b)
}
