#!/usr/bin/env bash
# bench/claim-bytes.sh — `make bench-claim-bytes`: ingest's dedupe table in bytes per request
# (BenchmarkClaimBytes, processors/ingest): the store's files, sealed and active segments apart,
# and the changelog's key and value bytes before and after compaction, at 100k, 300k and 1M
# requests in a partition (BENCH_CLAIM_BYTES_SIZES), BENCH_CLAIM_BYTES_RUNS times (3) with
# other seeds. BENCH_CLAIM_BYTES_BASE=DIR also runs the same benchmark file in DIR, a checkout
# of another commit (git worktree add, or git archive), alternating with this one run by run,
# for an A/B in one sitting. The raw output goes to .bench/results/ (ignored by git); the
# summary (min and max of each figure over the runs) to commit to bench/claim-bytes.json.
# BENCH_CLAIM_BYTES_FROM=DIR summarizes the outputs in DIR (before-N.txt, after-N.txt) instead.
# About 1 minute a run and side on 2 cores, 0.5 GB of TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${BENCH_CLAIM_BYTES_SIZES:-100k,300k,1M}
RUNS=${BENCH_CLAIM_BYTES_RUNS:-3}
BASE=${BENCH_CLAIM_BYTES_BASE:-}
mkdir -p .bench/results
stamp=$(date -u +%Y%m%dT%H%M%S)
load=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || true)
base_commit=
out=.bench/results/claim-bytes-$stamp
FROM=${BENCH_CLAIM_BYTES_FROM:-}
if [ -n "$FROM" ]; then
  out=$FROM
  load="(not recorded: summarized from $FROM)"
  RUNS=$(ls "$out"/after-*.txt | wc -l)
  base_commit=${BENCH_CLAIM_BYTES_BASE_COMMIT:-}
  BASE=
fi
mkdir -p "$out"
if [ -n "$BASE" ]; then
  cp processors/ingest/claimbytes_bench_test.go "$BASE/processors/ingest/"
  base_commit=$(git -C "$BASE" rev-parse --short HEAD 2>/dev/null || echo "$BASE")
fi
sides="after"
[ -z "$BASE" ] || sides="before after"
[ -n "$FROM" ] || for i in $(seq 1 "$RUNS"); do
  for side in $sides; do
    dir=.
    [ "$side" = after ] || dir=$BASE
    echo "run $i, $side"
    (cd "$dir" && CLAIM_BYTES_SIZES=$SIZES CLAIM_BYTES_SEED=$((i * 10)) \
      go test -run '^$' -bench ClaimBytes -benchtime 1x -count 1 ./processors/ingest) > "$out/$side-$i.txt"
  done
done
awk -v commit="$commit" -v base="$base_commit" -v started="$stamp" -v load="$load" -v cores="$(nproc)" -v runs="$RUNS" '
  FNR == 1 { side = FILENAME; sub(/.*\//, "", side); sub(/-[0-9]+\.txt$/, "", side) }
  /^BenchmarkClaimBytes\// {
    split($1, name, "/"); size = name[2]; sub(/-[0-9]+$/, "", size); sub(/k$/, "000", size)
    key = side " " size
    if (!(key in seen)) { seen[key] = 1; order[n++] = key }
    for (i = 3; i < NF; i += 2) {
      unit = $(i + 1); if (unit == "ns/op") continue; gsub(/[\/-]/, "_", unit)
      k = key SUBSEP unit
      if (!(k in lo) || $i < lo[k]) lo[k] = $i
      if (!(k in hi) || $i > hi[k]) hi[k] = $i
      if (!((key, "units") in units)) units[key, "units"] = ""
      if (index(" " units[key, "units"] " ", " " unit " ") == 0) units[key, "units"] = units[key, "units"] " " unit
    }
  }
  END {
    if (n == 0) { print "no BenchmarkClaimBytes lines" > "/dev/stderr"; exit 1 }
    printf "{\n  \"started\": \"%s\",\n  \"commit\": \"%s\",\n  \"base\": \"%s\",\n", started, commit, base
    printf "  \"machine\": {\"cores\": %s, \"load_average_start\": \"%s\"},\n", cores, load
    printf "  \"benchmark\": \"BenchmarkClaimBytes (processors/ingest), %s runs a side, [min, max]; before: base, after: commit\",\n  \"rows\": [\n", runs
    for (j = 0; j < n; j++) {
      split(order[j], p, " ")
      line = sprintf("    {\"side\": \"%s\", \"requests\": %s", p[1], p[2])
      m = split(units[order[j], "units"], us, " ")
      for (u = 1; u <= m; u++) { k = order[j] SUBSEP us[u]; line = line sprintf(", \"%s\": [%s, %s]", us[u], lo[k], hi[k]) }
      printf "%s}%s\n", line, (j < n - 1 ? "," : "")
    }
    printf "  ]\n}\n"
  }' $(ls "$out"/*.txt | sort) > bench/claim-bytes.json
echo "summary (commit this): bench/claim-bytes.json"
