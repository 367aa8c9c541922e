"""Profile the pure part of a reconcile with N lanes: compile everything, then diff one switch.

    .venv/bin/python -m bench.probes.profile_reconcile --lanes 10000

The controller does this work per switch on connect; ``bench.suite.scale`` measures the whole thing on
OVS. The "actual" flows here are the desired ones read back (as after a controller restart, where
nothing needs to change), so the diff finds every flow kept.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lanes", type=int, default=10_000)
    ap.add_argument("--src", default="dtn")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)

    from bench.harness.workload import flows, lane_spec
    from viplanes.api.app import default_topology
    from viplanes.controller.compile.lane import compile_desired
    from viplanes.controller.compile.reconcile import plan_switch

    topo = default_topology()
    now = time.time()
    specs = [lane_spec(topo, i + 1, args.src, f, now=now) for i, f in enumerate(flows(args.lanes))]
    dpid = topo.host(args.src).iface.attach and topo.switch(topo.host(args.src).iface.attach.switch).dpid
    plain = []
    for _ in range(5):  # without the profiler: the figure docs/benchmarks.md quotes
        t = time.perf_counter()
        compile_desired(topo, specs, now)
        plain.append(time.perf_counter() - t)
    print(
        f"compile_desired of {args.lanes} lanes, no profiler, 5 runs: "
        + " ".join(f"{x * 1000:.0f}" for x in plain)
        + f" ms (median {sorted(plain)[2] * 1000:.0f})"
    )
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    per_dpid, refused = prof.runcall(compile_desired, topo, specs, now)
    t1 = time.perf_counter()
    wanted = per_dpid[dpid]
    # the desired set holds meters (rate-capped lanes, the ARP punt) too: only flows come back
    # in flow stats
    stats = [_as_stats(m) for m in wanted if hasattr(m, "table_id")]
    t2 = time.perf_counter()
    plan = prof.runcall(plan_switch, wanted, stats, now, {})
    t3 = time.perf_counter()
    print(
        f"compile_desired of {args.lanes} lanes: {t1 - t0:.2f} s ({(t1 - t0) / args.lanes * 1e3:.3f} "
        f"ms/lane, under cProfile); refused {len(refused)}"
    )
    print(
        f"plan_switch over {len(wanted)} flows on dpid {dpid}: {t3 - t2:.2f} s; kept {plan.kept}, adds {len(plan.adds)}"
    )
    again = []  # without the profiler, the desired keys already kept: a switch's reconcile at restart
    for _ in range(5):
        stats = [_as_stats(m) for m in wanted if hasattr(m, "table_id")]
        t = time.perf_counter()
        plan_switch(wanted, stats, now, {})
        again.append(time.perf_counter() - t)
    print(
        f"plan_switch over {len(stats)} flows read back, no profiler, 5 runs: "
        + " ".join(f"{x * 1000:.0f}" for x in again)
        + f" ms (median {sorted(again)[2] * 1000:.0f})"
    )
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


def _as_stats(msg):  # type: ignore[no-untyped-def]
    """A FlowMod dressed as the OFPFlowStats entry the switch would return for it."""
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    return parser.OFPFlowStats(
        table_id=msg.table_id,
        duration_sec=1,
        duration_nsec=0,
        priority=msg.priority,
        idle_timeout=msg.idle_timeout,
        hard_timeout=msg.hard_timeout,
        flags=msg.flags,
        cookie=msg.cookie,
        packet_count=0,
        byte_count=0,
        match=msg.match,
        instructions=msg.instructions,
    )


if __name__ == "__main__":
    main()
