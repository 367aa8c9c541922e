"""The failover benchmark's soak (issue 44): both controllers alive for ``--soak-minutes``, lanes
requested and released through the API once a second, the lease row read every 0.1 s.

A false takeover is a change of the lease's holder while nothing was killed (a standby taking the
lease from a live master: the timing of ``viplanes.cluster.leader`` too tight for the machine's
load); an epoch change without one is a reclaim. Near misses are the master's own log lines of a
renewal that did not answer in time. A lane lost is a lane the database holds ``active`` with no
flow on its access bridge at the end, or a request that did not become active within 10 s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import requests

from tests.support.scaleout_kit import lane_flows, request_active
from viplanes.cluster.renewals import parse_summaries

NEAR_MISSES = ("no renewal answered before the deadline", "renewal answered after its own deadline", "lost, now SLAVE")
SOAK_PORTS = range(9200, 9300)  # inside setup_researcher's grant, apart from the kill rounds' lanes


def soak(db: str, url: str, h: dict[str, str], bridge: str, minutes: float, logs: list[Path]) -> dict[str, Any]:
    import psycopg2

    conn = psycopg2.connect(db)
    conn.autocommit = True
    cur = conn.cursor()

    def lease() -> tuple[str, int]:
        cur.execute("SELECT holder, epoch FROM controller_lease WHERE name = 'controller'")
        holder, epoch = cur.fetchone()
        return str(holder), int(epoch)

    misses_before = _near_misses(logs)
    last = lease()
    takeovers = epochs = failed = cycles = 0
    loads = [os.getloadavg()[0]]
    end = time.monotonic() + minutes * 60
    next_lane = next_load = time.monotonic()
    try:
        while time.monotonic() < end:
            now_lease = lease()
            if now_lease != last:
                takeovers += now_lease[0] != last[0]
                epochs += now_lease[1] != last[1]
                print(f"soak: lease {last} -> {now_lease} with no kill", flush=True)
                last = now_lease
            if time.monotonic() >= next_lane:
                next_lane = time.monotonic() + 1.0
                port = SOAK_PORTS[cycles % len(SOAK_PORTS)]
                cycles += 1
                try:
                    lane = request_active(url, h, port, within_s=10)
                    requests.post(f"{url}/api/v1/lanes/{lane['id']}/release", headers=h, timeout=15)
                except (AssertionError, requests.RequestException) as exc:
                    failed += 1
                    print(f"soak: lane on port {port} not active: {str(exc)[:200]}", flush=True)
            if time.monotonic() >= next_load:
                next_load = time.monotonic() + 30
                loads.append(os.getloadavg()[0])
            time.sleep(0.1)
        cur.execute("SELECT id FROM lanes WHERE state = 'active'")
        active = [int(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()
    unflowed = [lane_id for lane_id in active if not lane_flows(bridge, lane_id)]
    return {
        "soak_minutes": minutes,
        "soak_cycles": cycles,
        "false_takeovers": takeovers,
        "epoch_changes": epochs,
        "near_misses": _near_misses(logs) - misses_before,
        # the masters' renewal jitter (``viplanes.cluster.renewals``): what a shorter lease would eat
        **parse_summaries("\n".join(_read(log) for log in logs)),
        "lanes_lost": failed + len(unflowed),
        "soak_load_min": min(loads),
        "soak_load_max": max(loads),
        "soak_load_mean": sum(loads) / len(loads),
    }


def _near_misses(logs: list[Path]) -> int:
    """The controllers' log lines of a lease renewal that did not answer in time."""
    return sum(_read(log).count(line) for log in logs for line in NEAR_MISSES)


def _read(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""
