"""sFlow at the lab's access switches: the switches where a campus host plugs in (a cloud host is
outside the campus), sampled for detection from the switches (docs/automatic-lanes.md).

The lab configures its own bridges; on a real campus the operator does (switchconfig's command).
Sampling is undone at the lab's teardown, and only on the lab's bridges.
"""

from __future__ import annotations

from collections.abc import Sequence

from viplanes.detection.sflow import switchconfig
from viplanes.detection.sflow.switchconfig import SwitchSampling
from viplanes.lab.net import LabNetwork
from viplanes.topologies.model import Topology


def access_switches(topology: Topology) -> list[str]:
    """Topology switches with a campus host attached, in topology order."""
    attached = {h.iface.attach.switch for h in topology.hosts if h.role != "cloud" and h.iface.attach is not None}
    return [s.name for s in topology.switches if s.name in attached]


def sample_access_switches(
    lab: LabNetwork, topology: Topology, sampling: SwitchSampling, switches: Sequence[str] | None = None
) -> list[str]:
    """Turn sFlow on at ``switches`` (default: the access switches); off again at ``lab.stop``.
    Returns the bridges configured."""
    bridges = [lab.bridge(name) for name in (switches if switches is not None else access_switches(topology))]
    switchconfig.enable(bridges, sampling)

    def off() -> None:
        switchconfig.disable(bridges)

    lab.on_stop(off)
    return bridges
