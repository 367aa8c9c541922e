"""A raw OpenFlow 1.3 connection to a fresh userspace OVS bridge: the compiled bytes go to a real
switch exactly as built, without os-ken's app in between (the compiler-against-OVS tests)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from os_ken.ofproto import ofproto_parser as ofproto_parser_mod
from os_ken.ofproto import ofproto_protocol
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.ovs import ovs_problem, vsctl
from tests.support.procs import free_port
from tests.support.runtag import ifname


class FakeDatapath(ofproto_protocol.ProtocolDesc):
    """Just enough of an os-ken Datapath to serialise a message or parse a reply (OpenFlow 1.3)."""

    def __init__(self) -> None:
        super().__init__(ofp.OFP_VERSION)
        self.id = 1


class RawOpenFlow:
    """Just enough of an OpenFlow 1.3 controller connection to send bytes and read answers."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.xid = 100
        self.sock.sendall(struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_HELLO, 8, 1))
        while self.recv().__class__ is not parser.OFPHello:
            pass

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("switch closed the connection")
            data += chunk
        return data

    def recv(self) -> Any:
        head = self._read(8)
        version, msg_type, length, xid = struct.unpack("!BBHI", head)
        body = self._read(length - 8)
        msg = ofproto_parser_mod.msg(FakeDatapath(), version, msg_type, length, xid, head + body)
        if isinstance(msg, parser.OFPEchoRequest):
            self.sock.sendall(struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_ECHO_REPLY, 8, xid))
        return msg

    def send(self, msg: Any) -> None:
        self.xid += 1
        msg.datapath, msg.xid = FakeDatapath(), self.xid
        msg.serialize()
        self.sock.sendall(bytes(msg.buf))

    def barrier(self) -> list[Any]:
        """Send a barrier; return every error the switch sent before answering it."""
        self.send(parser.OFPBarrierRequest(None))
        errors = []
        deadline = time.monotonic() + 30  # each recv has the socket's 10 s; this bounds the loop
        while time.monotonic() < deadline:
            msg = self.recv()
            if isinstance(msg, parser.OFPBarrierReply):
                return errors
            if isinstance(msg, parser.OFPErrorMsg):
                errors.append(msg)
        raise AssertionError("no barrier reply from the switch within 30 s")

    def flow_stats(self, cookie: int, mask: int) -> list[Any]:
        self.send(
            parser.OFPFlowStatsRequest(
                None, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, cookie, mask, parser.OFPMatch()
            )
        )
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = self.recv()
            if isinstance(msg, parser.OFPFlowStatsReply):
                out += msg.body
                if not msg.flags & ofp.OFPMPF_REPLY_MORE:
                    return out
        raise AssertionError("the switch's flow stats did not end within 30 s")

    def close(self) -> None:
        self.sock.close()


@contextmanager
def ovs_bridge() -> Iterator[tuple[str, RawOpenFlow]]:
    """A fresh userspace bridge with OpenFlow ports 1-4, listening for one controller."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    problem = ovs_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    name = ifname("vxA", longest_suffix="-p4")
    port = free_port()
    conn = None
    try:
        vsctl(
            "add-br",
            name,
            "--",
            "set",
            "bridge",
            name,
            "datapath_type=netdev",
            "fail_mode=secure",
            "protocols=OpenFlow13",
            "other-config:disable-in-band=true",
        )
        for n in (1, 2, 3, 4):
            vsctl(
                "add-port",
                name,
                f"{name}p{n}",
                "--",
                "set",
                "interface",
                f"{name}p{n}",
                "type=internal",
                f"ofport_request={n}",
            )
        vsctl("set-controller", name, f"ptcp:{port}:127.0.0.1")
        for _ in range(50):
            try:
                conn = RawOpenFlow(port)
                break
            except OSError:
                time.sleep(0.1)
        assert conn is not None, "bridge never listened"
        yield name, conn
    finally:
        if conn is not None:
            conn.close()
        subprocess.run(["ovs-vsctl", "--timeout=20", "--if-exists", "del-br", name], capture_output=True, timeout=30)


def install(conn: RawOpenFlow, ofmsgs: list[Any]) -> None:
    for msg in ofmsgs:
        conn.send(msg)
    errors = conn.barrier()
    assert not errors, [(e.type, e.code) for e in errors]


def of_kind(msg: Any) -> str:
    """The os-ken message class ``msg`` is, by name: a ``CookieDelete`` (a removal's delete built
    from a prototype, ``controller/compile/removal.py``) is an ``OFPFlowMod``."""
    return next(c.__name__ for c in type(msg).__mro__ if c.__module__.startswith("os_ken."))
