"""Reading one Prometheus metric off a /metrics page, and waiting on the acceptor's grant index.

Why: tests that create an automatic grant used to sleep 1.5 s "for the acceptor's grant index to
refresh" (every second); on a loaded machine that is a guess, on a quiet one time wasted. The
acceptor says how many automatic grants its index holds (``viplanes_auto_grants_indexed``).
"""

from __future__ import annotations

import requests

from tests.support.procs import wait_for


def metric(text: str, name: str) -> float | None:
    """The value of the unlabelled sample ``name`` in an exposition ``text``, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def wait_grants_indexed(
    metrics_url: str, at_least: int, headers: dict[str, str] | None = None, timeout: float = 15
) -> None:
    """Until the acceptor behind ``metrics_url`` holds ``at_least`` automatic grants."""

    def indexed() -> bool:
        page = requests.get(metrics_url, headers=headers or {}, timeout=10).text
        return (metric(page, "viplanes_auto_grants_indexed") or 0) >= at_least

    wait_for(indexed, timeout, 0.05, what=f"{at_least} automatic grant(s) in the acceptor's index", ignore=(OSError,))
