"""Integration fixtures: fail fast and clearly when Open vSwitch is not running.

Mininet's own ovs-vsctl calls have no timeout and hang forever against a dead ovsdb-server, so
every integration test checks OVS first (`make test` starts it via scripts/ovs-up).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    """``item.failed_call``: the test itself failed (fixtures print their processes' logs then)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item.failed_call = True  # type: ignore[attr-defined]


def ovs_problem() -> str | None:
    """None when ovsdb-server and ovs-vswitchd answer, else a one-line reason."""
    try:
        subprocess.run(["ovs-vsctl", "--timeout=5", "show"], check=True, capture_output=True, text=True, timeout=10)
        subprocess.run(
            ["ovs-appctl", "--timeout=5", "-t", "ovs-vswitchd", "version"],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except FileNotFoundError:
        return "Open vSwitch is not installed (run `make setup`)"
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", "") or ""
        return f"Open vSwitch is not running (run scripts/ovs-up): {detail.strip()[:200]}"
    return None


@pytest.fixture(autouse=True)
def _require_ovs(request: pytest.FixtureRequest) -> None:
    if "integration" in request.keywords and "postgres" not in request.keywords:
        problem = ovs_problem()
        if problem:
            pytest.fail(problem, pytrace=False)
