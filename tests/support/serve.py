"""`viplanes serve` as a real child process, and the HTTP steps every serve-based test starts with:
an operator token from the CLI, a researcher with a grant, a lane body."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from tests.support.procs import lab_security_args
from viplanes.lab.servechild import ServeChild

VIPLANES = [sys.executable, "-m", "viplanes.cli.main"]
LANE_PORT = 9000


def memory_serve(
    db_url: str,
    workdir: Path,
    env: dict[str, str] | None = None,
    tick: float = 0.1,
    ready_s: float = 90,
    args: tuple[str, ...] = (),
) -> ServeChild:
    """`viplanes serve --dataplane memory` (not started): the API-only tests' serve. ``args``:
    more serve options (e.g. --topology FILE). ``ready_s``: an idle serve took over 20 s to
    answer with two lab runs and other work on 2 cores; waiting longer costs a passing test
    nothing."""
    return ServeChild(db_url, workdir, dataplane="memory", tick=tick, env=env, ready_s=ready_s, args=args)


def openflow_serve(db_url: str, workdir: Path, of_port: int, security: list[str] | None = None) -> ServeChild:
    """serve driving real switches on ``of_port`` (not started): TLS with the lab PKI unless
    ``security`` gives other options (``[]``: plain TCP)."""
    security = lab_security_args() if security is None else security
    return ServeChild(db_url, workdir, openflow=("127.0.0.1", of_port), tick=0.2, security=security, ready_s=90)


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


def lane_body(port: int = LANE_PORT, duration: int = 600, **over: Any) -> dict[str, Any]:
    """The one test lane: 10.1.0.10 to 203.0.113.10 over TCP (``over`` replaces any field)."""
    return {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": port,
        "duration_s": duration,
        "purpose": "integration",
        **over,
    }
