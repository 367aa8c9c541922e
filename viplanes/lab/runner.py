"""Runs a sweep's `RunSpec`s on a `Session` and appends one JSON line per run.

Lanes are requested through the REST API with the researcher's token, once per placement and
port, held while that placement's lane runs last (a fresh one asked for before one would expire) and released
when they are done, or when anything fails.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .datasets import Dataset, same_content
from .estimate import estimate_s, wan_record
from .filetools import FILE_TOOLS, HTTP_PORT, SSH_PORT, run_file_tool
from .measure import Measurement, run_iperf3, run_rclone
from .services import rclone_binary
from .session import Session
from .stack import StackError
from .startup import PROBE_DIR, PROBE_NAME, net_mbps
from .sweep import RunSpec


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
        if (spec.series == "tools" or spec.tool in FILE_TOOLS) and m.ok:  # seed 003's downloads
            startup = self._startup_s(node, spec)
            if startup is not None:
                net = {"startup_s": round(startup, 3), "mbps_net": round(net_mbps(m.bytes, m.seconds, startup), 3)}
                m = replace(m, extra={**m.extra, **net})
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

    def _probe_dir(self) -> Path:
        """The 1-byte file every tool fetches for its start-up (written once, on the cloud's disk)."""
        where = self.sess.services.data_dir / self.sess.services.bucket / PROBE_DIR
        if not (where / PROBE_NAME).exists():
            where.mkdir(parents=True, exist_ok=True)
            (where / PROBE_NAME).write_bytes(b"p")
        return where

    def _startup_s(self, node: Any, spec: RunSpec) -> float | None:
        """Wall seconds ``spec``'s tool takes for the probe file, with the run's options."""
        svc = self.sess.services
        probe = self._probe_dir()
        local = self.sess.work_dir / "downloads" / uuid.uuid4().hex[:12]
        try:
            if spec.tool in FILE_TOOLS:
                if svc.files is None:
                    return None
                m = run_file_tool(node, spec.tool, svc.files, probe / PROBE_NAME, local, spec.parallel)
            else:
                src = f"cloud:{svc.bucket}/{PROBE_DIR}"
                chunk = spec.chunk_mb or 8
                streams = spec.parallel if spec.dataset == "one" else None
                env, binary = svc.rclone_env(), rclone_binary()
                m = run_rclone(node, env, binary, src, str(local), spec.parallel, chunk, multi_thread_streams=streams)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        return m.seconds if m.ok else None

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
