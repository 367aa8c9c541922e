"""The gate's seal: only datagrams the gate forwarded can become samples.

goflow2 listens on a loopback UDP port, and any local process can send to it; goflow2 has no way to
check who sent a datagram. So the gate rewrites the agent address of every datagram it admits into
a secret one: per sampling agent, a random IPv6 address (``fd`` + 120 random bits) chosen when the
process starts and never shown. goflow2 reports it as ``sampler_address``; the reader turns it back
into the switch's agent, and a sample carrying any other agent (a datagram sent straight to
goflow2) is refused as ``sflow_ungated``. A local user cannot read the loopback traffic or goflow2's
stdout, so guessing is the only way in: 2^-120 per datagram. Why not a network namespace or a Unix
socket: goflow2 listens only on UDP, and a namespace needs privileges the hardened unit drops.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable, Iterable
from ipaddress import IPv6Address

from viplanes.detection.sflow.agents import SFLOW_V5, datagram_agent
from viplanes.domain.sighting import IPAddress

ADDRESS_IPV6 = 2


def _secret(token: Callable[[int], bytes]) -> IPv6Address:
    """A unique-local address: never IPv4-mapped (goflow2 would print that as IPv4)."""
    return IPv6Address(b"\xfd" + token(15))


class AgentSeal:
    """Agent address <-> its secret address, for the gate (``seal``) and the reader (``unseal``)."""

    def __init__(self, agents: Iterable[IPAddress], token: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self._sealed: dict[IPAddress, IPv6Address] = {a: _secret(token) for a in set(agents)}
        self._real = {v: k for k, v in self._sealed.items()}

    def seal(self, payload: bytes) -> bytes | None:
        """The datagram with its agent address replaced by the agent's secret one; None when it
        is not an sFlow v5 datagram of a known agent."""
        agent = datagram_agent(payload)
        sealed = self._sealed.get(agent) if agent is not None else None
        if sealed is None:
            return None
        length = 4 if agent is not None and agent.version == 4 else 16
        return struct.pack("!II", SFLOW_V5, ADDRESS_IPV6) + sealed.packed + payload[8 + length :]

    def unseal(self, sealed: IPAddress | None) -> IPAddress | None:
        """The switch agent behind a secret address; None for any address the gate did not write."""
        return self._real.get(sealed) if isinstance(sealed, IPv6Address) else None
