package rollup

import (
	"fmt"
	"strings"
)

// The sunk tables the rollups read (their Source).
const (
	InferenceResults = "inference_results"
	GatewayLogs      = "gateway_logs"
	ModerationHits   = "moderation_hits"
	DLQEntries       = "dlq_entries"
	SinkLedger       = "sink_ledger"
)

// DLQFirst is the table that names, for each dead-lettered origin, its first entry in the
// dead-letter topic (the one v_dlq_entries keeps). The DLQ mirror writes a row to it for every
// entry; FINAL keeps the first (see migration 0017).
const DLQFirst = "dlq_first"

// Watermarks is the table in which Recompute records, per source table, the newest minute it
// rolled up. A panel reads rollups below it and raw rows from it on (Range).
const Watermarks = "rollup_watermarks"

// Merge is how a measure's values over several rows combine into one.
type Merge int

const (
	// Sum adds the values (counts, sums of tokens, bytes).
	Sum Merge = iota
	// Max keeps the largest (the newest event time landed).
	Max
	// Quantiles merges quantilesState values (Measure.Type names the levels and argument).
	Quantiles
)

// Measure is one aggregate column of a rollup.
type Measure struct {
	Name string
	// Type is the stored column's ClickHouse type: UInt64 for a Sum, DateTime for a Max, and
	// AggregateFunction(quantiles(<levels>), <arg type>) for Quantiles.
	Type  string
	Merge Merge
}

// zero is a value that leaves any combination of the measure unchanged. In a GROUP BY query.
func (m Measure) zero() string {
	switch m.Merge {
	case Max:
		return "toDateTime(0)"
	case Quantiles:
		levels, arg := m.quantiles()
		return fmt.Sprintf("quantilesStateIf(%s)(to%s(0), 0)", levels, arg)
	default:
		return "to" + m.Type + "(0)"
	}
}

// merge is the aggregate that combines stored values of the measure into one stored value.
func (m Measure) merge(col string) string {
	switch m.Merge {
	case Max:
		return "max(" + col + ")"
	case Quantiles:
		levels, _ := m.quantiles()
		return fmt.Sprintf("quantilesMergeState(%s)(%s)", levels, col)
	default:
		return "sum(" + col + ")"
	}
}

// quantiles splits AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt32) into its levels and
// argument type.
func (m Measure) quantiles() (levels, arg string) {
	inner := strings.TrimSuffix(strings.TrimPrefix(m.Type, "AggregateFunction(quantiles("), ")")
	levels, arg, _ = strings.Cut(inner, "), ")
	return levels, arg
}

// Dim is one grouping column of a rollup (always a String).
type Dim struct{ Name string }

// Part is what one source table contributes to a rollup: its rows, grouped by minute and by the
// rollup's dimensions. A rollup fed by two tables (moderation: model outputs and gateway texts)
// has two parts, each owning the rollup rows its Scope selects.
type Part struct {
	Source string
	// Time is the source's time column: the rows of minute m are those with
	// toStartOfMinute(Time) = m.
	Time string
	// Final reads the source through FINAL (the ReplacingMergeTree tables; not the ledger, an
	// audit log in which a re-written flush counts twice, as in v_sink_minute).
	Final bool
	// Where filters the source's rows ("" for all). "$rows" in it stands for the condition that
	// selects the minutes being aggregated (for a subquery that must see the same rows).
	Where string
	// Dims holds one SQL expression per Rollup.Dims, Measures one aggregate per
	// Rollup.Measures, producing exactly the measure's Type.
	Dims, Measures []string
	// Scope selects the rollup rows this part writes ("" for all of them), so that a
	// recompute of this part leaves the other parts' rows alone.
	Scope string
}

// Rollup is one family of pre-aggregated rows: rollup_<Name>_minute, with a row per minute and
// combination of dimensions, rollup_<Name>_hour, the same per hour, and rollup_<Name>_day, the
// same per UTC day.
type Rollup struct {
	Name     string
	Dims     []Dim
	Measures []Measure
	Parts    []Part
}

// MinuteTable, HourTable and DayTable are the rollup's tables.
func (r Rollup) MinuteTable() string { return "rollup_" + r.Name + "_minute" }
func (r Rollup) HourTable() string   { return "rollup_" + r.Name + "_hour" }
func (r Rollup) DayTable() string    { return "rollup_" + r.Name + "_day" }

// Tables are the rollup's tables, finest first.
func (r Rollup) Tables() []string { return []string{r.MinuteTable(), r.HourTable(), r.DayTable()} }

// Sources are the tables the rollup reads, in the order of its parts.
func (r Rollup) Sources() []string {
	var out []string
	for _, p := range r.Parts {
		out = append(out, p.Source)
	}
	return out
}

func (r Rollup) dimNames() []string {
	out := make([]string, len(r.Dims))
	for i, d := range r.Dims {
		out[i] = d.Name
	}
	return out
}

func (r Rollup) measureNames() []string {
	out := make([]string, len(r.Measures))
	for i, m := range r.Measures {
		out[i] = m.Name
	}
	return out
}

// latencyQuantiles is the latency state the views keep (v_model_minute's latency_ms_quantiles).
const latencyQuantiles = "AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt32)"

// The rollups, one per family of panels. Each mirrors a per-minute view of migrations 0008 and
// 0014 (same dimensions, same measures, same filters), so a panel's answer over a rollup is the
// view's answer.
// The rollups compare enum columns as strings (toString(status) = 'UNKNOWN'): a literal the
// column's enum lacks is an error in ClickHouse, and an operator may narrow an enum (an
// old server's table, a column changed by hand); the comparison as text is false instead.
var (
	// Model mirrors v_model_minute: inference results per model.
	Model = Rollup{
		Name: "model",
		Dims: []Dim{{"model"}},
		Measures: []Measure{{"requests", "UInt64", Sum}, {"errors", "UInt64", Sum}, {"unknown", "UInt64", Sum},
			{"latency_ms_sum", "UInt64", Sum}, {"latency_ms_quantiles", latencyQuantiles, Quantiles},
			{"tokens_prompt", "UInt64", Sum}, {"tokens_completion", "UInt64", Sum}, {"flagged", "UInt64", Sum}},
		Parts: []Part{{Source: InferenceResults, Time: "event_time", Final: true,
			Dims: []string{"toString(model)"},
			Measures: []string{"toUInt64(count())", "toUInt64(countIf(toString(status) NOT IN ('OK', 'UNKNOWN')))", "toUInt64(countIf(toString(status) = 'UNKNOWN'))",
				"toUInt64(sum(latency_ms))", "quantilesState(0.5, 0.95, 0.99)(latency_ms)",
				"toUInt64(sum(prompt_tokens))", "toUInt64(sum(completion_tokens))", "toUInt64(countIf(toString(verdict) IN ('REVIEW', 'BLOCK')))"}}},
	}
	// Tenant mirrors v_tenant_minute: token spend per tenant and model, from gateway responses.
	Tenant = Rollup{
		Name: "tenant",
		Dims: []Dim{{"tenant_id"}, {"model"}},
		Measures: []Measure{{"requests", "UInt64", Sum}, {"errors", "UInt64", Sum}, {"tokens_prompt", "UInt64", Sum},
			{"tokens_completion", "UInt64", Sum}, {"tokens_total", "UInt64", Sum}},
		Parts: []Part{{Source: GatewayLogs, Time: "event_time", Final: true, Where: "toString(phase) = 'RESPONSE'",
			Dims: []string{"toString(tenant_id)", "toString(model)"},
			Measures: []string{"toUInt64(count())", "toUInt64(countIf(status_code >= 400))", "toUInt64(sum(prompt_tokens))",
				"toUInt64(sum(completion_tokens))", "toUInt64(sum(prompt_tokens + completion_tokens))"}}},
	}
	// Moderation mirrors v_moderation_minute: verdicts per kind of screened text.
	Moderation = Rollup{
		Name:     "moderation",
		Dims:     []Dim{{"record"}, {"verdict"}, {"moderation_status"}},
		Measures: []Measure{{"records", "UInt64", Sum}, {"with_hits", "UInt64", Sum}, {"hits", "UInt64", Sum}},
		Parts: []Part{
			{Source: InferenceResults, Time: "event_time", Final: true, Scope: "record = 'inference'",
				Dims:     []string{"'inference'", "toString(verdict)", "toString(moderation_status)"},
				Measures: []string{"toUInt64(count())", "toUInt64(countIf(hit_count > 0))", "toUInt64(sum(hit_count))"}},
			{Source: GatewayLogs, Time: "event_time", Final: true, Scope: "record != 'inference'",
				Dims:     []string{"lower(phase)", "toString(verdict)", "toString(moderation_status)"},
				Measures: []string{"toUInt64(count())", "toUInt64(countIf(hit_count > 0))", "toUInt64(sum(hit_count))"}},
		},
	}
	// Category mirrors v_category_minute: dictionary matches per category and kind of text.
	// requests counts distinct requests per minute; a request's text has one event time, so
	// the counts add up over minutes and hours.
	Category = Rollup{
		Name:     "category",
		Dims:     []Dim{{"category"}, {"record"}},
		Measures: []Measure{{"hits", "UInt64", Sum}, {"requests", "UInt64", Sum}},
		Parts: []Part{{Source: ModerationHits, Time: "event_time", Final: true,
			Dims:     []string{"toString(category)", "if(phase = '', 'inference', lower(phase))"},
			Measures: []string{"toUInt64(count())", "toUInt64(uniqExact(request_id))"}}},
	}
	// DLQ mirrors v_dlq_minute: dead letters per stage, class and origin topic, each origin
	// once (its first entry, as v_dlq_entries keeps it), by its dead-letter time.
	DLQ = Rollup{
		Name:     "dlq",
		Dims:     []Dim{{"stage"}, {"class"}, {"origin_topic"}},
		Measures: []Measure{{"entries", "UInt64", Sum}, {"bytes", "UInt64", Sum}},
		Parts: []Part{{Source: DLQEntries, Time: "error_time", Final: true,
			// GLOBAL IN: in cluster mode both tables are Distributed, and ClickHouse refuses a
			// distributed subquery inside a distributed query; on one server it is a plain IN.
			// Neither uses dlq_first's key for an IN over a subquery, so the lookup would read
			// every origin ever dead-lettered. dlq_first is keyed by origin time first
			// (migration 0019), and a bound on it from the rows' own origin times (constants by
			// the time the key is read) keeps the lookup to the granules of the origins of the
			// minutes being read, however many origins the table holds, and whatever their
			// offsets (a bound on offsets, which are not comparable across partitions, let one
			// partition whose offsets run low make the lookup read nearly every origin).
			Where: "(dlq_topic, dlq_partition, dlq_offset) GLOBAL IN (SELECT dlq_topic, dlq_partition, dlq_offset FROM " + DLQFirst + " FINAL" +
				" WHERE origin_time >= (SELECT min(" + DLQFirstTime + ") FROM " + DLQEntries + " WHERE $rows)" +
				" AND origin_time <= (SELECT max(" + DLQFirstTime + ") FROM " + DLQEntries + " WHERE $rows)" +
				" AND (origin_time, origin_topic, origin_partition, origin_offset, stage, orphan) GLOBAL IN (SELECT " + DLQFirstTime +
				", origin_topic, origin_partition, origin_offset, toString(stage), " + DLQOrphan + " FROM " + DLQEntries + " WHERE $rows))",
			Dims:     []string{"toString(stage)", "toString(class)", "origin_topic"},
			Measures: []string{"toUInt64(count())", "toUInt64(sum(value_bytes))"}}},
	}
	// Sink mirrors v_sink_minute and v_freshness: what each ClickHouse sink group landed, from
	// the ledger (an audit log: a flush written twice counts twice, as in the views).
	Sink = Rollup{
		Name: "sink",
		Dims: []Dim{{"group"}, {"topic"}},
		Measures: []Measure{{"flushes", "UInt64", Sum}, {"records", "UInt64", Sum}, {"rows_landed", "UInt64", Sum},
			{"hit_rows_landed", "UInt64", Sum}, {"last_event_time", "DateTime", Max}, {"last_flush", "DateTime", Max}},
		Parts: []Part{{Source: SinkLedger, Time: "flushed_at",
			Dims: []string{"group", "topic"},
			Measures: []string{"toUInt64(uniqExact(batch_id))", "toUInt64(sum(max_offset - min_offset + 1))", "toUInt64(sum(rows))",
				"toUInt64(sum(hit_rows))", "max(max_event_time)", "max(flushed_at)"}}},
	}
)

// DLQOrphan is the key that stands for the origin of a DLQ entry without one (an entry whose
// headers could not be read): its own DLQ position, so each such entry counts once. The
// same expression as v_dlq_entries' LIMIT 1 BY.
const DLQOrphan = "if(origin_topic = '', concat(dlq_topic, '/', toString(dlq_partition), '/', toString(dlq_offset)), '')"

// DLQFirstTime is the time that leads dlq_first's key, of a dlq_entries row: its origin's time,
// the same in every entry of an origin; an orphan's own dead-letter time.
const DLQFirstTime = "toDateTime(if(origin_topic = '', error_time, origin_time))"

// All are the rollups, in the dashboards' order.
var All = []Rollup{Model, Tenant, Moderation, Category, DLQ, Sink}

// ByName returns the rollup named name.
func ByName(name string) (Rollup, bool) {
	for _, r := range All {
		if r.Name == name {
			return r, true
		}
	}
	return Rollup{}, false
}

// Sources lists every table some rollup reads, each once, in the order of All.
func Sources() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range All {
		for _, s := range r.Sources() {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// ReadBy lists the rollups with a part that reads source.
func ReadBy(source string) []Rollup {
	var out []Rollup
	for _, r := range All {
		for _, p := range r.Parts {
			if p.Source == source {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// TimeColumn is the time column of source as the rollups read it ("" if none reads it).
func TimeColumn(source string) string {
	for _, r := range All {
		for _, p := range r.Parts {
			if p.Source == source {
				return p.Time
			}
		}
	}
	return ""
}
