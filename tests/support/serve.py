"""`viplanes serve` as a real child process, and the HTTP steps every serve-based test starts with:
an operator token from the CLI, a researcher with a grant, a lane body."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import requests

from tests.support.procs import free_port, lab_security_args, stop_process, wait_healthy

VIPLANES = [sys.executable, "-m", "viplanes.cli.main"]


class Serve:
    """One `viplanes serve` child process; stopped with SIGTERM (then SIGKILL) in teardown."""

    def __init__(
        self,
        db_url: str,
        workdir: Path,
        env: dict[str, str] | None = None,
        tick: float = 0.1,
        ready_s: float = 20,
        args: tuple[str, ...] = (),
    ) -> None:
        self.args = args  # more `serve` options (e.g. --topology FILE)
        self.db_url = db_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"serve-{self.port}.log"
        self.env, self.tick, self.ready_s = env, tick, ready_s
        self.proc: subprocess.Popen | None = None

    def start(self) -> Serve:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    *VIPLANES,
                    "serve",
                    "--dataplane",
                    "memory",
                    "--db",
                    self.db_url,
                    "--api",
                    f"127.0.0.1:{self.port}",
                    "--openflow",
                    f"127.0.0.1:{free_port()}",
                    "--tick",
                    str(self.tick),
                    *self.args,
                ],
                stdout=log,
                stderr=log,
                env=self.env,
            )
        wait_healthy(self.proc, self.url, self.log, timeout=self.ready_s)
        return self

    def stop(self) -> int | None:
        """SIGTERM, SIGKILL after 30 s; the exit code (None when never started). An idle serve
        stops in ~4-5 s at load 13 (scheduler, watchers, os-ken joins); 10 s was once exceeded."""
        if self.proc is None:
            return None
        stop_process(self.proc, 30)
        return self.proc.returncode


def bootstrap(db_url: str, name: str = "root") -> str:
    """An operator made with the CLI (what a first install does); its token."""
    out = subprocess.run(
        [*VIPLANES, "principal", "add", name, "--role", "operator", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def setup_researcher(url: str, op: str, max_lanes: int, timeout: float = 10) -> str:
    h = {"Authorization": f"Bearer {op}"}
    tok = requests.post(
        f"{url}/api/v1/principals", json={"name": "alice", "role": "researcher"}, headers=h, timeout=timeout
    ).json()["token"]
    r = requests.post(
        f"{url}/api/v1/grants",
        headers=h,
        timeout=timeout,
        json={
            "principal": "alice",
            "src_prefixes": ["10.1.0.0/24"],
            "dst_prefixes": ["203.0.113.0/24"],
            "protocols": ["tcp"],
            "ports": ["9000-9300"],
            "max_duration_s": 3600,
            "max_lanes": max_lanes,
        },
    )
    assert r.status_code == 201, r.text
    return tok


def lane_body(port: int, duration: int = 600) -> dict:
    return {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": port,
        "duration_s": duration,
        "purpose": "integration",
    }


def start_with_openflow(serve: Serve, of_port: int, security: list[str] | None = None) -> None:
    """Start ``serve`` driving real switches on ``of_port``: TLS with the lab PKI unless
    ``security`` gives other options (``[]``: plain TCP)."""
    security = lab_security_args() if security is None else security
    with open(serve.log, "ab") as log:
        serve.proc = subprocess.Popen(
            [
                *VIPLANES,
                "serve",
                "--db",
                serve.db_url,
                "--api",
                f"127.0.0.1:{serve.port}",
                "--openflow",
                f"127.0.0.1:{of_port}",
                "--tick",
                "0.2",
                *security,
            ],
            stdout=log,
            stderr=log,
        )
    wait_healthy(serve.proc, serve.url, serve.log, timeout=20)
