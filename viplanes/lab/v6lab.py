"""The v6 series (`v6series.py`) on its own dual-stack lab: root, OVS and Mininet."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from viplanes.topologies.loader import load_topology

from .measure import run_iperf3
from .net import build_network, clean_stale
from .services import IPERF_PORT, _spawn, _wait_listening
from .stack import StackError, start_stack
from .v6series import V6_PARALLEL, V6_PLACEMENT, V6_SECONDS, V6Run, v6_plan, v6_record

V6_TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "campus-dualstack.yaml"


def run_v6_series(
    work_dir: Path,
    results: Path,
    on_result: Callable[[V6Run, dict[str, Any]], None] | None = None,
    topology_path: Path = V6_TOPOLOGY,
) -> list[dict[str, Any]]:
    """Run the series on its own lab; one JSON line per run appended to ``results``.

    Needs root and OVS. The researcher's grant covers the desktop's two addresses to the cloud's
    two, iperf3's port only."""
    topo = load_topology(topology_path)
    desktop = next(h for h in topo.hosts if h.role == V6_PLACEMENT)
    cloud = next(h for h in topo.hosts if h.role == "cloud")
    if desktop.ip6 is None or cloud.ip6 is None:
        raise ValueError(f"{topology_path}: the desktop and the cloud need an ip6 for the v6 series")
    src = {4: str(desktop.iface.ip.ip), 6: str(desktop.ip6)}
    dst = {4: str(cloud.iface.ip.ip), 6: str(cloud.ip6)}
    clean_stale()
    stack = start_stack(
        topology_path,
        work_dir / "v6" / "service",
        [f"{src[4]}/32", f"{src[6]}/128"],
        [f"{dst[4]}/32", f"{dst[6]}/128"],
        [str(IPERF_PORT)],
    )
    records = []
    try:
        with build_network(topo, *stack.openflow) as lab:
            logs = work_dir / "v6" / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            cloud_node = lab.host(cloud.name)
            # no -B: the server takes both families on the one port
            server = _spawn(lab, cloud_node, ["iperf3", "-s", "-p", str(IPERF_PORT)], logs / "iperf3-server.log")
            _wait_listening(cloud_node, "*", IPERF_PORT, [server])
            node = lab.host(desktop.name)
            _wait_v6(node, dst[6])
            for run in v6_plan():
                lane = None
                if run.path == "lane":
                    lane = stack.request_lane(
                        src[run.family], dst[run.family], IPERF_PORT, 300, purpose="lab: v6 series"
                    )
                started = time.time()
                m = run_iperf3(node, dst[run.family], IPERF_PORT, V6_PARALLEL, V6_SECONDS, download=False)
                if lane is not None:
                    stack.release_lane(int(lane["id"]))
                record = v6_record(run, m, started, lab.run_id, topo.name, lane)
                records.append(record)
                with results.open("a") as out:
                    out.write(json.dumps(record, sort_keys=True) + "\n")
                if on_result:
                    on_result(run, record)
    finally:
        stack.stop()
    return records


def _wait_v6(node: Any, dst6: str, timeout_s: float = 20.0) -> None:
    """Until the desktop's v6 reaches the cloud (the switches connect, neighbours resolve)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if " 0% packet loss" in node.cmd(f"ping -6 -c 1 -W 1 {dst6}"):
            return
        time.sleep(0.5)
    raise StackError(f"the desktop cannot reach {dst6} over IPv6 within {timeout_s:.0f}s")
