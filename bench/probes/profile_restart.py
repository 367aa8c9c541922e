"""The controller's CPU for a restart, in-process: warm-up, then every switch's reconcile.

    .venv/bin/python -m bench.probes.profile_restart --access 128 --lanes 1000 [--profile]

A synthetic campus of ``--access`` access switches (``bench.harness.synth_campus``, one host each) whose
switches already hold every flow of ``--lanes`` lanes from 16 hosts: each switch's flow-stats
reply is built from the desired flows (the bytes we serialise, one entry per flow) and decoded by
``flowstats`` inside the timing, as the reader thread does. One thread, no sockets, no TLS: what
``bench.suite.switches`` measures on OVS minus the handshakes, the GIL's other threads and OVS's dump.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import struct
import time
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp

from bench.harness.synth_campus import host_ip
from bench.probes.parse_experiment import body_for
from bench.probes.profile_switches import runtime_for
from viplanes.controller.compile.flowkey import cached_key
from viplanes.controller.openflow import flowstats
from viplanes.domain.values import LaneSpec

ENTRIES_PER_REPLY = 300  # OVS splits a dump into multipart replies of up to 64 KiB


def lanes_for(access: int, n: int, now: float) -> list[LaneSpec]:
    hosts = min(16, access)
    return [
        LaneSpec(
            lane_id=i + 1,
            src_ip=host_ip(i % hosts * access // hosts, 0),
            dst_ip="203.0.113.10",
            protocol="tcp",
            dst_port=5000 + i,
            src_port=None,
            nat_ip=f"198.51.100.{200 + i % 8}",
            expires_at=now + 3600,
        )
        for i in range(n)
    ]


def replies(per_dpid: dict[int, list[Any]]) -> dict[int, list[bytes]]:
    """Each switch's flow-stats replies for these flows (one entry per distinct flow)."""
    out: dict[int, list[bytes]] = {}
    for dpid, msgs in per_dpid.items():
        flows = list({cached_key(m): m for m in msgs if type(m).__name__ == "OFPFlowMod"}.values())
        chunks = []
        for i in range(0, len(flows), ENTRIES_PER_REPLY):
            body = body_for(flows[i : i + ENTRIES_PER_REPLY])
            chunks.append(
                struct.pack("!BBHIHH4x", 4, ofp.OFPT_MULTIPART_REPLY, 16 + len(body), 1, ofp.OFPMP_FLOW, 0) + body
            )
        out[dpid] = chunks
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--access", type=int, default=128)
    ap.add_argument("--lanes", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="cProfile the reconciles")
    args = ap.parse_args(argv)
    now = time.time()
    lanes = lanes_for(args.access, args.lanes, now)
    before = runtime_for(args.access)  # the switches' side: what they hold
    before.source = lambda: lanes
    wire = replies(before.desired(now)[0])

    def flow_stats(dpid: int, *_args: Any, **_kwargs: Any) -> list[Any]:
        entries: list[Any] = []
        for raw in wire[dpid]:
            decoded = flowstats.decode_flow_stats_reply(raw)
            if decoded is None:
                raise SystemExit(f"dpid {dpid}: a reply the wire decoder leaves to os-ken")
            entries += decoded[0]
        return entries

    rt = runtime_for(args.access)  # the restarted controller
    rt.source = lambda: lanes
    rt.flow_stats = flow_stats  # type: ignore[method-assign]
    t0 = time.process_time()
    rt.warm_up()
    t1 = time.process_time()
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    kept = 0
    for dpid in sorted(wire):
        plan = rt.reconcile_switch(dpid)
        if plan is None or plan.adds or plan.deletes:
            raise SystemExit(f"dpid {dpid}: the restart would add or delete flows")
        kept += plan.kept + len(plan.refreshes)  # refreshes: the replies say 12 s old
    if prof:
        prof.disable()
    t2 = time.process_time()
    print(
        f"{len(wire)} switches, {args.lanes} lanes, {kept} flows kept: warm-up {t1 - t0:.2f} s "
        f"CPU, reconciles {t2 - t1:.2f} s CPU"
    )
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
