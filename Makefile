# One task runner for everything; the README's two commands call it.
SHELL := /bin/bash
PY_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUF := tools/node_modules/.bin/buf
PYTEST_ARGS ?=

.PHONY: all venv gen gen-check buf-lint lint test test-python demo bench bench-quick clean

all: test

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
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

test-python: venv
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

test: gen-check test-python

demo: venv
	$(PY) -m examples.demo

bench: venv
	$(PY) -m bench.run

bench-quick: venv
	BENCH_QUICK=1 $(PY) -m bench.run

clean:
	rm -rf .capgate .run bench/out
