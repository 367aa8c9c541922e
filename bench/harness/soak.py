"""The HTTPS API as a campus uses it, for a while, then idle; and what the server holds afterwards.

Clients, each a thread (the CLI a child process): keep-alive sessions (a researcher's script,
``viplanes transfer`` renewing a lease), one-shot connections (a new TLS connection per request,
as curl and cron jobs make), the CLI (``viplanes principal whoami``, a fresh process each time),
an operator's console page polling its rows every 3 s, and a Prometheus scrape of /metrics.
After the clients stop and close: CLOSE-WAIT sockets on the port, sockets and descriptors the
server still holds, and how long its CPU takes to return to its idle rate
(``bench.harness.procwatch``). Used by ``tests/integration/test_https_soak.py`` (short) and
``bench/suite/https_soak.py`` (minutes, 50 clients).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from bench.harness import procwatch

# non-socket descriptors may grow by what the database pool opens for threads the warm-up did not
# reach (SQLite: the file, its WAL and shared memory per connection, 8 threads); a per-request leak
# over thousands of requests is far above it. Sockets are held to their baseline exactly.
FD_SLACK = 32
# the split API's workers each hold a PostgreSQL pool whose sockets may grow by a few; the API
# port's own sockets (CLOSE-WAIT, held connections) are checked exactly above
SOCKET_SLACK = 16
IDLE_MAX_TICKS = 10.0  # a server at rest (scheduler ticks, sweeps) spends under 10 % of a core
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass(frozen=True)
class Target:
    """A running API: where, how to trust and call it, and which process serves it."""

    url: str
    ca_file: str
    token: str
    port: int
    pid: int  # serve, or the `viplanes api` parent (its workers are its children)


@dataclass(frozen=True)
class Mix:
    keepalive: int = 10
    oneshot: int = 8
    console: int = 1  # polls /ui/lanes/rows every console_every_s
    metrics: int = 1  # scrapes /metrics every metrics_every_s
    cli: int = 1  # runs `viplanes principal whoami` back to back
    console_every_s: float = 3.0
    metrics_every_s: float = 5.0

    @classmethod
    def for_clients(cls, clients: int) -> Mix:
        """``clients`` in all: one console, one scrape, one CLI, the rest half keep-alive, half one-shot."""
        rest = max(clients - 3, 2)
        return cls(keepalive=(rest + 1) // 2, oneshot=rest // 2)


@dataclass
class Tally:
    """Every HTTP request's latency and every failure, by client kind (thread-safe appends)."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)

    def fail(self, kind: str, what: str) -> None:
        with self.lock:
            self.failures.append(f"{kind}: {what}")

    def http(self) -> list[float]:
        return sorted(x for kind, xs in self.latencies.items() if kind != "cli" for x in xs)


def _timed(tally: Tally, kind: str, call: Callable[[], requests.Response]) -> None:
    t0 = time.monotonic()
    try:
        r = call()
    except requests.RequestException as exc:
        tally.fail(kind, f"{exc.__class__.__name__}: {exc}"[:300])
        return
    if r.status_code != 200:
        tally.fail(kind, f"HTTP {r.status_code} {r.text[:200]}")
        return
    tally.ok(kind, time.monotonic() - t0)


def _keepalive(t: Target, tally: Tally, stop: threading.Event) -> None:
    with requests.Session() as s:
        s.headers["Authorization"] = f"Bearer {t.token}"
        paths = ("/api/v1/whoami", "/api/v1/lanes", "/healthz")
        n = 0
        while not stop.is_set():
            path = paths[n % len(paths)]
            _timed(tally, "keepalive", lambda p=path: s.get(f"{t.url}{p}", verify=t.ca_file, timeout=30))
            n += 1


def _oneshot(t: Target, tally: Tally, stop: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {t.token}", "Connection": "close"}
    while not stop.is_set():  # requests.get: a new session, a new connection and handshake each time
        _timed(
            tally,
            "oneshot",
            lambda: requests.get(f"{t.url}/api/v1/whoami", headers=headers, verify=t.ca_file, timeout=30),
        )


def _console(t: Target, tally: Tally, stop: threading.Event, every_s: float) -> None:
    with requests.Session() as s:
        try:  # verify per request: a $REQUESTS_CA_BUNDLE would override a session's verify
            page = s.get(f"{t.url}/ui/login", verify=t.ca_file, timeout=30)
            m = CSRF.search(page.text)
            signed = s.post(
                f"{t.url}/ui/login",
                data={"csrf": m.group(1) if m else "", "token": t.token},
                verify=t.ca_file,
                timeout=30,
            )
            signed.raise_for_status()
        except requests.RequestException as exc:
            tally.fail("console", f"sign-in: {exc}")
            return
        while not stop.wait(every_s):
            _timed(
                tally,
                "console",
                lambda: s.get(f"{t.url}/ui/lanes/rows", verify=t.ca_file, timeout=30, allow_redirects=False),
            )


def _metrics(t: Target, tally: Tally, stop: threading.Event, every_s: float) -> None:
    with requests.Session() as s:
        while not stop.wait(every_s):
            _timed(tally, "metrics", lambda: s.get(f"{t.url}/metrics", verify=t.ca_file, timeout=30))


def _cli(t: Target, tally: Tally, stop: threading.Event) -> None:
    command = [sys.executable, "-m", "viplanes.cli.main", "principal", "whoami", "--api-url", t.url]
    env = {
        "VIPLANES_TOKEN": t.token,
        "VIPLANES_CA_FILE": t.ca_file,
        "VIPLANES_CONFIG": "/nonexistent",
        "PATH": "/usr/bin:/bin",
    }
    while not stop.is_set():
        t0 = time.monotonic()
        r = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
        if r.returncode == 0:
            tally.ok("cli", time.monotonic() - t0)
        else:
            tally.fail("cli", f"exit {r.returncode}: {r.stdout.strip()} {r.stderr.strip()[-300:]}")


def load(t: Target, mix: Mix, duration_s: float) -> Tally:
    """Run the mix for ``duration_s``; every client has closed its connections when this returns."""
    tally, stop = Tally(), threading.Event()
    workers: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
        *[(_keepalive, ())] * mix.keepalive,
        *[(_oneshot, ())] * mix.oneshot,
        *[(_console, (mix.console_every_s,))] * mix.console,
        *[(_metrics, (mix.metrics_every_s,))] * mix.metrics,
        *[(_cli, ())] * mix.cli,
    ]
    threads = [threading.Thread(target=fn, args=(t, tally, stop, *extra), daemon=True) for fn, extra in workers]
    for th in threads:
        th.start()
    time.sleep(duration_s)
    stop.set()
    for th in threads:
        th.join(90)
    return tally


def percentile(sorted_xs: list[float], q: float) -> float:
    if not sorted_xs:
        return float("nan")
    return sorted_xs[min(len(sorted_xs) - 1, int(q * len(sorted_xs)))]


def soak(
    t: Target, mix: Mix, duration_s: float, idle_limit_s: float = 5.0, margin_ticks: float = 5.0
) -> dict[str, Any]:
    """Read the idle baseline, warm up, run the mix, stop, and read what the server holds."""
    time.sleep(1.0)
    pids = procwatch.with_children(t.pid)
    listeners = procwatch.port_sockets(pids, t.port)  # before any request: nothing but the listeners
    idle = procwatch.idle_rate(pids, 3.0)  # and the CPU of a server asked one health check so far
    # every server thread busy at once: the database pools and caches at their working size
    load(t, Mix(keepalive=12, oneshot=6, console=1, metrics=1, cli=0, console_every_s=0.5, metrics_every_s=0.5), 3.0)
    time.sleep(1.0)
    fds_before, sockets_before = procwatch.fd_count(pids), procwatch.socket_fds(pids)
    t0 = time.monotonic()
    tally = load(t, mix, duration_s)
    wall = time.monotonic() - t0
    settle = procwatch.time_to_idle(pids, idle, margin_ticks, limit_s=15.0)
    deadline = time.monotonic() + 5.0  # a socket the client closed is closed by the server at once
    while time.monotonic() < deadline and procwatch.port_sockets(pids, t.port) > listeners:
        time.sleep(0.2)
    http = tally.http()
    cli = tally.latencies.get("cli", [])
    return {
        "requests": len(http),
        "cli_runs": len(cli),
        "failed": len(tally.failures),
        "failures": tally.failures[:10],
        "req_per_s": len(http) / wall,
        "p50_ms": percentile(http, 0.50) * 1000,
        "p99_ms": percentile(http, 0.99) * 1000,
        "max_ms": (http[-1] if http else float("nan")) * 1000,
        "by_kind": {k: len(v) for k, v in sorted(tally.latencies.items())},
        "cli_p50_s": statistics.median(cli) if cli else float("nan"),
        "close_wait": procwatch.close_wait(t.port),
        "port_sockets_after": procwatch.port_sockets(pids, t.port),
        "listeners": listeners,
        "fds_before": fds_before,
        "fds_after": procwatch.fd_count(pids),
        "socket_fds_before": sockets_before,
        "socket_fds_after": procwatch.socket_fds(pids),
        "idle_ticks_per_s": idle,
        "idle_margin_ticks_per_s": margin_ticks,
        "cpu_back_to_idle_s": settle,
        "cpu_idle_limit_s": idle_limit_s,
        "duration_s": wall,
    }


def failed_checks(report: dict[str, Any]) -> list[str]:
    """The soak's pass conditions, each a line naming what broke; empty when the server held."""
    broken = []
    if report["failed"]:
        broken.append(f"{report['failed']} failed requests, e.g. {report['failures'][:3]}")
    if report["close_wait"]:
        broken.append(f"{report['close_wait']} sockets in CLOSE-WAIT on the API port")
    if report["port_sockets_after"] > report["listeners"]:
        broken.append(f"{report['port_sockets_after'] - report['listeners']} sockets still held on the API port")
    if report["socket_fds_after"] > report["socket_fds_before"] + SOCKET_SLACK:
        broken.append(f"socket descriptors {report['socket_fds_before']} -> {report['socket_fds_after']}")
    if report["fds_after"] > report["fds_before"] + FD_SLACK:
        broken.append(f"file descriptors {report['fds_before']} -> {report['fds_after']} (over {FD_SLACK} more)")
    if report["idle_ticks_per_s"] > IDLE_MAX_TICKS:  # a baseline already spinning would excuse anything
        broken.append(f"the server at rest spends {report['idle_ticks_per_s']:.0f} ticks/s (over {IDLE_MAX_TICKS})")
    settle = report["cpu_back_to_idle_s"]
    if settle is None or settle > report["cpu_idle_limit_s"]:
        broken.append(
            f"CPU not back to {report['idle_ticks_per_s']:.1f}+{report['idle_margin_ticks_per_s']:.0f} ticks/s "
            f"within {report['cpu_idle_limit_s']:.0f} s of the clients stopping (took {settle})"
        )
    return broken
