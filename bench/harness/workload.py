"""Which lanes the benchmarks ask for: distinct flows inside one grant, as API bodies or specs.

Two lanes must differ in (src, dst, protocol, dst_port, src_port) or the store refuses the second
as a duplicate; here they differ in destination address and port.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from dataclasses import dataclass

from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

DST_NET = ipaddress.IPv4Network("203.0.113.0/24")  # beyond the edge router (the cloud's subnet)
FIRST_DST = 20  # 203.0.113.20 onward: clear of the cloud host (.10) and the edge router (.1)
PORT_LO, PORT_HI = 9000, 9999
PROTOCOL = "tcp"


@dataclass(frozen=True)
class Flow:
    dst_ip: str
    dst_port: int


def flows(n: int, offset: int = 0) -> Iterator[Flow]:
    """``n`` distinct destinations: every port of 9000..9999 on one address, then the next address."""
    per_ip = PORT_HI - PORT_LO + 1
    max_flows = per_ip * (254 - FIRST_DST)
    if n + offset > max_flows:
        raise ValueError(f"at most {max_flows} distinct flows, asked for {n + offset}")
    for i in range(offset, offset + n):
        ip = DST_NET.network_address + FIRST_DST + i // per_ip
        yield Flow(str(ip), PORT_LO + i % per_ip)


def grant_body(principal: str, src_ip: str, max_lanes: int, max_duration_s: int = 7200) -> dict:
    """A grant that allows every flow ``flows`` can produce from one source."""
    return {
        "principal": principal,
        "src_prefixes": [f"{src_ip}/32"],
        "dst_prefixes": [str(DST_NET)],
        "protocols": [PROTOCOL],
        "ports": [f"{PORT_LO}-{PORT_HI}"],
        "max_duration_s": max_duration_s,
        "max_lanes": max_lanes,
    }


def lane_body(src_ip: str, flow: Flow, duration_s: int = 3600) -> dict:
    return {
        "src_ip": src_ip,
        "dst_ip": flow.dst_ip,
        "protocol": PROTOCOL,
        "dst_port": flow.dst_port,
        "duration_s": duration_s,
        "purpose": "benchmark",
    }


def lane_spec(
    topo: Topology, lane_id: int, src_host: str, flow: Flow, duration_s: int = 3600, now: float | None = None
) -> LaneSpec:
    """The spec the store would hand the controller for this flow (first pool address if NAT'd)."""
    host = topo.host(src_host)
    nat_ip = str(next(iter(topo.lane_pool.prefix.hosts()))) if host.needs_nat else None
    return LaneSpec(
        lane_id=lane_id,
        src_ip=str(host.iface.ip.ip),
        dst_ip=flow.dst_ip,
        protocol=PROTOCOL,
        dst_port=flow.dst_port,
        src_port=None,
        nat_ip=nat_ip,
        expires_at=(now if now is not None else time.time()) + duration_s,
    )
