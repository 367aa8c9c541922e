"""Pure statistics for latency samples: percentiles and a summary that serialises to JSON."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks.

    The same definition as numpy's default ('linear'), so numbers compare with other tools.
    """
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Latency summary in milliseconds."""

    n: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def summarize_ms(samples_s: Sequence[float]) -> Summary:
    """Summary of samples given in seconds, reported in milliseconds."""
    if not samples_s:
        raise ValueError("no samples to summarize")
    ms = [s * 1000.0 for s in samples_s]
    return Summary(
        n=len(ms),
        mean_ms=sum(ms) / len(ms),
        p50_ms=percentile(ms, 50),
        p95_ms=percentile(ms, 95),
        p99_ms=percentile(ms, 99),
        max_ms=max(ms),
    )


def ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is zero (a ratio to nothing is no number)."""
    return None if b == 0 else a / b


def within(value: float, reference: float, tolerance: float) -> bool:
    """True when ``value`` is at most ``tolerance`` (0.2 = 20 %) above ``reference``."""
    return value <= reference * (1.0 + tolerance)
