#!/usr/bin/env bash
# deploy/demo.sh — the main job on the local stack: generated traffic through ingest, then what
# landed where. Run by `make demo` after the stack is up and bin/backflow is built.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=.stack/env
set -a; . "$ENV"; set +a
BF="bin/backflow --env-file $ENV"
KT=deploy/local/kafka-tool
BOOT=${BACKFLOW_KAFKA_BROKERS%%,*}
REQUESTS=${DEMO_REQUESTS:-10000}

say() { printf '\n== %s ==\n' "$*"; }

say "1. backflow ping: one real request to each service"
$BF ping

say "2. loadgen: $REQUESTS requests (3 records each) with duplicates and poison → .stack/demo-manifest.jsonl"
$BF loadgen --requests "$REQUESTS" --manifest .stack/demo-manifest.jsonl

say "3. ingest: decode, dedupe, moderate, emit (log: .stack/logs/demo-ingest.log)"
$BF ingest >.stack/logs/demo-ingest.log 2>&1 &
ingest=$!
trap 'kill -TERM $ingest 2>/dev/null || true' EXIT
# Caught up when the group has committed every source partition to its end (lag 0).
start=$SECONDS
while :; do
  lag=$($KT consumer-groups --bootstrap-server "$BOOT" --describe --group backflow-ingest 2>/dev/null |
    awk '$2=="model-inference-result" || $2=="gateway-log" { if ($6 == "-") missing++; else s += $6; n++ } END { if (n == 0 || missing) print "?"; else print s }')
  printf '   lag %s after %ds\n' "$lag" $((SECONDS - start))
  [ "$lag" = 0 ] && break
  kill -0 $ingest 2>/dev/null || { tail -20 .stack/logs/demo-ingest.log; echo "ingest exited" >&2; exit 1; }
  [ $((SECONDS - start)) -lt 300 ] || { echo "ingest did not catch up in 300 s" >&2; exit 1; }
  sleep 2
done
kill -TERM $ingest; wait $ingest || true; trap - EXIT

say "4. what landed"
manifest=.stack/demo-manifest.jsonl
echo "   this run's manifest: $(grep -c '"kind":"original"' $manifest) originals, $(grep -c '"kind":"duplicate"' $manifest) duplicates, $(grep -c '"kind":"poison"' $manifest) poison"
echo "   records in backflow.enriched (all runs so far): $($KT get-offsets --bootstrap-server "$BOOT" --topic backflow.enriched 2>/dev/null | awk -F: '{s+=$3} END {print s+0}')"
echo "   dead-letter topic, counts per class (all runs so far):"
$BF dlq list --limit 3 | sed 's/^/   /'
grep -E 'msg="ingest stopped"' .stack/logs/demo-ingest.log | sed 's/^/   /' || true

say "where to look"
cat <<TXT
   settings for your shell:  set -a; . .stack/env; set +a
   the manifest (oracle):    head .stack/demo-manifest.jsonl
   dead letters:             bin/backflow dlq list --env-file .stack/env --class unknown_schema
   Kafka's own tools:        deploy/local/kafka-tool consumer-groups --bootstrap-server $BOOT --describe --group backflow-ingest
   sensitive-word service:   curl -s $BACKFLOW_SENSITIVE_URL/metrics | grep ^sensitive_words
   service logs:             .stack/logs/
   stop everything:          deploy/local/stack down
TXT
