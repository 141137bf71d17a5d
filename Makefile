# elasti: see README.md. `make demo` and `make test` work on a fresh machine.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO        ?= go
BIN       ?= bin
# Every module of the workspace (go.work), named: in workspace mode ./...
# at the root matches only the root module's packages, not the image
# builder's (hack/images) nor the test bed's (test/).
MODULES   := . ./hack/images ./test
PKGS      := $(addsuffix /...,$(MODULES))
# make test names these first: go test starts packages in the order they are
# named, and with its lanes the run ends when the last long package does, so
# the longest start first (docs/development/ci.md has their times): the two
# real-node packages, the traffic suite and the operator's at once, then
# the kwok suites and the image builds while the traffic suite still runs. The two real-node
# packages share one real node (its lock), so the short one goes first
# instead of waiting half the run for the long one.
SLOW_PKGS := ./test/localcluster/realnode ./test/e2e/realnode ./test/e2e/traffic ./test/operator \
	./hack/images ./test/e2e ./test/e2e/helm ./test/e2e/apiserver
# Three lanes: the long suites mostly wait (cooldowns, rollouts, a real
# container's start), so a third package fits beside them on 2 cores and
# the run ends with the traffic suite (18.1 minutes against 21-28 with
# two; docs/development/ci.md).
TEST_PARALLEL ?= 3
TEST_TIMEOUT  ?= 45m
BENCH_TIME    ?= 1x
# ElastiServices in the fleet benchmark, and how many share a namespace.
FLEET         ?= 200 1000
FLEET_PER_NS  ?= 100
# all, or foreign: from the restart straight to another tool's scale-down.
FLEET_PHASES  ?= all
# The fleet benchmark's bound: N = 10,000 takes about 45 minutes on an idle
# 2-core machine and far longer beside other jobs; N = 1000, about 5.
FLEET_TIMEOUT ?= 150m
# The real node's cold-start gate (BenchmarkColdStartGateOnTheRealNode):
# cold starts per cell, each cell a resolver variant × an app's listen delay
# (0, 300 ms, 2 s) × periodSeconds (1, 10) × a path; 10 is 120 per path
# with both variants: on (direct probing of woken pods) and off. -v, since
# go test cuts a benchmark's log, which holds the per-cell table, short.
COLDSTART_COUNT    ?= 10
COLDSTART_VARIANTS ?= on,off
# make bench-compare: the commit whose resolver runs beside this tree's.
BASELINE ?= HEAD~1
# The cold-start soak (BenchmarkColdStartSoak): rounds of 120 cold starts
# (6 paths × 20 Services) with a resolver pod deleted and the apiserver
# SIGKILLed in two of them; 84 are 10,080 cold starts, about 40 minutes.
SOAK_ROUNDS   ?= 84
# The real node's soak (BenchmarkColdStartSoakOnTheRealNode): rounds of
# the gate's 18 cells with direct probing on, the same two faults; 30
# rounds are 540 cold starts, about 12 minutes (10,000 take 556 rounds,
# about 3.5 hours on 2 cores).
SOAK_REALNODE_ROUNDS ?= 30
# Where make bench writes its results files (the pictures in docs/ are
# drawn from them).
BENCH_OUT     ?= bench-results
# The results file make bench records each benchmark's figures in, and
# the results page's table is written from (make bench-page).
BENCH_RESULTS ?= docs/benchmarks/results.json
# The 5-minute app's start in BenchmarkSlowStartOnTheRealNode.
SLOWSTART_READY ?= 5m
# How long make fuzz runs each fuzz target.
FUZZTIME      ?= 30s

# The release this tree builds: what the binaries report (--version, the
# Starting log line, elasti_build_info) and the tag of the images in
# manifests/. Change it only with `make set-image-tag TAG=vX.Y.Z`, which
# rewrites this line, the Dockerfile's ARG VERSION and every elasti image
# in manifests/ and deploy/; test/release's tests fail when they disagree.
VERSION := v0.1.0
# The static build the Dockerfile runs for each image (keep the two alike;
# test/release checks it), so `make build` exercises it.
GO_BUILD_ENV   := CGO_ENABLED=0
# -buildvcs=false: the commit goes in the image labels instead, and a
# binary does not change with the state of the working tree.
GO_BUILD_FLAGS := -trimpath -buildvcs=false -ldflags "-s -w -X github.com/elasti-dev/elasti/pkg/command.version=$(VERSION)"
# The platforms of `make images` (hack/images/oci.Platforms; test/release
# checks they agree), and what the images record about their source: the
# commit, and its time as every timestamp in them
# (https://reproducible-builds.org/specs/source-date-epoch/).
IMAGE_PLATFORMS   := linux/amd64 linux/arm64
REVISION          ?= $(shell git rev-parse HEAD)$(shell git diff --quiet HEAD -- || echo -dirty)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)
# make push's and make release's destination, host[:port]/path:
# REGISTRY/elasti-operator:VERSION, and the chart at oci://REGISTRY/elasti.
REGISTRY ?=
# true: speak plain HTTP to REGISTRY (an HTTP-only private registry); false:
# never. Empty: only to a registry on loopback.
PLAIN_HTTP ?=

.PHONY: all build test unit docs generate verify verify-codegen verify-release verify-chart lint cluster-bins cluster-up cluster-down demo bench bench-operator bench-resolver bench-traffic bench-soak bench-realnode bench-fleet bench-page bench-compare version set-image-tag vulncheck fuzz images push release clean

all: build

build: ## Compile everything; the commands, built as the Dockerfile builds them, land in ./bin: elasti-operator, elasti-resolver and the kubectl plugin kubectl-elasti
	$(GO_BUILD_ENV) $(GO) build -trimpath $(PKGS)
	$(GO_BUILD_ENV) $(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/ ./cmd/...

images: ## OCI images of both commands for IMAGE_PLATFORMS, without Docker, into bin/images: <cmd>/ (OCI layout), <cmd>-<arch>.tar (docker load), <cmd>-<arch>.spdx.json (SBOM)
	for platform in $(IMAGE_PLATFORMS); do \
		$(GO_BUILD_ENV) GOOS=$${platform%/*} GOARCH=$${platform#*/} $(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/$${platform/\//_}/ ./cmd/...; \
	done
	$(GO) run ./hack/images -bin $(BIN) -out $(BIN)/images -version $(VERSION) -revision '$(REVISION)' -source-date-epoch '$(SOURCE_DATE_EPOCH)'

push: ## make images, then push both indexes to REGISTRY/elasti-operator:VERSION and REGISTRY/elasti-resolver:VERSION; prints the digests to pin
	@[[ -n '$(REGISTRY)' ]] || { echo 'make push: set REGISTRY=host[:port]/path' >&2; exit 1; }
	@$(MAKE) --no-print-directory images
	$(GO) run ./hack/images -out $(BIN)/images -version $(VERSION) -push '$(REGISTRY)' -plain-http '$(PLAIN_HTTP)'

# make release's kubectl plugin archives, beside make images' platforms,
# and where krew's manifest (bin/release/elasti.yaml) says they are
# downloaded from: upload bin/release/kubectl-elasti_*.tar.gz there.
PLUGIN_PLATFORMS := $(IMAGE_PLATFORMS) darwin/amd64 darwin/arm64
PLUGIN_URL       ?= https://github.com/elasti-dev/elasti/releases/download/$(VERSION)
comma := ,
space := $() $()

release: ## make images, push them as make push does, then package charts/elasti with its values pinned to the pushed images' digests and push it to oci://REGISTRY/elasti; prints every digest to pin. Also writes kubectl-elasti_VERSION_OS_ARCH.tar.gz for PLUGIN_PLATFORMS and krew's manifest elasti.yaml with their sha256 sums into bin/release
	@[[ -n '$(REGISTRY)' ]] || { echo 'make release: set REGISTRY=host[:port]/path' >&2; exit 1; }
	@$(MAKE) --no-print-directory images
	for platform in $(filter-out $(IMAGE_PLATFORMS),$(PLUGIN_PLATFORMS)); do \
		$(GO_BUILD_ENV) GOOS=$${platform%/*} GOARCH=$${platform#*/} $(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/$${platform/\//_}/ ./cmd/kubectl-elasti; \
	done
	$(GO) run ./hack/images -plugin -bin $(BIN) -chart-out $(BIN)/release -version $(VERSION) -source-date-epoch '$(SOURCE_DATE_EPOCH)' \
		-plugin-platforms '$(subst $(space),$(comma),$(strip $(PLUGIN_PLATFORMS)))' -plugin-url '$(PLUGIN_URL)' $(if $(wildcard LICENSE),-license LICENSE)
	helm_dir=$$(hack/build-cluster-bins.sh helm); \
	$(GO) run ./hack/images -out $(BIN)/images -version $(VERSION) -push '$(REGISTRY)' -plain-http '$(PLAIN_HTTP)' \
		-chart charts/elasti -chart-out $(BIN)/release -helm "$$helm_dir/helm"

cluster-bins: ## Build or reuse the cached control-plane binaries (shows progress)
	@hack/build-cluster-bins.sh >/dev/null

# -trimpath keeps the checkout's directory out of the build cache's keys, so
# a fresh clone elsewhere (CI clones anew each run) reuses the compiled
# packages of the last one: about 30 s of the two cores' compiling.
test: cluster-bins ## The full suite: unit, integration and end-to-end tests on the local control plane
	$(GO) test -trimpath -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(SLOW_PKGS) $(PKGS)

docs: ## Rewrite the reference pages written from the code (docs/reference/api.md, conditions.md); test/release fails when they drift
	UPDATE_DOCS=1 $(GO) test -count=1 -run 'Reference' ./test/release/

generate: ## Regenerate deepcopy, clientset, listers and informers
	hack/update-codegen.sh

# .ci/run checks code generation itself, from an empty module cache, and
# sets CODEGEN_VERIFIED=1 so make verify does not run the same check again.
verify: $(if $(CODEGEN_VERIFIED),,verify-codegen) verify-release verify-chart lint ## Everything CI checks before tests

verify-codegen:
	hack/verify-codegen.sh

verify-release: ## Images pinned to VERSION, the Dockerfile's Go equal to go.mod's, one build command
	$(GO) test -count=1 ./test/release/

verify-chart: ## helm lint and helm template of charts/elasti: defaults, KubeElasti's values and each option (charts/elasti/ci/)
	hack/verify-chart.sh

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

cluster-up: cluster-bins ## Start the local control plane; prints the KUBECONFIG to export
	@$(GO) run ./test/cmd/localcluster up

cluster-down: ## Stop the local control plane
	@$(GO) run ./test/cmd/localcluster down

demo: cluster-bins ## The most complete working flow on the local cluster
	hack/demo.sh

# bench_run runs make bench's go test command $(2), its output also in
# $(BENCH_OUT)/$(1).txt, and records its benchmarks' figures in the results
# file with the machine's load before it (test/benchplot -merge); $(3) is
# the command that reproduces it, which the results page quotes.
define bench_run
mkdir -p $(BENCH_OUT)
cat /proc/loadavg > $(BENCH_OUT)/$(1).load
$(2) 2>&1 | tee $(BENCH_OUT)/$(1).txt
$(GO) run ./test/benchplot -merge $(BENCH_OUT)/$(1).txt -results $(BENCH_RESULTS) -command "$(3)" -load-before $(BENCH_OUT)/$(1).load
endef

# newline ends one expansion of bench_run in a $(foreach): each of its
# lines is a line of the recipe.
define newline


endef

bench: bench-operator bench-resolver bench-traffic bench-soak bench-realnode bench-fleet bench-page ## Every Go benchmark on the local control plane (each bench-* target alone reruns its part), then the results page: COLDSTART_COUNT=N cold starts per cell of the real node's gate (10), COLDSTART_VARIANTS=on,off its resolver variants; SLOWSTART_READY=5m the slow app's start; FLEET="N …" sizes the fleet, one run each (default 200 1000), FLEET_PER_NS=M per namespace (100), FLEET_PHASES=foreign skips the operator's own scale-down and the wake; SOAK_ROUNDS=N rounds of the cold-start soak (84), SOAK_REALNODE_ROUNDS=N of the real node's (30)

bench-operator: cluster-bins ## The operator's benchmarks (wake latency and watches, test/operator)
	$(call bench_run,operator,$(GO) test -count=1 -run '^$$' -bench . -benchtime $(BENCH_TIME) -timeout 30m ./test/operator/,make bench-operator)

bench-resolver: cluster-bins ## The resolver's benchmarks on the local control plane (test/e2e: the latency it adds, its throughput, its part of a cold start) and its packages' (pkg/resolver: port listeners, filled bounds, probe answers, held memory)
	$(call bench_run,resolver-e2e,$(GO) test -count=1 -run '^$$' -bench 'Resolver' -benchtime $(BENCH_TIME) -timeout 30m ./test/e2e/,make bench-resolver)
	$(call bench_run,resolver-pkgs,$(GO) test -count=1 -run '^$$' -bench 'PortListeners|FilledBounds|ProbeAnswers|HeldMemory' -benchtime 1x ./pkg/resolver/...,make bench-resolver)
	$(GO) run ./test/benchplot -held -results $(BENCH_RESULTS) -out docs/benchmarks/resolver-memory-vs-held.svg

bench-traffic: cluster-bins ## The traffic path, routing, the kwok cold-start gate and the 10-minute flapping run (test/e2e/traffic)
	$(call bench_run,traffic,$(GO) test -count=1 -run '^$$' -bench 'TrafficPath|ResolverRouting|ColdStartGate|Flapping' -benchtime 1x -timeout 60m ./test/e2e/traffic/,make bench-traffic)

bench-soak: cluster-bins ## The cold-start soak on kwok (SOAK_ROUNDS rounds) and its picture
	$(call bench_run,soak,$(GO) test -v -count=1 -run '^$$' -bench 'ColdStartSoak' -benchtime 1x -timeout 150m ./test/e2e/traffic/ -args -soak-rounds=$(SOAK_ROUNDS) -soak-results=$(CURDIR)/$(BENCH_OUT)/soak.json,make bench-soak SOAK_ROUNDS=$(SOAK_ROUNDS))
	$(GO) run ./test/benchplot -soak $(BENCH_OUT)/soak.json -out docs/benchmarks/soak-beyond-ready.svg

bench-realnode: cluster-bins ## Real containers on the real node: cold starts, the gate, one app at a time (and its picture), the 5-minute app, the soak
	$(call bench_run,realnode-cold,$(GO) test -count=1 -run '^$$' -bench 'ColdStartOnTheRealNode' -benchtime 10x -timeout 30m ./test/e2e/realnode/,make bench-realnode)
	$(call bench_run,realnode-gate,$(GO) test -v -count=1 -run '^$$' -bench 'ColdStartGateOnTheRealNode|ColdStartOneAtATimeOnTheRealNode|SlowStartOnTheRealNode' -benchtime 1x -timeout 100m ./test/e2e/realnode/ -args -coldstart-count=$(COLDSTART_COUNT) -coldstart-variants=$(COLDSTART_VARIANTS) -coldstart-one-listen=0s$(comma)300ms$(comma)2s -coldstart-results=$(CURDIR)/$(BENCH_OUT)/coldstart.json -slowstart-ready=$(SLOWSTART_READY),make bench-realnode COLDSTART_COUNT=$(COLDSTART_COUNT) COLDSTART_VARIANTS=$(COLDSTART_VARIANTS) SLOWSTART_READY=$(SLOWSTART_READY))
	$(GO) run ./test/benchplot -coldstart $(BENCH_OUT)/coldstart.json -out docs/benchmarks/coldstart-realnode.svg
	$(call bench_run,realnode-soak,$(GO) test -v -count=1 -run '^$$' -bench 'ColdStartSoakOnTheRealNode' -benchtime 1x -timeout 300m ./test/e2e/realnode/ -args -coldstart-count=$(SOAK_REALNODE_ROUNDS) -coldstart-variants=on,make bench-realnode SOAK_REALNODE_ROUNDS=$(SOAK_REALNODE_ROUNDS))

bench-fleet: cluster-bins ## The fleet of FLEET ElastiServices (test/e2e), one run per size in FLEET, and the picture of convergence against N from every size recorded
	$(foreach n,$(FLEET),$(call bench_run,fleet-$(n),$(GO) test -count=1 -run '^$$' -bench 'Fleet' -benchtime 1x -timeout $(FLEET_TIMEOUT) ./test/e2e/ -args -fleet-size=$(n) -fleet-per-namespace=$(FLEET_PER_NS) -fleet-phases=$(FLEET_PHASES),make bench-fleet FLEET=$(n) FLEET_PER_NS=$(FLEET_PER_NS))$(newline))
	$(GO) run ./test/benchplot -fleet -results $(BENCH_RESULTS) -out docs/benchmarks/fleet-vs-n.svg

bench-page: ## Rewrite docs/benchmarks.md's results table from docs/benchmarks/results.json
	$(GO) run ./test/benchplot -page docs/benchmarks.md -results $(BENCH_RESULTS)

bench-compare: cluster-bins ## The real node's cold-start gate with this tree's resolver (variant on) and BASELINE's (a commit, HEAD~1 by default; variant baseline) by turns in one run, COLDSTART_COUNT rounds each, with the resolver pods' CPU per round: a change to the resolver against its parent
	dir=$$(mktemp -d); git worktree add --detach "$$dir/tree" "$(BASELINE)"; \
	trap 'git worktree remove --force "'"$$dir"'/tree"; rm -rf "'"$$dir"'"' EXIT; \
	$(GO) test -v -count=1 -run '^$$' -bench 'ColdStartGateOnTheRealNode$$' -benchtime 1x -timeout 120m ./test/e2e/realnode/ \
		-args -coldstart-count=$(COLDSTART_COUNT) -coldstart-variants=on,baseline -coldstart-interleave -coldstart-baseline="$$dir/tree"

version: ## Print VERSION, e.g. for a release pipeline's image tags
	@echo '$(VERSION)'

set-image-tag: ## Release TAG (vX.Y.Z): sets VERSION, the Dockerfile's ARG VERSION and every elasti image tag in manifests/ and deploy/
	@hack/set-image-tag.sh '$(TAG)'

# govulncheck, pinned. It reads the Go vulnerability database, by default
# https://vuln.go.dev, which this project's CI cannot reach (only the Go
# module proxy is reachable there); VULNDB=file:///path/to/mirror uses an
# offline copy instead. See README, "Images and releases".
GOVULNCHECK_VERSION := v1.9.0
VULNDB ?=
vulncheck: ## Known vulnerabilities in the code paths elasti uses (needs vuln.go.dev, or VULNDB=file:///mirror)
	$(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)$(if $(VULNDB), -db '$(VULNDB)') ./...

# Targets are found by their source, not by `go test -list`, which would run
# the integration packages' TestMain and start a control plane.
fuzz: ## Every fuzz target for FUZZTIME each (their seeds already run in make test)
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' pkg cmd | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' "$$dir"/*_test.go | sed 's/^func //'); do \
			echo "== $$target in ./$$dir for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "./$$dir" || exit 1; \
		done; \
	done

clean:
	rm -rf $(BIN)
