"""A raw TCP peer speaking OpenFlow bytes to the controller's listener (the guard and embedded tests)."""

from __future__ import annotations

import socket
import struct
import time

from os_ken.ofproto import ofproto_v1_3 as ofp


def msg(msg_type: int, body: bytes, version: int = 4, xid: int = 1) -> bytes:
    return struct.pack("!BBHI", version, msg_type, 8 + len(body), xid) + body


# ---- a live controller against hostile peers --------------------------------------------------
class Peer:
    """A bare-bytes OpenFlow 1.3 switch: enough handshake to be a connected switch."""

    def __init__(self, port: int, dpid: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.dpid = dpid
        self.buf = b""

    def read(self, timeout: float = 5.0) -> tuple[int, int, bytes] | None:
        """(type, xid, whole message), or None when the controller closed the connection."""
        self.sock.settimeout(timeout)
        while len(self.buf) < 8 or len(self.buf) < struct.unpack_from("!H", self.buf, 2)[0]:
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise
            except OSError:  # reset, or closed by the test meanwhile
                return None
            if not chunk:
                return None
            self.buf += chunk
        length = struct.unpack_from("!H", self.buf, 2)[0]
        raw, self.buf = self.buf[:length], self.buf[length:]
        return raw[1], struct.unpack_from("!I", raw, 4)[0], raw

    def handshake(self) -> None:
        self.sock.sendall(msg(ofp.OFPT_HELLO, struct.pack("!HHI", 1, 8, 1 << 4)))  # OpenFlow 1.3 only
        deadline = time.monotonic() + 30  # each read has its own 5 s; this bounds the loop
        while True:
            assert time.monotonic() < deadline, "no FEATURES_REQUEST from the controller within 30 s"
            got = self.read()
            assert got is not None, "controller closed a well-behaved switch"
            msg_type, xid, _ = got
            if msg_type == ofp.OFPT_FEATURES_REQUEST:
                self.sock.sendall(
                    msg(ofp.OFPT_FEATURES_REPLY, struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0, 0), xid=xid)
                )
                return

    def serve_until(self, want_type: int, timeout: float = 5.0) -> bytes | None:
        """Answer what a switch must answer until a message of ``want_type`` arrives."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                got = self.read(max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                continue
            if got is None:
                return None
            msg_type, xid, raw = got
            if msg_type == want_type:
                return raw
            if msg_type == ofp.OFPT_ECHO_REQUEST:
                self.sock.sendall(msg(ofp.OFPT_ECHO_REPLY, raw[8:], xid=xid))
            elif msg_type == ofp.OFPT_BARRIER_REQUEST:
                self.sock.sendall(msg(ofp.OFPT_BARRIER_REPLY, b"", xid=xid))
            elif msg_type == ofp.OFPT_MULTIPART_REQUEST:
                mp_type = struct.unpack_from("!H", raw, 8)[0]
                self.sock.sendall(msg(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", mp_type, 0), xid=xid))
        return None

    def closed_by_controller(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                got = self.read(max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                return False
            if got is None:
                return True
        return False

    def close(self) -> None:
        self.sock.close()
