# Sluicegate: `make demo` runs the story on a local control plane; `make test` runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CLUSTER_DIR ?= .cluster
KIND_GPUS ?= 8
STAMP := $(VENV)/.installed
# make test runs whole test files on this many pytest workers, each with its own shared cluster.
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

.PHONY: venv
venv: $(STAMP) ## create the virtual environment and install the project with its dev tools

.PHONY: binaries
binaries: $(STAMP) ## build kube-apiserver, controller-manager, scheduler, kubectl, etcd and kwok into the cache
	$(BIN)/python -m controlplane build

.PHONY: kueue
kueue: $(STAMP) ## build Kueue v0.17.0, the benchmarks' peer, into its own cache (only benchmarks need it)
	$(BIN)/python -m controlplane build-kueue

.PHONY: helm
helm: $(STAMP) ## build helm v3.22.0, which the chart's tests drive, into its own cache (only those tests need it)
	$(BIN)/python -m controlplane build-helm

.PHONY: prometheus
prometheus: $(STAMP) ## build prometheus and promtool v0.316.0 into their own cache (the alert tests and MONITORING=1 need them)
	$(BIN)/python -m controlplane build-prometheus

.PHONY: operators
operators: $(STAMP) ## build the Kubeflow training-operator v1.8.1 and KubeRay v1.5.0 into their own caches (only the operator e2e tests need them)
	$(BIN)/python -m controlplane build-operators

.PHONY: builds
builds: $(STAMP) ## every binary the tests need (control plane, Kueue, helm, Prometheus, the operators), the missing ones built side by side
	@$(MAKE) --no-print-directory -j5 binaries kueue helm prometheus operators

.PHONY: lint
lint: $(STAMP) ## ruff
	$(BIN)/ruff check .

.PHONY: typecheck
typecheck: $(STAMP) ## mypy --strict
	$(BIN)/mypy

.PHONY: imports
imports: $(STAMP) ## import-linter: policy stays pure, only kube/ talks to Kubernetes
	$(BIN)/lint-imports

.PHONY: unit
unit: $(STAMP) ## unit and property tests (no cluster)
	$(BIN)/pytest tests/unit tests/property

.PHONY: e2e
e2e: builds ## end-to-end tests against the real local control plane (and Kueue and Prometheus beside it)
	$(BIN)/pytest tests/e2e

.PHONY: test
test: lint typecheck imports builds ## every check: ruff, mypy, import-linter, unit, property, promtool's alert and e2e tests (not the fidelity run)
	$(BIN)/pytest tests -m "not fidelity" -n $(TEST_WORKERS) --dist loadfile --durations=30

.PHONY: fidelity
fidelity: binaries ## a recorded run replayed by the simulator: release order and waits against what was observed (own cluster, a few minutes)
	$(BIN)/pytest tests/e2e/test_recorder.py -m fidelity

FAULT_FIGURES ?= docs/reliability.json

.PHONY: faults
faults: binaries ## the fault suite's long variants (30 controller kills, 3 restarts of apiserver and etcd, 5,000 connections, a rolling upgrade from the previous release...); writes the table in docs/reliability.md
	SLUICEGATE_FAULTS=full SLUICEGATE_FAULTS_FIGURES=$(FAULT_FIGURES) $(BIN)/pytest tests/e2e/test_faults_*.py
	$(BIN)/python -m audit.reliability --figures $(FAULT_FIGURES) --doc docs/reliability.md

.PHONY: soak
soak: binaries ## the soak: 10 minutes of steady submissions with limit changes and one controller kill; its row in docs/reliability.md
	SLUICEGATE_FAULTS_FIGURES=$(FAULT_FIGURES) $(BIN)/pytest tests/e2e/soak.py
	$(BIN)/python -m audit.reliability --figures $(FAULT_FIGURES) --doc docs/reliability.md

BENCH_ARGS ?=

.PHONY: bench
bench: binaries kueue ## every benchmark, unattended: the dispatch cycle, then the matrix of Sluicegate, Kueue and the bare ungater (writes benchmarks/RESULTS.md; hours)
	$(BIN)/python -m benchmarks.dispatch
	$(BIN)/python -m benchmarks.cycle
	$(BIN)/python -m benchmarks.matrix $(BENCH_ARGS)

.PHONY: bench-cycle
bench-cycle: $(STAMP) ## the controller's cycle at 10k and 100k pending pods (no cluster): cycle time and the longest hold of its event loop
	$(BIN)/python -m benchmarks.cycle

.PHONY: bench-quick
bench-quick: binaries kueue ## one small scenario through every system (a few minutes), for working on the harness
	$(BIN)/python -m benchmarks.matrix --quick

.PHONY: bench-baseline
bench-baseline: binaries kueue ## the baseline scenario (1,000 pods, at most 32 running) through every system
	$(BIN)/python -m benchmarks.matrix --scenario baseline

.PHONY: bench-large
bench-large: binaries kueue ## 20,000 pods over 100 queues on 1,000 nodes: bare, Sluicegate, Kueue tuned (controller RSS and longest loop block; hours)
	$(BIN)/python -m benchmarks.matrix --scenario p20000-q100-n1000 --systems bare,sluicegate,kueue-qps1000 $(BENCH_ARGS)

.PHONY: bench-controller
bench-controller: binaries ## the gate controller on a fresh control plane: reaction times, drain against the bare ungater, API requests per pod
	$(BIN)/python -m benchmarks.controller

.PHONY: bench-webhook
bench-webhook: binaries ## admission reviews/s and latency, and the webhook's cost to pod creates (own cluster)
	$(BIN)/python -m benchmarks.admission

IMAGE ?= sluicegate:dev
CONTAINER ?= podman

.PHONY: image
image: ## build the container image from Containerfile (IMAGE=name:tag, CONTAINER=docker or podman)
	$(CONTAINER) build -t $(IMAGE) -f Containerfile .

.PHONY: containerfile
containerfile: $(STAMP) ## write Containerfile and .dockerignore from the product's packages listed in pyproject.toml
	$(BIN)/python -m tests.image

.PHONY: chart
chart: $(STAMP) ## write charts/sluicegate's copies of manifests/ (CRDs, RBAC, webhook configurations, monitoring, samples)
	$(BIN)/python -m tests.chart

.PHONY: bench-ungater
bench-ungater: binaries ## the bare ungater's drain of 1,000 gated pods on a fresh control plane (the ceiling)
	$(BIN)/python -m benchmarks.ungater

.PHONY: bench-simulate
bench-simulate: $(STAMP) ## the what-if simulator replaying a synthetic week: 100,000 workloads, 50 queues
	$(BIN)/python -m benchmarks.simulate

.PHONY: bench-estimates
bench-estimates: $(STAMP) ## expected start times: accuracy on the fidelity scene and a week of 10,000 workloads, CPU at 10,000 pending
	$(BIN)/python -m benchmarks.estimates

.PHONY: cluster-up
cluster-up: binaries ## start a local control plane in $(CLUSTER_DIR) (4 nodes x 8 GPUs)
	$(BIN)/python -m controlplane --root $(CLUSTER_DIR) up

.PHONY: cluster-down
cluster-down: $(STAMP) ## stop the local control plane in $(CLUSTER_DIR)
	$(BIN)/python -m controlplane --root $(CLUSTER_DIR) down

.PHONY: up
up: binaries $(if $(MONITORING),prometheus) ## start an empty local control plane with Sluicegate running on it (KEEP_STATE=1: keep the last run's objects; MONITORING=1: and Prometheus scraping it, alerts loaded)
	@$(BIN)/python -m controlplane --root $(CLUSTER_DIR) up --sluicegate $(if $(KEEP_STATE),--keep-state) $(if $(MONITORING),--monitoring)

.PHONY: down
down: $(STAMP) ## stop Sluicegate's processes and the local control plane (logs stay in $(CLUSTER_DIR)/logs)
	$(BIN)/python -m controlplane --root $(CLUSTER_DIR) down

.PHONY: status
status: $(STAMP) ## what runs in $(CLUSTER_DIR); a Sluicegate process that died is shown with the end of its log
	@$(BIN)/python -m controlplane --root $(CLUSTER_DIR) status

.PHONY: demo
demo: binaries $(if $(MONITORING),prometheus) ## the story on a local control plane with Sluicegate: a live view, a summary per queue; the cluster stays up (DEMO_ARGS=--plain: plain lines; MONITORING=1: with Prometheus, ending with the alerts active)
	@$(BIN)/python -m demo --root $(CLUSTER_DIR) $(if $(MONITORING),--monitoring) $(DEMO_ARGS) || { s=$$?; [ $$s -eq 130 ] || exit $$s; }  # Ctrl-C: its one line says it all

.PHONY: kind-up
kind-up: ## for machines with Docker: a kind cluster with 4 fake GPU nodes (kind, kubectl on PATH)
	kind create cluster --name sluicegate --config manifests/kind/cluster.yaml
	for node in $$(kubectl --context kind-sluicegate get nodes -l '!node-role.kubernetes.io/control-plane' -o name); do \
	  kubectl --context kind-sluicegate patch $$node --subresource=status --type=merge \
	    -p '{"status":{"capacity":{"nvidia.com/gpu":"$(KIND_GPUS)"}}}'; \
	done

.PHONY: kind-down
kind-down: ## delete the kind cluster
	kind delete cluster --name sluicegate

.PHONY: clean
clean: cluster-down ## stop the cluster and remove the virtual environment and caches (not the binaries)
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis $(CLUSTER_DIR)
