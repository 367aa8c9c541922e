"""The L3/L4 matches of one lane: what the rule compiler turns into flows (pure, stdlib only).

For every (destination network, masked port entry) of a :class:`~viplanes.domain.values.LaneSpec`, the
forward match (campus host -> destination) and the reverse match (destination -> host) as OXM field
dicts in os-ken's form: exact values plain, masked ones as ``(value, mask)`` tuples, which
``OFPMatch(**fields)`` accepts (``ipv4_dst=("203.0.113.16", "255.255.255.240")``,
``tcp_dst=(50000, 0xfff0)``). The compiler adds ``in_port``/``eth_src``/the source's own address
at the access switch, rewrites, priorities and cookies; this module only says *which packets*.

Source address per family: ``src4`` is the IPv4 source as the edge router sees it (the lane-pool
``nat_ip``, else the host's address); ``src6`` is the host's global ``ip6`` (never translated).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from viplanes.domain.portmasks import FULL_MASK, port_entries, ranges_to_masks
from viplanes.domain.values import LaneSpec

ETH_TYPE = {4: 0x0800, 6: 0x86DD}
IP_PROTO = {"tcp": 6, "udp": 17}


@dataclass(frozen=True)
class LaneMatch:
    version: int  # 4 or 6
    fwd: dict[str, Any]
    rev: dict[str, Any]


def match_count(spec: LaneSpec) -> int:
    """Distinct matches per direction: destinations x masked port entries."""
    return len(spec.dst_nets) * len(ranges_to_masks(spec.dst_ports))


def lane_matches(spec: LaneSpec, src4: str | None, src6: str | None, masked_ports: bool = True) -> list[LaneMatch]:
    """Every forward/reverse match pair of the lane; ValueError for a family without a source.
    ``masked_ports=False`` (a switch without masked port matches): one pair per exact port."""
    proto = spec.protocol
    if proto not in IP_PROTO:
        raise ValueError(f"lane {spec.lane_id}: protocol {proto!r} is not tcp or udp")
    ports = port_entries(spec.dst_ports, masked_ports)
    out: list[LaneMatch] = []
    for text in spec.dst_nets:
        net = ipaddress.ip_network(text)
        src = src4 if net.version == 4 else src6
        if src is None:
            raise ValueError(
                f"lane {spec.lane_id}: destination {net} is IPv{net.version} but the source "
                f"has no IPv{net.version} address"
            )
        key = f"ipv{net.version}"
        dst: Any = str(net.network_address) if net.num_addresses == 1 else (str(net.network_address), str(net.netmask))
        common = {"eth_type": ETH_TYPE[net.version], "ip_proto": IP_PROTO[proto]}
        for value, mask in ports:
            port: Any = value if mask == FULL_MASK else (value, mask)
            fwd = {**common, f"{key}_src": src, f"{key}_dst": dst, f"{proto}_dst": port}
            rev = {**common, f"{key}_src": dst, f"{key}_dst": src, f"{proto}_src": port}
            if spec.src_port is not None:
                fwd[f"{proto}_src"] = spec.src_port
                rev[f"{proto}_dst"] = spec.src_port
            out.append(LaneMatch(net.version, fwd, rev))
    return out
