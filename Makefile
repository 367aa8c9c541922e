# The README's two commands are `make demo` and `make test`; both run `make setup` first.
VENV := .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
# make bench: the failover soak's minutes (false takeovers, lanes lost); SOAK_MINUTES=0 skips it
SOAK_MINUTES ?= 30
export PATH := $(CURDIR)/tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

# Before the tests, `make test` runs the static checks: scripts/lint (ruff: lint and format check
# on every Python file), scripts/lint-imports (the layer contracts in .importlinter) and
# scripts/typecheck (mypy on every product module, mypy.ini); scripts/check-units (the systemd units
# under deploy/systemd, verified and scored offline by systemd-analyze).
.PHONY: setup test test-unit test-integration demo bench ovs-up clean paper

setup:
	@scripts/setup.sh

ovs-up:
	@scripts/ovs-up

# pytest exits 5 when it collected nothing; make treats every non-zero code as failure. Both runs
# print their 20 slowest steps: where the suite's time goes, in every CI log. Both run on two
# workers (pytest-xdist): unit tests share no file, port or bridge name; the integration suite goes
# a whole module at a time, the Keycloak modules together (tests/support/workers.py), and labs on
# the one ovs-vswitchd stay apart by their run's bridge names and conntrack zones. The modules marked
# `solo` (sub-second fail-over, sFlow detection within seconds) run after, alone: beside another
# lab on two cores they missed their bounds (a 0.25-0.37 s gap against 0.1 s, no lane within 6 s).
test: setup
	scripts/lint
	scripts/lint-imports
	scripts/typecheck
	scripts/check-units
	$(PYTEST) -q -m "not integration" -n 2 --durations=20 tests
	$(PYTEST) -q -m "integration and not solo" -n 2 --dist loadgroup --durations=20 tests
	$(PYTEST) -q -m "integration and solo" --durations=10 tests

test-unit: setup
	$(PYTEST) -q -m "not integration" -n 2 --durations=20 tests

test-integration: setup
	$(PYTEST) -q -m "integration and not solo" -n 2 --dist loadgroup --durations=20 tests
	$(PYTEST) -q -m "integration and solo" --durations=10 tests

demo: setup
	$(PY) -m viplanes.lab.demo

# the paper run (~14 min) and the README's findings table regenerated from it (docs/lab.md)
paper: setup
	scripts/paper-run

bench: setup
	$(PY) -m bench.run_all --soak-minutes $(SOAK_MINUTES)

clean:
	rm -rf build *.egg-info .pytest_cache
