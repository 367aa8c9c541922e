"""A real ``viplanes serve`` child process for benchmarks, and a lean keep-alive API client.

The client is ``http.client`` on one persistent connection per thread: ``requests`` costs about a
millisecond of client CPU per call, which on two cores would be charged to the server's numbers.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.ovs import serve_security_args
from viplanes.lab.ports import free_port as free_port
from viplanes.lab.servechild import ServeChild

REPO = Path(__file__).resolve().parents[2]


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (from /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def vswitchd_pid() -> int | None:
    """The ovs-vswitchd the bench's ovs-vsctl talks to ($OVS_RUNDIR: a private one, see pinned_ovs)."""
    rundir = os.environ.get("OVS_RUNDIR") or "/var/run/openvswitch"
    try:
        return int(Path(rundir, "ovs-vswitchd.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def cpu_detail(pid: int) -> dict[str, float]:
    """User and system CPU seconds, and voluntary/involuntary context switches summed over every
    thread (a process's own status counts its main thread only)."""
    out = {"user_s": 0.0, "sys_s": 0.0, "voluntary_cs": 0.0, "involuntary_cs": 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out["user_s"], out["sys_s"] = int(fields[11]) / tick, int(fields[12]) / tick
        for task in Path(f"/proc/{pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    out["voluntary_cs"] += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    out["involuntary_cs"] += int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return out


class CpuMeter:
    """CPU seconds used between ``__init__`` and ``stop`` by serve, ovs-vswitchd and this process;
    for serve also user vs system time and context switches (``serve_detail``)."""

    def __init__(self, serve_pid: int | None) -> None:
        self.pids = {"serve": serve_pid, "ovs-vswitchd": vswitchd_pid(), "bench clients": os.getpid()}
        self.start = {k: cpu_seconds(p) if p else None for k, p in self.pids.items()}
        self.detail0 = cpu_detail(serve_pid) if serve_pid else None
        self.t0 = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.t0
        out: dict[str, Any] = {"wall_s": wall}
        for k, pid in self.pids.items():
            now = cpu_seconds(pid) if pid else None
            before = self.start[k]
            out[f"{k}_cpu_s"] = None if now is None or before is None else now - before
        serve_pid = self.pids["serve"]
        if serve_pid and self.detail0 is not None:
            after = cpu_detail(serve_pid)
            out["serve_detail"] = {k: after[k] - self.detail0[k] for k in after}
        return out


class ApiError(RuntimeError):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class Api:
    """One keep-alive connection; not thread-safe (give each client thread its own)."""

    def __init__(self, port: int, token: str | None = None, timeout_s: float = 60.0) -> None:
        self.port, self.token, self.timeout_s = port, token, timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body) if body is not None else None
        for attempt in (1, 2):  # one retry on a connection the server closed while idle
            if self._conn is None:
                self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout_s)
            try:
                self._conn.request(method, path, body=data, headers=headers)
                resp = self._conn.getresponse()
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, out = self.call(method, path, body)
        if status >= 400:
            raise ApiError(status, out)
        return out

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def bench_serve(
    workdir: Path,
    of_port: int,
    dataplane: str = "openflow",
    threads: int = 8,
    db_url: str | None = None,
    repo: Path | None = None,
    extra_args: list[str] | None = None,
    of_host: str = "127.0.0.1",
) -> ServeChild:
    """serve (not started) as the benchmarks run it: log in ``workdir``, 0.5 s tick. ``repo``: another
    checkout with its own .venv (bench.probes.ab runs old and new code side by side); ``of_host``:
    where the bridges reach the controller (a veth for pinned_ovs)."""
    repo = repo or REPO
    python = sys.executable if repo == REPO else str(repo / ".venv" / "bin" / "python")
    # the bench's bridges are not cabled to each other: no cabling probes (docs/dataplane.md)
    env = {"VIPLANES_LINK_PROBE_S": "0", **os.environ}
    return ServeChild(
        db_url or f"sqlite:///{workdir / 'bench.db'}",
        workdir,
        openflow=(of_host, of_port),
        dataplane=dataplane,
        threads=threads,
        tick=0.5,
        security=serve_security_args(),
        args=extra_args or (),
        env=env,
        cli=(python, "-m", "viplanes.cli.main"),
        cwd=repo,
        ready_s=60.0,
        log_name="serve.log",
    )


def researcher(serve: ServeChild, op_token: str, name: str, grants: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """Create a researcher over the API and give it ``grants``; returns (token, grant ids)."""
    op = Api(serve.api_port, op_token)
    token = op.ok("POST", "/api/v1/principals", {"name": name, "role": "researcher"})["token"]
    ids = [op.ok("POST", "/api/v1/grants", {**g, "principal": name})["id"] for g in grants]
    op.close()
    return token, ids
