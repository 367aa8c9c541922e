"""sFlow v5 datagrams made by hand (flow samples with a raw Ethernet/IPv4/TCP header), for tests
that drive the collector without a switch, and for forged-datagram tests. The layout is the
sFlow v5 specification's (sflow.org/sflow_version_5.txt): XDR, big-endian."""

from __future__ import annotations

import socket
import struct
from ipaddress import IPv4Address, IPv6Address


def _tcp_header(src: IPv4Address, dst: IPv4Address, sport: int, dport: int, frame: int) -> bytes:
    eth = bytes.fromhex("020000000002020000000001") + struct.pack("!H", 0x0800)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, frame - 14, 1, 0x4000, 64, 6, 0, src.packed, dst.packed)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 0x50, 0x10, 65535, 0, 0)
    return eth + ip + tcp


def _tcp6_header(src: IPv6Address, dst: IPv6Address, sport: int, dport: int, frame: int, label: int) -> bytes:
    eth = bytes.fromhex("020000000002020000000001") + struct.pack("!H", 0x86DD)
    ip = struct.pack("!IHBB16s16s", 6 << 28 | label, frame - 54, 6, 64, src.packed, dst.packed)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 0x50, 0x10, 65535, 0, 0)
    return eth + ip + tcp


def _flow_sample(header: bytes, frame: int, sampling_rate: int, seq: int, in_if: int) -> bytes:
    header += b"\0" * (-len(header) % 4)
    raw = struct.pack("!IIII", 1, frame + 4, 4, len(header) - (-len(header) % 4)) + header
    record = struct.pack("!II", 1, len(raw)) + raw  # enterprise 0, format 1: raw packet header
    body = struct.pack("!IIIIIIII", seq, 1, sampling_rate, seq * sampling_rate, 0, in_if, 2, 1) + record
    return struct.pack("!II", 1, len(body)) + body  # enterprise 0, format 1: flow sample


def flow_sample6(
    src: str, dst: str, sport: int, dport: int, sampling_rate: int, label: int, seq: int = 1, in_if: int = 1
) -> bytes:
    """One sampled IPv6 TCP packet of 1,514 bytes whose header carries flow label ``label``."""
    header = _tcp6_header(IPv6Address(src), IPv6Address(dst), sport, dport, 1514, label)
    return _flow_sample(header, 1514, sampling_rate, seq, in_if)


def flow_sample(
    src: str, dst: str, sport: int, dport: int, sampling_rate: int, frame: int = 1514, seq: int = 1, in_if: int = 1
) -> bytes:
    header = _tcp_header(IPv4Address(src), IPv4Address(dst), sport, dport, frame)
    header += b"\0" * (-len(header) % 4)
    raw = struct.pack("!IIII", 1, frame + 4, 4, len(header) - (-len(header) % 4)) + header
    record = struct.pack("!II", 1, len(raw)) + raw  # enterprise 0, format 1: raw packet header
    body = struct.pack("!IIIIIIII", seq, 1, sampling_rate, seq * sampling_rate, 0, in_if, 2, 1) + record
    return struct.pack("!II", 1, len(body)) + body  # enterprise 0, format 1: flow sample


def datagram(agent: str, samples: list[bytes], seq: int = 1) -> bytes:
    head = struct.pack("!II4sIIII", 5, 1, IPv4Address(agent).packed, 0, seq, 1000, len(samples))
    return head + b"".join(samples)


def send(target: tuple[str, int], payload: bytes, source: str = "") -> None:
    """One datagram to ``target``, from ``source`` when given (a loopback alias: 127.0.0.2)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if source:
            s.bind((source, 0))
        s.sendto(payload, target)
