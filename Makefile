# backflow — the two commands are `make demo` and `make test`; see README.md.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
STACK := deploy/local/stack
PKGS := ./...

.PHONY: help demo test test-short test-integration check-go fmt-check vet build stack-up stack-down stack-status clean bench bench-micro

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

demo: check-go build stack-up ## the main job: every stage on ~30 s of generated traffic, then what landed where
	deploy/demo.sh

test: check-go stack-up fmt-check vet ## everything: stack up (reused if running), gofmt, vet, all tests with -race
	$(GO) test -race -count=1 $(PKGS)

test-short: check-go fmt-check vet ## unit tests only, no stack needed
	$(GO) test -race -short -count=1 $(PKGS)

check-go:
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is needed: https://go.dev/dl/ (not found on PATH)" >&2; exit 1; }

fmt-check: ## fail if gofmt would change a file
	@out=$$(find . -name '*.go' -not -path './.stack/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

build: ## build bin/backflow
	$(GO) build -o bin/backflow ./cmd/backflow

bench: check-go build stack-up ## drain a 1M-record backlog with backflow, the raw-library ceiling and Benthos; results in bench/results (BENCH_FLAGS=--quick: a short run)
	$(GO) build -o bin/bench-ceiling ./bench/ceiling
	$(GO) build -o bin/bench-harness ./bench/harness
	bench/benthos/build.sh
	bin/bench-harness $(BENCH_FLAGS)

bench-micro: check-go ## Go micro-benchmarks of the hot paths into bench/results/micro-*.txt, for benchstat (BENCH_COUNT, BENCH_RUN)
	bench/micro.sh

stack-up: ## start (or reuse) the local stack
	$(STACK) up

stack-down: ## stop the local stack, leaving no process behind
	$(STACK) down

stack-status:
	$(STACK) status

clean: stack-down ## stop the stack and delete its state (.stack/) and bin/
	rm -rf .stack bin
