"""The campus on real userspace OVS for one benchmark run: bridges, a work directory, cleanup."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.harness.ovs import Bridges, create_bridges, ofctl, ovs_up
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.lab.servechild import ServeChild
from viplanes.topologies.model import Topology


@dataclass
class Campus:
    topo: Topology
    bridges: Bridges
    workdir: Path

    def host_ip(self, name: str) -> str:
        return str(self.topo.host(name).iface.ip.ip)

    def attach(self, serve: ServeChild) -> None:
        """Point the bridges at the serve's controller and wait for them (no-op without one)."""
        if serve.dataplane == "memory":
            return
        self.bridges.connect(serve.of_port)
        self.wait_connected()

    def wait_connected(self, timeout_s: float = 30.0, settle_s: float = 1.0) -> float:
        """Wait until OVS reports every bridge connected; returns the seconds it took."""
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self.bridges.connected().values()):
                took = time.perf_counter() - t0
                time.sleep(settle_s)
                return took
            time.sleep(0.05)
        raise TimeoutError(f"bridges not connected after {timeout_s} s: {self.bridges.connected()}")

    def lane_flows(self, lane_id: int) -> dict[int, int]:
        """dpid -> number of flows carrying the lane's cookie, as OVS itself reports."""
        cookie = lane_cookie(lane_id)
        out = {}
        for dpid, name in self.bridges.names.items():
            text = ofctl("dump-flows", name, f"cookie={cookie:#x}/-1")
            out[dpid] = sum(1 for line in text.splitlines() if "cookie=" in line)
        return {d: n for d, n in out.items() if n}


@contextlib.contextmanager
def campus(name: str) -> Iterator[Campus]:
    """Bridges named ``vb<pid><n>s1``... for this run only; deleted (and the workdir) on exit."""
    from viplanes.api.app import default_topology

    ovs_up()
    topo = default_topology()
    prefix = f"vb{os.getpid() % 10000}{name[:1]}"
    workdir = Path(tempfile.mkdtemp(prefix=f"viplanes-bench-{name}-"))
    bridges = create_bridges(topo, prefix, None)
    try:
        yield Campus(topo, bridges, workdir)
    finally:
        bridges.delete()
        if not os.environ.get("BENCH_KEEP_WORKDIR"):
            shutil.rmtree(workdir, ignore_errors=True)
