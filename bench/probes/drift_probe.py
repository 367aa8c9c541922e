"""What the drift check (controller/runtime/drift.py) costs the controller per round, at N lanes.

    .venv/bin/python -m bench.probes.drift_probe --lanes 0 2000

A runtime carrying N DTN lanes (as after activations: their flow counts known) runs rounds of
``check_drift`` against switches that answer at once, so the numbers are the controller's own
work: computing the expected range of every switch and one aggregate request per switch. The
switch side (ovs-vswitchd counting its flows) is measured separately with ``ovs-ofctl
dump-aggregate`` (docs/faults.md).
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace
from typing import Any


def run(lanes: int, rounds: int) -> dict[str, float]:
    from bench.harness.workload import flows, lane_spec
    from viplanes.api.app import default_topology
    from viplanes.controller.compile import lane as compiler
    from viplanes.controller.runtime.drift import flow_mod_counts
    from viplanes.controller.runtime.lane_runtime import LaneRuntime

    topo = default_topology()
    now = time.time()
    rt = LaneRuntime(topo, clock=time.time)
    specs = [lane_spec(topo, i + 1, "dtn", f, now=now) for i, f in enumerate(flows(lanes))]
    expected: dict[int, int] = dict(flow_mod_counts(compiler.compile_base(topo)))
    for spec in specs:  # what activate() records
        per_dpid = compiler.compile_lane(spec, topo, now)
        rt.note_lane_flows(spec, per_dpid)
        rt.lanes[spec.lane_id] = spec
        for dpid, n in flow_mod_counts(per_dpid).items():
            expected[dpid] = expected.get(dpid, 0) + n
    with rt.state.compile_lock:
        for dpid, msgs in rt.state.flows.shared(specs).items():  # type: ignore[union-attr]
            expected[dpid] += len(msgs)

    def send(dpid: int, msgs: list[Any]) -> bool:  # a switch that answers at once, correctly
        for msg in msgs:
            rt.on_flow_stats(dpid, msg.xid, [SimpleNamespace(flow_count=expected[dpid])], False)
        return True

    rt.send = send
    rt.connected.update(expected)
    rt.reconciled.update({d: None for d in expected})  # type: ignore[misc]
    rt.reconcile_switch = lambda dpid, timeout_s=10.0: (_ for _ in ()).throw(  # type: ignore[method-assign]
        AssertionError(f"drift check reconciled dpid {dpid}: the count is off")
    )
    rt.check_drift()  # warm
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        assert rt.check_drift() == []
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "lanes": lanes,
        "flows": sum(expected.values()),
        "cpu_ms_per_round": cpu / rounds * 1e3,
        "wall_ms_per_round": wall / rounds * 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lanes", type=int, nargs="+", default=[0, 2000])
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args(argv)
    from viplanes.controller.runtime.drift import DRIFT_PERIOD_S

    for n in args.lanes:
        r = run(n, args.rounds)
        print(
            f"{r['lanes']:>6} lanes, {r['flows']:>6} app flows on 4 switches: "
            f"{r['cpu_ms_per_round']:.2f} ms CPU per round ({r['wall_ms_per_round']:.2f} ms wall); "
            f"every {DRIFT_PERIOD_S:g} s = {r['cpu_ms_per_round'] / DRIFT_PERIOD_S / 10:.3f} % of a core"
        )


if __name__ == "__main__":
    main()
