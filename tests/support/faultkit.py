"""What the fault tests share: `viplanes serve` on a private OVS, iperf3 through a lane, gaps.

``fault_serve`` is the real ``viplanes serve`` (the one launcher, ``ServeChild``; SQLite file,
campus topology) with its OpenFlow listener on the controller link of a
:class:`~tests.support.privovs.PrivateOvs`; it can be killed (-9 or SIGTERM) and started again on
the same database and ports.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from tests.support.privovs import PrivateOvs
from tests.support.procs import wait_for
from tests.support.serve import LANE_PORT, lane_body
from viplanes.lab.servechild import ServeChild

__all__ = ["LANE_PORT", "api", "fault_serve", "gaps", "lane_body", "longest_gap_s", "seconds_until", "Iperf"]


def fault_serve(ovs: PrivateOvs, workdir: Path, of_port: int, db_url: str | None = None) -> ServeChild:
    """serve (not started) on the bed's controller link; ready when /readyz says every switch is
    reconciled. Restarts reuse the database, the ports and the log."""
    return ServeChild(
        db_url or f"sqlite:///{workdir / 'faults.db'}",
        workdir,
        openflow=(ovs.controller_ip, of_port),
        tick=0.2,
        security=ovs.security_args,
        ready_path="/readyz",
        log_name="serve.log",
    )


def api(served: ServeChild, method: str, path: str, token: str, **kw: Any) -> requests.Response:
    return requests.request(
        method,
        f"{served.url}/api/v1{path}",
        timeout=kw.pop("timeout", 15),
        headers={"Authorization": f"Bearer {token}", **kw.pop("headers", {})},
        **kw,
    )


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
