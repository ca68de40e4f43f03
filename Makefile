# backflow — the two commands are `make demo` and `make test`; see README.md.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
STACK := deploy/local/stack
PKGS := ./...

.PHONY: help demo demo-cluster stack-cluster-up test test-leftovers test-short chaos soak test-integration check-go fmt-check vet build config-reference stack-plain-up stack-up stack-down stack-status chromium dashboard-screenshot grafana-json clean bench bench-scale bench-cluster bench-micro bench-storage bench-claim-bytes bench-dashboard bench-restart bench-streams

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

demo: check-go build stack-plain-up ## the main job: every stage on ~30 s of generated traffic, then what landed where
	deploy/demo.sh

demo-cluster: check-go build stack-cluster-up ## the demo on the cluster stack: 3 backflow run processes, ClickHouse 2 shards x 2 replicas, a Redis Cluster; the manifest checked against the distributed views
	deploy/demo-cluster.sh

stack-cluster-up:
	$(STACK) up kafka registry sensitive-words
	$(STACK) --cluster up

test: check-go stack-up chromium fmt-check vet ## everything: both stacks up (reused if running), Chromium, gofmt, vet, all tests with -race, then test-leftovers for what they made
	since=$$(date +%s%N); status=0; \
	$(GO) test -race -count=1 -timeout 30m $(PKGS) || status=$$?; \
	$(GO) run ./test/leftovers --since $$since $(LEFTOVERS_FLAGS) || status=1; \
	exit $$status

SINCE ?=
test-leftovers: check-go ## fail if topics, groups, subjects, databases or Redis keys made by tests remain on the stacks (SINCE=<unix ns>: only those made since; LEFTOVERS_FLAGS="--delete --older-than 1h" removes a crashed run's)
	$(GO) run ./test/leftovers $(if $(SINCE),--since $(SINCE)) $(LEFTOVERS_FLAGS)

test-short: check-go fmt-check vet ## unit tests only, no stack needed
	$(GO) test -race -short -count=1 $(PKGS)

check-go:
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is needed: https://go.dev/dl/ (not found on PATH)" >&2; exit 1; }

fmt-check: ## fail if gofmt would change a file
	@out=$$(find . -path './.*' -prune -o -name '*.go' -print0 | xargs -0 gofmt -l); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

build: ## build bin/backflow and the load generator bin/loadgen
	$(GO) build -o bin/backflow ./cmd/backflow
	$(GO) build -o bin/loadgen ./tools/loadgen/cmd/loadgen

config-reference: ## regenerate deploy/config.example.yaml after changing a config key (README: check-config --print-reference)
	$(GO) run ./cmd/backflow check-config --print-example > deploy/config.example.yaml

bench: check-go build stack-up ## drain a 1M-record backlog with backflow, the raw-library ceiling and Benthos; summary in bench/latest.json (commit it), raw results and profiles in .bench/results (not committed); BENCH_FLAGS=--quick: a short run, no summary
	$(GO) build -o bin/bench-ceiling ./bench/ceiling
	$(GO) build -o bin/bench-harness ./bench/harness
	bench/benthos/build.sh
	bin/bench-harness $(BENCH_FLAGS)

BENCH_SCALE ?= 100k,1M,10M
bench-scale: check-go build stack-up ## scale mode: drain backlogs of BENCH_SCALE records (default 100k,1M,10M; about 20 minutes on 2 cores) with backflow and the ceiling; bench/latest.json and docs/bench-scale.png (commit both)
	$(GO) build -o bin/bench-ceiling ./bench/ceiling
	$(GO) build -o bin/bench-harness ./bench/harness
	bin/bench-harness --scale $(BENCH_SCALE) $(BENCH_FLAGS)

bench-cluster: check-go build stack-cluster-up ## how backflow scales out: 1, 2 and 3 backflow run processes sharing the groups drain a 300k backlog on the cluster stack, alternating; summary in bench/scaling.json (commit it), quoted by docs/scaling.md
	$(GO) build -o bin/bench-harness ./bench/harness
	bin/bench-harness --env-file .stack/cluster/env --peers backflow,backflow-x2,backflow-x3 --backflow-layout run \
		--records 300000 --latency=false --profile=false --plot "" --summary bench/scaling.json $(BENCH_FLAGS)

BENCH_RESTART_REQUESTS ?= 1M,10M
bench-restart: check-go build stack-plain-up ## what a restart costs: 3 backflow run instances (every demo stage, static instance ids) on state from BENCH_RESTART_REQUESTS requests (default 1M,10M), under 300 requests/s: a rolling restart on kept disks, a restart on an empty disk, a failover (SIGKILL), 3 runs each; summary in bench/restart.json (commit it), raw results in .bench/results (not committed); BENCH_FLAGS="--requests 30k --runs 1 --summary ''": a quick look
	$(GO) build -o bin/bench-harness ./bench/harness
	bin/bench-harness --restart --env-file $(or $(BACKFLOW_STACK_DIR),.stack)/env --requests $(BENCH_RESTART_REQUESTS) --runs 3 $(BENCH_FLAGS)

BENCH_STREAMS_FLAGS ?=
bench-streams: check-go build stack-plain-up ## Protobuf and JSON Schema streams against the same records as Avro: shop-order and page-view, 500k originals each, drained by backflow run with the stream's stage alone, 3 runs per format interleaved; records/s, CPU per record, peak RSS, ratio to Avro; summary in bench/stream-formats.json (commit it); BENCH_STREAMS_FLAGS=--quick: a short look, no summary
	$(GO) build -o bin/bench-harness ./bench/harness
	bin/bench-harness --stream-formats --env-file $(or $(BACKFLOW_STACK_DIR),.stack)/env $(BENCH_STREAMS_FLAGS)

bench-storage: check-go ## the dedupe claims' store at 1M, 10M and 30M live claims (BENCH_STORAGE_SIZES): CPU per claim and lookup, restore records/s, disk per claim; summary in bench/storage.json (commit it); about 15 min, 30 GB of TMPDIR
	bench/storage.sh

bench-claim-bytes: check-go ## ingest's dedupe table in bytes per request at 100k to 1M requests (BENCH_CLAIM_BYTES_SIZES), on disk and in the changelog; BENCH_CLAIM_BYTES_BASE=DIR (a checkout of another commit) for an A/B; summary in bench/claim-bytes.json (commit it); about 1 min a run
	bench/claim-bytes.sh

BENCH_DASHBOARD_FLAGS ?=
bench-dashboard: check-go stack-plain-up ## every dashboard panel over 30 min to 30 days at 10M and 100M inference results, the old layout (views) against the new (rollups) on the same rows; summary in bench/dashboard.json (commit it), the table for docs/benchmarks.md on stdout (BENCH_DASHBOARD_FLAGS="--sizes 1M --runs 1": a quick look)
	$(GO) run ./bench/dashboard $(BENCH_DASHBOARD_FLAGS)

bench-micro: check-go ## Go micro-benchmarks of the hot paths into .bench/results/micro-*.txt (not committed), for benchstat (BENCH_COUNT, BENCH_RUN)
	bench/micro.sh

stack-plain-up:
	$(STACK) up

stack-up: ## start (or reuse) the local stack and its secured twin (deploy/local/stack --secure)
	$(STACK) up
	$(STACK) --secure up

stack-down: ## stop both stacks, leaving no process behind
	$(STACK) down

stack-status:
	$(STACK) status
	$(STACK) --secure status

chromium: ## install Debian's Chromium (for the dashboard's browser test) unless it is there
	deploy/local/chromium >/dev/null

dashboard-screenshot: ## after make demo: docs/dashboard.png from the running dashboard, in headless Chromium
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
	  --disable-component-update --disable-sync --user-data-dir="$$(mktemp -d)" --hide-scrollbars --window-size=1440,2480 \
	  --virtual-time-budget=20000 --screenshot="$$PWD/docs/dashboard.png" "http://127.0.0.1:$${BACKFLOW_DASHBOARD_PORT:-18400}/#range=30m&refresh=0"

grafana-json: ## regenerate deploy/grafana/dashboards/backflow.json from internal/dashboard/panels.go
	$(GO) test ./internal/dashboard -run TestGrafanaJSONUpToDate -count=1 -update

CHAOS_FLAGS ?=
chaos: check-go ## the fault-injection suite: every scenario of reliability.md on a 3-broker stack and the secured one (CHAOS_FLAGS="--scenarios 2,16")
	$(STACK) up --brokers 3 || { $(STACK) down kafka && $(STACK) up --brokers 3; }
	$(STACK) --secure up
	$(GO) run ./test/chaos/cmd/chaos $(if $(CHAOS_FLAGS),,--summary test/chaos/latest.json) $(CHAOS_FLAGS)

DURATION ?= 10m
soak: check-go ## scenario 20: faults 1, 2, 5, 9 and 15 in turn under steady traffic for DURATION (default 10m)
	$(STACK) up --brokers 3 || { $(STACK) down kafka && $(STACK) up --brokers 3; }
	$(GO) run ./test/chaos/cmd/chaos --soak $(DURATION) --json .chaos/soak.json

clean: stack-down ## stop the stack and delete its state (.stack/) and bin/
	rm -rf .stack bin
