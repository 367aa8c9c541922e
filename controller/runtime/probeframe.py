"""The cabling probe's frame: built by the controller, checked when a switch punts it back. Pure:
the clock and the secret are passed in.

A probe says "I left switch DPID on port PORT at time T (nonce N)" and carries a keyed MAC over
that (HMAC-SHA256 with a random secret of this controller process, truncated to 16 bytes). Only
this process can make one, so a frame that passes ``ProbeCodec.check`` was built here and sent
out of (DPID, PORT); the switch that punted it says which port it came in on (the connection is
the switch's own, authenticated: issue 9). Refused frames change nothing: a forged, replayed or
stale frame cannot create, hide or move a link, only be counted.

Replays: a frame is accepted only within ``window_s`` of its sending, and each nonce only once
(a probe leaves on one port and reaches one switch; a second copy is somebody's recording).

Layout after the Ethernet header (dst 01:80:c2:00:00:0e, src, EtherType 0x88B5)::

    "VPLP" | version (1) | dpid (8) | port (4) | sent, ms of the controller's clock (8)
    | nonce (8) | HMAC-SHA256(secret, everything before)[:16]
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import struct
from dataclasses import dataclass

from viplanes.controller.compile.linkprobe import ETH_TYPE_PROBE, PROBE_DST

MAGIC = b"VPLP"
VERSION = 1
_BODY = struct.Struct("!4sBQIQQ")
MAC_LEN = 16
_ETH = struct.Struct("!6s6sH")
FRAME_LEN = _ETH.size + _BODY.size + MAC_LEN
_DST = bytes.fromhex(PROBE_DST.replace(":", ""))


@dataclass(frozen=True)
class Probe:
    """A verified probe: it left (dpid, port) ``age_s`` ago."""

    dpid: int
    port: int
    age_s: float


@dataclass(frozen=True)
class Refusal:
    """Why a punted frame is no probe of ours (a machine code and words for the log)."""

    code: str  # short | not_a_probe | bad_mac | stale | replayed
    reason: str


def _src_mac(dpid: int) -> bytes:
    """A locally administered unicast source naming the sending switch (for captures)."""
    return b"\x02" + (dpid & 0xFFFFFFFFFF).to_bytes(5, "big")


class ProbeCodec:
    """Builds and checks this process's probes; ``secret`` None draws 32 random bytes."""

    def __init__(self, window_s: float, secret: bytes | None = None) -> None:
        self.window_s = window_s
        self._secret = secret if secret is not None else os.urandom(32)
        self._nonces = itertools.count(int.from_bytes(os.urandom(4), "big") << 16)
        self._seen: dict[int, float] = {}  # nonce -> sent (s); pruned past the window
        self._pruned_at = 0.0

    def build(self, dpid: int, port: int, now: float) -> bytes:
        """The frame to send out of (dpid, port) at ``now`` (seconds of the controller's clock)."""
        body = _BODY.pack(MAGIC, VERSION, dpid, port, _ms(now), next(self._nonces) & (2**64 - 1))
        eth = _ETH.pack(_DST, _src_mac(dpid), ETH_TYPE_PROBE)
        return eth + body + self._mac(body)

    def check(self, frame: bytes, now: float) -> Probe | Refusal:
        """The probe a punted frame carries, or why it is refused."""
        if len(frame) < FRAME_LEN:
            return Refusal("short", f"{len(frame)} bytes, a probe has {FRAME_LEN}")
        _, _, ethertype = _ETH.unpack_from(frame)
        body = frame[_ETH.size : _ETH.size + _BODY.size]
        magic, version, dpid, port, sent_ms, nonce = _BODY.unpack(body)
        if ethertype != ETH_TYPE_PROBE or magic != MAGIC or version != VERSION:
            return Refusal("not_a_probe", f"EtherType {ethertype:#06x}, not a version {VERSION} probe")
        tag = frame[_ETH.size + _BODY.size : FRAME_LEN]
        if not hmac.compare_digest(tag, self._mac(body)):
            return Refusal("bad_mac", f"claims dpid {dpid} port {port} with a MAC this controller did not make")
        age = now - sent_ms / 1000.0
        if not -0.001 <= age <= self.window_s:  # later than now: the sender's clock is ours
            return Refusal("stale", f"dpid {dpid} port {port}: sent {age:.1f} s ago, window {self.window_s:g} s")
        self._prune(now)
        if nonce in self._seen:
            return Refusal("replayed", f"dpid {dpid} port {port}: nonce {nonce} seen before")
        self._seen[nonce] = sent_ms / 1000.0
        return Probe(dpid, port, age)

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()[:MAC_LEN]

    def _prune(self, now: float) -> None:
        """At most once a second: the nonces of a whole window are a few per link."""
        if now - self._pruned_at < 1.0:
            return
        self._pruned_at = now
        oldest = now - self.window_s
        self._seen = {n: t for n, t in self._seen.items() if t >= oldest}


def _ms(seconds: float) -> int:
    return max(0, int(seconds * 1000))
