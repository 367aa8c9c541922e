"""Reconcile at scale on real OVS: 2,000 lanes installed on connect, then a new controller (cold:
nothing compiled, nothing known) finds every flow right and touches none of them.

Run with VIPLANES_SCALE_LANES=10000 for the bigger number (about a minute)."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.support.ovs import ovs_problem
from tests.support.paths import REPO
from tests.support.procs import free_port, lab_security

pytestmark = pytest.mark.integration
N_LANES = int(os.environ.get("VIPLANES_SCALE_LANES", "2000"))


def _wait(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_restarted_controller_keeps_thousands_of_flows(record_property) -> None:
    problem = ovs_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    from viplanes.controller.openflow.embedded import EmbeddedController
    from viplanes.controller.runtime.lane_runtime import LaneRuntime
    from viplanes.domain.values import LaneSpec
    from viplanes.lab.net import build_network
    from viplanes.topologies.loader import load_topology

    topo = load_topology(REPO / "topologies" / "campus.yaml")
    now = time.time()
    # the DTN is on the border switch: two flows per lane there, the bulk of a science DMZ
    lanes = [
        LaneSpec(i, "198.51.100.30", f"203.0.113.{10 + i // 60000}", "tcp", 1024 + i % 60000, None, None, now + 3600)
        for i in range(1, N_LANES + 1)
    ]
    port = free_port()
    first = EmbeddedController(LaneRuntime(topo), port=port, refresh_period_s=3600, security=lab_security(topo))
    first.attach_source(lambda: lanes)
    first.start()
    lab = second = None
    try:
        t0 = time.perf_counter()
        lab = build_network(topo, "127.0.0.1", port, shape=False)
        assert _wait(lambda: len(first.runtime.reconciled) == 4, 120)
        install_s = time.perf_counter() - t0
        from os_ken.ofproto import ofproto_v1_3_parser as parser

        from viplanes.controller.compile.lane import compile_base, compile_lane
        from viplanes.controller.compile.shared import compile_shared

        def flows(msgs: list) -> int:
            return sum(isinstance(m, parser.OFPFlowMod) for m in msgs)

        base = flows(compile_base(topo)[3])
        # per lane at the border: forward, reverse, conntrack replies (table 1) and the commits of
        # new and established connections (table 3); once per address: its related-ICMP flows
        per_lane = flows(compile_lane(lanes[0], topo, now)[3])
        shared = flows(compile_shared(topo, lanes[:1]).get(3, []))
        assert per_lane == 6
        assert len(first.runtime.reconciled[3].adds) == per_lane * N_LANES + base + shared
        s3 = lab.switch("s3")
        dump = f"ovs-ofctl -O OpenFlow13 dump-flows {lab.bridge('s3')}"
        before = s3.cmd(f"{dump} cookie=0x5650000000000001/-1")
        first.stop()
        time.sleep(1.0)
        second = EmbeddedController(LaneRuntime(topo), port=port, refresh_period_s=3600, security=lab_security(topo))
        second.attach_source(lambda: lanes)
        t0 = time.perf_counter()
        second.start()
        assert _wait(lambda: len(second.runtime.reconciled) == 4, 120)
        restart_s = time.perf_counter() - t0
        plan = second.runtime.reconciled[3]
        assert plan.kept == per_lane * N_LANES + base + shared
        assert not (plan.adds or plan.deletes or plan.refreshes)
        after = s3.cmd(f"{dump} cookie=0x5650000000000001/-1")
        age = [float(x) for x in re.findall(r"duration=([\d.]+)s", before + after)]
        assert len(age) == 2 * per_lane and all(age[i + per_lane] > age[i] for i in range(per_lane))  # never re-added
        print(
            f"\n{N_LANES} lanes ({per_lane * N_LANES} flows on s3): first connect to all reconciled "
            f"{install_s:.1f} s; controller restart to all reconciled {restart_s:.1f} s "
            "(incl. OVS reconnect backoff)"
        )
        record_property("install_s", round(install_s, 2))
        record_property("restart_reconciled_s", round(restart_s, 2))
    finally:
        if lab is not None:
            lab.stop()
        for ctl in (first, second):
            if ctl is not None:
                ctl.stop()
