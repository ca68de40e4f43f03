#!/usr/bin/env bash
# bench/storage.sh — `make bench-storage`: the dedupe claims' store (internal/claimstore) at
# steady state with 1M, 10M and 30M live claims (BENCH_STORAGE_SIZES), BenchmarkClaimStoreGrowth:
# CPU per claim and per lookup, restore records/s, disk and memory per claim. The raw output
# goes to .bench/results/storage-<UTC time>.txt (ignored by git); the summary to commit to
# bench/storage.json. It needs about 1 KB of disk a claim under TMPDIR (the store and its
# restored copy; 30 GB at 30M) and takes about 15 minutes on 2 cores.
# BENCH_STORAGE_STORE=leveldb runs the same on the LevelDB storage the table used before (no
# summary is written then). BENCH_STORAGE_FROM=FILE summarizes a raw output file instead of
# running.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${BENCH_STORAGE_SIZES:-1M,10M,30M}
STORE=${BENCH_STORAGE_STORE:-claimstore}
mkdir -p .bench/results
stamp=$(date -u +%Y%m%dT%H%M%S)
load=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || true) # at the start: the code measured
if [ -n "${BENCH_STORAGE_FROM:-}" ]; then
  out=$BENCH_STORAGE_FROM
  load="(not recorded: summarized from $out)"
else
  out=.bench/results/storage-$stamp.txt
  echo "storage benchmark: $STORE at $SIZES live claims → $out (load average $load)"
  {
    echo "# load average at the start: $load"
    CLAIMS_BENCH_SIZES=$SIZES CLAIMS_BENCH_STORE=$STORE go test -run '^$' -bench ClaimStoreGrowth -benchtime 1x -timeout 120m ./internal/claimstore/
  } | tee "$out"
fi
[ "$STORE" = claimstore ] || exit 0
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
awk -v commit="$commit" -v started="$stamp" -v load="$load" -v cpu="$cpu" -v cores="$(nproc)" '
  /^BenchmarkClaimStoreGrowth\// {
    split($1, name, "/"); size = name[3]; sub(/-[0-9]+$/, "", size); sub(/k$/, "000", size)
    line = sprintf("    {\"claims\": %s", size)
    for (i = 3; i < NF; i += 2) {
      unit = $(i + 1); if (unit == "ns/op") continue; gsub(/[\/-]/, "_", unit)
      line = line sprintf(", \"%s\": %s", unit, $i)
    }
    rows[n++] = line "}"
  }
  END {
    if (n == 0) { print "no BenchmarkClaimStoreGrowth lines" > "/dev/stderr"; exit 1 }
    printf "{\n  \"started\": \"%s\",\n  \"commit\": \"%s\",\n  \"machine\": {\"cores\": %s, \"cpu\": \"%s\", \"load_average_start\": \"%s\"},\n", started, commit, cores, cpu, load
    printf "  \"benchmark\": \"BenchmarkClaimStoreGrowth (internal/claimstore), one run per size\",\n  \"sizes\": [\n"
    for (i = 0; i < n; i++) printf "%s%s\n", rows[i], (i < n - 1 ? "," : "")
    printf "  ]\n}\n"
  }' "$out" > bench/storage.json
echo "summary (commit this): bench/storage.json"
