"""What every system of the peers benchmark shares: a lane's compiled messages and flow counts,
the watched floor in two pooled halves, a clean table between systems, and the timed loop that
turns one system's request/release into samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.harness.campus import Campus
from bench.harness.flowwatch import FlowWatch
from bench.harness.ovs import ofctl
from bench.harness.stats import summarize_ms
from bench.harness.workload import Flow, flows, lane_spec
from bench.suite.activation import SRC, run_floor


def lane_messages(c: Campus, lane_id: int, flow: Flow) -> dict[int, list[Any]]:
    from viplanes.controller.compile.lane import compile_lane

    return compile_lane(lane_spec(c.topo, lane_id, SRC, flow), c.topo, time.time())


def flow_counts(msgs: dict[int, list[Any]]) -> dict[int, int]:
    """Flows per switch a watcher will see: a border lane's new-connection meter is no flow."""
    from os_ken.ofproto.ofproto_v1_3_parser import OFPFlowMod

    return {d: sum(isinstance(x, OFPFlowMod) for x in m) for d, m in msgs.items()}


def watched_floor(c: Campus, n: int, watch: FlowWatch) -> dict[str, Any]:
    """One half of the ratios' floor (see ``pooled``)."""
    floor = run_floor(c, n, watch=watch)
    if not floor["visible_s"] or not floor["gone_s"]:
        raise RuntimeError(f"the watched floor saw no flows: {floor['watch_missed'][:3]}")
    return floor


def pooled(halves: list[dict[str, Any]]) -> dict[str, Any]:
    """The floor measured in two halves, right before and right after our SQLite run, as one
    sample set: a slow spell of this shared VM then weighs on both sides of the ratio instead of
    on one (the floor alone moved 1.6-5.1 ms between runs minutes apart)."""
    out = dict(halves[0])
    for key in ("visible_s", "gone_s", "latency_s", "removal_s", "watch_missed"):
        out[key] = [x for h in halves for x in h.get(key, [])]
    return out


def clear_flows(c: Campus) -> None:
    """A clean table between systems (the previous controller is gone already)."""
    for name in c.bridges.names.values():
        ofctl("del-flows", name)


class Samples:
    """Per-system samples in seconds plus failures."""

    def __init__(self) -> None:
        self.activation: list[float] = []
        self.release: list[float] = []
        self.answer: list[float] = []  # request -> the system's own answer (HTTP status)
        self.failures: list[str] = []

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"failures": self.failures[:10], "failure_count": len(self.failures)}
        for key in ("activation", "release", "answer"):
            samples = getattr(self, key)
            out[key] = summarize_ms(samples).as_dict() if samples else None
        return out


def _timed_loop(
    n: int, warmup: int, one: Callable[[int, Flow], tuple[float, float, float] | str], watch: FlowWatch
) -> Samples:
    """Run ``one`` for warmup + n flows; keep (activation, release, answer) of the last n."""
    out = Samples()
    for i, flow in enumerate(flows(n + warmup, offset=1000)):
        watch.forget()
        got = one(i, flow)
        if isinstance(got, str):
            out.failures.append(got)
            if len(out.failures) >= 3 and not out.activation:  # broken, not slow: stop here
                break
            continue
        if i >= warmup:
            out.activation.append(got[0])
            out.release.append(got[1])
            out.answer.append(got[2])
    return out
