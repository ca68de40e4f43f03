#!/usr/bin/env bash
# deploy/demo.sh — the main job on the local stack: every stage running in one `backflow run`
# process (config deploy/demo.yaml, with declared streams beside the built-in ones: Avro,
# Protobuf and JSON Schema), generated
# traffic for about 30 s, then what landed where.
# Run by `make demo` once the stack is up and bin/backflow is built. DEMO_SECONDS and DEMO_RATE
# (requests/s) change the traffic; DEMO_BACKFILL (default 20m) dates its event times back so
# the dashboard shows a history. `backflow run` (metrics on BACKFLOW_METRICS_PORT, default
# 19464, scraped by the stack's Prometheus) and `backflow dashboard` (BACKFLOW_DASHBOARD_PORT,
# default 18400, with Prometheus's firing alerts) keep running in the
# background afterwards, so the places it points to are live; `deploy/local/stack down` stops
# them gracefully before the services.
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
BACKFILL=${DEMO_BACKFILL:-20m}
LOGS=.stack/logs
METRICS="127.0.0.1:${BACKFLOW_METRICS_PORT:-19464}"
RUN_PID=.stack/run/demo-run.pid
DASH_ADDR=127.0.0.1:${BACKFLOW_DASHBOARD_PORT:-18400}
DASH_PID=.stack/run/demo-dashboard.pid
PROM=${BACKFLOW_PROMETHEUS_URL:-}
GROUPS_RE='group="(backflow-ingest|backflow-sink-clickhouse|backflow-sink-clickhouse-dlq|backflow-sink-clickhouse-rollups|backflow-features|backflow-stream-agent-task-event|backflow-stream-shop-order|backflow-stream-page-view)"'
# The declared streams of deploy/demo.yaml: name, schema file, dedupe key. Each one's manifest
# is .stack/demo-stream-NAME.jsonl.
STREAMS=(
  "agent-task-event deploy/streams/agent-task-event.avsc event_id"
  "shop-order deploy/streams/shop-order.proto order_id"
  "page-view deploy/streams/page-view.schema.json view_id"
)

say() { printf '\n== %s ==\n' "$*"; }
metric() { curl -sf "http://$METRICS/metrics" | grep -E "^$1" || true; }
# stop_bg PIDFILE: SIGTERM a background process of an earlier demo and wait for it (it flushes
# and commits; bounded by its shutdown_timeout).
stop_bg() {
  [ -f "$1" ] || return 0
  local p; p=$(cat "$1")
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 1 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$1"
}
# start_bg PIDFILE LOG CMD...: CMD in its own session, so it outlives this script. The env file
# is named by its absolute path, so a full 'deploy/local/stack down' also finds it.
start_bg() {
  local pidfile=$1 log=$2; shift 2
  setsid "$@" >"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
}
alive() { kill -0 "$(cat "$1")" 2>/dev/null; }

say "1. backflow ping: one real request to each service"
$BF ping

say "2. backflow migrate: ClickHouse tables and views"
$BF migrate

say "3. backflow run: ingest, sink-clickhouse, sink-features and the declared streams agent-task-event (Avro), shop-order (Protobuf) and page-view (JSON Schema) in one process (log: $LOGS/demo-run.log), and the dashboard"
stop_bg "$RUN_PID"; stop_bg "$DASH_PID"
# ingest reads the source topics and loadgen writes them; on a fresh stack neither exists yet
# (the brokers do not create topics), so create them first, 3 partitions each as loadgen would.
for topic in model-inference-result gateway-log; do
  $KT topics --bootstrap-server "$BOOT" --create --if-not-exists --topic "$topic" --partitions 3 --replication-factor 1 >/dev/null
done
# A declared stream's table is derived from its subject's schema, which its producer
# registers: loadgen, here, with a backlog the stage drains when it starts (the schema file's
# extension gives the type; shop-order.proto's import is registered as shop-common.proto).
for s in "${STREAMS[@]}"; do
  read -r name schema _ <<<"$s"
  $KT topics --bootstrap-server "$BOOT" --create --if-not-exists --topic "$name" --partitions 3 --replication-factor 1 >/dev/null
  echo "   declared stream $name: a backlog from loadgen ($schema) → .stack/demo-stream-$name.jsonl"
  bin/loadgen --env-file "$ENV" --config deploy/demo.yaml --stream "$name" --stream-schema "$schema" \
    --requests "${DEMO_STREAM_RECORDS:-3000}" --no-progress --manifest ".stack/demo-stream-$name.jsonl" | sed 's/^/   /'
done
bin/backflow check-config --config deploy/demo.yaml | sed 's/^/   /'
start_bg "$RUN_PID" "$LOGS/demo-run.log" bin/backflow --env-file "$PWD/$ENV" run --config deploy/demo.yaml --metrics-addr "$METRICS"
for _ in $(seq 100); do curl -sf "http://$METRICS/healthz" >/dev/null && break; alive "$RUN_PID" || { tail -n 5 "$LOGS/demo-run.log"; exit 1; }; sleep 0.2; done
echo "   pid $(cat "$RUN_PID"); metrics http://$METRICS/metrics, health http://$METRICS/healthz, readiness http://$METRICS/readyz"
start_bg "$DASH_PID" "$LOGS/demo-dashboard.log" bin/backflow --env-file "$PWD/$ENV" dashboard --addr "$DASH_ADDR" \
  --breaker-metrics-url "http://$METRICS/metrics"
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/${DASH_ADDR%:*}/${DASH_ADDR##*:}") 2>/dev/null && break; sleep 0.1; done
alive "$DASH_PID" || { tail -n 5 "$LOGS/demo-dashboard.log"; echo "the dashboard did not start" >&2; exit 1; }
echo "   dashboard on http://$DASH_ADDR/ (pid $(cat "$DASH_PID"))"
[ -n "$PROM" ] && echo "   Prometheus on $PROM/ scrapes http://$METRICS/metrics and evaluates deploy/prometheus/rules.yaml (alerts: $PROM/alerts)"

say "4. loadgen: ${SECS}s at $RATE requests/s, with duplicates and poison, event times from $BACKFILL ago → .stack/demo-manifest.jsonl"
bin/loadgen --env-file "$ENV" --duration "${SECS}s" --rate "$RATE" --backfill "$BACKFILL" --manifest .stack/demo-manifest.jsonl

say "5. waiting until every group's lag is 0 (backflow_consumer_lag on /metrics)"
start=$SECONDS
while :; do
  lags=$(metric 'backflow_consumer_lag\{' | grep -E "$GROUPS_RE" | awk '
    { match($0, /group="[^"]+"/); g = substr($0, RSTART + 7, RLENGTH - 8); seen[g] = 1; lag[g] += $NF }
    END { for (g in seen) printf "%s=%d ", g, lag[g] }')
  printf '   %s(%ds)\n' "$lags" $((SECONDS - start))
  if [ "$(echo "$lags" | grep -o '=' | wc -l)" = 8 ] && [ "$(echo "$lags" | grep -oE '=[0-9]+' | grep -vc '=0$')" = 0 ]; then break; fi
  alive "$RUN_PID" || { tail -n 5 "$LOGS/demo-run.log"; echo "backflow run exited" >&2; exit 1; }
  [ $((SECONDS - start)) -lt 300 ] || { echo "not caught up in 300 s" >&2; exit 1; }
  sleep 2
done
echo "   records per stage, from /metrics:"
printf '   %-28s %10s %10s\n' stage in out
metric 'backflow_stage_records_(in|out)_total' | sed -E 's/backflow_stage_records_(in|out)_total\{stage="([^"]+)"\} /\2 \1 /' |
  awk '{ v[$1" "$2] = $3; s[$1] = 1 } END { for (x in s) printf "   %-28s %10d %10d\n", x, v[x" in"], v[x" out"] }' | sort
echo "   dead letters by stage and class: $(metric backflow_stage_records_dlq_total | sed -E 's/.*class="([^"]+)",stage="([^"]+)"\} /\2:\1=/' | tr '\n' ' ')"
breaker=$(metric 'backflow_moderation_breaker_state\{' | awk '{
  s = $NF == 0 ? "closed" : $NF == 1 ? "half-open" : $NF == 2 ? "open" : "unknown (" $NF ")"; printf "%s%s", sep, s; sep = ", " }')
echo "   moderation breaker: ${breaker:-unknown (no backflow_moderation_breaker_state on /metrics)}"
rollups=$(metric 'backflow_rollup_lag_seconds\{' | sed -E 's/.*source="([^"]+)"\} /\1=/' | awk -F= '{ printf "%s%s %.1fs", sep, $1, $2; sep = ", " }')
echo "   dashboards' rollups, seconds from rows landing to their minutes rolled up (backflow_rollup_lag_seconds): ${rollups:-none yet}"
if [ -n "$PROM" ]; then
  firing=$(curl -sf "$PROM/api/v1/alerts" | python3 -c 'import json, sys
print(" ".join(sorted({a["labels"]["alertname"] for a in json.load(sys.stdin)["data"]["alerts"] if a["state"] == "firing"})))' || true)
  echo "   Prometheus ($PROM) alerts firing: ${firing:-none}"
fi

say "6. what landed"
m=.stack/demo-manifest.jsonl
echo "   this run sent: $(grep -c '"kind":"original"' $m) originals, $(grep -c '"kind":"duplicate"' $m) duplicates, $(grep -c '"kind":"poison"' $m) poison"
echo "   ClickHouse (deduplicated views; all runs so far):"
$CH --format PrettyCompactMonoBlock -q "
  SELECT 'v_inference_results' AS view, count() AS rows, uniqExact(request_id) AS request_ids FROM v_inference_results
  UNION ALL SELECT 'v_gateway_logs', count(), uniqExact(request_id) FROM v_gateway_logs
  UNION ALL SELECT 'v_moderation_hits', count(), uniqExact(request_id) FROM v_moderation_hits
  UNION ALL SELECT 'v_dlq_entries', count(), uniqExact(origin_topic, origin_partition, origin_offset) FROM v_dlq_entries" | sed 's/^/   /'
for s in "${STREAMS[@]}"; do
  read -r name _ key <<<"$s"
  sm=.stack/demo-stream-$name.jsonl view=v_${name//-/_}
  stream_sent=$(grep -c '"kind":"original"' "$sm" || true)
  read -r srows skeys <<<"$($CH -q "SELECT count(), uniqExact($key) FROM $view")"
  echo "   declared stream $name: this run sent $stream_sent originals, $(grep -c '"kind":"duplicate"' "$sm" || true) duplicates, $(grep -c '"kind":"poison"' "$sm" || true) poison;"
  echo "   $view (all runs so far): $srows rows, $skeys distinct $key"
  if [ "$srows" -ne "$skeys" ] || [ "$skeys" -lt "$stream_sent" ]; then
    echo "the declared stream $name's view does not hold each sent record once" >&2
    exit 1
  fi
done
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
   dashboard:                http://$DASH_ADDR/   (log $LOGS/demo-dashboard.log)
   backflow's metrics:       curl -s http://$METRICS/metrics | grep ^backflow_   (health /healthz, readiness /readyz)
   ClickHouse:               $CH   (views v_inference_results, v_gateway_logs, v_moderation_hits, v_dlq_entries, v_agent_task_event, v_shop_order, v_page_view; sink_ledger;
                             per-minute v_model_minute, v_tenant_minute, v_moderation_minute, v_dlq_minute, v_sink_minute, v_freshness)
   Prometheus:               ${PROM:-not running: deploy/local/stack up prometheus}   (alerts ${PROM:+$PROM/alerts}; rules deploy/prometheus/rules.yaml, runbooks docs/operations.md#alerts)
   Grafana:                  deploy/grafana/README.md (the same panels)
   dead letters:             bin/backflow dlq list --env-file $ENV --class unknown_schema
   the manifest (oracle):    head .stack/demo-manifest.jsonl
   consumer groups:          bin/backflow groups --env-file $ENV
   config reference:         bin/backflow check-config --print-example   (deploy/config.example.yaml)
   sensitive-word service:   curl -s $BACKFLOW_SENSITIVE_WORDS_URL/metrics | grep ^sensitive_words
   Feast:                    deploy/feast/README.md
   backflow's log:           $LOGS/demo-run.log
   more traffic:             bin/loadgen --env-file $ENV --duration 30s --rate 1000
   stop everything:          deploy/local/stack down   (SIGTERM to backflow run and the dashboard first)
TXT

say "dashboard: http://$DASH_ADDR/   metrics: http://$METRICS/metrics${PROM:+   Prometheus: $PROM/}"
echo "   backflow run (pid $(cat "$RUN_PID")) and the dashboard (pid $(cat "$DASH_PID")) keep running in the background"
