# hlo — set-up is two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv (unless a virtual environment is already active) and installs hlo into it.

ifeq ($(VIRTUAL_ENV),)
VENV := .venv
else
VENV := $(VIRTUAL_ENV)
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.hlo-installed
SHARED ?= ../shared
ARGS ?=

.PHONY: demo test test-all conformance bench install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q -m "not slow" $(ARGS)

test-all: $(STAMP)
	$(PY) -m pytest -q $(ARGS)

# The full StableHLO conformance run (minutes); `make test` runs a fixed sample.
conformance: $(STAMP)
	$(PY) -m hlo.conformance $(SHARED)/conformance/stablehlo_interpret --target interpreter $(ARGS)
	$(PY) -m hlo.conformance $(SHARED)/conformance/stablehlo_testdata --target interpreter $(ARGS)

bench: $(STAMP)
	$(PY) -m pip install -q -r bench/requirements-peers.txt
	$(PY) -m bench $(ARGS)

clean:
	rm -rf .venv build *.egg-info .pytest_cache .hypothesis
