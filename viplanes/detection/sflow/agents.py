"""Whose samples count: only the topology's sampling switches, and only samples taken where the
flow's source plugs in.

sFlow is unauthenticated UDP, and goflow2's ``sampler_address`` is only the agent address written
inside the datagram, so a host that reaches the collector could claim to be a switch and invent
samples. Three checks, each a counter (docs/automatic-lanes.md, "Whose samples count"):

1. the datagram (``datagram``, before goflow2 sees it: the gate): its UDP source and its agent
   address both belong to one switch the topology declares as sampling;
2. the sample (``sample``, after goflow2 decoded it): the flow's source is a host attached to that
   switch (not a flow merely crossing it), and the sample's input port is that host's port (not an
   inter-switch link, not another host's port: OVS samples a frame before the host source guard
   drops it). The input port's ifIndex is the topology's (``ifindex: {PORT: IFINDEX}``) or learned
   from the switch's OVSDB (``ifindex: ovsdb``, ``ifindex.py``); a sample from a port known
   neither way is refused (``sflow_port_unknown``).

Pure: built from plain facts (``SamplingSwitch``); the caller turns the topology into them.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from typing import Protocol

from viplanes.detection.sflow.detector import Sample
from viplanes.domain.sighting import IPAddress

SFLOW_V5 = 5


@dataclass(frozen=True)
class SamplingSwitch:
    """One sampling switch as the checks need it."""

    name: str
    agent: IPAddress
    sources: frozenset[IPAddress]
    hosts: frozenset[IPAddress]  # every address of every host attached to this switch
    # sFlow ifIndex -> the addresses of the host on that port; None: ifIndexes not declared
    host_ports: Mapping[int, frozenset[IPAddress]] | None = field(default=None)
    # OpenFlow port -> the addresses of the host on it (what learned ifIndexes are matched to)
    ofports: Mapping[int, frozenset[IPAddress]] = field(default_factory=dict)


class IfindexSource(Protocol):
    """Learned OpenFlow port -> ifIndex per switch (``ifindex.OvsdbIfindexes``)."""

    def ifindexes(self, switch: str, fresh: bool = False) -> Mapping[int, int]: ...


def datagram_agent(payload: bytes) -> IPAddress | None:
    """The agent address of an sFlow v5 datagram (XDR: version, address type, address); None
    for anything that is not one."""
    if len(payload) < 12:
        return None
    version, kind = struct.unpack_from("!II", payload)
    if version != SFLOW_V5:
        return None
    if kind == 1:
        return IPv4Address(payload[8:12])
    if kind == 2 and len(payload) >= 24:
        return IPv6Address(payload[8:24])
    return None


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 source (a dual-stack socket) as the IPv4 address it is."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class SampleGuard:
    """The checks above; ``counts`` holds the refusals by reason (exported on /metrics)."""

    def __init__(self, switches: Iterable[SamplingSwitch], learned: IfindexSource | None = None) -> None:
        self.switches = tuple(switches)
        self.learned = learned
        self.counts: Counter[str] = Counter()
        self._by_agent: dict[IPAddress, list[SamplingSwitch]] = {}
        for sw in self.switches:
            self._by_agent.setdefault(sw.agent, []).append(sw)
        self._sources = frozenset(a for sw in self.switches for a in sw.sources)

    def datagram_refusal(self, source: IPAddress, payload: bytes) -> str | None:
        """Why a datagram from ``source`` must not reach the collector, or None."""
        source = _plain(source)
        if source not in self._sources:
            return "sflow_foreign_source"
        agent = datagram_agent(payload)
        if agent is None:
            return "sflow_malformed"
        switches = self._by_agent.get(agent)
        if not switches:
            return "sflow_foreign_agent"
        if not any(source in sw.sources for sw in switches):
            return "sflow_agent_mismatch"  # a real switch's agent, sent from another one's address
        return None

    def datagram(self, source: IPAddress, payload: bytes) -> bool:
        """Admit (True) or count the refusal (False)."""
        why = self.datagram_refusal(source, payload)
        if why is None:
            return True
        self.counts[why] += 1
        return False

    def sample_refusal(self, sample: Sample) -> str | None:
        """Why a decoded sample must not reach the detector, or None."""
        switches = self._by_agent.get(sample.agent) if sample.agent is not None else None
        if not switches:
            return "sflow_foreign_agent"
        at_source = [sw for sw in switches if sample.src_ip in sw.hosts]
        if not at_source:
            return "sflow_not_source_switch"  # sampled where the flow passes, not where it starts
        why = "sflow_port_unknown"
        for sw in at_source:
            on_port = self._port_hosts(sw, sample.in_if)
            if on_port is None:
                continue
            if sample.src_ip in on_port:
                return None
            why = "sflow_link_port"  # a known port, not this source's
        return why

    def _port_hosts(self, sw: SamplingSwitch, in_if: int | None) -> frozenset[IPAddress] | None:
        """The addresses of the host on input port ``in_if`` (empty: a port with no host);
        None when the port is unknown (neither declared nor learned, even after a fresh read)."""
        if in_if is None:
            return frozenset() if sw.host_ports else None
        if sw.host_ports is not None and in_if in sw.host_ports:
            return sw.host_ports[in_if]
        if self.learned is None:
            return frozenset() if sw.host_ports else None
        for fresh in (False, True):  # a new port (a host plugged in later): read again, bounded
            by_ifindex = {ifx: port for port, ifx in self.learned.ifindexes(sw.name, fresh).items()}
            if in_if in by_ifindex:
                return sw.ofports.get(by_ifindex[in_if], frozenset())
        return None

    def sample(self, sample: Sample) -> bool:
        """Admit (True) or count the refusal (False)."""
        why = self.sample_refusal(sample)
        if why is None:
            return True
        self.counts[why] += 1
        return False
