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
PACKAGE_DIRS := compiler ir passes backends runtime

.PHONY: demo test test-all conformance bench install lint clean mpi

install: $(STAMP)

# Set-up also does what installing a wheel of hlo would: byte-compiles its sources (an editable
# install does not, and where PYTHONDONTWRITEBYTECODE is set Python never writes them, so every
# process would compile ~60 modules' source, ~0.1 s, on its first hlo.jit call), and builds the
# CPU backend's library code (the GEMM's bodies, the worker pool: ~5 s) into the library folder,
# as installing jaxlib or torch puts their precompiled kernels in place.
$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test,lint]'
	$(PY) -m compileall -q $(PACKAGE_DIRS) >/dev/null
	$(PY) -m hlo.backends.cpu.build_library
	@touch $(STAMP)

# MPI for the multi-process tests (tests/distributed): Open MPI from the system's packages and
# mpi4py (the `hlo[mpi]` extra). Idempotent: does nothing where both are there (~0.1 s); on a
# fresh Debian/Ubuntu machine apt-get takes ~25 s. Where apt-get is absent or not allowed it
# says so and goes on: the tests that need MPI then skip, naming the reason.
MPI_PACKAGES := openmpi-bin libopenmpi-dev
mpi: $(STAMP)
	@if ! command -v mpirun >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing $(MPI_PACKAGES) (apt-get)"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q --no-install-recommends $(MPI_PACKAGES) >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends $(MPI_PACKAGES) >/dev/null; } || \
	    echo "make mpi: apt-get could not install $(MPI_PACKAGES); the MPI tests will skip"; \
	  else \
	    echo "make mpi: no mpirun, and apt-get is absent or needs root: the MPI tests will skip (install $(MPI_PACKAGES) or another MPI)"; \
	  fi; \
	fi
	@if command -v mpirun >/dev/null 2>&1 && ! $(PY) -c 'import mpi4py' 2>/dev/null; then \
	  $(PY) -m pip install -q -e '.[mpi]' || echo "make mpi: pip could not install mpi4py; the MPI tests will skip"; \
	fi

demo: $(STAMP)
	$(PY) examples/demo.py $(ARGS)

test: $(STAMP) mpi
	$(PY) -m pytest -q -m "not slow" $(ARGS)

test-all: $(STAMP) mpi
	$(PY) -m pytest -q $(ARGS)

# ruff (pyflakes, import order, no needless noqa) over everything, mypy over the packages:
# settings in pyproject.toml. mypy reads the packages under the names they are imported by, from
# a tree of links (build/lint/hlo -> compiler/*, build/lint/hlo/ir -> ir, ...).
LINT_TREE := build/lint/hlo
lint: $(STAMP)
	@rm -rf $(LINT_TREE) && mkdir -p $(LINT_TREE)
	@set -e; top=$(firstword $(PACKAGE_DIRS)); \
	for f in $$top/*; do case $$f in */__pycache__) ;; *) ln -s ../../../$$f $(LINT_TREE)/ ;; esac; done; \
	for d in $(wordlist 2,99,$(PACKAGE_DIRS)); do ln -s ../../../$$d $(LINT_TREE)/$$d; done
	@status=0; \
	echo "ruff check ."; $(PY) -m ruff check . || status=1; \
	echo "mypy (packages: hlo)"; $(PY) -m mypy || status=1; \
	exit $$status

# The full StableHLO conformance run (minutes); `make test` runs a fixed sample.
conformance: $(STAMP)
	$(PY) -m hlo.conformance $(SHARED)/conformance/stablehlo_interpret --target interpreter $(ARGS)
	$(PY) -m hlo.conformance $(SHARED)/conformance/stablehlo_testdata --target interpreter $(ARGS)

# library code for sources edited since set-up is built first (a no-op when it is all there)
bench: $(STAMP)
	$(PY) -m pip install -q -r bench/requirements-peers.txt
	$(PY) -m compileall -q $(PACKAGE_DIRS) >/dev/null
	$(PY) -m hlo.backends.cpu.build_library
	$(PY) -m bench $(ARGS)

clean:
	rm -rf .venv build *.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
