# walletsaga: the two commands people run are `make demo` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Every go command below runs go1.27.3, which the go command fetches through the module
# proxy the first time, whatever Go the machine has. go.mod's toolchain line, .ci/run, the scripts
# that run go, the Dockerfile's builder image and the README's set-up name the same version
# (deploy/toolchain_test.go checks that they agree).
export GOTOOLCHAIN := go1.27.3

GO        ?= go
GOFLAGS   ?=
PKGS      ?= ./...
# The vendored RocketMQ client is a module of its own (its go.mod, its upstream tests' own
# dependencies), so ./... and therefore vet and lint leave it out; `make test` and
# `make test-unit` run its tests (upstream's and those of walletsaga's patches) in it.
CLIENT    := third_party/rocketmq-client-go
# Fuzzing: `make fuzz` runs each fuzz target for FUZZTIME; `make test` ends with a short pass
# of FUZZ_SHORT per target (their seeds already ran under -race with the other tests).
FUZZTIME   ?= 60s
FUZZ_SHORT ?= 3s
# Verbose test output is filtered to results and t.Log lines (the integration tests log the
# broker address and their counts there); the full log is kept in .run/test.log.
TEST_FILTER := grep -Ev '^=== (RUN|PAUSE|CONT|NAME)' || true
# `make vulncheck` builds its vulnerability database from this version of the module
# golang.org/x/vulndb (docs/RUNBOOK.md, "Known vulnerabilities", says how to move it on).
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018

.PHONY: help tools services services-down services-status services-clean build release test test-unit test-compose vet lint vulncheck demo bench fuzz chaos

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

tools: ## install what the tests need beyond Go (headless Chromium and promtool from Debian; schemathesis, pinned, into .run/tools/)
	@scripts/tools.sh

services: ## start Postgres, the RocketMQ name server and broker on loopback (idempotent)
	@scripts/services.sh up

services-down: ## stop them (broker first)
	@scripts/services.sh down

services-status: ## say what runs where
	@scripts/services.sh status

services-clean: ## stop them and delete their data under .run/
	@scripts/services.sh clean

build: ## build walletsvc, notifier, providersim and demo into bin/
	$(GO) build $(GOFLAGS) -o bin/walletsvc ./cmd/walletsvc
	$(GO) build $(GOFLAGS) -o bin/notifier ./cmd/notifier
	$(GO) build $(GOFLAGS) -o bin/providersim ./cmd/providersim
	$(GO) build $(GOFLAGS) -o bin/demo ./cmd/demo

release: ## static binaries for linux/amd64 and linux/arm64 into dist/, a CycloneDX SBOM of each, and SHA256SUMS (scripts/release.sh)
	GO=$(GO) scripts/release.sh

vet: ## go vet
	$(GO) vet $(PKGS)

lint: ## golangci-lint (the version pinned in go.mod; its first build takes minutes) with .golangci.yml
	$(GO) tool golangci-lint run $(PKGS)

vulncheck: ## govulncheck (pinned in go.mod) on a database built offline from golang.org/x/vulndb@VULNDB_VERSION; fails on a reachable vulnerability not in scripts/vulncheck/exceptions.txt
	GO=$(GO) $(GO) run $(GOFLAGS) ./scripts/vulncheck -vulndb $(VULNDB_VERSION)

test: tools services vet lint vulncheck ## start the services if needed, vet, lint, scan for known vulnerabilities, run every test with -race, then fuzz each target for FUZZ_SHORT
	@mkdir -p .run
	WALLETSAGA_REQUIRE_SERVICES=1 $(GO) test $(GOFLAGS) -race -count=1 -timeout 20m -v $(PKGS) 2>&1 \
		| tee .run/test.log | { $(TEST_FILTER); }
	$(GO) -C $(CLIENT) test $(GOFLAGS) -race -count=1 ./... 2>&1 | tee -a .run/test.log
	@echo "make test: full log in .run/test.log"
	WALLETSAGA_REQUIRE_SERVICES=1 GO=$(GO) scripts/fuzz.sh $(FUZZ_SHORT)

test-compose: ## docker-compose.yml for real, on an engine of its own (scripts/compose-test.sh; root; ~7 min, more the first time)
	scripts/compose-test.sh

fuzz: services ## run every fuzz target for FUZZTIME each (default 60s); a failure names the input saved in testdata/fuzz/
	WALLETSAGA_REQUIRE_SERVICES=1 GO=$(GO) scripts/fuzz.sh $(FUZZTIME)

test-unit: ## only the unit tests, no services needed: under -short every test needing Postgres, RocketMQ or Chromium skips
	$(GO) test $(GOFLAGS) -race -count=1 -short $(PKGS)
	$(GO) -C $(CLIENT) test $(GOFLAGS) -race -count=1 ./...

demo: ## play the ordered-SMS story end to end (DEMO_EXIT=1 to exit when done)
	@scripts/demo.sh

bench: services build ## load-test the stack beside its Postgres and RocketMQ ceilings (~21 min); results in bench/results/
	$(GO) run $(GOFLAGS) ./bench -bin bin -out bench/results $(BENCH_ARGS)

chaos: build ## kill, freeze, restart and reshard a stack of its own under load, then audit it (~8 min, ~10 with -brokers 2; CHAOS_ARGS="-seed N")
	$(GO) run $(GOFLAGS) ./chaos -bin bin $(CHAOS_ARGS)
