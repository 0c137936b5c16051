# The README's two set-up commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# --no-loadscope-reorder: files go to the workers in collection order (tests/conftest.py
# starts the long notebook files first), not sorted by their number of tests
PYTEST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder --durations=25

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e ".[test,dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/jaxannot demo

test: $(VENV)/.installed-test
	# one BLAS thread per test worker: oversubscribed OpenBLAS threads make LAPACK calls
	# tens of times slower on 2 cores
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 XLA_FLAGS=--xla_force_host_platform_device_count=2 \
		$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check jaxannot tests benchmarks tools notebooks
	$(BIN)/ruff format --check jaxannot tests benchmarks tools notebooks
	$(BIN)/lint-imports

bench: $(VENV)/.installed-test
	$(BIN)/python -m pip install -q -e ".[bench]"
	@echo "run a benchmark: $(BIN)/python -m benchmarks.<purpose>.<name> --help"

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
