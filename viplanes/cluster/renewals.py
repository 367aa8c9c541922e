"""How late the lease holder's renewals run: the measurement behind ``LEASE_S`` and ``RENEW_S``.

A lease is safe only while every renewal answers before the holder's deadline; the time it has
left then (the *slack*) is what a shorter lease would eat. The holder records each successful
renewal's gap since the previous one and its slack, and logs a summary every ``every`` renewals
(``lease controller: renewals ...``): the failover soak reads those lines, so the lease timing is
argued from the renewal jitter measured on the loaded machine, not guessed. Pure: no clock, no
database; the lease hands in monotonic times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SUMMARY = re.compile(
    r"renewals: gap p50 (?P<p50>[\d.]+) ms, p99 (?P<p99>[\d.]+) ms, max (?P<gmax>[\d.]+) ms; "
    r"slack min (?P<smin>[\d.-]+) ms over (?P<n>\d+)"
)


@dataclass
class RenewalStats:
    """Gaps between successful renewals and the slack each left before the previous deadline."""

    every: int = 200
    gaps: list[float] = field(default_factory=list)
    slacks: list[float] = field(default_factory=list)
    _last_sent: float | None = None

    def renewed(self, sent_at: float, answered_at: float, old_deadline: float) -> str | None:
        """One renewal answered; a summary line (then a fresh window) every ``every`` renewals.
        ``old_deadline`` 0 (a gain, not a renewal) starts the gaps over."""
        if old_deadline <= 0.0 or self._last_sent is None:
            self._last_sent = sent_at
            return None
        self.gaps.append(sent_at - self._last_sent)
        self.slacks.append(old_deadline - answered_at)
        self._last_sent = sent_at
        if len(self.gaps) < self.every:
            return None
        line = summary(self.gaps, self.slacks)
        self.gaps, self.slacks = [], []
        return line

    def lost(self) -> None:
        """Not leading any more: the next gain starts a new series."""
        self._last_sent = None


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(gaps: list[float], slacks: list[float]) -> str:
    return (
        f"renewals: gap p50 {quantile(gaps, 0.5) * 1000:.0f} ms, p99 {quantile(gaps, 0.99) * 1000:.0f} ms, "
        f"max {max(gaps) * 1000:.0f} ms; slack min {min(slacks) * 1000:.0f} ms over {len(gaps)}"
    )


def parse_summaries(text: str) -> dict[str, float]:
    """The worst of every summary line in a log: max gap, min slack, renewals counted."""
    found = [m.groupdict() for m in SUMMARY.finditer(text)]
    if not found:
        return {}
    return {
        "renewal_gap_p99_ms_max": max(float(f["p99"]) for f in found),
        "renewal_gap_max_ms": max(float(f["gmax"]) for f in found),
        "renewal_slack_min_ms": min(float(f["smin"]) for f in found),
        "renewals": float(sum(int(f["n"]) for f in found)),
    }
