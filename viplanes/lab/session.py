"""The lab a sweep runs on: the network, the cloud services, the VIP Lanes service, the datasets.

`session()` builds all of it from a topology YAML and tears it down on exit, whatever happens;
`Session` is what a `Runner` (`runner.py`) needs of it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from viplanes.lifecycle import stop_process
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

from .datasets import Dataset, make_dataset, seed
from .filetools import HTTP_PORT, SSH_PORT
from .net import LabNetwork, build_network, clean_stale
from .services import IPERF_PORT, S3_PORT, CloudServices, start_cloud_services
from .stack import Stack, StackError, start_controller_only, start_stack


@dataclass
class Session:
    """Everything a run needs: the network, the cloud services, the service, the datasets."""

    topology: Topology
    lab: LabNetwork
    services: CloudServices
    stack: Stack | None  # None: default path only (no service)
    datasets: dict[str, Dataset]
    work_dir: Path
    size_mb: int
    dataset_mb: dict[str, int] = field(default_factory=dict)  # sizes differing from size_mb

    def size_of(self, dataset: str | None) -> int:
        return self.dataset_mb.get(dataset or "", self.size_mb)

    def placement_host(self, placement: str) -> str:
        for host in self.topology.hosts:
            if host.role == placement:
                return host.name
        raise ValueError(f"topology {self.topology.name} has no {placement} host")


def lab_grant_prefixes(topo: Topology) -> tuple[list[str], list[str]]:
    """The researcher's grant: every campus host to the cloud host(s)."""
    src = [f"{h.iface.ip.ip}/32" for h in topo.hosts if h.role != "cloud"]
    dst = [f"{h.iface.ip.ip}/32" for h in topo.hosts if h.role == "cloud"]
    return src, dst


@contextmanager
def session(
    topology_path: Path,
    work_dir: Path,
    shapes: tuple[str, ...],
    size_mb: int,
    need_lanes: bool = True,
    shape_links: bool = True,
    warn: Callable[[str], None] = print,
    external: Stack | None = None,
    dataset_mb: dict[str, int] | None = None,
    file_tools: bool = False,
) -> Iterator[Session]:
    """Build the whole lab and the service around it; everything is torn down on exit.

    Without ``need_lanes``, a service that cannot start (no embedded controller yet) is replaced
    by the minimal controller launcher, which forwards the default path only. ``external`` is a
    `viplanes serve` someone already runs (its API, its OpenFlow address, a researcher token).
    ``file_tools`` also starts seed 003's sshd and HTTP server on the cloud host.
    """
    topo = load_topology(topology_path)
    clean_stale()
    work_dir.mkdir(parents=True, exist_ok=True)
    sizes = {s: (dataset_mb or {}).get(s, size_mb) for s in shapes}
    datasets = {s: make_dataset(work_dir / "datasets", s, sizes[s]) for s in shapes}
    src, dst = lab_grant_prefixes(topo)
    stack: Stack | None = None
    controller = None
    try:
        try:
            if external is not None:
                stack = external
            else:
                ports = [IPERF_PORT, S3_PORT] + ([SSH_PORT, HTTP_PORT] if file_tools else [])
                stack = start_stack(topology_path, work_dir / "service", src, dst, [str(p) for p in ports])
            openflow = stack.openflow
        except StackError as exc:
            if need_lanes:
                raise
            warn(f"viplanes serve unavailable ({exc}); default path only, minimal controller")
            controller, openflow = start_controller_only(work_dir)
        with build_network(topo, *openflow, shape=shape_links) as lab:
            s3_dir = work_dir / "cloud" / "s3"
            shutil.rmtree(s3_dir, ignore_errors=True)
            for shape, ds in datasets.items():
                seed(ds, s3_dir / "lab" / "datasets" / f"{sizes[shape]}M" / ds.name)
            services = start_cloud_services(lab, work_dir / "cloud", file_tools=file_tools)
            yield Session(
                topo,
                lab,
                services,
                stack,
                datasets,
                work_dir,
                size_mb,
                {s: mb for s, mb in sizes.items() if mb != size_mb},
            )
    finally:
        if stack is not None:
            stack.stop()
        stop_process(controller)
