"""Profile one re-route in-process: N desktop lanes on the redundant campus, the bypass link they
ride goes down, ``Reroute.apply_now`` moves them (issue 42).

    .venv/bin/python -m bench.probes.profile_reroute --lanes 1000 [--profile]

The switches are a stub that records what it is sent and answers every barrier at once (no
flow table), so the figure is the controller's own work: compiling, planning, serialising is
left out (os-ken's glue does it). ``bench.suite.reroute`` measures the whole thing on OVS.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser


class _Datapath:
    """What ``serialize`` needs of a datapath: the protocol modules."""

    from os_ken.ofproto import ofproto_v1_3 as ofproto
    from os_ken.ofproto import ofproto_v1_3_parser as ofproto_parser


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lanes", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="print the top of a cProfile of the re-route")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)

    from bench.harness.workload import flows, lane_spec
    from bench.suite.reroute import TOPOLOGY
    from tests.support.clock import FakeClock
    from viplanes.controller.runtime.lane_runtime import LaneRuntime
    from viplanes.controller.runtime.links import LinkBook, LinkSettings
    from viplanes.controller.runtime.reroute import Reroute
    from viplanes.topologies.loader import load_topology
    from viplanes.topologies.model import Topology

    topo: Topology = load_topology(TOPOLOGY)
    clock = FakeClock()
    sent: list[tuple[int, Any]] = []
    rt = LaneRuntime(topo, clock=clock, spawn=lambda fn: fn())

    def send(dpid: int, ofmsgs: list[Any]) -> bool:
        for msg in ofmsgs:
            sent.append((dpid, msg))
            if isinstance(msg, parser.OFPBarrierRequest):
                rt.on_barrier_reply(dpid, msg.xid)
        return True

    rt.send = send
    rt.connected.update(sw.dpid for sw in topo.switches)
    rt.reroute = Reroute(
        rt.state, rt.wire, rt.resync, LinkBook(topo, LinkSettings(), clock), topo, start=lambda fn: None
    )
    specs = [lane_spec(topo, i + 1, "desktop", f, now=clock.now) for i, f in enumerate(flows(args.lanes))]
    t = time.perf_counter()
    results = rt.activate_many(specs)
    print(f"activated {sum(r.ok for r in results.values())} of {len(specs)} lanes in {time.perf_counter() - t:.2f} s")
    rt.state.source = lambda: specs  # the desired lanes, as the store would answer
    mark = len(sent)
    rt.port_status(3, 3, up=False)  # s3's end of the s2:3-s3:3 bypass link
    prof = cProfile.Profile(time.thread_time) if args.profile else None  # CPU: the machine is shared
    t, cpu = time.perf_counter(), time.thread_time()
    if prof is not None:
        prof.runcall(rt.reroute.apply_now)
    else:
        rt.reroute.apply_now()
    took, cpu = time.perf_counter() - t, time.thread_time() - cpu
    sent = sent[mark:]
    mods = sum(isinstance(m, parser.OFPFlowMod) for _, m in sent)
    barriers = sum(isinstance(m, parser.OFPBarrierRequest) for _, m in sent)
    reads = sum(isinstance(m, parser.OFPFlowStatsRequest) for _, m in sent)
    print(
        f"re-route of {args.lanes} lanes: {took * 1000:.0f} ms, {cpu * 1000:.0f} ms of CPU"
        f"{' (under cProfile)' if prof else ''}, load {os.getloadavg()[0]:.1f}; "
        f"{mods} flow-mods, {barriers} barriers, {reads} flow-stats reads"
    )
    t = time.thread_time()
    for _, msg in sent:  # what os-ken's glue does with each before writing it
        msg.datapath = _Datapath()
        msg.serialize()
    print(f"serialising them: {(time.thread_time() - t) * 1000:.0f} ms of CPU")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
