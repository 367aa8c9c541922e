"""The controller's own CPU per activation+release against the number of switches, in-process.

    .venv/bin/python -m bench.probes.profile_switches --sizes 4,32,128 --n 2000

A ``LaneRuntime`` on a synthetic campus (``bench/harness/synth_campus.py``) whose switches answer every
barrier at once (no OVS, no sockets, no other process): what is left is the controller's own
work per lane, which must not depend on the switches a lane does not cross. Sizes are measured
in alternation, several rounds, so machine noise hits all of them alike; prints CPU time per
cycle (process time, not wall time) per size and the growth from the first to the last.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench.harness.synth_campus import campus_data, host_ip
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import parse_topology


class InstantSwitches:
    """A ``send`` that accepts every message and answers barriers at once."""

    def __init__(self) -> None:
        self.runtime: LaneRuntime | None = None

    def __call__(self, dpid: int, ofmsgs: list[Any]) -> bool:
        assert self.runtime is not None
        for msg in ofmsgs:
            if type(msg).__name__ == "OFPBarrierRequest":
                self.runtime.on_barrier_reply(dpid, msg.xid)
        return True


def runtime_for(access: int) -> LaneRuntime:
    topo = parse_topology(campus_data(access, hosts_per_access=1))
    send = InstantSwitches()
    rt = LaneRuntime(topo, send, spawn=lambda fn: fn())
    send.runtime = rt
    rt.connected.update(sw.dpid for sw in topo.switches)
    return rt


def cpu_per_cycle_ms(rt: LaneRuntime, access: int, n: int, first_id: int) -> float:
    src = host_ip(access - 1, 0)
    t0 = time.process_time()
    for i in range(n):
        lane = LaneSpec(
            lane_id=first_id + i,
            src_ip=src,
            dst_ip="203.0.113.10",
            protocol="tcp",
            dst_port=5000 + i % 1000,
            src_port=None,
            nat_ip="198.51.100.200",
            expires_at=time.time() + 3600,
        )
        if not rt.activate(lane).ok:
            raise RuntimeError(f"lane {lane.lane_id} not activated on {access} access switches")
        rt.deactivate(lane.lane_id)
    return (time.process_time() - t0) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4,32,128")
    ap.add_argument("--n", type=int, default=2000, help="cycles per size and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    runtimes = {n: runtime_for(n) for n in sizes}
    for n, rt in runtimes.items():
        cpu_per_cycle_ms(rt, n, 200, 1)  # warm-up: paths, caches
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(args.rounds):
        for n in sizes:
            samples[n].append(cpu_per_cycle_ms(runtimes[n], n, args.n, 1000 + r * args.n))
    best = {n: min(v) for n, v in samples.items()}
    growth = (best[sizes[-1]] - best[sizes[0]]) / best[sizes[0]] * 100
    print(
        json.dumps(
            {
                "cpu_ms_per_cycle_best": best,
                "samples": samples,
                f"growth_{sizes[0]}_to_{sizes[-1]}_pct": round(growth, 1),
                "load": os.getloadavg(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
