"""The paper's section 4 in the lab: placements x directions x paths x tools x parameters.

`plan()` is pure: it turns a `Sweep` into the ordered list of runs. `Runner` executes them on a
running `Session` (lab + cloud services + the VIP Lanes service) and appends one JSON line per
run. Lanes are requested through the REST API with the researcher's token, once per placement,
and released when that placement's lane runs are done.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from viplanes.lifecycle import stop_process
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology

from .datasets import SHAPES, Dataset, make_dataset, same_content, seed
from .estimate import NO_LANE, estimate_s, wan_record
from .filetools import FILE_TOOLS, HTTP_PORT, MULTI_TOOLS, SSH_PORT, run_file_tool
from .measure import Measurement, run_iperf3, run_rclone
from .net import LabNetwork, build_network, clean_stale
from .services import IPERF_PORT, S3_PORT, CloudServices, rclone_binary, start_cloud_services
from .stack import Stack, StackError, start_controller_only, start_stack

PLACEMENTS = ("desktop", "server", "dtn")
DIRECTIONS = ("upload", "download")
PATHS = ("default", "lane")
TOOLS = ("iperf3", "rclone")
ALL_TOOLS = TOOLS + FILE_TOOLS  # seed 003's tools download one file ("one" dataset) only


@dataclass(frozen=True)
class Sweep:
    """Which runs to make. The defaults are a sensible subset; the paper's grid is much larger."""

    placements: tuple[str, ...] = PLACEMENTS
    directions: tuple[str, ...] = DIRECTIONS
    paths: tuple[str, ...] = PATHS
    tools: tuple[str, ...] = TOOLS
    streams: tuple[int, ...] = (1, 4)  # iperf3 -P
    transfers: tuple[int, ...] = (4, 16)  # rclone --transfers
    chunks_mb: tuple[int, ...] = (8,)  # rclone --s3-chunk-size (S3's minimum part is 5 MiB)
    datasets: tuple[str, ...] = ("split10",)
    size_mb: int = 32
    seconds: float = 5.0  # iperf3 -t
    reps: int = 1
    upload_concurrency: int | None = None  # rclone --s3-upload-concurrency (None: rclone's 4)
    dataset_mb: tuple[tuple[str, int], ...] = ()  # per-dataset sizes overriding size_mb

    def size_of(self, dataset: str | None) -> int:
        """The size in MiB of one dataset of this sweep."""
        return dict(self.dataset_mb).get(dataset or "", self.size_mb)

    def check(self) -> None:
        """ValueError with one readable line for anything outside the known grid."""
        for name, values, known in (
            ("placement", self.placements, PLACEMENTS),
            ("direction", self.directions, DIRECTIONS),
            ("path", self.paths, PATHS),
            ("tool", self.tools, ALL_TOOLS),
            ("dataset", self.datasets, tuple(SHAPES)),
        ):
            bad = [v for v in values if v not in known]
            if bad or not values:
                raise ValueError(f"{name}: {', '.join(bad) or 'none given'} (choose from {', '.join(known)})")
        for name, nums in (("streams", self.streams), ("transfers", self.transfers), ("chunk size", self.chunks_mb)):
            if not nums or any(n < 1 or n > 128 for n in nums):
                raise ValueError(f"{name} must be between 1 and 128")
        if any(c < 5 for c in self.chunks_mb):
            raise ValueError("chunk size must be at least 5 MiB (the S3 minimum part size)")
        sizes = [self.size_mb, *(mb for _, mb in self.dataset_mb)]
        if not all(1 <= mb <= 4096 for mb in sizes) or not 1 <= self.reps <= 100:
            raise ValueError("size must be 1-4096 MiB and repetitions 1-100")
        if not 1 <= self.seconds <= 600:
            raise ValueError("iperf3 duration must be 1-600 s")


@dataclass(frozen=True)
class RunSpec:
    placement: str
    direction: str
    path: str
    tool: str
    parallel: int  # iperf3 streams or rclone transfers
    rep: int
    chunk_mb: int | None = None
    dataset: str | None = None
    seconds: float | None = None
    upload_concurrency: int | None = None
    series: str | None = None  # which sweep of `lab run --paper` made it (streams, transfers...)


def plan(sweep: Sweep) -> list[RunSpec]:
    """Every run of the sweep, grouped by placement then path (one lane per group)."""
    runs = []
    for placement in sweep.placements:
        for path in sweep.paths:
            if path == "lane" and placement in NO_LANE:
                continue
            for rep in range(1, sweep.reps + 1):
                for direction in sweep.directions:
                    if "iperf3" in sweep.tools:
                        runs += [
                            RunSpec(placement, direction, path, "iperf3", p, rep, seconds=sweep.seconds)
                            for p in sweep.streams
                        ]
                    if "rclone" in sweep.tools:
                        runs += [
                            RunSpec(
                                placement,
                                direction,
                                path,
                                "rclone",
                                t,
                                rep,
                                chunk_mb=c,
                                dataset=d,
                                upload_concurrency=sweep.upload_concurrency,
                            )
                            for d in sweep.datasets
                            for t in sweep.transfers
                            for c in sweep.chunks_mb
                        ]
                    if direction == "download":  # seed 003 fetches a file from the cloud
                        runs += [
                            RunSpec(placement, direction, path, tool, t, rep, dataset="one")
                            for tool in FILE_TOOLS
                            if tool in sweep.tools
                            for t in (sweep.transfers if tool in MULTI_TOOLS else (1,))
                        ]
    return runs


def needed_shapes(sweep: Sweep) -> tuple[str, ...]:
    """The datasets a sweep's runs read: rclone's, plus the one file seed 003's tools fetch."""
    shapes = sweep.datasets if "rclone" in sweep.tools else ()
    if any(t in FILE_TOOLS for t in sweep.tools) and "one" not in shapes:
        shapes += ("one",)
    return shapes


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


def _left_s(lane: dict[str, Any]) -> float:
    """Seconds until a lane expires (infinite if the API did not say)."""
    try:
        expires = datetime.fromisoformat(str(lane["expires_at"]))
    except (KeyError, ValueError):
        return float("inf")
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return (expires - datetime.now(UTC)).total_seconds()


@dataclass
class Runner:
    """Runs specs on a session and appends one JSON line per run to ``results``."""

    sess: Session
    results: Path
    on_result: Callable[[RunSpec, dict[str, Any]], None] | None = None
    on_lane: Callable[[str, dict[str, Any]], None] | None = None  # ("granted"|"released", lane)
    lanes: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    def run_all(self, specs: list[RunSpec], lane_duration_s: int = 1800) -> list[dict[str, Any]]:
        records = []
        try:
            for spec in specs:
                self._lanes_for(spec, specs, lane_duration_s)
                record = self.run_one(spec)
                records.append(record)
                with self.results.open("a") as out:
                    out.write(json.dumps(record, sort_keys=True) + "\n")
                if self.on_result:
                    self.on_result(spec, record)
        finally:
            self.release_lanes()
        return records

    def _lanes_for(self, spec: RunSpec, specs: list[RunSpec], duration_s: int) -> None:
        """Hold lanes exactly while the current placement runs on the lane path."""
        host = self.sess.placement_host(spec.placement)
        wanted = set()
        if spec.path == "lane":  # every port this placement's lane runs need, asked for at once
            wanted = {(host, self._port(s.tool)) for s in specs if s.path == "lane" and s.placement == spec.placement}
        margin = estimate_s(spec, self.sess.size_of(spec.dataset), wan=self.sess.topology.wan) + 60
        for key in [k for k in self.lanes if k not in wanted or _left_s(self.lanes[k]) < margin]:
            self._release(self.lanes.pop(key))  # not needed any more, or about to expire
        if not wanted:
            return
        stack = self.sess.stack
        if stack is None:
            raise StackError("lane runs need viplanes serve (it did not start)")
        for key in sorted(wanted - set(self.lanes)):
            src_ip = str(self.sess.topology.host(key[0]).iface.ip.ip)
            self.lanes[key] = stack.request_lane(
                src_ip,
                self.sess.services.ip,
                key[1],
                duration_s,
                purpose=f"lab: {spec.placement} to cloud port {key[1]}",
            )
            if self.on_lane:
                self.on_lane("granted", self.lanes[key])

    def _port(self, tool: str) -> int:
        if tool in FILE_TOOLS:
            return SSH_PORT if tool in ("scp", "rsync") else HTTP_PORT
        return self.sess.services.iperf_port if tool == "iperf3" else self.sess.services.s3_port

    def release_lanes(self) -> None:
        while self.lanes:
            self._release(self.lanes.popitem()[1])

    def _release(self, lane: dict[str, Any]) -> None:
        if self.sess.stack is not None:
            self.sess.stack.release_lane(int(lane["id"]))
            if self.on_lane:
                self.on_lane("released", lane)

    def run_one(self, spec: RunSpec) -> dict[str, Any]:
        host_name = self.sess.placement_host(spec.placement)
        node = self.sess.lab.host(host_name)
        svc = self.sess.services
        download = spec.direction == "download"
        started = time.time()
        intact = None
        ds = None
        if spec.tool == "iperf3":
            m = run_iperf3(node, svc.ip, svc.iperf_port, spec.parallel, spec.seconds or 5, download)
        elif spec.tool in FILE_TOOLS:
            ds = self.sess.datasets["one"]
            m, intact = self._file_tool(node, spec, ds)
        else:
            ds = self.sess.datasets[spec.dataset or "split10"]
            m, intact = self._rclone(node, spec, ds, download)
        wan_mbps = svc.per_connection_mbps
        lane = self.lanes.get((host_name, self._port(spec.tool))) if spec.path == "lane" else None
        return {
            **{k: v for k, v in asdict(spec).items()},
            "host": host_name,
            "lab_run": self.sess.lab.run_id,
            "timestamp": datetime.fromtimestamp(started, UTC).isoformat(),
            "bytes": m.bytes,
            "seconds": round(m.seconds, 4),
            "mbps": round(m.mbps, 3),
            "ok": m.ok and intact is not False,
            "error": m.error if m.ok or intact is None else (m.error or "copy differs from the source"),
            "intact": intact,
            "dataset_files": ds.files if ds else None,
            "dataset_bytes": ds.bytes if ds else None,
            "size_mb": self.sess.size_of(spec.dataset),
            "wan_mbps": wan_mbps,
            "wan": wan_record(self.sess.topology.wan),
            "lane_id": lane["id"] if lane else None,
            "lane_nat_ip": lane.get("nat_ip") if lane else None,
            **{f"x_{k}": v for k, v in m.extra.items()},
        }

    def _file_tool(self, node: Any, spec: RunSpec, ds: Dataset) -> tuple[Measurement, bool | None]:
        svc = self.sess.services
        if svc.files is None:
            raise StackError(f"{spec.tool} runs need the cloud's sshd and HTTP server (session(file_tools=True))")
        remote = svc.data_dir / svc.bucket / "datasets" / f"{self.sess.size_of('one')}M" / ds.name
        local = self.sess.work_dir / "downloads" / uuid.uuid4().hex[:12]
        m = run_file_tool(node, spec.tool, svc.files, next(remote.iterdir()), local, spec.parallel)
        intact = same_content(ds.path, local) if m.ok else None
        shutil.rmtree(local, ignore_errors=True)
        return m, intact

    def _rclone(self, node: Any, spec: RunSpec, ds: Dataset, download: bool) -> tuple[Measurement, bool | None]:
        svc = self.sess.services
        tag = uuid.uuid4().hex[:12]
        if download:
            src = f"cloud:{svc.bucket}/datasets/{self.sess.size_of(spec.dataset)}M/{ds.name}"
            local = self.sess.work_dir / "downloads" / tag
            m = run_rclone(
                node,
                svc.rclone_env(),
                rclone_binary(),
                src,
                str(local),
                spec.parallel,
                spec.chunk_mb or 8,
                spec.upload_concurrency,
                multi_thread_streams=spec.parallel if spec.dataset == "one" else None,  # S3 multipart GETs
            )
            copy, source = local, ds.path
        else:
            dst = f"cloud:{svc.bucket}/up/{tag}"
            m = run_rclone(
                node,
                svc.rclone_env(),
                rclone_binary(),
                str(ds.path),
                dst,
                spec.parallel,
                spec.chunk_mb or 8,
                spec.upload_concurrency,
            )
            copy, source = svc.data_dir / svc.bucket / "up" / tag, ds.path
        intact = same_content(source, copy) if m.ok else None
        shutil.rmtree(copy, ignore_errors=True)
        return m, intact
