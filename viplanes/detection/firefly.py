"""scitags fireflies: parse one datagram into a ``Sighting`` and listen for them on UDP.

A firefly (https://www.scitags.org; sent by XRootD, dCache, FTS, gfal2, ``flowd``) is a syslog
header followed by JSON: ``flow-lifecycle.state`` (start/ongoing/end), ``flow-id`` (afi, src-ip,
dst-ip, protocol, src-port, dst-port) and ``context`` (experiment-id, activity-id). It is not
authenticated: the sighting carries the UDP source as ``reporter`` and the acceptor refuses a
firefly whose reporter is not the flow's source. Parsing is defensive: a size cap, and every bad
datagram is a counter, never a traceback.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections import Counter
from collections.abc import Callable

from viplanes.detection.udplisten import UdpListener
from viplanes.domain.sighting import Sighting, SightingKind, SightingSink, SightingState

log = logging.getLogger(__name__)

THREAD_NAME = "viplanes-firefly"
MAX_DATAGRAM = 1500  # the spec keeps a firefly within one MTU
DEFAULT_PORT = 10514
_PROTOCOLS = {"tcp": 6, "udp": 17}
_STATES = {"start": SightingState.START, "ongoing": SightingState.ONGOING, "end": SightingState.END}


class BadFirefly(ValueError):
    """Why a datagram is not a usable firefly; ``code`` is the counter."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _port(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise BadFirefly("bad_field", f"port {value!r}")
    return value


def parse_firefly(data: bytes, reporter: str, observed_at: float) -> Sighting:
    """One datagram -> a firefly ``Sighting``; ``BadFirefly`` for anything else."""
    if len(data) > MAX_DATAGRAM:
        raise BadFirefly("too_big", f"{len(data)} bytes")
    start = data.find(b"{")
    if start < 0:
        raise BadFirefly("bad_json", "no JSON object")
    try:
        doc = json.loads(data[start:].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadFirefly("bad_json", str(exc)[:80]) from None
    if not isinstance(doc, dict):
        raise BadFirefly("bad_json", "not an object")
    flow, life, ctx = doc.get("flow-id"), doc.get("flow-lifecycle"), doc.get("context") or {}
    if not isinstance(flow, dict) or not isinstance(life, dict) or not isinstance(ctx, dict):
        raise BadFirefly("bad_field", "flow-id and flow-lifecycle must be objects")
    state = _STATES.get(str(life.get("state", "")).lower())
    proto = _PROTOCOLS.get(str(flow.get("protocol", "")).lower())
    if state is None or proto is None:
        raise BadFirefly("bad_field", "state or protocol")
    try:
        src = ipaddress.ip_address(str(flow.get("src-ip")))
        dst = ipaddress.ip_address(str(flow.get("dst-ip")))
        rep = ipaddress.ip_address(reporter.split("%")[0])
    except ValueError as exc:
        raise BadFirefly("bad_field", str(exc)[:80]) from None
    if isinstance(rep, ipaddress.IPv6Address) and rep.ipv4_mapped is not None:
        rep = rep.ipv4_mapped
    if src.version != dst.version:
        raise BadFirefly("bad_field", "mixed address families")
    evidence = {
        k: str(ctx[key])[:64]
        for k, key in (("experiment", "experiment-id"), ("activity", "activity-id"), ("application", "application"))
        if key in ctx
    }
    return Sighting(
        kind=SightingKind.FIREFLY,
        state=state,
        src_ip=src,
        dst_ip=dst,
        protocol=proto,
        src_port=_port(flow.get("src-port")),
        dst_port=_port(flow.get("dst-port")),
        observed_at=observed_at,
        reporter=rep,
        evidence=evidence,
    )


class FireflyListener:
    """Holds a UDP socket and its thread (``UdpListener``) and is their handler: each datagram
    parsed and offered to the sink."""

    def __init__(
        self,
        sink: SightingSink,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sink = sink
        self.counts: Counter[str] = Counter()
        self._clock = clock
        # one byte more than a firefly may have: an oversize datagram is seen, and counted
        self._udp = UdpListener(host, port, THREAD_NAME, MAX_DATAGRAM + 1, self)
        self.address = self._udp.address

    def start(self) -> None:
        self._udp.start()

    def stop(self) -> None:
        self._udp.stop()

    def receive(self, data: bytes, reporter: str) -> None:
        try:
            sighting = parse_firefly(data, reporter, self._clock())
        except BadFirefly as exc:
            self.counts[exc.code] += 1
            return
        except Exception:  # never a traceback out of the loop
            self.counts["bad_field"] += 1
            return
        self.counts["accepted"] += 1
        self.sink.offer(sighting)
