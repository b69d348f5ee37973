# Regent: broker, operator and Helm chart. `make help` lists the targets.

SHELL := /usr/bin/env bash
CACHE ?= $(or $(REGENT_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/regent)
K8S_VERSION := v1.37.2
export KUBEBUILDER_ASSETS := $(CACHE)/k8s-$(K8S_VERSION)
CONTROLLER_GEN := $(CACHE)/tools/controller-gen
HELM := $(CACHE)/tools/helm
export REGENT_HELM := $(HELM)
VERSION ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' charts/regent/Chart.yaml 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/regent-mq/regent/broker/app.Version=$(VERSION)
GO_TEST_FLAGS ?=

.DEFAULT_GOAL := help

.PHONY: help
# Every description starts in the column after the longest target, and wraps
# at 100 columns into that column.
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {n[++c] = $$1; d[c] = $$2; if (length($$1) > w) w = length($$1)} \
		END {pad = sprintf("%" (w + 4) "s", ""); for (i = 1; i <= c; i++) { \
			line = sprintf("  %-" w "s  ", n[i]); k = split(d[i], words, " "); len = w + 4; \
			for (j = 1; j <= k; j++) { if (len > w + 4 && len + 1 + length(words[j]) > 100) { print line; line = pad; len = w + 4 } \
				if (len > w + 4) { line = line " "; len++ } line = line words[j]; len += length(words[j]) } \
			print line }}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install what is missing: PostgreSQL, podman, buildah and runc (apt), Citus (built from ../shared/vendor, or CITUS_TARBALL), and kube-apiserver, etcd, kubectl, helm, controller-gen (built into the cache, ~/.cache/regent).
	@REGENT_CACHE=$(CACHE) hack/deps.sh

.PHONY: generate
generate: deps ## Generate deepcopy code for the API types (controller-gen) and broker/pg/migrate/schema.sql (pg_dump of a migrated database).
	$(CONTROLLER_GEN) object paths=./api/...
	go test -count=1 -run '^TestSchemaSQLIsTheMigratedSchema$$' ./broker/pg/migrate/ -update

.PHONY: manifests
manifests: deps ## Generate the CRDs (config/crd/bases), the RBAC role (config/rbac) and the chart's copy of the CRDs.
	$(CONTROLLER_GEN) crd rbac:roleName=regent-operator paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@if [ -d charts/regent ]; then mkdir -p charts/regent/crds && cp config/crd/bases/*.yaml charts/regent/crds/; fi

.PHONY: build
build: ## Build the broker, the operator and the tools into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# Images: the Dockerfile's broker, operator and worker targets, tagged as the chart's default images
# (<IMAGE_REPO>/regent-broker:<appVersion>). They hold the binaries of `make build` on scratch, so
# building them pulls nothing. The engine is the first of podman, buildah and docker found, or
# CONTAINER_TOOL; push the images to your registry with IMAGE_REPO=registry.example/regent.
IMAGE_REPO ?= ghcr.io/regent-mq
CONTAINER_TOOL ?= $(firstword $(foreach t,podman buildah docker,$(if $(shell command -v $(t)),$(t))))
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt

.PHONY: images
images: build ## Build the broker, operator and worker images (podman, buildah or docker), tagged with the chart's appVersion.
	@if [ -z "$(CONTAINER_TOOL)" ]; then echo "make images needs podman, buildah or docker; make deps installs podman and buildah" >&2; exit 1; fi
	cp $(CA_BUNDLE) bin/ca-certificates.crt
	$(CONTAINER_TOOL) build --target broker -t $(IMAGE_REPO)/regent-broker:$(VERSION) .
	$(CONTAINER_TOOL) build --target operator -t $(IMAGE_REPO)/regent-operator:$(VERSION) .
	$(CONTAINER_TOOL) build --target worker -t $(IMAGE_REPO)/regent-worker:$(VERSION) .

.PHONY: lint
lint: ## Check formatting (gofmt) and run go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...

.PHONY: test
test: deps kube-deps lint ## Run every test (PostgreSQL, envtest, chart, e2e, the chart on a real single-node cluster); this is what CI runs.
	REGENT_KUBE_E2E=1 go test -count=1 $(GO_TEST_FLAGS) ./...
	@echo "The queue, streams and admin suites again, with JWT auth and tenancy on:"
	REGENT_TEST_MODE=secure go test -count=1 $(GO_TEST_FLAGS) ./broker/api/queue/... ./broker/api/streams/... ./broker/api/admin/... ./broker/domain/spool/...
	@echo "The queue, streams, admin and retention suites and the pipelines' kill tests again, on a Citus cluster (a coordinator and 2 workers), and a pipeline while Citus nodes join and die:"
	REGENT_TEST_CITUS=2 go test -count=1 $(GO_TEST_FLAGS) ./broker/api/queue/... ./broker/api/streams/... ./broker/api/admin/... ./broker/domain/retention/...
	REGENT_TEST_CITUS=2 go test -count=1 $(GO_TEST_FLAGS) -run 'WhileWorkersAndBrokersAreKilled|WhileCitusNodesJoinAndDie' ./test/cluster/
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_TEST)

# Every route's fuzz target (test/fuzz), one after the other: go test fuzzes one target at a time.
# One worker each: the machine is shared, and each worker process starts its own PostgreSQL.
FUZZ_PKG := ./test/fuzz/
FUZZTIME ?= 60s
FUZZTIME_TEST ?= 3s

.PHONY: fuzz
fuzz: deps ## Fuzz every route's decoder for FUZZTIME each (60s; make test runs 3s each). A crasher lands in test/fuzz/testdata.
	go test -c -fuzz=. -o bin/fuzz.test $(FUZZ_PKG)
	@hack/fuzz.sh $(CURDIR)/bin/fuzz.test $(FUZZ_PKG) $(FUZZTIME)

.PHONY: console-shots
console-shots: deps ## Run the console's browser tests (Chromium) and write their screenshots to bin/console/.
	@mkdir -p bin/console
	REGENT_CONSOLE_SHOTS=$(CURDIR)/bin/console go test -count=1 ./broker/api/console/
	@ls bin/console/*.png

.PHONY: chaos
chaos: deps ## Run the fault suites at length (brokers SIGKILLed in turn under the reference worker, ...) and the idle-flush race 200 times per scenario, and print their figures.
	REGENT_CHAOS=1 go test -count=1 -timeout 30m -v -run . ./test/cluster/
	REGENT_FLUSHRACE_RUNS=200 go test -count=1 -timeout 30m -v ./test/flushrace/

.PHONY: e2e
e2e: deps kube-deps ## Run the end-to-end tests: the whole stack as `make run` starts it, then the chart on a real single-node cluster (root).
	REGENT_KUBE_E2E=1 go test -count=1 -p 1 -timeout 30m -v -run . ./test/e2e/...

.PHONY: kube-deps
kube-deps: deps ## Install what a real single-node cluster needs: containerd, conntrack (apt); kubelet, kube-proxy, controller manager, scheduler, CoreDNS (built into the cache).
	@REGENT_CACHE=$(CACHE) hack/kube-deps.sh

.PHONY: kube
kube: kube-deps images ## Run Regent on a real single-node cluster (kubelet, containerd, CoreDNS; helm install of the chart) until Ctrl-C; needs root.
	@VERSION=$(VERSION) IMAGE_REPO=$(IMAGE_REPO) bin/regent-kube

.PHONY: bench
bench: deps build ## Run the Go benchmarks, regent-bench's sweeps against a fresh local broker and their pgbench limits (~20 min; BENCH_QUICK=1: a short pass).
	go test -run '^$$' -bench . -benchmem $(if $(BENCH_QUICK),-benchtime=10x) ./broker/...
	go test -run '^$$' -bench . -benchmem -cpu 1 $(if $(BENCH_QUICK),-benchtime=100x) ./pipeline/
	hack/bench.sh

.PHONY: run
run: deps build ## Run the whole stack locally until Ctrl-C (PostgreSQL, kube-apiserver, broker on :6632, operator); FRESH=1 starts from empty data; CITUS=1 runs a Citus cluster (a coordinator and 2 workers) instead of PostgreSQL.
	@FRESH=$(FRESH) CITUS=$(CITUS) bin/regent-local

.PHONY: clean
clean: ## Remove bin/ and the local stacks' data (.regent/, .regent-kube/).
	rm -rf bin .regent .regent-kube
