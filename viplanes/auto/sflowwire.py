"""Detection from the switches wired to an acceptor and a topology: the one place ``viplanes
serve`` and the split deployment's controller role build it from (docs/automatic-lanes.md).

The topology says which switches sample (``sflow:`` per switch) and where each host plugs in;
``sampling_switches`` turns that into the plain facts ``viplanes.detection.sflow.agents`` checks against.
"""

from __future__ import annotations

from collections.abc import Callable

from viplanes.auto.acceptor import Acceptor
from viplanes.detection.sflow.agents import SampleGuard, SamplingSwitch
from viplanes.detection.sflow.detector import PrefixFilter
from viplanes.detection.sflow.flowlabel import FlowLabelMarks
from viplanes.detection.sflow.ifindex import OvsdbIfindexes
from viplanes.detection.sflow.service import SflowDetection, SflowSettings
from viplanes.domain.sighting import IPAddress
from viplanes.topologies.model import Topology


def sampling_switches(topology: Topology) -> list[SamplingSwitch]:
    """The switches that declare ``sflow:``, with the addresses on their host and middlebox ports."""
    out = []
    for sw in topology.switches:
        if sw.sflow is None:
            continue
        by_port: dict[int, frozenset[IPAddress]] = {}
        # where a flow can start: a host's port, or a middlebox leg's (the campus NAT's outside
        # leg is where translated flows enter the border: what NAT pairing compares)
        ifaces = [h.iface for h in topology.hosts]
        ifaces += [leg for mb in topology.middleboxes for leg in (mb.inside, mb.outside)]
        for iface in ifaces:
            attach = iface.attach
            if attach is not None and attach.switch == sw.name:
                addrs = (iface.ip.ip, iface.ip6.ip if iface.ip6 is not None else None)
                by_port[attach.port] = frozenset(a for a in addrs if a is not None)
        ifindex = dict(sw.sflow.ifindex)
        host_ports = {ifindex[p]: addrs for p, addrs in by_port.items() if p in ifindex} if ifindex else None
        hosts = frozenset(a for addrs in by_port.values() for a in addrs)
        out.append(SamplingSwitch(sw.name, sw.sflow.agent, frozenset(sw.sflow.sources), hosts, host_ports, by_port))
    return out


def ifindex_learner(topology: Topology) -> OvsdbIfindexes | None:
    """The OVSDB reader for the sampling switches whose topology says ``ifindex: ovsdb``."""
    where = {
        sw.name: (sw.dpid, sw.sflow.ifindex_ovsdb) for sw in topology.switches if sw.sflow and sw.sflow.ifindex_ovsdb
    }
    return OvsdbIfindexes(where) if where else None


def sflow_detection(
    acceptor: Acceptor, topology: Topology, clock: Callable[[], float], settings: SflowSettings
) -> SflowDetection | None:
    """Detection per ``VIPLANES_SFLOW_*`` (None when off), its sightings to ``acceptor``, its
    samples only from ``topology``'s sampling switches."""
    if not settings.enabled:
        return None
    narrow = PrefixFilter(settings.prefixes) if settings.prefixes else None

    def prefilter(src: IPAddress, dst: IPAddress) -> bool:
        return acceptor.may_concern(src, dst) and (narrow is None or narrow(src, dst))

    guard = SampleGuard(sampling_switches(topology), ifindex_learner(topology))
    experiments = topology.flow_label_experiments
    marks = FlowLabelMarks(acceptor, experiments, acceptor.may_concern) if experiments else None
    return SflowDetection(
        settings, acceptor, clock, prefilter=prefilter, guard=guard, marks=marks, floor=acceptor.rate_floor
    )
