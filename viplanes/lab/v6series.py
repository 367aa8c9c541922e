"""`lab run --paper`'s v6 series: does a lane gain as much over IPv6 as over IPv4?

The paper grid runs on campus-paper.yaml, which is v4-only (its WAN proxy and grants are v4).
This series is small and separate: on the dual-stack campus (campus-dualstack.yaml, no WAN
model) the desktop uploads to the cloud with iperf3 on the v4 default path (the firewall), a v4
lane, the v6 default path (the same firewall, IPv6 is routed untranslated) and a v6 lane. Both
families cross the same links and caps, so the lane's gain should be the same; the report
(`fidelity/seeds.py:v6_finding`) compares the two gains. Its rows carry ``series="v6"`` and a
``family``; the grid's findings leave them out (`grid_runs`).

Pure (plan, estimate, records); `v6lab.run_v6_series` builds its own lab and service and runs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .estimate import estimate_s
from .measure import Measurement
from .sweep import RunSpec

V6_SERIES = "v6"
V6_PLACEMENT = "desktop"  # the paper's lane gain is the desktop's (behind the firewall and NAT)
V6_PARALLEL = 4  # as the grid's baseline iperf3 runs
V6_SECONDS = 3.0  # as the grid's iperf3 runs
# building the dual-stack lab and starting its own `viplanes serve`: ~8 s measured (the
# whole series took 21.7 s, docs/lab.md)
V6_BUILD_S = 10.0
V6_LANE_S = 2.0  # asking for a lane and waiting until it is active


@dataclass(frozen=True)
class V6Run:
    family: int  # 4 or 6
    path: str  # "default" or "lane"

    def spec(self) -> RunSpec:
        return RunSpec(
            V6_PLACEMENT, "upload", self.path, "iperf3", V6_PARALLEL, 1, seconds=V6_SECONDS, series=V6_SERIES
        )


def v6_plan() -> list[V6Run]:
    """v4 default, v4 lane, v6 default, v6 lane: each family's lane right after its baseline."""
    return [V6Run(family, path) for family in (4, 6) for path in ("default", "lane")]


def v6_estimate_s() -> float:
    """The series' time: its own lab and service, its runs, a lane per family."""
    runs = v6_plan()
    lanes = sum(1 for r in runs if r.path == "lane")
    return V6_BUILD_S + sum(estimate_s(r.spec(), 0) for r in runs) + lanes * V6_LANE_S


def grid_runs(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of everything but this series (the v4 grid's findings and Table 2 read these)."""
    return [r for r in records if r.get("series") != V6_SERIES]


def v6_runs(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("series") == V6_SERIES]


def v6_record(
    run: V6Run, m: Measurement, started: float, lab_run: str, topology: str, lane: dict[str, Any] | None
) -> dict[str, Any]:
    """The same fields the report reads for a grid run, plus the address family."""
    spec = run.spec()
    return {
        "placement": spec.placement,
        "direction": spec.direction,
        "path": spec.path,
        "tool": spec.tool,
        "parallel": spec.parallel,
        "rep": spec.rep,
        "series": V6_SERIES,
        "family": run.family,
        "topology": topology,
        "lab_run": lab_run,
        "timestamp": datetime.fromtimestamp(started, UTC).isoformat(),
        "bytes": m.bytes,
        "seconds": round(m.seconds, 4),
        "mbps": round(m.mbps, 3),
        "ok": m.ok,
        "error": m.error,
        "lane_id": lane["id"] if lane else None,
    }
