"""The collector: goflow2 (github.com/netsampler/goflow2) decodes the switches' sFlow v5 datagrams
and writes one JSON line per sampled packet; we read those lines.

Why goflow2 and not a decoder of our own: it is maintained (netsampler, releases through 2025),
decodes sFlow v5, NetFlow v9 and IPFIX alike (so the same reader serves a switch that exports
IPFIX), and runs as its own process, so a malformed datagram from the campus meets Go's decoder,
not our process. No Python sFlow v5 decoder on PyPI is maintained. scripts/setup.sh builds it
from the Go module proxy once into /var/cache/viplanes (docs/automatic-lanes.md).

``CollectorProcess`` supervises it (restarts it with a back-off when it dies) and feeds every
line to the detector from one reader thread, ``viplanes-sflow-reader``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import IO

from viplanes.detection.sflow.bound import wait_bound
from viplanes.detection.sflow.detector import Detector, Sample
from viplanes.lifecycle import die_with_parent

log = logging.getLogger(__name__)

GOFLOW2_VERSION = "v2.2.6"
GOFLOW2_CACHED = Path(f"/var/cache/viplanes/goflow2-{GOFLOW2_VERSION}/goflow2")
# goflow2 names the common protocols; anything else it writes as a number
_PROTOCOLS = {"ICMP": 1, "TCP": 6, "UDP": 17, "GRE": 47, "ESP": 50, "AH": 51, "ICMPv6": 58, "SCTP": 132}
_PORTED = {6, 17, 132}
MAX_BACKOFF_S = 30.0
STABLE_S = 60.0  # a collector that ran this long before it died restarts after the first back-off
MAX_LINE = 16_384  # a goflow2 line is ~1.3 kB; anything longer is not one of its lines


def parse_line(line: bytes | str) -> Sample | None:
    """One goflow2 JSON line -> a ``Sample``; None for anything that is not an IP flow sample."""
    if len(line) > MAX_LINE:
        return None
    try:
        msg = json.loads(line)
        if not isinstance(msg, dict) or msg.get("type") != "SFLOW_5":
            return None
        proto_raw = msg.get("proto", 0)
        proto = _PROTOCOLS.get(proto_raw) if isinstance(proto_raw, str) else int(proto_raw)
        if proto is None:
            proto = int(proto_raw)
        ported = proto in _PORTED
        agent_text = msg.get("sampler_address") or ""
        return Sample(
            src_ip=ip_address(msg["src_addr"]),
            dst_ip=ip_address(msg["dst_addr"]),
            protocol=proto,
            src_port=int(msg.get("src_port", 0)) if ported else None,
            dst_port=int(msg.get("dst_port", 0)) if ported else None,
            frame_bytes=int(msg["bytes"]),
            sampling_rate=int(msg["sampling_rate"]),
            agent=ip_address(agent_text) if agent_text else None,
            in_if=_uint(msg.get("in_if")),
            flow_label=_uint(msg.get("ipv6_flow_label")) if msg.get("etype") == "IPv6" else None,
            dscp=tos >> 2 if (tos := _uint(msg.get("ip_tos"))) is not None and tos < 256 else None,
        )
    except (ValueError, TypeError, KeyError):
        return None


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port free on ``host`` now (goflow2 behind the gate listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _uint(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def goflow2_argv(binary: Path, listen: tuple[str, int]) -> list[str]:
    """goflow2 listening for sFlow only, JSON lines on stdout, its metrics HTTP server on an
    ephemeral loopback port (its default ``:8080`` would take the API's port on every address)."""
    host, port = listen
    where = f"[{host}]" if ":" in host else host
    return [
        str(binary),
        "-listen",
        f"sflow://{where}:{port}",
        "-format",
        "json",
        "-transport",
        "file",
        "-addr",
        "127.0.0.1:0",
        "-loglevel",
        "warn",
    ]


@dataclass(frozen=True)
class CollectorSettings:
    """Where goflow2 is and listens; ``wrap`` prefixes its command (tests: ``ip netns exec NS``)."""

    binary: Path = GOFLOW2_CACHED
    listen: tuple[str, int] = ("127.0.0.1", 6343)
    expire_every_s: float = 1.0  # how often idle flows are dropped from the detector's table
    restart_backoff_s: float = 1.0  # first wait before restarting a collector that died (doubles, max 30 s)
    ready_s: float = 5.0  # how long start() waits for goflow2 to bind its port (then it goes on, warned)
    wrap: tuple[str, ...] = ()


class CollectorProcess:
    """goflow2 supervised, its lines read into ``detector`` on one thread; ``stop`` ends both."""

    def __init__(
        self,
        detector: Detector,
        clock: Callable[[], float],
        settings: CollectorSettings,
        admit: Callable[[Sample], Sample | None] | None = None,
        *,
        uptime: Callable[[], float] = time.monotonic,
    ) -> None:
        self._detector = detector
        self._uptime = uptime  # how long a collector ran (``STABLE_S``); tests move it by hand
        self._admit = admit  # the sample check: the sample to observe, or None; None admits all
        self._clock = clock
        self.settings = settings
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.restarts = 0
        self.lines = 0
        self._started_at = 0.0

    def argv(self) -> Sequence[str]:
        return [*self.settings.wrap, *goflow2_argv(self.settings.binary, self.settings.listen)]

    def start(self) -> None:
        """Start goflow2 now (a missing binary raises OSError here, not later in the thread) and
        wait until it has bound its port, so the first datagrams are decoded, not refused. The
        reader thread forks it: the child's death signal follows that thread (``die_with_parent``),
        and ``start``'s caller may be a short-lived thread."""
        spawned: list[subprocess.Popen[bytes] | OSError] = []
        ready = threading.Event()

        def supervise() -> None:
            try:
                spawned.append(self._spawn())
            except OSError as exc:
                spawned.append(exc)
                return
            finally:
                ready.set()
            self._run()

        self._thread = threading.Thread(target=supervise, name="viplanes-sflow-reader", daemon=True)
        self._thread.start()
        ready.wait(self.settings.ready_s + 5)
        if not spawned:
            raise OSError("sflow: the collector did not start")
        proc = spawned[0]
        if isinstance(proc, OSError):
            raise proc
        port = self.settings.listen[1]
        if not wait_bound(proc.pid, port, self.settings.ready_s, lambda: proc.poll() is None):
            log.warning("sflow: collector not listening on port %d after %.1f s", port, self.settings.ready_s)

    def _spawn(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.argv(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(os.getpid()),
        )
        with self._lock:
            self._proc = proc
            self._started_at = self._uptime()
        return proc

    def _run(self) -> None:
        backoff = self.settings.restart_backoff_s
        while not self._stopping.is_set():
            with self._lock:
                proc = self._proc
            if proc is None or proc.stdout is None:
                return
            self._read(proc.stdout)
            code = proc.wait()
            if self._stopping.is_set():
                return
            if self._uptime() - self._started_at >= STABLE_S:  # a crash after a good run: start over
                backoff = self.settings.restart_backoff_s
            log.warning("sflow: collector exited (%s); restarting in %.1f s", code, backoff)
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            try:
                self._spawn()
                self.restarts += 1
            except OSError as exc:
                log.error("sflow: cannot restart the collector: %s", exc)

    def _read(self, stream: IO[bytes]) -> None:
        detector, clock = self._detector, self._clock
        next_expire = clock() + self.settings.expire_every_s
        for line in stream:
            self.lines += 1
            now = clock()
            sample = parse_line(line)
            if sample is not None and self._admit is not None:
                sample = self._admit(sample)
            if sample is not None:
                detector.observe(sample, now)
            if now >= next_expire:
                detector.expire(now)
                next_expire = now + self.settings.expire_every_s

    def pid(self) -> int | None:
        """The running collector's process id (for CPU accounting)."""
        with self._lock:
            return self._proc.pid if self._proc is not None else None

    def reader_tid(self) -> int | None:
        """The reader thread's kernel id (its CPU is in /proc/self/task/TID/stat)."""
        return self._thread.native_id if self._thread is not None else None

    def stop(self) -> None:
        """End goflow2 and the reader; twice, for a restart that raced the stop."""
        self._stopping.set()
        self._end_child()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._end_child()

    def _end_child(self) -> None:
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
