#!/usr/bin/env bash
# deploy/demo.sh — the main job on the local stack: every stage running in one `backflow run`
# process (config deploy/demo.yaml), generated traffic for about 30 s, then what landed where.
# Run by `make demo` once the stack is up and bin/backflow is built. DEMO_SECONDS and DEMO_RATE
# (requests/s) change the traffic; BACKFLOW_METRICS_PORT (default 19464) moves /metrics.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=.stack/env
set -a; . "$ENV"; set +a
BF="bin/backflow --env-file $ENV"
KT=deploy/local/kafka-tool
BOOT=${BACKFLOW_KAFKA_BROKERS%%,*}
CH="clickhouse-client --host ${BACKFLOW_CLICKHOUSE_ADDR%%:*} --port ${BACKFLOW_CLICKHOUSE_ADDR##*:}"
SECS=${DEMO_SECONDS:-30}
RATE=${DEMO_RATE:-1000}
LOGS=.stack/logs
METRICS="127.0.0.1:${BACKFLOW_METRICS_PORT:-19464}"
GROUPS_RE='group="(backflow-ingest|backflow-sink-clickhouse|backflow-sink-clickhouse-dlq|backflow-features)"'

say() { printf '\n== %s ==\n' "$*"; }
pid=
stop_run() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  code=0; wait "$pid" || code=$?
  pid=
  echo "   backflow run stopped on SIGTERM with exit code $code (0: flushed and committed)"
}
trap stop_run EXIT
metric() { curl -sf "http://$METRICS/metrics" | grep -E "^$1" || true; }

say "1. backflow ping: one real request to each service"
$BF ping

say "2. backflow migrate: ClickHouse tables and views"
$BF migrate

say "3. backflow run: ingest, sink-clickhouse and sink-features in one process (log: $LOGS/demo-run.log)"
bin/backflow check-config --config deploy/demo.yaml | sed 's/^/   /'
$BF run --config deploy/demo.yaml --metrics-addr "$METRICS" >"$LOGS/demo-run.log" 2>&1 & pid=$!
for _ in $(seq 100); do curl -sf "http://$METRICS/healthz" >/dev/null && break; kill -0 "$pid" 2>/dev/null || { tail -5 "$LOGS/demo-run.log"; exit 1; }; sleep 0.2; done
echo "   pid $pid; metrics http://$METRICS/metrics, health http://$METRICS/healthz, readiness http://$METRICS/readyz"

say "4. loadgen: ${SECS}s at $RATE requests/s, with duplicates and poison → .stack/demo-manifest.jsonl"
$BF loadgen --duration "${SECS}s" --rate "$RATE" --manifest .stack/demo-manifest.jsonl

say "5. waiting until every group's lag is 0 (backflow_consumer_lag on /metrics)"
start=$SECONDS
while :; do
  lags=$(metric backflow_consumer_lag | grep -E "$GROUPS_RE" | awk '
    { match($0, /group="[^"]+"/); g = substr($0, RSTART + 7, RLENGTH - 8); seen[g] = 1; lag[g] += $NF }
    END { for (g in seen) printf "%s=%d ", g, lag[g] }')
  printf '   %s(%ds)\n' "$lags" $((SECONDS - start))
  if [ "$(echo "$lags" | grep -o '=' | wc -l)" = 4 ] && [ "$(echo "$lags" | grep -oE '=[0-9]+' | grep -vc '=0$')" = 0 ]; then break; fi
  kill -0 "$pid" 2>/dev/null || { tail -5 "$LOGS/demo-run.log"; echo "backflow run exited" >&2; exit 1; }
  [ $((SECONDS - start)) -lt 300 ] || { echo "not caught up in 300 s" >&2; exit 1; }
  sleep 2
done
echo "   records per stage, from /metrics:"
printf '   %-28s %10s %10s\n' stage in out
metric 'backflow_stage_records_(in|out)_total' | sed -E 's/backflow_stage_records_(in|out)_total\{stage="([^"]+)"\} /\2 \1 /' |
  awk '{ v[$1" "$2] = $3; s[$1] = 1 } END { for (x in s) printf "   %-28s %10d %10d\n", x, v[x" in"], v[x" out"] }' | sort
echo "   dead letters by stage and class: $(metric backflow_stage_records_dlq_total | sed -E 's/.*class="([^"]+)",stage="([^"]+)"\} /\2:\1=/' | tr '\n' ' ')"
echo "   moderation breaker: $(metric backflow_moderation_breaker_state | awk '{print $NF}') (0 closed, 1 half-open, 2 open)"
stop_run

say "6. what landed"
m=.stack/demo-manifest.jsonl
echo "   this run sent: $(grep -c '"kind":"original"' $m) originals, $(grep -c '"kind":"duplicate"' $m) duplicates, $(grep -c '"kind":"poison"' $m) poison"
echo "   ClickHouse (deduplicated views; all runs so far):"
$CH --format PrettyCompactMonoBlock -q "
  SELECT 'v_inference_results' AS view, count() AS rows, uniqExact(request_id) AS request_ids FROM v_inference_results
  UNION ALL SELECT 'v_gateway_logs', count(), uniqExact(request_id) FROM v_gateway_logs
  UNION ALL SELECT 'v_moderation_hits', count(), uniqExact(request_id) FROM v_moderation_hits
  UNION ALL SELECT 'v_dlq_entries', count(), uniqExact(origin_topic, origin_partition, origin_offset) FROM v_dlq_entries" | sed 's/^/   /'
echo "   dead letters per class (ClickHouse mirror of backflow.dlq):"
$CH --format PrettyCompactNoEscapes -q "SELECT class, stage, count() AS entries FROM v_dlq_entries GROUP BY class, stage ORDER BY entries DESC" | sed 's/^/   /'
echo "   latency per model (top 5 by requests):"
$CH --format PrettyCompactNoEscapes -q "SELECT model, count() AS requests, round(quantile(0.5)(latency_ms)) AS p50_ms, round(quantile(0.95)(latency_ms)) AS p95_ms FROM v_inference_results GROUP BY model ORDER BY requests DESC LIMIT 5" | sed 's/^/   /'
echo "   features read back through Feast's own SDK (3 busiest tenants):"
if deploy/feast/setup.sh >"$LOGS/demo-feast.log" 2>&1; then
  rows=$($CH -q "SELECT tenant_id FROM v_gateway_logs WHERE phase = 'RESPONSE' GROUP BY tenant_id ORDER BY count() DESC LIMIT 3" |
    python3 -c 'import json,sys; print(json.dumps([{"tenant_id": t.strip()} for t in sys.stdin if t.strip()]))')
  echo "{\"features\": [\"tenant_features:request_count\", \"tenant_features:flagged_count\", \"tenant_features:tokens\"], \"entity_rows\": $rows}" |
    .stack/feast-venv/bin/python deploy/feast/read_online.py .stack/feast-repo | sed 's/^/   /'
else
  echo "   (Feast could not be set up; see $LOGS/demo-feast.log)"
fi

say "where to look"
cat <<TXT
   ClickHouse:               $CH   (views v_inference_results, v_gateway_logs, v_moderation_hits, v_dlq_entries; sink_ledger)
   dead letters:             bin/backflow dlq list --env-file $ENV --class unknown_schema
   the manifest (oracle):    head .stack/demo-manifest.jsonl
   consumer groups:          $KT consumer-groups --bootstrap-server $BOOT --describe --all-groups
   backflow's metrics:       bin/backflow run --env-file $ENV --config deploy/demo.yaml  then  curl -s http://$METRICS/metrics | grep ^backflow_
   config reference:         bin/backflow check-config --print-example   (deploy/config.example.yaml)
   sensitive-word service:   curl -s $BACKFLOW_SENSITIVE_URL/metrics | grep ^sensitive_words
   Feast:                    deploy/feast/README.md
   backflow's log:           $LOGS/demo-run.log
   stop everything:          deploy/local/stack down
TXT
