#!/usr/bin/env bash
# bench/micro.sh — `make bench-micro`: Go micro-benchmarks of backflow's hot paths (decode,
# dedupe lookup, batch build, ClickHouse append, Feast key serialization, the ingest record
# path, the sensitive-word matcher and the goka table storage), written to
# .bench/results/micro-<UTC time>.txt (ignored by git: raw results are never committed) in the
# format benchstat reads. Compare two runs with
#   go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da OLD.txt NEW.txt
# BENCH_COUNT (default 6) repeats each benchmark, as benchstat wants for its confidence
# intervals; BENCH_RUN (default .) selects benchmarks by regexp; BENCH_TIME (default 1s) is
# -benchtime. BenchmarkAppend talks to the stack's ClickHouse (deploy/local/stack up).
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${BENCH_COUNT:-6}
RUN=${BENCH_RUN:-.}
TIME=${BENCH_TIME:-1s}
mkdir -p .bench/results
out=.bench/results/micro-$(date -u +%Y%m%dT%H%M%S).txt
pkgs=(./avro/ ./processors/ingest/ ./sinks/clickhouse/ ./processors/features/ ./sinks/redis/ ./internal/feast/ ./tools/sensitive-words/ ./internal/kafka/)
echo "micro-benchmarks: -count $COUNT -bench '$RUN' -benchtime $TIME over ${pkgs[*]} → $out"
{
  echo "# backflow micro-benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  go test -run '^$' -bench "$RUN" -benchmem -benchtime "$TIME" -count "$COUNT" "${pkgs[@]}"
} | tee "$out"
echo "written: $out (benchstat $out, or benchstat OLD $out to compare)"
