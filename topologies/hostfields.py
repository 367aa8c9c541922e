"""Read a host's optional machine limits (``cpu_cores``): how much of the lab machine's CPU the
processes the lab runs in that host may use, so a host can stand for a slower machine
(docs/lab.md, "The desktop's own limit"). The controller ignores it; only the lab applies it.

Split from ``loader.py`` so each part of a campus file has its own reader.
"""

from __future__ import annotations

import math
from typing import Any

from viplanes.topologies.fields import FieldReader

# a share below 5% of a core starves even the host's shell; above 64 is no limit on any lab machine
CPU_CORES_RANGE = (0.05, 64.0)


def read_cpu_cores(reader: FieldReader, m: dict[str, Any], where: str) -> float | None:
    """The host's ``cpu_cores`` (None: absent, or bad and reported with its key and range)."""
    if "cpu_cores" not in m:
        return None
    value = m["cpu_cores"]
    lo, hi = CPU_CORES_RANGE
    number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not number or not lo <= value <= hi:
        reader.bad(f"{where}.cpu_cores", f"expected a number of cores {lo}..{hi:.0f}, got {value!r}")
        return None
    return float(value)
