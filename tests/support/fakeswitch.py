"""A hostile OpenFlow 1.3 "switch" for attack tests: plain sockets + ssl, messages packed by hand.

It plays just enough of a switch to be served: hello, features reply with the dpid it claims,
empty port-desc and flow-stats replies, barrier and echo replies. It counts what the controller
sends it (flow-mods, barriers, packet-outs), so a test can prove an impostor got nothing.
Single-threaded: ``pump`` reads and answers until a deadline or until the controller closes.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections import Counter
from pathlib import Path

from os_ken.ofproto import ofproto_v1_3 as ofp

HEADER = 8


def client_context(ca: Path | None, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """TLS client side as ovs-vswitchd does it: checks the controller against ``ca`` (or not)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if ca is not None:
        ctx.load_verify_locations(cafile=str(ca))
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def message(msg_type: int, body: bytes = b"", xid: int = 0) -> bytes:
    return struct.pack("!BBHI", ofp.OFP_VERSION, msg_type, HEADER + len(body), xid) + body


def arp_request_packet_in(target_ip: str, in_port: int = 1) -> bytes:
    """A PACKET_IN carrying an ARP request for ``target_ip`` (what the edge router would punt)."""
    sender_mac = bytes.fromhex("020000030001")
    frame = (
        b"\xff" * 6
        + sender_mac
        + b"\x08\x06"
        + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)
        + sender_mac
        + socket.inet_aton("198.51.100.1")
        + b"\0" * 6
        + socket.inet_aton(target_ip)
    )
    return packet_in(frame, in_port)


def packet_in(frame: bytes, in_port: int = 1) -> bytes:
    """A raw OF1.3 PACKET_IN carrying ``frame``, as if punted from ``in_port``."""
    oxm = struct.pack("!HBBI", 0x8000, ofp.OFPXMT_OFB_IN_PORT << 1, 4, in_port)
    match = struct.pack("!HH", ofp.OFPMT_OXM, 4 + len(oxm)) + oxm
    match += b"\0" * ((8 - len(match) % 8) % 8)
    body = struct.pack("!IHBBQ", ofp.OFP_NO_BUFFER, len(frame), ofp.OFPR_ACTION, 0, 0)
    return message(ofp.OFPT_PACKET_IN, body + match + b"\0\0" + frame)


class FakeSwitch:
    def __init__(self, port: int, dpid: int, ctx: ssl.SSLContext | None, answer_echo: bool = True) -> None:
        self.dpid = dpid
        self.answer_echo = answer_echo
        self.received: Counter[int] = Counter()  # message type -> count
        self.closed = False
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        # raises ssl.SSLError / OSError when the controller refuses the handshake
        self.sock = ctx.wrap_socket(raw) if ctx is not None else raw
        self.sock.settimeout(0.2)
        self._buf = bytearray()
        self.send(message(ofp.OFPT_HELLO, struct.pack("!HHI", 1, 8, 1 << ofp.OFP_VERSION)))

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def _reply(self, msg_type: int, xid: int, body: bytes) -> None:
        if msg_type == ofp.OFPT_FEATURES_REQUEST:
            self.send(message(ofp.OFPT_FEATURES_REPLY, struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0x4F, 0), xid))
        elif msg_type == ofp.OFPT_ECHO_REQUEST and self.answer_echo:
            self.send(message(ofp.OFPT_ECHO_REPLY, body, xid))
        elif msg_type == ofp.OFPT_BARRIER_REQUEST:
            self.send(message(ofp.OFPT_BARRIER_REPLY, b"", xid))
        elif msg_type == ofp.OFPT_MULTIPART_REQUEST:
            mp_type = struct.unpack_from("!H", body, 0)[0]
            self.send(message(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", mp_type, 0), xid))

    def pump(self, seconds: float, until_closed: bool = False) -> bool:
        """Read and answer for ``seconds``; True if the controller closed the connection."""
        deadline = time.monotonic() + seconds
        self.sock.settimeout(max(0.001, min(0.2, seconds)))
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except (TimeoutError, ssl.SSLWantReadError):
                if time.monotonic() >= deadline:
                    break
                continue
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self._buf += chunk
            while len(self._buf) >= HEADER:
                _v, msg_type, length, xid = struct.unpack_from("!BBHI", self._buf, 0)
                if len(self._buf) < length:
                    break
                body = bytes(self._buf[HEADER:length])
                del self._buf[:length]
                self.received[msg_type] += 1
                self._reply(msg_type, xid, body)
            if time.monotonic() >= deadline:
                break
        return self.closed

    @property
    def flow_mods(self) -> int:
        return self.received[ofp.OFPT_FLOW_MOD]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
