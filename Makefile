# The README's two commands are `make demo` and `make test`; both run `make setup` first.
VENV := .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
export PATH := $(CURDIR)/tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

# scripts/lint-imports checks the layer contracts in .importlinter (README, Folders);
# scripts/typecheck runs mypy on the modules mypy.ini lists.
.PHONY: setup test test-unit test-integration demo bench ovs-up clean

setup:
	@scripts/setup.sh

ovs-up:
	@scripts/ovs-up

# pytest exits 5 when it collected nothing; make treats every non-zero code as failure.
test: setup
	scripts/lint-imports
	scripts/typecheck
	$(PYTEST) -q -m "not integration" tests
	$(PYTEST) -q -m integration tests

test-unit: setup
	$(PYTEST) -q -m "not integration" tests

test-integration: setup
	$(PYTEST) -q -m integration tests

demo: setup
	$(PY) -m viplanes.lab.demo

bench: setup
	$(PY) -m bench.run_all

clean:
	rm -rf build *.egg-info .pytest_cache
