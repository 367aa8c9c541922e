"""Connections to an OpenFlow port that never finish a handshake, reopened as they are closed: the
attack of issue 28 item 2, from many source addresses. Runs as its own process (``start``), so
its connect/close churn never shares a GIL with the listener under test.

Modes: ``idle`` says nothing after connecting; ``slow`` is a slowloris: a TLS record header, then
one byte every ``interval`` seconds, never a whole ClientHello.

    python -m tests.support.handshake_flood HOST PORT SECONDS PER_SOURCE MODE SOURCE...

prints one JSON line at the end: connections opened, closed by the peer, connects refused. SIGTERM
ends it early, summary printed (``stop``): a test floods for as long as its checks take, no longer.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REOPEN_DELAY_S = 0.02  # after the listener closed one: how soon it comes back
SLOW_INTERVAL_S = 0.5
TLS_RECORD_START = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"  # handshake record, ClientHello


def start(host: str, port: int, seconds: float, per_source: int, mode: str, sources: list[str]) -> subprocess.Popen:
    """The flood as a child process (stdout: its JSON summary line)."""
    root = Path(__file__).resolve().parents[2]
    args = [sys.executable, "-m", "tests.support.handshake_flood", host, str(port), str(seconds)]
    return subprocess.Popen(
        [*args, str(per_source), mode, *sources], cwd=root, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )


def stop(flood: subprocess.Popen, timeout: float = 30) -> dict[str, int]:
    """End the flood now (SIGTERM) and return its summary."""
    flood.terminate()
    out, _ = flood.communicate(timeout=timeout)
    stats: dict[str, int] = json.loads(out)
    return stats


_ending = False  # set by SIGTERM: the loop ends and the summary is printed


def _end(_signum: int, _frame: object) -> None:
    global _ending
    _ending = True


def _open(host: str, port: int, source: str) -> socket.socket | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.bind((source, 0))
        sock.connect_ex((host, port))
    except OSError:
        sock.close()
        return None
    return sock


def run(host: str, port: int, seconds: float, per_source: int, mode: str, sources: list[str]) -> dict[str, int]:
    stats = {"opened": 0, "closed_by_peer": 0, "failed": 0}
    live: dict[int, tuple[socket.socket, str, int]] = {}  # fd -> (sock, source, bytes sent)
    due: list[tuple[float, str]] = [(0.0, s) for s in sources for _ in range(per_source)]
    poller = select.poll()
    end = time.monotonic() + seconds
    next_drip = time.monotonic()
    while time.monotonic() < end and not _ending:
        now = time.monotonic()
        ready = [d for d in due if d[0] <= now]
        due = [d for d in due if d[0] > now]
        for _, source in ready:
            sock = _open(host, port, source)
            if sock is None:
                stats["failed"] += 1
                due.append((now + 0.1, source))
                continue
            stats["opened"] += 1
            live[sock.fileno()] = (sock, source, 0)
            poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        for fd, _ in poller.poll(20):
            sock, source, _sent = live.pop(fd)
            poller.unregister(fd)
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if data:  # never expected: a listener answering an unfinished handshake
                live[fd] = (sock, source, _sent)
                poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
                continue
            sock.close()
            stats["closed_by_peer"] += 1
            due.append((time.monotonic() + REOPEN_DELAY_S, source))
        if mode == "slow" and time.monotonic() >= next_drip:
            next_drip = time.monotonic() + SLOW_INTERVAL_S
            for fd, (sock, source, sent) in list(live.items()):
                chunk = TLS_RECORD_START[sent : sent + 1] or b"\x00"
                try:
                    sock.send(chunk)
                    live[fd] = (sock, source, sent + 1)
                except OSError:
                    pass
    for sock, _, _ in live.values():
        sock.close()
    return stats


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _end)
    h, p, secs, per, m, *srcs = sys.argv[1:]
    print(json.dumps(run(h, int(p), float(secs), int(per), m, srcs)), flush=True)
