"""Packets as the fields a switch matches on, for the flow-table simulator (``flowsim``) and the
tests that walk them: one canonical form, so a packet built here compares equal to one a
simulated switch rewrote.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from viplanes.controller.compile.flowkey import IPV4_FIELDS, IPV6_FIELDS, MAC_FIELDS

Packet = dict[str, Any]


def canonical(fieldname: str, value: Any) -> Any:
    """How packet fields are stored: dotted IPv4 / compressed IPv6 strings, lower-case MACs, ints."""
    if isinstance(value, dict):
        return {k: canonical(k, v) for k, v in value.items()}
    if fieldname in MAC_FIELDS:
        return str(value).lower()
    if fieldname in IPV4_FIELDS:
        return str(ipaddress.IPv4Address(value))
    if fieldname in IPV6_FIELDS:
        return str(ipaddress.IPv6Address(value))
    return int(value)


def make_packet(**fields: Any) -> Packet:
    return {k: canonical(k, v) for k, v in fields.items() if v is not None}


def ip_packet(
    eth_src: str,
    eth_dst: str,
    ipv4_src: str,
    ipv4_dst: str,
    protocol: str = "tcp",
    src_port: int = 40000,
    dst_port: int = 5201,
) -> Packet:
    """A TCP or UDP packet as the fields a switch can match on."""
    proto = {"tcp": 6, "udp": 17}[protocol]
    return make_packet(
        eth_src=eth_src,
        eth_dst=eth_dst,
        eth_type=0x0800,
        ip_proto=proto,
        ipv4_src=ipv4_src,
        ipv4_dst=ipv4_dst,
        **{f"{protocol}_src": src_port, f"{protocol}_dst": dst_port},
    )


def ip6_packet(
    eth_src: str,
    eth_dst: str,
    ipv6_src: str,
    ipv6_dst: str,
    protocol: str = "tcp",
    src_port: int | None = 40000,
    dst_port: int | None = 5201,
) -> Packet:
    """A TCP or UDP packet over IPv6; ports None: a non-first fragment (no L4 header)."""
    proto = {"tcp": 6, "udp": 17}[protocol]
    ports = {f"{protocol}_src": src_port, f"{protocol}_dst": dst_port}
    return make_packet(
        eth_src=eth_src, eth_dst=eth_dst, eth_type=0x86DD, ip_proto=proto, ipv6_src=ipv6_src, ipv6_dst=ipv6_dst, **ports
    )


def icmp6_error(
    eth_src: str, eth_dst: str, ipv6_src: str, ipv6_dst: str, about: Packet, icmp_type: int = 2, icmp_code: int = 0
) -> Packet:
    """An ICMPv6 error (default: packet too big) quoting the header of ``about``."""
    inner = {k: v for k, v in about.items() if k.startswith(("ipv6_", "ip_proto", "tcp_", "udp_"))}
    return make_packet(
        eth_src=eth_src,
        eth_dst=eth_dst,
        eth_type=0x86DD,
        ip_proto=58,
        ipv6_src=ipv6_src,
        ipv6_dst=ipv6_dst,
        icmpv6_type=icmp_type,
        icmpv6_code=icmp_code,
        icmp_inner=inner,
    )


def icmp_error(
    eth_src: str, eth_dst: str, ipv4_src: str, ipv4_dst: str, about: Packet, icmp_type: int = 3, icmp_code: int = 4
) -> Packet:
    """An ICMP error (default: fragmentation needed) quoting the header of ``about``."""
    inner = {k: v for k, v in about.items() if k.startswith(("ipv4_", "ip_proto", "tcp_", "udp_"))}
    return make_packet(
        eth_src=eth_src,
        eth_dst=eth_dst,
        eth_type=0x0800,
        ip_proto=1,
        ipv4_src=ipv4_src,
        ipv4_dst=ipv4_dst,
        icmpv4_type=icmp_type,
        icmpv4_code=icmp_code,
        icmp_inner=inner,
    )
