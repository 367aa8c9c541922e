"""What the fault tests share: `viplanes serve` on a private OVS, iperf3 through a lane, gaps.

``Served`` runs the real ``viplanes serve`` (subprocess, SQLite file, campus topology) with its
OpenFlow listener on the controller link of a :class:`~tests.support.privovs.PrivateOvs`;
it can be killed (-9 or SIGTERM) and started again on the same database and ports.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from tests.support.privovs import PrivateOvs
from tests.support.procs import free_port, wait_for

VIPLANES = [sys.executable, "-m", "viplanes.cli.main"]
LANE_PORT = 9000


class Served:
    def __init__(self, ovs: PrivateOvs, workdir: Path, of_port: int, db_url: str | None = None) -> None:
        self.ovs = ovs
        self.db_url = db_url or f"sqlite:///{workdir / 'faults.db'}"
        self.api_port, self.of_port = free_port(), of_port
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.log = workdir / "serve.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        """Start serve; the seconds until /readyz said ready (every switch reconciled)."""
        t0 = time.monotonic()
        self.start_background()
        self.wait_ready(30)
        return time.monotonic() - t0

    def start_background(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    *VIPLANES,
                    "serve",
                    "--db",
                    self.db_url,
                    "--api",
                    f"127.0.0.1:{self.api_port}",
                    "--openflow",
                    f"{self.ovs.controller_ip}:{self.of_port}",
                    "--tick",
                    "0.2",
                    *self.ovs.security_args,
                ],
                stdout=log,
                stderr=log,
            )

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"serve not ready:\n{self.log.read_text()[-3000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def api(self, method: str, path: str, token: str, **kw: Any) -> requests.Response:
        return requests.request(
            method,
            f"{self.url}/api/v1{path}",
            timeout=kw.pop("timeout", 15),
            headers={"Authorization": f"Bearer {token}", **kw.pop("headers", {})},
            **kw,
        )


def lane_body(port: int = LANE_PORT, duration: int = 600, **over: Any) -> dict[str, Any]:
    return {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": port,
        "duration_s": duration,
        "purpose": "fault suite",
        **over,
    }


class Iperf:
    """iperf3 server in the cloud namespace, client in the desktop one, 0.1 s JSON intervals."""

    def __init__(self, ovs: PrivateOvs, seconds: float, mbps: int = 20) -> None:
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", ovs.host_ns("cloud"), "iperf3", "-s", "-p", str(LANE_PORT), "-1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        self.client = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ovs.host_ns("desktop"),
                "iperf3",
                "-c",
                "203.0.113.10",
                "-p",
                str(LANE_PORT),
                "-t",
                str(seconds),
                "-i",
                "0.1",
                "-b",
                f"{mbps}M",
                "-J",
                "--connect-timeout",
                "3000",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def result(self, timeout: float) -> dict[str, Any]:
        out, err = self.client.communicate(timeout=timeout)
        return json.loads(out) if out.strip() else {"error": err}

    def stop(self) -> None:
        for proc in (self.client, self.server):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def longest_gap_s(report: dict[str, Any]) -> float:
    """Longest run of intervals that moved no byte (seconds); the whole run if it never started."""
    assert "intervals" in report, report.get("error")
    longest = run = 0.0
    for interval in report["intervals"]:
        s = interval["sum"]
        if s["bytes"] == 0:
            run += s["seconds"]
            longest = max(longest, run)
        else:
            run = 0.0
    return round(longest, 2)


def gaps(report: dict[str, Any], at_least_s: float = 0.2) -> list[tuple[float, float]]:
    """(start, length) in seconds from the client's start of every byte-less run >= at_least_s:
    where a gap sits (at the kill, during the outage, at the restart) tells what caused it."""
    found: list[tuple[float, float]] = []
    start = None
    for interval in report.get("intervals", []):
        s = interval["sum"]
        if s["bytes"] == 0:
            start = s["start"] if start is None else start
        elif start is not None:
            if s["start"] - start >= at_least_s:
                found.append((round(start, 2), round(s["start"] - start, 2)))
            start = None
    return found


def seconds_until(check: Callable[[], Any], timeout: float, step: float = 0.1) -> float | None:
    """How long ``check()`` took to hold (the fault tests report it), or None after ``timeout``."""
    t0 = time.monotonic()
    return time.monotonic() - t0 if wait_for(check, timeout, step) else None
