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
	$(BIN)/python -m pip install --quiet -e ".[test,lint,fast,operator,spark,demo]"
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

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

# The k8s tier's control plane. kube-apiserver is built from tools/kube-apiserver (a Go module
# pinning k8s.io/kubernetes) once per version and cached as $(CACHE_DIR)/bin/kube-apiserver-<version>,
# with Go's module and build caches under $(CACHE_DIR)/go; etcd is Debian's etcd-server, installed
# with apt-get when running as root. Without Go, or etcd and a way to install it, this only warns:
# the k8s tests then fail in CI and skip elsewhere.
KUBE_APISERVER_MODULE := tools/kube-apiserver
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" || $$2 == "k8s.io/kubernetes" {print $$NF; exit}' $(KUBE_APISERVER_MODULE)/go.mod)
KUBE_VERSION_PARTS := $(subst ., ,$(patsubst v%,%,$(KUBE_VERSION)))
export KUBE_APISERVER := $(CACHE_DIR)/bin/kube-apiserver-$(KUBE_VERSION)
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(KUBE_VERSION_PARTS)) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(KUBE_VERSION_PARTS)) \
	-X k8s.io/component-base/version.gitTreeState=clean

$(KUBE_APISERVER):
	@if command -v go >/dev/null 2>&1; then \
		echo "make: building kube-apiserver $(KUBE_VERSION) (once per version; minutes)" \
		&& mkdir -p $(dir $@) \
		&& cd $(KUBE_APISERVER_MODULE) \
		&& export GOMODCACHE=$(CACHE_DIR)/go/mod GOCACHE=$(CACHE_DIR)/go/build GOTOOLCHAIN=local \
		&& go mod download \
		&& CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp . \
		&& mv $@.tmp $@; \
	else \
		echo "make: go not found, not building kube-apiserver (the k8s tests need it)"; \
	fi

## k8s-deps: etcd (Debian's etcd-server) and kube-apiserver (built once, cached under $(CACHE_DIR))
k8s-deps: $(KUBE_APISERVER)
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
demo: $(STAMP)
	$(BIN)/reconsume demo

## lint: ruff, mypy --strict and the import-linter layer contracts
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: lint, then every test tier
test: lint compat-deps k8s-deps chart-deps
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

## bench: run the benchmarks and rewrite bench/RESULTS.md
bench: $(STAMP) bench-java
	$(BIN)/python -m bench.run --write bench/RESULTS.md

# clean keeps $(CACHE_DIR): downloads and the built kube-apiserver outlive the work tree.
clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis $(ALI_ONS)/node_modules \
		$(JAVA_CLIENT)/target reconsume-demo
