"""The floor, as its own process: ``python -m bench.harness.floor --port P --bridges a,b,c --n 200``.

Starts :mod:`bench.harness.floor_app` (os-ken keeps process-wide state, so each controller gets a fresh
process), points the given bridges at it, then for each lane: compile, send, one barrier per
switch in parallel, wait; then remove it the same way. Prints one JSON object on stdout.

The switches connect over the transport the systems of the run use (``--transport``, default
:func:`bench.harness.ovs.openflow_scheme`: TLS with the lab PKI unless ``BENCH_OPENFLOW=tcp``), so the
floor pays the same encryption. With ``--watched`` the parent times it on the peers' clock: after
each send the floor prints a ``SYNC`` line (send time, barrier time, the lane's cookie and flows
per switch) and waits for a line on stdin, which the parent writes once its
:class:`bench.harness.flowwatch.FlowWatch` has seen the flows (added, then deleted). The floor then paces
like a client that waits for "visible" before the next step, and no watcher thread competes with
the floor's own threads for its GIL.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from bench.harness.ovs import openflow_scheme, vsctl
from bench.harness.workload import flows, lane_spec

if TYPE_CHECKING:
    from viplanes.domain.values import LaneSpec
    from viplanes.topologies.model import Topology

SYNC = "SYNC "  # prefix of the lines a --watched floor prints and answers on stdin


def listener_security(transport: str) -> Any:
    """The floor's listener security for ``tcp`` or ``ssl`` (the lab PKI, as serve gets it)."""
    from viplanes.cli.openflow_options import listener_security as from_options

    if transport == "tcp":
        return from_options(None, True, [], None)
    from viplanes.lab.labpki import ensure_lab_pki

    lab = ensure_lab_pki()
    return from_options(lab.dir, False, [lab.vswitchd_pin], None)


def sync(kind: str, **fields: Any) -> None:
    """Tell the watching parent what was just sent and wait until it has seen it on the switches."""
    sys.stdout.write(SYNC + json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()
    if not sys.stdin.readline():
        raise SystemExit("the watching parent went away")


def measure(
    port: int,
    bridges: list[str],
    n: int,
    src_host: str,
    warmup: int,
    batched: bool = False,
    bundle: bool = False,
    transport: str = "tcp",
    watched: bool = False,
) -> dict:
    from viplanes.api.app import default_topology
    from viplanes.controller.compile.cookies import lane_cookie
    from viplanes.controller.compile.lane import compile_base
    from viplanes.controller.openflow.launcher import start_apps

    topo = default_topology()
    running = start_apps(["bench.harness.floor_app"], "127.0.0.1", port, of_security=listener_security(transport))
    app = running.app("FloorApp")
    app.base_flows = compile_base(topo)
    app.batched = batched
    app.bundle = bundle
    for name in bridges:
        vsctl("set-controller", name, f"{transport}:127.0.0.1:{port}")
    name_of = {int(vsctl("get", "bridge", b, "other-config:datapath-id").strip().strip('"'), 16): b for b in bridges}
    dpids = {sw.dpid for sw in topo.switches}
    if not app.wait_for(dpids, 20.0):
        raise RuntimeError(f"switches {sorted(dpids - set(app.datapaths))} never connected")
    time.sleep(0.5)  # let the connect-time chatter (port status, base flows) settle

    latencies, compile_s, removal_s, failures = [], [], [], 0
    for i, flow in enumerate(flows(n + warmup)):
        spec = lane_spec(topo, 100_000 + i, src_host, flow)
        t0 = time.perf_counter()
        ofmsgs = full_install(spec, topo)
        t1 = time.perf_counter()
        ok = app.send_with_barriers(ofmsgs)
        t2 = time.perf_counter()
        # the lane's own flows (its cookie) only: the watcher looks for that cookie, and a border
        # lane's new-connection meter is no flow
        counts = lane_flow_counts(spec, ofmsgs)
        if watched:
            sync("add", i=i, cookie=lane_cookie(spec.lane_id), counts=counts, sent=t0, barriers=t2)
            t2 = time.perf_counter()
        app.send_with_barriers(full_removal(spec, topo, ofmsgs.keys()))
        t3 = time.perf_counter()
        if watched:
            sync("delete", i=i, cookie=lane_cookie(spec.lane_id), counts=counts, sent=t2, barriers=t3)
        if i < warmup:
            continue
        failures += not ok
        latencies.append(t2 - t0)
        compile_s.append(t1 - t0)
        removal_s.append(t3 - t2)
    if bundle:  # the lane's flows must really be on the switches after a committed bundle
        check_spec = lane_spec(topo, 99_999, src_host, next(flows(1)))
        check = full_install(check_spec, topo)
        app.send_with_barriers(check)
        present = {dpid: _count_cookie(name_of[dpid], 99_999) for dpid in check}
        app.send_with_barriers(full_removal(check_spec, topo, check.keys()))
    else:
        present = None
    return {
        "transport": transport,
        "bundle_flows_present": present,
        "latency_s": latencies,
        "compile_s": compile_s,
        "removal_s": removal_s,
        "failures": failures,
        "errors": app.errors[:20],
        "switches_per_lane": len(ofmsgs),
        "flows_per_lane": sum(len(m) for m in ofmsgs.values()),
    }


def full_install(spec: LaneSpec, topo: Topology) -> dict[int, list[Any]]:
    """What ``serve`` sends for a lane no live lane shares an address with: its compiled flows and
    meter, then the shared flows of its addresses (the border's ARP reply and related-ICMP flows
    for the lane address, ICMP transit at the other switches of the path). The floor sent the
    compiled lane alone, 11 messages of the 16 an activation sends in the lab."""
    from viplanes.controller.compile.lane import compile_lane
    from viplanes.controller.compile.shared import compile_shared

    msgs = compile_lane(spec, topo, time.time())
    for dpid, extra in compile_shared(topo, [spec]).items():
        msgs.setdefault(dpid, []).extend(extra)
    return msgs


def lane_flow_counts(spec: LaneSpec, msgs: dict[int, list[Any]]) -> dict[int, int]:
    """Per switch, the flow-mods under the lane's own cookie: what a flow monitor reports for it."""
    from os_ken.ofproto.ofproto_v1_3_parser import OFPFlowMod

    from viplanes.controller.compile.cookies import lane_cookie

    cookie = lane_cookie(spec.lane_id)
    return {d: sum(isinstance(x, OFPFlowMod) and x.cookie == cookie for x in m) for d, m in msgs.items()}


def full_removal(spec: LaneSpec, topo: Topology, dpids: Iterable[int]) -> dict[int, list[Any]]:
    """What ``serve`` sends to take off a lane no live lane shares an address with: its flows by
    cookie, the border's new-connection meter, and the shared flows of its addresses with the
    lane address's conntrack zone flushed (``full_install``'s counterpart). The floor's lanes never
    overlap, so every address is the last lane's."""
    from viplanes.controller.compile.lane import compile_lane_removal, newconn_border
    from viplanes.controller.compile.shared import compile_shared_removal, lane_addresses

    by_dpid: dict[int, set[str]] = {}
    for address, per_dpid in lane_addresses(spec, topo).items():
        for dpid in per_dpid:
            by_dpid.setdefault(dpid, set()).add(address)
    msgs = compile_lane_removal(spec.lane_id, dpids, with_meter=False, newconn_at=newconn_border(topo))
    for dpid, extra in compile_shared_removal(by_dpid, topo).items():
        msgs.setdefault(dpid, []).extend(extra)
    return msgs


def _count_cookie(bridge: str, lane_id: int) -> int:
    from bench.harness.ovs import ofctl
    from viplanes.controller.compile.cookies import lane_cookie

    text = ofctl("dump-flows", bridge, f"cookie={lane_cookie(lane_id):#x}/-1")
    return sum(1 for line in text.splitlines() if "cookie=" in line)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--bridges", required=True, help="comma-separated bridge names")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--src", default="desktop", help="source host of the lanes")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument(
        "--batched", action="store_true", help="one socket write per switch instead of one send_msg per message"
    )
    ap.add_argument(
        "--bundle", action="store_true", help="each switch's messages in one atomic ONF bundle (commit, then barrier)"
    )
    ap.add_argument(
        "--transport",
        choices=("tcp", "ssl"),
        default=openflow_scheme(),
        help="OpenFlow transport (default: BENCH_OPENFLOW, else ssl with the lab PKI)",
    )
    ap.add_argument(
        "--watched", action="store_true", help="after each send print a SYNC line and wait for a line on stdin"
    )
    args = ap.parse_args(argv)
    out = measure(
        args.port,
        args.bridges.split(","),
        args.n,
        args.src,
        args.warmup,
        args.batched,
        args.bundle,
        args.transport,
        args.watched,
    )
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # os-ken's native threads do not all stop on close; the process is done


if __name__ == "__main__":
    main()
