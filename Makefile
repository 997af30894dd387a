# meshperf: `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

# Code generators, pinned; `make tools` installs them into ./bin with go install.
BUF_VERSION                := v1.75.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
# helm for the chart's tests (deploy/kubernetes/helm_test.go); `make helm`
# installs it into ./bin with go install.
HELM_VERSION               := v3.22.0
# Build tags of the tests run alone or by hand (TestProbeFidelity,
# TestCaptureAb): `make lint` vets them too (.golangci.yml lints them).
HAND_TAGS := fidelity,capture

# golangci-lint for `make lint` (.golangci.yml); `make golangci-lint`
# installs it into ./bin with go install.
GOLANGCI_LINT_VERSION      := v2.15.0

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

# Lab size, CNI modes (measured in turn, then compared), namespace prefix
# and trigger arguments for `make demo` (two demos at once need two
# prefixes). One-second qperf/iperf3 runs keep each 3-node mesh (72 heavy
# tests, one at a time) around a minute and a half.
NODES     ?= 3
MODES     ?= host-gw,vxlan
PREFIX    ?= mpdemo
DEMO_ARGS ?= --trigger-arg=--duration=1s
# FAMILY is the lab's IP stack: ipv4 (the default), ipv6 or dual (every
# pair-path measured in both families, side by side in the comparison).
FAMILY    ?= ipv4
# UI=1 keeps the demo's last lab and its web UI up after the verdict, until
# Ctrl-C, on UI_LISTEN (this machine's loopback).
UI        ?=
UI_LISTEN ?= 127.0.0.1:7780
ifeq ($(UI),1)
DEMO_UI := --keep-ui --ui-listen $(UI_LISTEN)
endif
# Image that `make image` builds.
IMAGE ?= ghcr.io/meshperf/meshperf:dev
# OCI layout that `make image-oci` writes, and its tag (the version linked in).
OCI_OUT ?= $(CURDIR)/out/oci/meshperf
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# Prefix and continuous-mesh interval of `make demo-faults`.
FAULTS_PREFIX ?= mpfaults
INTERVAL      ?= 30s

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install the measuring tools (apt-get, as root) if any is missing.
	@deploy/lab/install-deps.sh

.PHONY: test-deps
test-deps: helm ## Install what the tests need besides the measuring tools: chromium, prometheus, victoria-metrics, mmdebstrap, umoci (apt-get, as root), helm (go install).
	@deploy/lab/install-test-deps.sh

# Reinstalled when ./bin/helm is missing or another version than HELM_VERSION.
.PHONY: helm
helm: ## Install the pinned helm into ./bin (go install; the chart's tests run it).
	@if [[ "$$($(BIN)/helm version --template '{{.Version}}' 2>/dev/null)" == "$(HELM_VERSION)" ]]; then \
		echo "helm: $(HELM_VERSION) in $(BIN)"; \
	else \
		echo "helm: go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) (a few minutes)"; \
		GOBIN=$(BIN) go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	fi

# Reinstalled when ./bin/golangci-lint is missing or another version than
# GOLANGCI_LINT_VERSION (`version --short` prints it without the v).
.PHONY: golangci-lint
golangci-lint: ## Install the pinned golangci-lint into ./bin (go install; `make lint` runs it).
	@if [[ "v$$($(BIN)/golangci-lint version --short 2>/dev/null)" == "$(GOLANGCI_LINT_VERSION)" ]]; then \
		echo "golangci-lint: $(GOLANGCI_LINT_VERSION) in $(BIN)"; \
	else \
		echo "golangci-lint: go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) (a few minutes)"; \
		GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi

.PHONY: build
build: ## Build agent, coordinator and meshlab into ./bin.
	go build -ldflags "-X github.com/meshperf/meshperf/internal/version.Version=$(VERSION)" -o $(BIN)/ ./cmd/...

# go test's output goes through internal/testlog: the usual ok/FAIL lines
# and failures, then a "SKIPPED: pkg Test: reason" line per skipped test;
# with CI=true a skip for a missing tool or root fails the target
# (internal/testskip's prefixes). pipefail keeps go test's own status.
# RACE_PKGS are the packages whose goroutines share state (the agent's
# sessions, servers, endpoint and runners; the coordinator's wiring, the
# registry's indexes, runs, the gossip tracker, probe plans, the
# Kubernetes caches, the store's batches, the web UI's shared reads, the
# metrics and alerts; the prober and the spool): `make test` runs their
# tests a second time under the race detector, about 6 minutes.
# agent/gossip is left out: its tests time hashicorp/memberlist's probes,
# which the detector's slowdown fails.
RACE_PKGS = ./agent/ ./agent/servers/ ./agent/endpoint/ ./agent/runner/ ./agent/httptarget/ ./agent/probe/ ./agent/spool/ \
	./coordinator/ ./coordinator/registry/ ./coordinator/runs/ ./coordinator/membership/ ./coordinator/probeplan/ \
	./coordinator/kube/ ./coordinator/identity/ ./coordinator/server/ ./coordinator/store/ ./coordinator/ingest/ \
	./coordinator/monitor/ ./coordinator/remotewrite/ ./coordinator/web/ ./coordinator/metrics/ ./coordinator/alert/ \
	./coordinator/retention/ ./internal/queue/ ./internal/tick/ ./internal/lograte/

.PHONY: test
test: deps test-deps ## Run every test (as root: lab and end-to-end tests build network namespaces), then the concurrent core's under -race; lists the skipped ones.
	go test -json -count=1 -timeout 30m ./... | go run ./internal/testlog
	$(MAKE) --no-print-directory test-race

.PHONY: test-race
test-race: ## Run the tests of RACE_PKGS under the race detector.
	go test -race -json -count=1 -timeout 15m $(RACE_PKGS) | go run ./internal/testlog

.PHONY: demo
demo: deps build ## Full mesh on a local lab per CNI mode, then compare (root); UI=1 keeps the web UI up until Ctrl-C.
	$(BIN)/meshlab demo --bin $(BIN) --prefix $(PREFIX) --nodes $(NODES) --modes $(MODES) --ip-family $(FAMILY) $(DEMO_UI) $(DEMO_ARGS)

.PHONY: demo-faults
demo-faults: deps build ## Inject each fault into a lab under continuous monitoring; detected and localised? (root)
	$(BIN)/meshlab demo-faults --bin $(BIN) --prefix $(FAULTS_PREFIX) --interval $(INTERVAL)

.PHONY: fidelity
fidelity: deps ## The in-process probes against ping, qperf and curl on the same lab paths, alone (root, about 3 minutes).
	go test -tags fidelity -count=1 -v -run 'TestProbeFidelity' ./deploy/lab/

.PHONY: bench-scale
bench-scale: ## The coordinator against simulated fleets of 300, 1,000 and 5,000 agents on loopback (about 10 minutes).
	bench/scale.sh

.PHONY: bench-prober
bench-prober: deps ## A real agent in the lab probing 1,000 peers (ICMP and TCP every 10 s): its own RSS and CPU (root, about a minute).
	@out=$$(go test -count=1 -v -run 'TestProberScale1000$$' ./deploy/lab/ 2>&1) || { echo "$$out" | tail -40; exit 1; }; \
	line=$$(echo "$$out" | sed -n 's/^.*\(prober peers=[^(]*[^ (]\) (.*/\1/p'); \
	if [ -z "$$line" ]; then echo "$$out" | tail -5; exit 1; fi; echo "$$line"

.PHONY: bench-web
bench-web: test-deps ## The web UI's mesh page in headless chromium for 300 simulated agents: time to the first full paint (about 3 minutes).
	@go test -count=1 -timeout 25m -run '^$$' -bench 'BenchmarkMeshPaint300$$' -benchtime 3x ./deploy/lab/webui/ | grep -E '^(mesh_paint|Benchmark|ok|FAIL|---|    )'

.PHONY: image
image: ## Build the container image with docker: IMAGE=... (default ghcr.io/meshperf/meshperf:dev).
	@command -v docker >/dev/null 2>&1 || { echo "make image: docker not found on PATH; install Docker (or build the Dockerfile with another builder)" >&2; exit 1; }
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: image-oci
image-oci: ## Build the image with no registry or docker (root): an OCI layout in OCI_OUT (default out/oci/meshperf), tag VERSION.
	@OCI_OUT=$(OCI_OUT) VERSION=$(VERSION) deploy/image/build-oci.sh

.PHONY: docs
docs: config-docs ## Regenerate the generated docs (docs/cli/*.md from the cobra commands, docs/config.md); the tests fail when they are stale.
	MESHPERF_UPDATE_DOCS=1 go test -count=1 -run '^TestCLIReference$$' ./cmd/agent/ ./cmd/coordinator/ ./cmd/meshlab/

.PHONY: tools
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc ## Install the pinned code generators.

$(BIN)/buf:
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

.PHONY: proto
proto: tools ## Regenerate the protobuf code with buf.
	buf generate

.PHONY: lint
lint: tools golangci-lint ## buf lint, go vet, gofmt and golangci-lint (.golangci.yml).
	buf lint
	go vet ./...
	go vet -tags $(HAND_TAGS) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(BIN)/golangci-lint run ./...

.PHONY: config-docs
config-docs: ## Regenerate docs/config.md, the config file's reference, from coordinator/config.
	go run ./coordinator/config/configdocs -dir coordinator/config -out docs/config.md

.PHONY: verify
verify: proto lint ## Fail if generated code or go.mod/go.sum drift from the sources.
	go mod tidy -diff
	@if [ -n "$$(git status --porcelain -- proto)" ]; then \
		echo "generated code drifted; run 'make proto' and commit:"; git status --porcelain -- proto; git diff --stat -- proto; exit 1; fi

# BREAKING_AGAINST is the git revision `make breaking` compares the protocol
# with: the previous commit by default (what .ci/run checks); e.g.
# BREAKING_AGAINST=main for a whole branch.
BREAKING_AGAINST ?= HEAD~1

# buf breaking with buf.yaml's category (WIRE_JSON: the wire and the JSON
# must not break, see buf.yaml). Skipped, saying why, in a clone without
# that revision (the first commit, or a shallow clone).
.PHONY: breaking
breaking: tools ## Check the protocol for wire/JSON breaking changes against BREAKING_AGAINST (default HEAD~1).
	@if ! rev=$$(git rev-parse --verify --quiet '$(BREAKING_AGAINST)^{commit}'); then \
		echo "buf breaking: skipped: this clone has no commit $(BREAKING_AGAINST) to compare with (first commit or shallow clone)"; exit 0; fi; \
	echo "buf breaking: the protocol against $(BREAKING_AGAINST) ($${rev:0:12})"; \
	if ! buf breaking --against ".git#ref=$$rev"; then \
		echo "buf breaking: the protocol breaks wire or JSON compatibility with $(BREAKING_AGAINST) ($${rev:0:12}); see buf.yaml and docs/architecture.md (Protocol packages)" >&2; exit 1; fi; \
	echo "buf breaking: no wire or JSON break"

.PHONY: clean
clean: ## Remove ./bin.
	rm -rf $(BIN)
