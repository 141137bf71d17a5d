# elasti: see README.md. `make demo` and `make test` work on a fresh machine.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO        ?= go
BIN       ?= bin
PKGS      := ./...
# Integration packages each start a control plane; two at once fit 2 cores.
TEST_PARALLEL ?= 2
TEST_TIMEOUT  ?= 30m
BENCH_TIME    ?= 1x
# ElastiServices in the fleet benchmark.
FLEET         ?= 1000

.PHONY: all build test unit generate verify verify-codegen lint cluster-bins cluster-up cluster-down demo bench clean

all: build

build: ## Compile everything; commands under cmd/ land in ./bin
	$(GO) build ./...
	@if compgen -G 'cmd/*/main.go' >/dev/null; then $(GO) build -o $(BIN)/ ./cmd/...; fi

cluster-bins: ## Build or reuse the cached control-plane binaries (shows progress)
	@hack/build-cluster-bins.sh >/dev/null

test: cluster-bins ## The full suite: unit, integration and end-to-end tests on the local control plane
	$(GO) test -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(PKGS)

generate: ## Regenerate deepcopy, clientset, listers and informers
	hack/update-codegen.sh

verify: verify-codegen lint ## Everything CI checks before tests

verify-codegen:
	hack/verify-codegen.sh

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

cluster-up: cluster-bins ## Start the local control plane; prints the KUBECONFIG to export
	@$(GO) run ./hack/localcluster up

cluster-down: ## Stop the local control plane
	@$(GO) run ./hack/localcluster down

demo: cluster-bins ## The most complete working flow on the local cluster
	hack/demo.sh

bench: cluster-bins ## Go benchmarks on the local control plane; FLEET=N sizes the fleet (default 1000)
	$(GO) test -count=1 -run '^$$' -bench . -benchtime $(BENCH_TIME) -timeout 30m ./pkg/operator/
	$(GO) test -count=1 -run '^$$' -bench 'Resolver' -benchtime $(BENCH_TIME) -timeout 30m ./pkg/e2e/
	$(GO) test -count=1 -run '^$$' -bench 'PortListeners' -benchtime 1x ./pkg/resolver/
	$(GO) test -count=1 -run '^$$' -bench 'TrafficPath|ResolverRouting' -benchtime 1x -timeout 30m ./pkg/e2e/traffic/
	$(GO) test -count=1 -run '^$$' -bench 'Fleet' -benchtime 1x -timeout 60m ./pkg/e2e/ -args -fleet-size=$(FLEET)

clean:
	rm -rf $(BIN)
