# reconsume — the two commands a new user needs are `make demo` and `make test`.

PYTHON ?= python3
VENV ?= .venv
CACHE_DIR ?= $(HOME)/.cache/reconsume
export PIP_CACHE_DIR ?= $(CACHE_DIR)/pip
export PIP_DISABLE_PIP_VERSION_CHECK = 1

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# The compat tier's npm project (ali-ons); installed from its lockfile, re-installed when that
# changes. Without npm this only warns: the compat test then fails in CI and skips elsewhere.
ALI_ONS := tests/compat/ali_ons
ALI_ONS_STAMP := $(ALI_ONS)/node_modules/.installed-$(shell cat $(ALI_ONS)/package-lock.json | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench venv compat-deps k8s-deps clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -e ".[test,lint,fast,operator,spark,demo,protos]"
	@rm -f $(VENV)/.installed-*
	@touch $@

# Apache RocketMQ's gRPC protocol (apache.rocketmq.v2) as Python modules, generated from the
# published .proto files (tools/gen_protos.py; the tarball cached under $(CACHE_DIR)/protos).
PROTOS_STAMP := broker_image/reconsume/wire/v2/.generated
$(PROTOS_STAMP): tools/gen_protos.py $(STAMP)
	RECONSUME_CACHE_DIR=$(CACHE_DIR) $(BIN)/python tools/gen_protos.py --force

venv: $(STAMP) $(PROTOS_STAMP)

$(ALI_ONS_STAMP): $(ALI_ONS)/package.json $(ALI_ONS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(ALI_ONS) && npm ci --cache "$(CACHE_DIR)/npm" --prefer-offline --no-audit --no-fund \
			--loglevel=error \
		&& touch node_modules/$(notdir $@); \
	else \
		echo "make: npm not found, not installing $(ALI_ONS) (its compat test needs node and npm)"; \
	fi

## compat-deps: the npm packages of the compat tier (ali-ons), cached under $(CACHE_DIR)/npm
compat-deps: $(ALI_ONS_STAMP)

# The compat tier's Maven project (mqadmin): rocketmq-tools and its dependencies copied to
# target/lib, again when the pom changes. Without mvn or java this only warns, like npm above.
MQADMIN := tests/compat/mqadmin
MQADMIN_STAMP := $(MQADMIN)/target/lib/.installed-$(shell cat $(MQADMIN)/pom.xml | cksum | cut -d' ' -f1)

$(MQADMIN_STAMP): $(MQADMIN)/pom.xml
	@if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then \
		rm -rf $(MQADMIN)/target/lib \
		&& mvn -f $(MQADMIN)/pom.xml -Dmaven.repo.local=$(CACHE_DIR)/m2 -B -q package \
		&& touch $@; \
	else \
		echo "make: mvn or java not found, not installing $(MQADMIN) (its compat test needs both)"; \
	fi

## compat-deps: also mqadmin (Maven artifacts cached under $(CACHE_DIR)/m2)
compat-deps: $(MQADMIN_STAMP)

# The compat tier's Java client driver: Apache RocketMQ's rocketmq-client, pinned by its pom,
# built into target/java-client-driver.jar (dependencies in target/lib); rebuilt when the pom
# or a source changes. Without mvn or java this only warns, like npm above.
JAVA_CLIENT := tests/compat/java
JAVA_CLIENT_SOURCES := $(shell find $(JAVA_CLIENT)/src -name '*.java')
JAVA_CLIENT_STAMP := $(JAVA_CLIENT)/target/.built-$(shell cat $(JAVA_CLIENT)/pom.xml | cksum | cut -d' ' -f1)

$(JAVA_CLIENT_STAMP): $(JAVA_CLIENT)/pom.xml $(JAVA_CLIENT_SOURCES)
	@if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then \
		rm -rf $(JAVA_CLIENT)/target \
		&& mvn -f $(JAVA_CLIENT)/pom.xml -Dmaven.repo.local=$(CACHE_DIR)/m2 -B -q package \
		&& touch $@; \
	else \
		echo "make: mvn or java not found, not building $(JAVA_CLIENT) (its compat tests need both)"; \
	fi

## compat-deps: also the Java client driver (Maven artifacts cached under $(CACHE_DIR)/m2)
compat-deps: $(JAVA_CLIENT_STAMP)

# The compat tier's 5.x Java client driver: Apache RocketMQ's rocketmq-client-java (gRPC),
# pinned by its pom, built into target/java5-client-driver.jar, like the 4.x driver above.
JAVA5_CLIENT := tests/compat/java5
JAVA5_CLIENT_SOURCES := $(shell find $(JAVA5_CLIENT)/src -name '*.java')
JAVA5_CLIENT_STAMP := $(JAVA5_CLIENT)/target/.built-$(shell cat $(JAVA5_CLIENT)/pom.xml | cksum | cut -d' ' -f1)

$(JAVA5_CLIENT_STAMP): $(JAVA5_CLIENT)/pom.xml $(JAVA5_CLIENT_SOURCES)
	@if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then \
		rm -rf $(JAVA5_CLIENT)/target \
		&& mvn -f $(JAVA5_CLIENT)/pom.xml -Dmaven.repo.local=$(CACHE_DIR)/m2 -B -q package \
		&& touch $@; \
	else \
		echo "make: mvn or java not found, not building $(JAVA5_CLIENT) (its compat tests need both)"; \
	fi

compat-deps: $(JAVA5_CLIENT_STAMP)

# The compat tier's Go client driver: Apache RocketMQ's rocketmq-client-go, pinned by its go.mod
# and go.sum, built into bin/go-client-driver (Go's module and build caches under
# $(CACHE_DIR)/go, as for kube-bin below); rebuilt when go.mod, go.sum or a source changes.
# Without go this only warns, like npm above.
GO_CLIENT := tests/compat/go
GO_CLIENT_DRIVER := $(GO_CLIENT)/bin/go-client-driver

$(GO_CLIENT_DRIVER): $(GO_CLIENT)/go.mod $(GO_CLIENT)/go.sum $(wildcard $(GO_CLIENT)/*.go)
	@if command -v go >/dev/null 2>&1; then \
		cd $(GO_CLIENT) && $(GO_ENV) GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false \
			-ldflags '-s -w' -o bin/go-client-driver .; \
	else \
		echo "make: go not found, not building $(GO_CLIENT) (its compat tests need it)"; \
	fi

## compat-deps: also the Go client driver (Go's caches under $(CACHE_DIR)/go)
compat-deps: $(GO_CLIENT_DRIVER)

# The Kubernetes binaries of the k8s and node tiers: tools/kube (a Go module pinning
# k8s.io/kubernetes) builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy, kubectl and the pod sandbox's pause program in one `go build` (they share most
# packages), and tools/coredns builds CoreDNS; all cached in $(KUBE_BIN_DIR), once per version,
# with Go's module and build caches under $(CACHE_DIR)/go. Without Go this only warns: the k8s
# and node tests then fail in CI and skip elsewhere.
KUBE_MODULE := tools/kube
COREDNS_MODULE := tools/coredns
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" || $$2 == "k8s.io/kubernetes" {print $$NF; exit}' $(KUBE_MODULE)/go.mod)
COREDNS_VERSION := $(shell awk '$$1 == "github.com/coredns/coredns" || $$2 == "github.com/coredns/coredns" {print $$NF; exit}' $(COREDNS_MODULE)/go.mod)
KUBE_VERSION_PARTS := $(subst ., ,$(patsubst v%,%,$(KUBE_VERSION)))
export KUBE_BIN_DIR := $(CACHE_DIR)/bin/kube-$(KUBE_VERSION)-coredns-$(COREDNS_VERSION)
KUBE_BIN_STAMP := $(KUBE_BIN_DIR)/.built-$(shell cat $(KUBE_MODULE)/go.sum $(COREDNS_MODULE)/go.sum $(KUBE_MODULE)/cmd/*/main.go $(COREDNS_MODULE)/main.go | cksum | cut -d' ' -f1)
KUBE_LDFLAGS := -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version, \
	-X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=$(word 1,$(KUBE_VERSION_PARTS)) \
	-X $(pkg).gitMinor=$(word 2,$(KUBE_VERSION_PARTS)) -X $(pkg).gitTreeState=clean)
GO_ENV := GOMODCACHE=$(CACHE_DIR)/go/mod GOCACHE=$(CACHE_DIR)/go/build GOTOOLCHAIN=local CGO_ENABLED=0

$(KUBE_BIN_STAMP): $(KUBE_MODULE)/go.mod $(KUBE_MODULE)/go.sum $(COREDNS_MODULE)/go.mod $(COREDNS_MODULE)/go.sum
	@if command -v go >/dev/null 2>&1; then \
		echo "make: building Kubernetes $(KUBE_VERSION) and CoreDNS $(COREDNS_VERSION) (once per version; minutes)" \
		&& rm -rf $(KUBE_BIN_DIR) && mkdir -p $(KUBE_BIN_DIR).tmp \
		&& (cd $(KUBE_MODULE) && $(GO_ENV) go build -trimpath -buildvcs=false \
			-ldflags '$(KUBE_LDFLAGS)' -o $(KUBE_BIN_DIR).tmp/ ./cmd/...) \
		&& (cd $(COREDNS_MODULE) && $(GO_ENV) go build -trimpath -buildvcs=false -ldflags '-s -w' \
			-o $(KUBE_BIN_DIR).tmp/coredns .) \
		&& mv $(KUBE_BIN_DIR).tmp $(KUBE_BIN_DIR) && touch $@; \
	else \
		echo "make: go not found, not building the Kubernetes binaries (the k8s and node tests need them)"; \
	fi

.PHONY: kube-bin
## kube-bin: the Kubernetes components, kubectl and CoreDNS (built once, cached under $(CACHE_DIR))
kube-bin: $(KUBE_BIN_STAMP)

## k8s-deps: etcd (Debian's etcd-server) and kube-apiserver (kube-bin)
k8s-deps: kube-bin
	@if [ -z "$$ETCD" ] && ! command -v etcd >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing etcd-server (apt-get)"; \
			log=$$(mktemp) \
			&& { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends etcd-server; } >"$$log" 2>&1 \
			|| { cat "$$log"; rm -f "$$log"; exit 1; }; \
			rm -f "$$log"; \
		else \
			echo "make: etcd not found, not installing etcd-server (needs apt-get as root; the k8s tests need it)"; \
		fi; \
	fi

# The node tier: Debian's containerd, runc, CNI plugins, iptables and the image tools (buildah,
# mmdebstrap), installed with apt-get when running as root; the Kubernetes binaries (kube-bin);
# reconsume's images built from its Dockerfiles with base images made here from Debian packages
# (`make images`, exported as docker-archive files under $(IMAGE_ARCHIVES)); and the node's own
# pause and CoreDNS images. Without apt-get as root this only warns: the node tests then fail
# in CI and skip elsewhere.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables buildah mmdebstrap
export RECONSUME_IMAGE_ARCHIVES ?= $(CACHE_DIR)/images

.PHONY: node-packages images node-deps
node-packages:
	@missing=""; for tool in containerd runc iptables buildah mmdebstrap; do \
		command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	test -x /usr/lib/cni/bridge || missing="$$missing containernetworking-plugins"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing$$missing (apt-get)"; \
			log=$$(mktemp) \
			&& { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends $(NODE_PACKAGES); } >"$$log" 2>&1 \
			|| { cat "$$log"; rm -f "$$log"; exit 1; }; \
			rm -f "$$log"; \
		else \
			echo "make: not installed:$$missing (needs apt-get as root; the node tests need them)"; \
		fi; \
	fi

## images: reconsume's three images from its Dockerfiles, with buildah (tools/build_images.py);
## IMAGE_BASE=debian makes the base images from Debian packages (no registry needed);
## IMAGE_REPOSITORY=<registry>/<path> names them there, PUSH=1 pushes them
IMAGE_BASE ?= public
IMAGE_REPOSITORY ?= ghcr.io/reconsume
images: $(STAMP) $(PROTOS_STAMP)
	$(BIN)/python tools/build_images.py --base $(IMAGE_BASE) --repository $(IMAGE_REPOSITORY) \
		--archives $(RECONSUME_IMAGE_ARCHIVES) $(if $(filter 1 true yes,$(PUSH)),--push)

## node-deps: what the node tier needs: packages, kube-bin, the images (Debian bases) and the
## node's pause and CoreDNS images
node-deps: node-packages kube-bin $(STAMP) $(PROTOS_STAMP)
	@if command -v buildah >/dev/null 2>&1 && command -v mmdebstrap >/dev/null 2>&1 \
			&& [ "$$(id -u)" = 0 ] && [ -x $(KUBE_BIN_DIR)/pause ]; then \
		$(MAKE) --no-print-directory images IMAGE_BASE=debian \
		&& $(BIN)/python -m tests.node.images $(KUBE_BIN_DIR); \
	else \
		echo "make: not building the node tier's images (needs root, buildah, mmdebstrap and kube-bin)"; \
	fi

# The chart tier's helm, built with `go install` once per version and cached as
# $(CACHE_DIR)/bin/helm-<version> (Go's caches under $(CACHE_DIR)/go, like kube-apiserver above).
# Without Go this only warns: the chart tests then fail in CI and skip elsewhere.
HELM_VERSION := v3.22.0
export HELM := $(CACHE_DIR)/bin/helm-$(HELM_VERSION)

$(HELM):
	@if command -v go >/dev/null 2>&1; then \
		echo "make: building helm $(HELM_VERSION) (once per version; minutes)" \
		&& mkdir -p $(dir $@) \
		&& export GOMODCACHE=$(CACHE_DIR)/go/mod GOCACHE=$(CACHE_DIR)/go/build GOTOOLCHAIN=local \
			GOBIN=$$(mktemp -d) CGO_ENABLED=0 \
		&& go install -trimpath -ldflags '-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)' \
			helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) \
		&& mv $$GOBIN/helm $@ && rmdir $$GOBIN; \
	else \
		echo "make: go not found, not building helm (the chart tests need it)"; \
	fi

# The chart tier's promtool (the alert rules' checks and unit tests) comes with Debian's
# prometheus, installed with apt-get when running as root, like etcd above. Without it this only
# warns: the chart's alert tests then fail in CI and skip elsewhere.
.PHONY: chart-deps
## chart-deps: helm (built once, cached under $(CACHE_DIR)) and promtool (Debian's prometheus)
chart-deps: $(HELM)
	@if ! command -v promtool >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing prometheus for promtool (apt-get)"; \
			log=$$(mktemp) \
			&& { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends prometheus; } >"$$log" 2>&1 \
			|| { cat "$$log"; rm -f "$$log"; exit 1; }; \
			rm -f "$$log"; \
		else \
			echo "make: promtool not found, not installing prometheus (needs apt-get as root; the chart tests need it)"; \
		fi; \
	fi

## demo: run the most complete thing reconsume can do on this machine, no cluster needed
demo: $(STAMP) $(PROTOS_STAMP)
	$(BIN)/reconsume demo

## lint: ruff, mypy --strict, the import-linter layer contracts and one version everywhere
lint: $(STAMP) $(PROTOS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/check_version.py

## test: lint, then every test tier
test: lint compat-deps k8s-deps chart-deps node-deps
	$(BIN)/pytest $(PYTEST_ARGS)

# The Java side of the comparison with Apache RocketMQ (bench/java: RocketMQ's 5.3 servers from
# Maven Central and the load generator), rebuilt when a pom or a Java source changes.
BENCH_JAVA := bench/java
BENCH_JAVA_STAMP := $(BENCH_JAVA)/loadgen/target/.built
BENCH_JAVA_SOURCES := $(wildcard $(BENCH_JAVA)/pom.xml $(BENCH_JAVA)/*/pom.xml) \
	$(shell find $(BENCH_JAVA) -path '*/src/*' -name '*.java' 2>/dev/null)

$(BENCH_JAVA_STAMP): $(BENCH_JAVA_SOURCES)
	mvn -f $(BENCH_JAVA)/pom.xml -Dmaven.repo.local=$(CACHE_DIR)/m2 -B -q package
	@touch $@

.PHONY: bench-java
## bench-java: build bench/java (Apache RocketMQ and the load generator), cached in $(CACHE_DIR)/m2
bench-java: $(BENCH_JAVA_STAMP)

# The benchmarks' own environment, on an optimised CPython build (profile-guided and
# link-time optimised, libpython linked in or built without semantic interposition) as the
# images run it: the same broker takes 12-15 % more CPU a send under load on a plain
# `./configure` build, such as pyenv's default (bench/RESULTS.md, "The interpreter the brokers
# run on"). Debian's python3.11 (packages python3.11 and python3.11-venv) where there is one.
BENCH_PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) $(PYTHON))
BENCH_VENV ?= .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

$(BENCH_STAMP): pyproject.toml
	@test -x $(BENCH_VENV)/bin/python || $(BENCH_PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade "pip>=24"
	$(BENCH_VENV)/bin/python -m pip install --quiet -e ".[test,fast,spark,demo]"
	@rm -f $(BENCH_VENV)/.installed-*
	@touch $@

.PHONY: bench-venv
## bench-venv: the benchmarks' environment (.venv-bench) on $(BENCH_PYTHON)
bench-venv: $(BENCH_STAMP) $(PROTOS_STAMP)

## bench: run the benchmarks in .venv-bench and rewrite bench/RESULTS.md
bench: bench-venv bench-java
	$(BENCH_VENV)/bin/python -m bench.run --write bench/RESULTS.md

# clean keeps $(CACHE_DIR): downloads and the built kube-apiserver outlive the work tree.
clean:
	rm -rf $(VENV) $(BENCH_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis $(ALI_ONS)/node_modules \
		$(JAVA_CLIENT)/target $(GO_CLIENT)/bin reconsume-demo
