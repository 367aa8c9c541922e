"""The HTTPS API soak (issue 40): 50 clients for 10 minutes against `viplanes serve --tls-cert` and
against `viplanes api --workers 2 --tls-cert` behind `viplanes controller cluster` on a throwaway
PostgreSQL, then idle. The mix and the after-checks are ``bench.harness.soak``: 0 failed requests,
p99 stated, 0 CLOSE-WAIT and no socket or descriptor left, CPU back to idle within 5 s.

    .venv/bin/python -m bench.suite.https_soak --duration 600 --clients 50 --target serve --target split
    .venv/bin/python -m bench.run_all --only https_soak --duration 180 --clients 50
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from bench.harness import soak
from bench.harness.report import Result, Target
from tests.support.procs import free_port, stop_process

VIPLANES = [sys.executable, "-m", "viplanes.cli.main"]
ENV = {"VIPLANES_CONFIG": "/nonexistent", "PATH": "/usr/bin:/bin"}


def _operator(db_url: str) -> str:
    out = subprocess.run(
        [*VIPLANES, "principal", "add", "soakop", "--role", "operator", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"principal add: {out.stderr.strip()}")
    return out.stdout.strip().splitlines()[-1]


def _wait_https(url: str, ca: str, procs: list[subprocess.Popen[bytes]], log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        try:
            if requests.get(f"{url}/healthz", verify=ca, timeout=2).ok:
                return
        except requests.RequestException:
            time.sleep(0.2)
    raise RuntimeError(f"API not up at {url}:\n{log.read_text(errors='replace')[-3000:]}")


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([*VIPLANES, *args], stdout=out, stderr=out, env=ENV)


@contextmanager
def serve_target(work: Path) -> Iterator[soak.Target]:
    from viplanes import pki

    pki.init(work / "pki", hosts=("localhost", "127.0.0.1"))
    db = f"sqlite:///{work / 'serve.db'}"
    token = _operator(db)
    port, log = free_port(), work / "serve.log"
    proc = _spawn(
        [
            "serve",
            "--dataplane",
            "memory",
            "--db",
            db,
            "--api",
            f"127.0.0.1:{port}",
            "--openflow",
            f"127.0.0.1:{free_port()}",
        ]
        + ["--tls-cert", str(work / "pki" / "controller.crt"), "--tls-key", str(work / "pki" / "controller.key")],
        log,
    )
    try:
        url, ca = f"https://127.0.0.1:{port}", str(work / "pki" / "ca.crt")
        _wait_https(url, ca, [proc], log)
        yield soak.Target(url, ca, token, port, proc.pid)
    finally:
        stop_process(proc, 20)


@contextmanager
def split_target(work: Path, workers: int = 2) -> Iterator[soak.Target]:
    from bench.harness.pg import throwaway_postgres
    from viplanes import pki

    pki.init(work / "pki", hosts=("localhost", "127.0.0.1"))
    with throwaway_postgres() as db:
        token = _operator(db)
        port = free_port()
        ctl = _spawn(
            ["controller", "cluster", "--db", db, "--openflow", f"127.0.0.1:{free_port()}", "--insecure-tcp"],
            work / "controller.log",
        )
        api = _spawn(
            ["api", "--db", db, "--listen", f"127.0.0.1:{port}", "--workers", str(workers)]
            + ["--tls-cert", str(work / "pki" / "controller.crt"), "--tls-key", str(work / "pki" / "controller.key")],
            work / "api.log",
        )
        try:
            url, ca = f"https://127.0.0.1:{port}", str(work / "pki" / "ca.crt")
            _wait_https(url, ca, [ctl, api], work / "api.log")
            yield soak.Target(url, ca, token, port, api.pid)
        finally:
            stop_process(api, 30)
            stop_process(ctl, 20)


TARGETS = {"serve": serve_target, "split": split_target}


def measure(target: str, duration_s: float, clients: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"viplanes-soak-{target}-"))
    with TARGETS[target](work) as t:
        report = soak.soak(t, soak.Mix.for_clients(clients), duration_s)
    report["broken"] = soak.failed_checks(report)
    report["target"], report["clients"] = target, clients
    return report


def run(quick: bool = False, duration: float | None = None, clients: int = 8, **_options: object) -> Result:
    """For ``make bench`` (bench.run_all): 600 s and 50 clients per target (--duration; 30 s with --quick);
    run_all's ``--clients`` default (8) is the churn's, so fewer than 50 here means 50."""
    seconds = duration or (30.0 if quick else 600.0)
    clients = max(clients, 50)
    result = Result("https_soak")
    for target in TARGETS:
        m = measure(target, seconds, clients)
        result.add(f"{target}: failed requests", m["failed"], "", Target("<=", 0))
        result.add(f"{target}: p50", m["p50_ms"], "ms")
        result.add(f"{target}: p99", m["p99_ms"], "ms", Target("<=", 2000.0))
        result.add(f"{target}: requests/s", m["req_per_s"], "/s")
        result.add(f"{target}: CLOSE-WAIT after", m["close_wait"], "", Target("<=", 0))
        result.add(f"{target}: CPU back to idle", m["cpu_back_to_idle_s"], "s", Target("<=", 5.0))
        result.details[target] = m
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of load per target (default 600)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--target", action="append", choices=sorted(TARGETS), help="serve, split (default both)")
    args = ap.parse_args()
    broken = False
    for target in args.target or list(TARGETS):
        report = measure(target, args.duration, args.clients)
        print(json.dumps(report, indent=2, default=str), flush=True)
        broken |= bool(report["broken"])
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
