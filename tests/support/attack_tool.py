"""Raw-socket helpers run inside Mininet hosts by test_attack_dataplane (no scapy, no nping here).

send IFACE SRC_MAC DST_MAC VLAN SRC_IP DST_IP SPORT DPORT FLAGS COUNT TAG
    COUNT TCP frames (802.1Q-tagged when VLAN > 0), payload b"VLATK" + TAG (4 bytes)
sendmany IFACE COUNT JSON
    the same for each case of JSON, a list of [SRC_MAC, DST_MAC, VLAN, SRC_IP, DST_IP, SPORT,
    DPORT, FLAGS, TAG]: one python3 start for a host's cases (one each took ~1 s at load 9)
sniff IFACE SECONDS [until-eof]
    count frames carrying b"VLATK"; prints JSON {tag: [count, src_ip, dst_ip, tagged]}
icmp DST_IP INNER_SRC INNER_DST INNER_SPORT INNER_DPORT
    one ICMP fragmentation-needed (MTU 1200) quoting a TCP header, via the kernel's IP
sniff_icmp IFACE SECONDS [until-eof]
    prints JSON list of [outer_dst, inner_src, inner_dst, inner_sport] of ICMP 3/4 frames

A sniffer given ``until-eof`` stops when its stdin closes (the test has sent everything), then
once no frame came for ``QUIET_S`` (the last frames are still crossing the lab's userspace
switches), and at SECONDS at the latest. A fixed window instead ran out under load while the
senders (one python3 start each) were still going: a late frame was simply not counted.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import sys
import time
from collections.abc import Callable

MARK = b"VLATK"
QUIET_S = 1.0


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def tcp_frame(
    src_mac: str, dst_mac: str, vlan: int, src_ip: str, dst_ip: str, sport: int, dport: int, flags: int, tag: str
) -> bytes:
    payload = MARK + tag.encode()[:4].ljust(4, b"_")
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1000, 1 if flags & 0x10 else 0, 5 << 4, flags, 65535, 0, 0) + payload
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 7, 0, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", ""))
    if vlan:
        eth += struct.pack("!HH", 0x8100, vlan)
    return eth + b"\x08\x00" + ip + tcp


def _send(iface: str, cases: list[list], count: int) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        for src_mac, dst_mac, vlan, src_ip, dst_ip, sport, dport, flags, tag in cases:
            frame = tcp_frame(
                src_mac, dst_mac, int(vlan), src_ip, dst_ip, int(sport), int(dport), int(str(flags), 0), tag
            )
            for _ in range(count):
                s.send(frame)
                time.sleep(0.002)


def send(argv: list[str]) -> None:
    iface, *case, count, tag = argv
    _send(iface, [[*case, tag]], int(count))


def sendmany(argv: list[str]) -> None:
    iface, count, cases = argv
    _send(iface, json.loads(cases), int(count))


def _any(frame: bytes) -> bool:
    return True


def _frames(iface: str, seconds: float, until_eof: bool = False, wanted: Callable[[bytes], bool] = _any):
    """Frames arriving on ``iface`` for ``seconds``; with ``until_eof``, only until stdin closed
    and ``QUIET_S`` passed without a ``wanted`` frame (the lab's own chatter does not count)."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3)) as s:
        s.bind((iface, 0))
        print("ready", flush=True)
        end = time.monotonic() + seconds
        watched: list = [s, sys.stdin] if until_eof else [s]
        quiet_end = None  # set once stdin closed: the end unless another frame comes
        while (left := min(end, quiet_end or end) - time.monotonic()) > 0:
            ready = select.select(watched, [], [], left)[0]
            if sys.stdin in ready:
                if not os.read(sys.stdin.fileno(), 4096):
                    watched = [s]
                    quiet_end = time.monotonic() + QUIET_S
                continue
            if ready:
                frame, addr = s.recvfrom(65535)
                if addr[2] != socket.PACKET_OUTGOING:
                    if quiet_end is not None and wanted(frame):
                        quiet_end = time.monotonic() + QUIET_S
                    yield frame


def _ip(frame: bytes) -> tuple[bytes, bool] | None:
    tagged = frame[12:14] == b"\x81\x00"
    at = 16 if tagged else 12
    if frame[at : at + 2] != b"\x08\x00":
        return None
    return frame[at + 2 :], tagged


def sniff(argv: list[str]) -> None:
    seen: dict[str, list] = {}
    for frame in _frames(argv[0], float(argv[1]), argv[2:] == ["until-eof"], lambda f: MARK in f):
        pos = frame.find(MARK)
        parsed = _ip(frame)
        if pos < 0 or parsed is None:
            continue
        ip, tagged = parsed
        tag = frame[pos + 5 : pos + 9].decode(errors="replace").rstrip("_")
        entry = seen.setdefault(tag, [0, socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20]), tagged])
        entry[0] += 1
    print(json.dumps(seen), flush=True)


def icmp(argv: list[str]) -> None:
    dst, inner_src, inner_dst, sport, dport = argv
    inner_ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 1500, 9, 0x4000, 63, 6, 0, socket.inet_aton(inner_src), socket.inet_aton(inner_dst)
    )
    inner_ip = inner_ip[:10] + struct.pack("!H", checksum(inner_ip)) + inner_ip[12:]
    quote = inner_ip + struct.pack("!HHI", int(sport), int(dport), 12345)
    body = struct.pack("!BBHHH", 3, 4, 0, 0, 1200) + quote
    body = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        for _ in range(3):
            s.sendto(body, (dst, 0))
            time.sleep(0.05)


def _is_frag_needed(frame: bytes) -> bool:
    parsed = _ip(frame)
    if parsed is None or parsed[0][9] != 1:
        return False
    ip = parsed[0]
    return ip[(ip[0] & 0xF) * 4 :][:2] == b"\x03\x04"


def sniff_icmp(argv: list[str]) -> None:
    found = []
    for frame in _frames(argv[0], float(argv[1]), argv[2:] == ["until-eof"], _is_frag_needed):
        parsed = _ip(frame)
        if parsed is None:
            continue
        ip, _tagged = parsed
        if ip[9] != 1:
            continue
        body = ip[(ip[0] & 0xF) * 4 :]
        if body[:2] != b"\x03\x04":
            continue
        inner = body[8:]
        found.append(
            [
                socket.inet_ntoa(ip[16:20]),
                socket.inet_ntoa(inner[12:16]),
                socket.inet_ntoa(inner[16:20]),
                int.from_bytes(inner[20:22], "big"),
            ]
        )
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    {"send": send, "sendmany": sendmany, "sniff": sniff, "icmp": icmp, "sniff_icmp": sniff_icmp}[sys.argv[1]](
        sys.argv[2:]
    )
