"""The gate in front of goflow2: the collector's public UDP port, where each datagram's UDP
source and agent address are checked before goflow2 decodes it.

goflow2 reports an sFlow sample's ``sampler_address`` from inside the datagram and drops the
datagram's UDP source, so the source can only be checked here. Admitted datagrams go to goflow2 on
a loopback port with their agent address sealed (``seal.py``: what the reader accepts, so nothing
sent straight to goflow2's port counts): 9-20 us per admitted datagram of 8 samples, 2-5 us per refused one
(tests/unit/detection/sflow/test_gate_cost.py, two runs on the loaded test machine).
One thread, ``viplanes-sflow-gate``.
"""

from __future__ import annotations

import logging
import socket
from ipaddress import ip_address

from viplanes.detection.sflow.agents import SampleGuard
from viplanes.detection.sflow.seal import AgentSeal
from viplanes.detection.udplisten import UdpListener

log = logging.getLogger(__name__)

MAX_DATAGRAM = 65_535
THREAD_NAME = "viplanes-sflow-gate"


class SflowGate:
    """Listens on ``listen`` (a ``UdpListener`` it holds and handles); forwards what ``guard``
    admits to ``collector`` (goflow2)."""

    def __init__(
        self, guard: SampleGuard, listen: tuple[str, int], collector: tuple[str, int], seal: AgentSeal
    ) -> None:
        self.guard = guard
        self.seal = seal
        self.collector = collector
        self.forwarded = 0
        self._udp = UdpListener(listen[0], listen[1], THREAD_NAME, MAX_DATAGRAM, self)  # binds: may raise
        self.address = self._udp.address
        self._out = socket.socket(socket.AF_INET6 if ":" in collector[0] else socket.AF_INET, socket.SOCK_DGRAM)

    def start(self) -> None:
        self._udp.start()

    def stop(self) -> None:
        self._udp.stop()
        self._out.close()

    def receive(self, data: bytes, source: str) -> bool:
        """Check one datagram from ``source``; forward it when admitted."""
        try:
            admitted = self.guard.datagram(ip_address(source.split("%")[0]), data)
        except ValueError:
            self.guard.counts["sflow_malformed"] += 1
            return False
        sealed = self.seal.seal(data) if admitted else None
        if sealed is not None:
            try:
                self._out.sendto(sealed, self.collector)
                self.forwarded += 1
            except OSError as exc:
                log.warning("sflow gate: cannot forward to the collector: %s", exc)
        return admitted
