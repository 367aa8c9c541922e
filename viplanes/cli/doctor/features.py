"""`viplanes doctor`'s feature check: per switch, what its capability profile
(topologies/profiles.py) lets it carry, the lanes the topology needs that no profile on their
path gives, and, when the controller reports a switch's own features, a profile that claims
more than the switch has.

Why: a profile is the operator's word about a hardware switch; a lane needing NAT or meters
on a switch without them fails only when someone asks for it. The readiness report may carry
``features`` per switch ({name: bool}, as learned from the switch); a report without them
leaves the profile unchecked against the switch, said as such.
"""

from __future__ import annotations

from typing import Any

from viplanes.cli.doctor.checks import FAIL, OK, Finding
from viplanes.topologies.capcheck import carries, lane_problems
from viplanes.topologies.model import Topology
from viplanes.topologies.profiles import FEATURES

FIX_PROFILE = "give the switch that feature or the right profile (docs/hardware.md); viplanes topology check"


def check_features(topology: Topology, report: dict[str, Any] | None) -> list[Finding]:
    learned = _learned(report)
    out = []
    for sw in topology.switches:
        name = f"features {sw.name}"
        reported = learned.get(sw.dpid)
        claimed = [f for f in FEATURES if getattr(sw.caps.features, f)]
        lacking = [f for f in claimed if reported is not None and reported.get(f) is False]
        if lacking:
            out.append(
                Finding(
                    name,
                    FAIL,
                    f"profile {sw.caps.profile} says {', '.join(lacking)}; the switch reports it lacks them",
                    f"set features: {{{', '.join(f'{f}: false' for f in lacking)}}} on {sw.name} in the topology",
                )
            )
            continue
        source = "matches the switch's report" if reported is not None else "not reported by the switch"
        out.append(Finding(name, OK, f"profile {sw.caps.profile} ({source}): {carries(topology, sw)}"))
    out += [Finding("features.lanes", FAIL, problem, FIX_PROFILE) for problem in lane_problems(topology)]
    return out


def _learned(report: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    """dpid -> the features a switch reported (only entries that carry them)."""
    if report is None:
        return {}
    switches = report.get("switches", [])
    return {
        int(sw["dpid"]): sw["features"]
        for sw in switches
        if isinstance(sw, dict) and isinstance(sw.get("features"), dict) and "dpid" in sw
    }
