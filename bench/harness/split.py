"""The split deployment (issue 12) for benchmarks: ``viplanes controller cluster`` and ``viplanes api
--workers N`` on a throwaway PostgreSQL, the benchmark campus's bridges pointed at the controller.

``SplitDeployment`` quacks like ``viplanes.lab.servechild.ServeChild`` where the churn benchmark needs it
(``api_port``, ``add_operator``, ``stop``), and ``GroupCpuMeter`` charges CPU to each role: the API
worker processes, the controller, PostgreSQL (postmaster and every backend) and ovs-vswitchd.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness.ovs import serve_security_args
from bench.harness.server import REPO, Api, cpu_seconds, free_port, vswitchd_pid


def children(pid: int) -> list[int]:
    """Direct children of a process (from /proc; every thread's list)."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(x) for x in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def reaped_cpu_seconds(pid: int) -> float:
    """CPU of a process's children that already exited and were waited for (cutime + cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def postmaster_pid(db_url: str) -> int | None:
    """The PostgreSQL server process: the parent of a backend we ask for its pid."""
    import psycopg2

    conn = psycopg2.connect(db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            backend = int(cur.fetchone()[0])
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1])
    except (OSError, IndexError, ValueError):
        return None
    finally:
        conn.close()


def tree_cpu_seconds(pid: int) -> float:
    """A process, its live children and its reaped children: CPU seconds so far."""
    total = (cpu_seconds(pid) or 0.0) + reaped_cpu_seconds(pid)
    return total + sum(cpu_seconds(c) or 0.0 for c in children(pid))


class GroupCpuMeter:
    """CPU seconds between ``__init__`` and ``stop`` per role; a role is a function -> seconds."""

    def __init__(self, roles: dict[str, Callable[[], float]]) -> None:
        self.roles = roles
        self.start = {k: f() for k, f in roles.items()}
        self.t0 = time.perf_counter()

    def stop(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {"wall_s": time.perf_counter() - self.t0}
        for k, f in self.roles.items():
            out[f"{k}_cpu_s"] = f() - self.start[k]
        return out


class SplitDeployment:
    """One controller + ``viplanes api --workers N`` on ``db_url``; logs in ``workdir``."""

    dataplane = "openflow"

    def __init__(self, workdir: Path, db_url: str, workers: int = 2, threads: int = 8) -> None:
        self.workdir, self.db_url, self.workers, self.threads = workdir, db_url, workers, threads
        self.of_port = free_port()
        self.api_port = free_port()
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        with open(self.workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "viplanes.cli.main", *args],
                stdout=log,
                stderr=log,
                cwd=REPO,
                env=dict(os.environ),
            )
        self.procs[name] = proc
        return proc

    def start(self, timeout_s: float = 60.0) -> SplitDeployment:
        self._spawn(
            "controller",
            [
                "controller",
                "cluster",
                "--db",
                self.db_url,
                "--openflow",
                f"127.0.0.1:{self.of_port}",
                "--tick",
                "0.5",
                *serve_security_args(),
            ],
        )
        self._spawn(
            "api",
            [
                "api",
                "--db",
                self.db_url,
                "--listen",
                f"127.0.0.1:{self.api_port}",
                "--workers",
                str(self.workers),
                "--threads",
                str(self.threads),
            ],
        )
        deadline = time.monotonic() + timeout_s
        api = Api(self.api_port)
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.tail(name)}")
            try:
                if api.call("GET", "/healthz")[0] == 200 and len(self.api_workers()) == self.workers:
                    api.close()
                    return self
            except OSError:
                api.close()
            time.sleep(0.1)
        raise TimeoutError(f"split deployment not up after {timeout_s} s:\n{self.tail('api')}")

    def wait_master(self, timeout_s: float = 30.0) -> None:
        """Until the controller holds the lease and every switch took its MASTER role."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "role MASTER" in self.tail("controller", 20000):
                time.sleep(1.0)  # its reconcile of each switch
                return
            time.sleep(0.1)
        raise TimeoutError(f"controller not master after {timeout_s} s:\n{self.tail('controller')}")

    def api_workers(self) -> list[int]:
        return children(self.procs["api"].pid) if "api" in self.procs else []

    def tail(self, name: str, chars: int = 3000) -> str:
        try:
            return (self.workdir / f"{name}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def add_operator(self, name: str = "benchop") -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "viplanes.cli.main",
                "principal",
                "add",
                name,
                "--role",
                "operator",
                "--db",
                self.db_url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        if out.returncode != 0:
            raise RuntimeError(f"principal add: {out.stderr.strip()}")
        return out.stdout.strip().splitlines()[-1]

    def cpu_meter(self) -> GroupCpuMeter:
        api_pid, ctl_pid = self.procs["api"].pid, self.procs["controller"].pid
        pg = postmaster_pid(self.db_url)
        vsd = vswitchd_pid()
        return GroupCpuMeter(
            {
                "api workers": lambda: tree_cpu_seconds(api_pid),
                "controller": lambda: cpu_seconds(ctl_pid) or 0.0,
                "postgresql": lambda: tree_cpu_seconds(pg) if pg else 0.0,
                "ovs-vswitchd": lambda: (cpu_seconds(vsd) or 0.0) if vsd else 0.0,
                "bench clients": lambda: cpu_seconds(os.getpid()) or 0.0,
            }
        )

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
