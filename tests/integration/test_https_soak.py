"""The HTTPS API through an ordinary half minute: a real `viplanes serve --tls-cert/--tls-key` under
keep-alive sessions, one-shot connections, the CLI, a console page polled every 3 s and a
Prometheus scrape (``bench.harness.soak``), then idle.

The failure this guards against (issue 40): a server that never closed the connections clients
closed filled its 100 connection slots after ~100 HTTPS requests and spun on the dead sockets.
The long version is ``bench/suite/https_soak.py`` (`make bench`).
"""

from __future__ import annotations

import json

import pytest

from bench.harness import soak
from bench.suite.https_soak import serve_target

pytestmark = pytest.mark.integration


def test_the_https_api_holds_two_thousand_requests_and_returns_to_idle(tmp_path):
    with serve_target(tmp_path) as target:
        report = soak.soak(target, soak.Mix(keepalive=10, oneshot=8, console=1, metrics=1, cli=1), duration_s=30.0)
    shown = json.dumps({k: v for k, v in report.items() if k != "failures"}, default=str)
    print(shown)
    assert report["requests"] >= 2000, shown
    assert report["by_kind"].get("console", 0) >= 5 and report["by_kind"].get("metrics", 0) >= 3, shown
    assert report["cli_runs"] >= 2, shown
    assert report["p99_ms"] < 2000, shown
    assert soak.failed_checks(report) == [], shown
