#!/usr/bin/env bash
# deploy/demo-cluster.sh — the demo on the cluster stack: three `backflow run` processes
# (config deploy/demo-cluster.yaml) share the consumer groups, writing to ClickHouse 2 shards x 2
# replicas and a Redis Cluster; loadgen sends DEMO_SECONDS (default 20) at DEMO_RATE requests/s
# (default 500); then the manifest is checked against the distributed views and Feast reads
# features back from the Redis Cluster. Run by `make demo-cluster` once both stacks are up and
# bin/ is built. The three processes are stopped (SIGTERM) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=.stack/cluster/env
set -a; . "$ENV"; set +a
BF="bin/backflow --env-file $ENV"
KT=${BACKFLOW_KAFKA_TOOL:-deploy/local/kafka-tool}
BOOT=${BACKFLOW_KAFKA_BROKERS%%,*}
SECS=${DEMO_SECONDS:-20}
RATE=${DEMO_RATE:-500}
LOGS=.stack/cluster/logs
RUN=.stack/cluster/run
PROCS=3
# The metrics ports of the three processes: BASE, BASE+1, BASE+2.
MBASE=${BACKFLOW_CLUSTER_METRICS_PORT:-19470}
MANIFEST=.stack/cluster/demo-manifest.jsonl
CH="clickhouse-client --host ${BACKFLOW_CLICKHOUSE_ADDR%%:*} --port ${BACKFLOW_CLICKHOUSE_ADDR##*:}"
# Read on another host than the one written to: the last replica of the last shard.
LAST=${BACKFLOW_CLICKHOUSE_CLUSTER_ADDRS##*,}
CH_LAST="clickhouse-client --host ${LAST%%:*} --port ${LAST##*:}"

say() { printf '\n== %s ==\n' "$*"; }
stop_all() {
  local f p
  for f in "$RUN"/demo-run-*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    rm -f "$f"
  done
}
trap stop_all EXIT
# alive fails the demo, with the end of its log, if a backflow process has exited.
alive() {
  local i
  for i in $(seq 1 $PROCS); do
    kill -0 "$(cat "$RUN/demo-run-$i.pid")" 2>/dev/null && continue
    echo "backflow process $i has exited; the end of $LOGS/demo-run-$i.log:" >&2
    tail -n 15 "$LOGS/demo-run-$i.log" >&2
    exit 1
  done
}

say "1. backflow ping: the shared Kafka, registry and sensitive-word service; the cluster's ClickHouse and Redis"
$BF ping

say "2. backflow migrate: every host of cluster $BACKFLOW_CLICKHOUSE_CLUSTER"
$BF migrate

say "3. $PROCS backflow run processes sharing the groups (logs: $LOGS/demo-run-N.log)"
stop_all
for topic in cluster.model-inference-result cluster.gateway-log; do
  $KT topics --bootstrap-server "$BOOT" --create --if-not-exists --topic "$topic" --partitions 3 --replication-factor 1 >/dev/null
done
# Each process joins the groups under a stable instance id (backflow-1..3), as a pod of a
# StatefulSet does under its name, and keeps its local tables in a folder of its own across
# runs, as the pod keeps its volume: a run right after another gets the same partitions back
# (no rebalance within kafka.session_timeout) and restores only what the changelogs gained.
# The folders are a cache of the table topics: they are emptied when those topics are not the
# ones they were built from (a new stack, deleted topics), which the topics' ids tell.
STORAGE=.stack/cluster/demo-storage
table_ids() {
  { $KT topics --bootstrap-server "$BOOT" --describe --topic 'backflow-cluster-(ingest|features)-table' 2>/dev/null || true; } |
    awk '$1 == "Topic:" && $3 == "TopicId:" {print $2, $4}' | sort
}
ids=$(table_ids)
if [ -z "$ids" ] || [ "$ids" != "$(cat "$STORAGE/table-ids" 2>/dev/null || true)" ]; then
  echo "   local tables: emptied (the table topics are new or gone)"
  rm -rf "$STORAGE"
else
  echo "   local tables: kept from the last run ($STORAGE)"
fi
mkdir -p "$STORAGE"
for i in $(seq 1 $PROCS); do
  BACKFLOW_KAFKA_INSTANCE_ID="backflow-$i" \
  BACKFLOW_INGEST_STORAGE_DIR="$PWD/$STORAGE/$i/ingest" BACKFLOW_SINK_FEATURES_STORAGE_DIR="$PWD/$STORAGE/$i/features" \
  setsid bin/backflow --env-file "$PWD/$ENV" run --config deploy/demo-cluster.yaml --metrics-addr "127.0.0.1:$((MBASE + i - 1))" \
    >"$LOGS/demo-run-$i.log" 2>&1 </dev/null &
  echo $! >"$RUN/demo-run-$i.pid"
done
for i in $(seq 1 $PROCS); do
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$((MBASE + i - 1))/healthz" >/dev/null && break; sleep 0.2; done
  kill -0 "$(cat "$RUN/demo-run-$i.pid")" || { tail -n 5 "$LOGS/demo-run-$i.log"; exit 1; }
  echo "   process $i: pid $(cat "$RUN/demo-run-$i.pid"), metrics http://127.0.0.1:$((MBASE + i - 1))/metrics"
done

say "4. loadgen: ${SECS}s at $RATE requests/s, with duplicates and poison → $MANIFEST"
bin/loadgen --env-file "$ENV" --no-progress --duration "${SECS}s" --rate "$RATE" --manifest "$MANIFEST" \
  --inference-topic cluster.model-inference-result --gateway-topic cluster.gateway-log

say "5. waiting until the groups have lag 0 (backflow groups)"
start=$SECONDS
while :; do
  lag=$($BF groups -o json 2>/dev/null | python3 -c '
import json, sys
want = {"backflow-cluster-ingest", "backflow-cluster-sink-clickhouse", "backflow-cluster-sink-clickhouse-rollups", "backflow-cluster-features"}
gs = [g for g in json.load(sys.stdin) if g.get("group") in want]
print(sum(int(t.get("lag") or 0) for g in gs for t in g.get("topics") or []) if len(gs) == len(want) else -1)' || echo -1)
  alive
  echo "   lag $lag ($((SECONDS - start))s)"
  [ "$lag" = 0 ] && break
  [ $((SECONDS - start)) -lt 300 ] || { echo "not caught up in 300 s" >&2; exit 1; }
  sleep 3
done
# The local tables are now built from these table topics: the next run keeps them.
table_ids >"$STORAGE/table-ids"

say "6. the oracle: the manifest against the distributed views (read on $LAST)"
originals=$(grep '"kind":"original"' "$MANIFEST" | grep -c '"topic":"cluster.model-inference-result"' || true)
# This run's request ids start with the manifest's run id: rows of earlier demos are left out.
run_id=$(head -n 1 "$MANIFEST" | python3 -c 'import json, sys; print(json.load(sys.stdin)["runId"])')
THIS_RUN="source_topic = 'cluster.model-inference-result' AND startsWith(request_id, '$run_id-')"
# The last flush may still be on its way to the other replica (about a second): wait for it.
for _ in $(seq 30); do
  read -r rows ids <<<"$($CH_LAST -q "SELECT count(), uniqExact(request_id) FROM v_inference_results WHERE $THIS_RUN")"
  [ "$ids" -ge "$originals" ] && break
  sleep 1
done
echo "   inference originals sent: $originals; in v_inference_results: $rows rows, $ids request ids (lost $((originals - ids)), duplicates $((rows - ids)))"
if [ "$ids" -ne "$originals" ] || [ "$rows" -ne "$ids" ]; then
  echo "the oracle does not match: lost or duplicated rows (logs: $LOGS/demo-run-N.log)" >&2
  exit 1
fi
echo "   rows per shard (inference_results_local, this run's):"
$CH -q "SELECT shard_num, host_address, port FROM system.clusters WHERE cluster = '$BACKFLOW_CLICKHOUSE_CLUSTER'" |
  while read -r shard host port; do
    echo "     shard $shard $host:$port $(clickhouse-client --host "$host" --port "$port" -q "SELECT count() FROM inference_results_local WHERE $THIS_RUN")"
  done
echo "   features read back through Feast from the Redis Cluster (3 busiest tenants) against ClickHouse:"
$CH_LAST --format PrettyCompactNoEscapes -q "SELECT tenant_id, count() AS responses FROM v_gateway_logs WHERE phase = 'RESPONSE' AND source_topic = 'cluster.gateway-log' GROUP BY tenant_id ORDER BY responses DESC LIMIT 3" | sed 's/^/   /'
repo=.stack/cluster/feast-repo
if BACKFLOW_FEAST_REPO_DIR="$PWD/$repo" deploy/feast/setup.sh >"$LOGS/demo-feast.log" 2>&1; then
  tenants=$($CH_LAST -q "SELECT tenant_id FROM v_gateway_logs WHERE phase = 'RESPONSE' AND source_topic = 'cluster.gateway-log' GROUP BY tenant_id ORDER BY count() DESC LIMIT 3" |
    python3 -c 'import json, sys; print(json.dumps([{"tenant_id": l.strip()} for l in sys.stdin if l.strip()]))')
  echo "{\"features\": [\"tenant_features:request_count\"], \"entity_rows\": $tenants}" |
    .stack/feast-venv/bin/python deploy/feast/read_online.py "$repo" | sed 's/^/   /'
  echo
else
  echo "   (Feast could not be set up; see $LOGS/demo-feast.log)"
fi
echo
echo "   (the three processes stop now; the cluster stack keeps running: deploy/local/stack --cluster down)"
