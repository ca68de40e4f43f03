#!/usr/bin/env bash
# deploy/demo.sh — the main job on the local stack: every stage running, generated traffic for
# about 30 s, then what landed where. Run by `make demo` once the stack is up and bin/backflow
# is built. DEMO_SECONDS and DEMO_RATE (requests/s) change the traffic; DEMO_BACKFILL (default
# 20m) dates its event times back so the dashboard shows a history. It leaves `backflow
# dashboard` running in the background on BACKFLOW_DASHBOARD_PORT (default 18400).
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
GROUPS_RE='^(backflow-ingest|backflow-sink-clickhouse|backflow-features)$'
BACKFILL=${DEMO_BACKFILL:-20m}
LOGS=.stack/logs
DASH_ADDR=127.0.0.1:${BACKFLOW_DASHBOARD_PORT:-18400}
DASH_PID=.stack/run/dashboard.pid
INGEST_METRICS_ADDR=127.0.0.1:${BACKFLOW_INGEST_METRICS_PORT:-18410}

say() { printf '\n== %s ==\n' "$*"; }
pids=()
stop_stages() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_stages EXIT

say "1. backflow ping: one real request to each service"
$BF ping

say "2. backflow migrate: ClickHouse tables and views"
$BF migrate

# The ingest stage's Prometheus endpoint, where this binary has one, feeds the dashboard's
# breaker; without it the dashboard shows the breaker as unknown.
ingest_metrics=() breaker=()
if bin/backflow ingest --help 2>/dev/null | grep -q -- '--metrics-addr'; then
  ingest_metrics=(--metrics-addr "$INGEST_METRICS_ADDR")
  breaker=(--breaker-metrics-url "http://$INGEST_METRICS_ADDR/metrics")
fi

say "3. the stages: ingest, sink-clickhouse, sink-features (logs: $LOGS/demo-*.log), and the dashboard"
# ingest reads the source topics and loadgen writes them; on a fresh stack neither exists yet
# (the brokers do not create topics), so create them first, 3 partitions each as loadgen would.
for topic in model-inference-result gateway-log; do
  $KT topics --bootstrap-server "$BOOT" --create --if-not-exists --topic "$topic" --partitions 3 --replication-factor 1 >/dev/null
done
$BF ingest "${ingest_metrics[@]}" >"$LOGS/demo-ingest.log" 2>&1 & pids+=($!)
# ingest creates backflow.enriched and the DLQ on a fresh cluster; the sinks need them to exist.
for _ in $(seq 1 300); do grep -q 'msg="ingest ready"' "$LOGS/demo-ingest.log" 2>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { tail -n 5 "$LOGS/demo-ingest.log"; echo "ingest exited" >&2; exit 1; }; sleep 0.2; done
$BF sink-clickhouse >"$LOGS/demo-sink-clickhouse.log" 2>&1 & pids+=($!)
$BF sink-features >"$LOGS/demo-sink-features.log" 2>&1 & pids+=($!)
echo "   started pids ${pids[*]}"
# The dashboard outlives the demo: its own session, its pid in .stack/run. The env file is named
# by its absolute path, so a full 'deploy/local/stack down' stops it with the stack.
if [ -f "$DASH_PID" ] && kill -0 "$(cat "$DASH_PID")" 2>/dev/null; then
  kill -TERM "$(cat "$DASH_PID")"
  for _ in $(seq 1 50); do kill -0 "$(cat "$DASH_PID")" 2>/dev/null || break; sleep 0.1; done
fi
setsid bin/backflow --env-file "$PWD/$ENV" dashboard --addr "$DASH_ADDR" "${breaker[@]}" >"$LOGS/demo-dashboard.log" 2>&1 </dev/null &
echo $! >"$DASH_PID"
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/${DASH_ADDR%:*}/${DASH_ADDR##*:}") 2>/dev/null && break; sleep 0.1; done
kill -0 "$(cat "$DASH_PID")" 2>/dev/null || { tail -n 5 "$LOGS/demo-dashboard.log"; echo "the dashboard did not start" >&2; exit 1; }
echo "   dashboard on http://$DASH_ADDR/ (pid $(cat "$DASH_PID"))"

say "4. loadgen: ${SECS}s at $RATE requests/s, with duplicates and poison, event times from $BACKFILL ago → .stack/demo-manifest.jsonl"
$BF loadgen --duration "${SECS}s" --rate "$RATE" --backfill "$BACKFILL" --manifest .stack/demo-manifest.jsonl

say "5. waiting until every group's lag is 0"
start=$SECONDS
while :; do
  lags=$($KT consumer-groups --bootstrap-server "$BOOT" --describe --all-groups 2>/dev/null | awk -v re="$GROUPS_RE" '
    $1 ~ re && $3 ~ /^[0-9]+$/ { seen[$1]=1; if ($6 ~ /^[0-9]+$/) lag[$1]+=$6; else if ($5 > 0) unknown[$1]=1 }
    END { for (g in seen) printf "%s=%s ", g, (g in unknown ? "?" : lag[g]+0) }')
  printf '   %s(%ds)\n' "$lags" $((SECONDS - start))
  if [ "$(echo "$lags" | grep -oE '=[0-9]+' | grep -vc '=0$')" = 0 ] && [ "$(echo "$lags" | grep -o '=' | wc -l)" = 3 ]; then break; fi
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { tail -n 5 $LOGS/demo-*.log; echo "a stage exited" >&2; exit 1; }; done
  [ $((SECONDS - start)) -lt 300 ] || { echo "not caught up in 300 s" >&2; exit 1; }
  sleep 2
done
stop_stages

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
echo "   features read back through Feast's own SDK (3 busiest tenants, then the busiest model;"
echo "   _1h/_24h are event-time windows as of last_seen, the entity's newest event):"
if deploy/feast/setup.sh >"$LOGS/demo-feast.log" 2>&1; then
  rows=$($CH -q "SELECT tenant_id FROM v_gateway_logs WHERE phase = 'RESPONSE' GROUP BY tenant_id ORDER BY count() DESC LIMIT 3" |
    python3 -c 'import json,sys; print(json.dumps([{"tenant_id": t.strip()} for t in sys.stdin if t.strip()]))')
  echo "{\"features\": [\"tenant_features:request_count\", \"tenant_features:flagged_count\", \"tenant_features:tokens\",
    \"tenant_features:request_count_1h\", \"tenant_features:flagged_ratio_1h\", \"tenant_features:last_seen\"], \"entity_rows\": $rows}" |
    .stack/feast-venv/bin/python deploy/feast/read_online.py .stack/feast-repo | sed 's/^/   /'
  echo
  model=$($CH -q "SELECT model FROM v_gateway_logs WHERE phase = 'RESPONSE' GROUP BY model ORDER BY count() DESC LIMIT 1")
  echo "{\"features\": [\"model_features:request_count\", \"model_features:error_count\", \"model_features:request_count_1h\",
    \"model_features:latency_avg_ms_1h\", \"model_features:latency_p95_ms_1h\", \"model_features:latency_max_ms_1h\"], \"entity_rows\": [{\"model\": \"$model\"}]}" |
    .stack/feast-venv/bin/python deploy/feast/read_online.py .stack/feast-repo | sed 's/^/   /'
  echo
else
  echo "   (Feast could not be set up; see $LOGS/demo-feast.log)"
fi

say "where to look"
cat <<TXT
   ClickHouse:               $CH   (views v_inference_results, v_gateway_logs, v_moderation_hits, v_dlq_entries; sink_ledger;
                             per-minute v_model_minute, v_tenant_minute, v_moderation_minute, v_dlq_minute, v_sink_minute, v_freshness)
   Grafana:                  deploy/grafana/README.md (the same panels)
   dead letters:             bin/backflow dlq list --env-file $ENV --class unknown_schema
   the manifest (oracle):    head .stack/demo-manifest.jsonl
   consumer groups:          $KT consumer-groups --bootstrap-server $BOOT --describe --all-groups
   sensitive-word service:   curl -s $BACKFLOW_SENSITIVE_URL/metrics | grep ^sensitive_words
   Feast:                    deploy/feast/README.md
   stage logs:               $LOGS/demo-*.log
   stop everything:          deploy/local/stack down   (also stops the dashboard)
TXT

say "dashboard: http://$DASH_ADDR/"
echo "   running in the background (pid $(cat "$DASH_PID"), log $LOGS/demo-dashboard.log); stop it: kill $(cat "$DASH_PID")"
