// Package dashdata writes synthetic rows into backflow's sunk tables, as the ClickHouse sink
// and the DLQ mirror would have landed them, at any size: the data of the dashboards'
// integration tests and of `make bench-dashboard`. Start with Spec and Fill.
//
// Each request is one inference result, a gateway REQUEST and a RESPONSE, the moderation hits
// of its screened texts, now and then a dead letter, and its share of the ledger, with
// loadgen's populations (12 models, 50 tenants, 200 users, Zipf-distributed), its latency and
// token distributions, its error and sensitive-text shares and its poison classes. 2% of the
// rows are landed twice, as a redelivery lands them, so that FINAL has work to do. Rows are made
// by ClickHouse itself, INSERT ... SELECT FROM numbers(), from hashes of the request's number:
// the same Spec writes the same rows into any database.
package dashdata

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	sensitivewords "github.com/backflowhq/backflow/tools/sensitive-words"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/test/testenv"
	"github.com/backflowhq/backflow/tools/loadgen"
)

// Spec is one fill.
type Spec struct {
	// Requests is how many requests: Requests inference results and twice as many gateway
	// rows (before the redelivered copies).
	Requests uint64
	// First is the number of the first request. Two fills of one database must not overlap
	// (their request ids would collide).
	First uint64
	// From and To bound the requests' times: request i of the fill starts at
	// From + i·(To-From)/Requests; its result and response follow by its latency.
	From, To time.Time
	// Epoch is the replay epoch the rows are written in (default 0). A fill in a higher epoch
	// of the same requests (First, Requests, From, To) rewrites them with other draws of every
	// attribute, as a replay after a change upstream does: other models, tenants, latencies,
	// verdicts and dead letters, in rows that win over the old ones (a higher version).
	Epoch int32
	// Chunk is the requests per INSERT. Default 2,000,000.
	Chunk uint64
	// Progress, when set, is called after each chunk with the requests written so far.
	Progress func(done uint64)
}

// The topics, groups and table values the rows carry: those of a default deployment.
const (
	LedgerGroup = "backflow-sink-clickhouse"
	MirrorGroup = "backflow-sink-clickhouse-dlq"
	partitions  = 6
)

// Fill writes the rows of s into the tables of conn's database, which the migrations made.
func Fill(ctx context.Context, conn driver.Conn, s Spec) error {
	if s.Requests == 0 || !s.From.Before(s.To) {
		return fmt.Errorf("dashdata: %d requests from %v to %v: want some, in a range", s.Requests, s.From, s.To)
	}
	if s.Chunk == 0 {
		s.Chunk = 2_000_000
	}
	q, err := newQueries(s)
	if err != nil {
		return err
	}
	for done := uint64(0); done < s.Requests; {
		n := min(s.Chunk, s.Requests-done)
		for _, stmt := range q.chunk(s.First+done, n) {
			if err := conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("dashdata: requests %d to %d: %w\n%s", s.First+done, s.First+done+n, err, stmt)
			}
		}
		done += n
		if s.Progress != nil {
			s.Progress(done)
		}
	}
	for _, stmt := range append([]string{q.ledger()}, q.replays()...) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("dashdata: ledger and replays: %w\n%s", err, stmt)
		}
	}
	return nil
}

// queries holds what every chunk's SQL is made of.
type queries struct {
	s                      Spec
	models, tenants, users string // cumulative Zipf weights, as ClickHouse arrays
	words, categories      string // the words loadgen plants and their dictionary categories
	classes                string // the DLQ class of each poison kind, in loadgen's rotation
}

func newQueries(s Spec) (*queries, error) {
	lg := loadgen.Config{}.WithDefaults()
	dict, err := sensitivewords.LoadDictionary(filepath.Join(testenv.RepoRoot(), "deploy", "sensitive-words", "sample.tsv"))
	if err != nil {
		return nil, err
	}
	cat := map[string]string{}
	for _, e := range dict.Entries {
		cat[e.Word] = e.Category
	}
	var words, cats []string
	for _, w := range lg.Words {
		if cat[w] == "" {
			return nil, fmt.Errorf("dashdata: loadgen's word %q is not in the sample dictionary", w)
		}
		words, cats = append(words, w), append(cats, cat[w])
	}
	var classes []string
	for _, k := range loadgen.AllPoisonKinds {
		classes = append(classes, k.Class())
	}
	return &queries{s: s, models: zipf(lg.Models, lg.ZipfS), tenants: zipf(lg.Tenants, lg.ZipfS), users: zipf(lg.UsersPerTenant, lg.ZipfS),
		words: strArray(words), categories: strArray(cats), classes: strArray(classes)}, nil
}

// zipf is the cumulative distribution of loadgen's Zipf law over n values (P(k) ∝ (1+k)^-s), as
// a ClickHouse array whose last element is exactly 1.
func zipf(n int, s float64) string {
	w := make([]float64, n)
	total := 0.0
	for k := range w {
		w[k] = math.Pow(float64(1+k), -s)
		total += w[k]
	}
	parts := make([]string, n)
	cum := 0.0
	for k := range w {
		cum += w[k] / total
		parts[k] = strconv.FormatFloat(cum, 'g', 12, 64)
	}
	parts[n-1] = "1"
	return "[" + strings.Join(parts, ", ") + "]"
}

func strArray(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + strings.ReplaceAll(x, "'", "\\'") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// u is the k-th uniform draw in (0, 1) of request n.
func u(k int) string {
	return fmt.Sprintf("((intHash64(s + %d) %% 1000000) + 0.5) / 1000000", k)
}

// pick is the index (from 0) that uniform draw k selects in the cumulative weights cum.
func pick(cum string, k int) string {
	return fmt.Sprintf("(arrayFirstIndex(x -> x > %s, %s) - 1)", u(k), cum)
}

// requests is a subquery of one row per request in [first, first+n), with every attribute the
// tables' rows derive from. Times are in milliseconds.
func (q *queries) requests(first, n uint64) string {
	span := uint64(q.s.To.Sub(q.s.From) / time.Millisecond)
	normal := func(a, b int, trig string) string { // a standard normal draw (Box-Muller)
		return fmt.Sprintf("(sqrt(-2 * log(%s)) * %s(2 * pi() * %s))", u(a), trig, u(b))
	}
	// A request's times are the same in every epoch, as a replay re-reads the same records: its
	// latency and the gap before its response are drawn from s0, which the epoch does not move
	// (the time-keyed tables collapse a rewrite only at the same minute).
	latency := strings.ReplaceAll(normal(4, 5, "cos"), "intHash64(s + ", "intHash64(s0 + ")
	inner := fmt.Sprintf(`SELECT n,
    n * 32 AS s0, n * 32 + %d AS s, toInt32(%d) AS ep, bitShiftLeft(toUInt64(ep), 40) AS vbase,
    lower(hex(intHash64(n))) AS rid,
    toUInt64(%d + intDiv((n - %d) * %d, %d)) AS t0,
    %s AS m, %s AS tn, %s AS us,
    toUInt32(least(60000, exp(%s * 0.6 + log(400)))) AS lat,
    toUInt32(greatest(1, exp(%s * 0.8 + log(180)))) AS ptok,
    toUInt32(greatest(1, exp(%s * 0.8 + log(140)))) AS ctok,
    %s AS r_status, %s < 0.5 AS v2, %s < 0.3 AS emb,
    %s < 0.05 AS out_sens, %s < 0.05 AS prompt_sens,
    if(%s < 0.003, 'UNAVAILABLE', 'CHECKED') AS out_mod, if(%s < 0.003, 'UNAVAILABLE', 'CHECKED') AS prompt_mod,
    %s < 0.6 AS review, intHash64(s + 15) %% 10 AS out_word, intHash64(s + 16) %% 10 AS prompt_word,
    intHash64(s0 + 17) %% 20 AS resp_gap, %s < 0.03 AS poison, intHash64(s + 19) AS h,
    arrayJoin(if(%s < 0.02, [0, 1], [0])) AS copy
FROM numbers(%d, %d)`,
		uint64(q.s.Epoch)*1_000_000_000_000, q.s.Epoch, q.s.From.UnixMilli(), q.s.First, span, q.s.Requests,
		pick(q.models, 1), pick(q.tenants, 2), pick(q.users, 3),
		latency, normal(4, 5, "sin"), normal(6, 7, "cos"),
		u(8), u(9), u(10), u(11), u(12), u(13), u(14), u(20), u(18), u(21), first, n)
	// n is numbers()'s number; the aliases above use it by that name.
	inner = strings.Replace(inner, "SELECT n,", "SELECT number AS n,", 1)
	return fmt.Sprintf(`(SELECT *,
    concat('model-', substring(toString(100 + m), 2)) AS model,
    concat('tenant-', substring(toString(1000 + tn), 2)) AS tenant,
    concat('user-', substring(toString(100000 + us), 2)) AS user,
    multiIf(r_status < 0.02, 'ERROR', r_status < 0.03, 'TIMEOUT', 'OK') AS status,
    toUInt16(multiIf(r_status < 0.02, 500, r_status < 0.03, 504, 200)) AS http,
    t0 + lat AS t_inf, t0 + lat + 2 + resp_gap AS t_resp,
    if(out_mod = 'CHECKED', if(out_sens, if(review, 'REVIEW', 'BLOCK'), 'ALLOW'), '') AS out_verdict,
    if(prompt_mod = 'CHECKED', if(prompt_sens, if(review, 'REVIEW', 'BLOCK'), 'ALLOW'), '') AS prompt_verdict,
    out_mod = 'CHECKED' AND out_sens AS out_hit, prompt_mod = 'CHECKED' AND prompt_sens AS prompt_hit,
    toInt32(n %% %d) AS part, toInt64(intDiv(n, %d) * 3) AS off
FROM (%s))`, partitions, partitions, inner)
}

func dt(ms string) string { return "toDateTime(intDiv(" + ms + ", 1000))" }

// chunk is the INSERTs of requests [first, first+n).
func (q *queries) chunk(first, n uint64) []string {
	req := q.requests(first, n)
	hitWord := func(w string) string { return "arrayElement(" + q.words + ", " + w + " + 1)" }
	hitCat := func(w string) string { return "arrayElement(" + q.categories + ", " + w + " + 1)" }
	inference := fmt.Sprintf(`INSERT INTO inference_results (source_topic, request_id, model, model_version, event_time, event_time_ms, landed_time_ms,
    latency_ms, prompt_tokens, completion_tokens, cached_tokens, risk_score, labels, label_scores, status, error, region, finish_reason,
    embedding_dim, output_chars, moderation_status, verdict, moderation_risk, categories, hit_count, schema_id, epoch, source_partition,
    source_offset, ingest_time, version)
SELECT '%s', rid, model, concat('v', toString(1 + m %% 3)), %s, toInt64(t_inf), toInt64(t_inf + 900),
    lat, ptok, ctok, if(v2, toUInt32(h %% (ptok + 1)), 0), toFloat32((h %% 500) / 1000 + if(out_sens, 0.4, 0)), ['toxicity', 'pii'],
    [toFloat32((h %% 300) / 1000), toFloat32((h %% 200) / 1000)], status,
    multiIf(status = 'ERROR', 'upstream model error', status = 'TIMEOUT', 'deadline exceeded', NULL),
    if(v2, arrayElement(['eu-west', 'us-east', 'ap-south'], (h %% 3) + 1), ''), if(v2, 'stop', NULL),
    if(emb, 16, 0), toUInt32(60 + h %% 300), out_mod, out_verdict, toFloat32(if(out_hit, 0.5 + (h %% 50) / 100, 0)),
    if(out_hit, [%s], emptyArrayString()), toUInt16(out_hit), if(v2, 2, 1), ep, part, off + 1, %s, vbase + off + 1
FROM %s`, avro.TopicInferenceResult, dt("t_inf"), hitCat("out_word"), dt("t_inf + 800"), req)
	gateway := fmt.Sprintf(`INSERT INTO gateway_logs (source_topic, request_id, phase, event_time, event_time_ms, landed_time_ms, tenant_id, user_id,
    route, model, status_code, latency_ms, prompt_tokens, completion_tokens, prompt_chars, response_chars, moderation_status, verdict,
    moderation_risk, categories, hit_count, schema_id, epoch, source_partition, source_offset, ingest_time, version)
SELECT '%s', rid, if(resp, 'RESPONSE', 'REQUEST'), %s, toInt64(t), toInt64(t + 900), tenant, user,
    '/v1/chat/completions', model, if(resp, http, 0), if(resp, toUInt32(t_resp - t0), 0), if(resp, ptok, 0), if(resp, ctok, 0),
    if(resp, 0, toUInt32(40 + h %% 120)), if(resp, toUInt32(60 + h %% 300), 0), if(resp, out_mod, prompt_mod),
    if(resp, out_verdict, prompt_verdict), toFloat32(if(hit, 0.5 + (h %% 50) / 100, 0)),
    if(hit, [if(resp, %s, %s)], emptyArrayString()), toUInt16(hit), 1, ep, part, off + if(resp, 2, 0), %s, vbase + off + if(resp, 2, 0)
FROM (SELECT *, arrayJoin([0, 1]) AS resp, if(resp, t_resp, t0) AS t, if(resp, out_hit, prompt_hit) AS hit FROM %s)`,
		avro.TopicGatewayLog, dt("t"), hitCat("out_word"), hitCat("prompt_word"), dt("t + 800"), req)
	hits := fmt.Sprintf(`INSERT INTO moderation_hits (source_topic, request_id, phase, start, end, word, category, event_time, epoch,
    source_partition, source_offset, version)
SELECT if(phase = '', '%s', '%s'), rid, phase, toUInt32(h %% 40), toUInt32(h %% 40 + lengthUTF8(word)), word,
    if(phase = 'REQUEST', %s, %s), %s, ep, part, off + multiIf(phase = '', 1, phase = 'REQUEST', 0, 2), vbase + off + 1
FROM (SELECT *, arrayJoin(arrayConcat(if(out_hit, ['', 'RESPONSE'], emptyArrayString()), if(prompt_hit, ['REQUEST'], emptyArrayString()))) AS phase,
    if(phase = 'REQUEST', %s, %s) AS word, multiIf(phase = '', t_inf, phase = 'REQUEST', t0, t_resp) AS t FROM %s WHERE out_hit OR prompt_hit)`,
		avro.TopicInferenceResult, avro.TopicGatewayLog, hitCat("prompt_word"), hitCat("out_word"), dt("t"),
		hitWord("prompt_word"), hitWord("out_word"), req)
	// Dead letters: 3 in 100 requests have one of their records dead-lettered by ingest, a third
	// of them an inference result, each class in loadgen's rotation.
	dlq := fmt.Sprintf(`INSERT INTO dlq_entries (dlq_topic, dlq_partition, dlq_offset, origin_topic, origin_partition, origin_offset, origin_time,
    stage, class, message, error_time, record_key, value_bytes, truncated_from, version)
SELECT 'backflow.dlq', toInt32(n %% 3), toInt64(intDiv(n, 3)), if(h %% 3 = 0, '%s', '%s'), part, off, %s, 'ingest',
    arrayElement(%s, (intDiv(h, 7) %% 8) + 1), 'decode: bad record', %s, rid, toUInt32(100 + h %% 1500), 0, vbase + intDiv(n, 3)
FROM %s WHERE poison`, avro.TopicInferenceResult, avro.TopicGatewayLog, dt("t0"), q.classes, dt("t0 + 1500"), req)
	return []string{inference, gateway, hits, dlq}
}

// ledger is the INSERT of the fill's ledger rows: the sink lands a request's three records in a
// flush of 300 records on one partition (one row per 100 requests, 15 of them moderation hit
// rows), the DLQ mirror its 300 dead letters of 10,000 requests in one. A flush lands 3 s after
// its newest event.
func (q *queries) ledger() string {
	span := uint64(q.s.To.Sub(q.s.From) / time.Millisecond)
	return fmt.Sprintf(`INSERT INTO sink_ledger (batch_id, group, topic, partition, min_offset, max_offset, rows, hit_rows, epoch, flushed_at, max_event_time)
SELECT concat(g, '-', toString(%d + j), '-', toString(%d)), g, if(mirror, 'backflow.dlq', 'backflow.enriched'), toInt32(intDiv(j, per) %% %d),
    toInt64(intDiv(j, per) * 300), toInt64(intDiv(j, per) * 300 + 299), 300, if(mirror, 0, 15), %d, %s, %s
FROM (SELECT *, if(mirror, '%s', '%s') AS g, toUInt64(%d + intDiv(least(j + per, %d) * %d, %d)) AS t_last
    FROM (SELECT number AS j, arrayJoin([0, 1]) AS mirror, if(mirror, 10000, 100) AS per FROM numbers(%d)) WHERE j %% per = 0)`,
		q.s.First, q.s.Epoch, partitions, q.s.Epoch, dt("t_last + 3000"), dt("t_last"), MirrorGroup, LedgerGroup,
		q.s.From.UnixMilli(), q.s.Requests, span, q.s.Requests, q.s.Requests)
}

// replays are a replay a day of the fill's range, each moving the sink group's 6 partitions.
func (q *queries) replays() []string {
	days := int64(q.s.To.Sub(q.s.From) / (24 * time.Hour))
	if days == 0 {
		return nil
	}
	return []string{fmt.Sprintf(`INSERT INTO replay_log (replay_id, replayed_at, who, consumer_group, spec, reason, actions, epoch_from, epoch_to, topic, partition, from_offset, to_offset)
SELECT concat('r', toString(%d + d)), toDateTime(%d + d * 86400 + 3600), 'ops@example.com', '%s', 'earliest', 'bench', ['move offsets'], toInt32(d), toInt32(d + 1),
    'backflow.enriched', toInt32(p), toInt64(1000 + p), 0
FROM (SELECT intDiv(number, %d) AS d, number %% %d AS p FROM numbers(%d))`, q.s.First, q.s.From.Unix(), LedgerGroup, partitions, partitions, days*partitions)}
}
