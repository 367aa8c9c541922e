"""sFlow on and off at Open vSwitch bridges, with ovs-vsctl.

Who runs this: the lab and the tests, on bridges they built. The controller does not: it speaks
OpenFlow to the switches, not OVSDB, and on a real campus the operator configures sampling on the
access switches like any other switch setting (the command is ``enable_argv``'s, printed by
docs/automatic-lanes.md). Every sFlow record made here carries ``external_ids:viplanes=sflow``;
``disable`` clears a bridge's sFlow only when its record carries that mark, so an operator's own
sFlow settings, or a bridge that is not ours, are never touched.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

MARK_KEY = "viplanes"
MARK_VALUE = "sflow"


@dataclass(frozen=True)
class SwitchSampling:
    """What each access switch is told: collector address, 1-in-N sampling, counter polling."""

    target: str = "127.0.0.1:6343"  # the collector, HOST:PORT as OVS writes it
    sampling: int = 64  # 1 in N packets (docs/automatic-lanes.md: why 64)
    polling_s: int = 10  # interface counters, unused by the detector; OVS needs a value
    header_bytes: int = 128  # bytes of each sampled packet sent: enough for IPv6 + TCP
    agent: str = ""  # interface or address reported as the agent ("" lets OVS choose)

    def __post_init__(self) -> None:
        if self.sampling < 1 or self.polling_s < 0 or not 64 <= self.header_bytes <= 256:
            raise ValueError("sflow: sampling >= 1, polling >= 0, header between 64 and 256 bytes")


def enable_argv(bridge: str, s: SwitchSampling) -> list[str]:
    """The ovs-vsctl arguments that make one sFlow record for ``bridge`` and point it there."""
    record = [
        "--id=@sf",
        "create",
        "sflow",
        f'targets="{s.target}"',
        f"sampling={s.sampling}",
        f"polling={s.polling_s}",
        f"header={s.header_bytes}",
        f"external_ids:{MARK_KEY}={MARK_VALUE}",
    ]
    if s.agent:
        record.append(f"agent={s.agent}")
    return ["--", *record, "--", "set", "bridge", bridge, "sflow=@sf"]


def _run(vsctl: Sequence[str], *args: str) -> str:
    return subprocess.run([*vsctl, *args], check=True, capture_output=True, text=True, timeout=30).stdout


def enable(bridges: Sequence[str], s: SwitchSampling, vsctl: Sequence[str] = ("ovs-vsctl", "--timeout=10")) -> None:
    """Sample on every bridge in ``bridges`` (one transaction each); replaces our earlier record."""
    for bridge in bridges:
        _run(vsctl, *enable_argv(bridge, s))


def ours(bridge: str, vsctl: Sequence[str] = ("ovs-vsctl", "--timeout=10")) -> bool:
    """Does ``bridge`` sample with a record this module made?"""
    uuid = _run(vsctl, "--bare", "get", "bridge", bridge, "sflow").strip()
    if uuid in ("", "[]"):  # no record (ovs-vsctl writes an empty set as [])
        return False
    mark = _run(vsctl, "--bare", "--if-exists", "get", "sflow", uuid, f"external_ids:{MARK_KEY}").strip()
    return mark.strip('"') == MARK_VALUE


def disable(bridges: Sequence[str], vsctl: Sequence[str] = ("ovs-vsctl", "--timeout=10")) -> list[str]:
    """Stop sampling where we started it; the bridges it cleared (OVS drops the orphan record)."""
    cleared = []
    for bridge in bridges:
        if ours(bridge, vsctl):
            _run(vsctl, "clear", "bridge", bridge, "sflow")
            cleared.append(bridge)
    return cleared
