"""The API server's own cost: requests/s and latency of `viplanes serve` over plain HTTP and HTTPS,
keep-alive and one-shot, and its CPU at idle after the load.

    .venv/bin/python -m bench.probes.api_server --seconds 20 --clients 16

Starts `viplanes serve --dataplane memory` (SQLite) once per scheme on loopback and drives it with
``bench.harness.soak`` clients: ``keepalive`` (one session each: GET /api/v1/whoami, /lanes,
/healthz in turn) and ``oneshot`` (a new connection, and for HTTPS a new handshake, per request).
Run it on a checkout of another server to compare: the numbers in docs/benchmarks.md ("The API
server") compare waitress (before) with cheroot.
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

from bench.harness import procwatch, soak
from bench.suite.https_soak import _operator, _spawn, _wait_https, serve_target
from tests.support.procs import free_port, stop_process


@contextmanager
def plain_serve(work: Path) -> Iterator[soak.Target]:
    db = f"sqlite:///{work / 'plain.db'}"
    token = _operator(db)
    port, log = free_port(), work / "plain.log"
    proc = _spawn(["serve", "--dataplane", "memory", "--db", db, "--api", f"127.0.0.1:{port}"], log)
    try:
        _wait_https(f"http://127.0.0.1:{port}", "", [proc], log)
        yield soak.Target(f"http://127.0.0.1:{port}", "", token, port, proc.pid)
    finally:
        stop_process(proc, 20)


def _row(t: soak.Target, kind: str, clients: int, seconds: float) -> dict[str, Any]:
    n = {"keepalive": 0, "oneshot": 0, kind: clients}
    mix = soak.Mix(keepalive=n["keepalive"], oneshot=n["oneshot"], console=0, metrics=0, cli=0)
    t0 = time.monotonic()
    tally = soak.load(t, mix, seconds)
    wall = time.monotonic() - t0
    xs = tally.http()
    return {
        "kind": kind,
        "req_per_s": round(len(xs) / wall, 1),
        "p50_ms": round(soak.percentile(xs, 0.5) * 1000, 1),
        "p99_ms": round(soak.percentile(xs, 0.99) * 1000, 1),
        "failed": len(tally.failures),
    }


def measure(scheme: str, clients: int, seconds: float) -> list[dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix=f"viplanes-apiserver-{scheme}-"))
    target = serve_target(work) if scheme == "https" else plain_serve(work)
    with target as t:
        pids = procwatch.with_children(t.pid)
        idle_before = procwatch.idle_rate(pids, 3.0)
        rows = [_row(t, kind, clients, seconds) for kind in ("keepalive", "oneshot")]
        time.sleep(2.0)
        idle_after = procwatch.idle_rate(pids, 3.0)
        for row in rows:
            row.update(
                scheme=scheme,
                idle_ticks_before=round(idle_before, 1),
                idle_ticks_after=round(idle_after, 1),
                close_wait=procwatch.close_wait(t.port),
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="per scheme and client kind")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--scheme", action="append", choices=["http", "https"], help="default: both")
    args = ap.parse_args()
    load = subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"# load before: {load}", file=sys.stderr)
    for scheme in args.scheme or ["http", "https"]:
        for row in measure(scheme, args.clients, args.seconds):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
