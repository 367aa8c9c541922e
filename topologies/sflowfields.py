"""Read a switch's ``sflow:`` mapping and the campus's ``ipv6_flow_label:`` from YAML.

``sflow: {agent: ADDRESS, from: [ADDRESS, ...], ifindex: {PORT: IFINDEX, ...} | ovsdb[:TARGET]}``
declares that a
switch samples for automatic lanes. The collector accepts a datagram only when its agent address
and its UDP source both belong to such a switch, and a sample only when it was taken on the port
of the flow's source host (docs/automatic-lanes.md, "Whose samples count").
"""

from __future__ import annotations

import ipaddress
from typing import Any

from viplanes.topologies.fields import FieldReader, kind_of
from viplanes.topologies.model import SflowAgent

IFINDEX_MAX = 2**32 - 1
FLOW_LABEL_SCHEMES = ("scitags",)
EXPERIMENT_MAX = 511  # scitags: 9 bits of the flow label


def _ip(reader: FieldReader, value: Any, where: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value) if isinstance(value, str) else ipaddress.ip_address("junk")
    except ValueError:
        reader.bad(where, f"bad IP address {value!r}")
        return None


def read_sflow(reader: FieldReader, value: Any, where: str) -> SflowAgent | None:
    """One switch's ``sflow`` mapping; None after a problem (noted on ``reader``)."""
    m = reader.mapping(value, where, ("agent",), ("from", "ifindex"))
    if m is None or "agent" not in m:
        return None
    agent = _ip(reader, m["agent"], f"{where}.agent")
    raw_from = m.get("from", [m["agent"]])
    sources = [_ip(reader, v, f"{where}.from[{i}]") for i, v in enumerate(reader.listing(raw_from, f"{where}.from"))]
    if not sources and "from" in m:
        reader.bad(f"{where}.from", "at least one address is needed")
    ifindex: list[tuple[int, int]] = []
    table = m.get("ifindex", {})
    ovsdb = ""
    if isinstance(table, str):  # learned from the switch's OVSDB (viplanes/detection/sflow/ifindex.py)
        ovsdb = _ovsdb(reader, table, f"{where}.ifindex")
        table = {}
    elif not isinstance(table, dict):
        reader.bad(f"{where}.ifindex", f"expected a mapping of port: ifIndex, got {kind_of(table)}")
        table = {}
    for port, index in table.items():
        ok_port = isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 0xFFFFFF00
        ok_index = isinstance(index, int) and not isinstance(index, bool) and 1 <= index <= IFINDEX_MAX
        if not ok_port or not ok_index:
            reader.bad(
                f"{where}.ifindex.{port}", f"expected PORT: IFINDEX (positive integers), got {port!r}: {index!r}"
            )
            continue
        ifindex.append((port, index))
    if agent is None or any(s is None for s in sources):
        return None
    return SflowAgent(agent, tuple(s for s in sources if s is not None), tuple(sorted(ifindex)), ovsdb)


def _ovsdb(reader: FieldReader, text: str, where: str) -> str:
    """``ovsdb`` (this host's database) or ``ovsdb:TARGET`` (an ovs-vsctl --db target)."""
    if text == "ovsdb":
        return "ovsdb"
    target = text.removeprefix("ovsdb:")
    if target == text or not target.startswith(("tcp:", "ssl:", "unix:")):
        reader.bad(where, f"expected a mapping of port: ifIndex, 'ovsdb' or 'ovsdb:tcp|ssl|unix:...', got {text!r}")
        return ""
    return target


def read_flow_label(reader: FieldReader, value: Any) -> tuple[int, ...]:
    """``ipv6_flow_label: {scheme: scitags, experiments: [ID, ...]}``: the campus's hosts mark
    IPv6 flows of these scitags experiments in the flow label; () when absent (the default)."""
    if value is None:
        return ()
    m = reader.mapping(value, "ipv6_flow_label", ("scheme", "experiments"))
    if m is None or "scheme" not in m or "experiments" not in m:
        return ()
    if m["scheme"] not in FLOW_LABEL_SCHEMES:
        reader.bad("ipv6_flow_label.scheme", f"expected one of {', '.join(FLOW_LABEL_SCHEMES)}, got {m['scheme']!r}")
    ids = reader.listing(m["experiments"], "ipv6_flow_label.experiments")
    good = [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= EXPERIMENT_MAX]
    if len(good) != len(ids) or not ids:
        reader.bad("ipv6_flow_label.experiments", f"expected a list of experiment ids 1..{EXPERIMENT_MAX}, got {ids!r}")
    return tuple(sorted(set(good)))
