"""Our OpenFlow listener for os-ken: every message passes ``guard`` before a parser sees it, and the
listener can be stopped.

os-ken 4.2's own listener has two problems we cannot live with:

- its read loop hands each message straight to parsers that loop forever on zero-length fields
  (see ``guard``); one hostile peer would pin a CPU and never let go of its thread;
- with native threads ``hub.kill`` is a no-op, so its accept loop and a dead connection's send
  thread never end: the listen socket stays bound after ``stop()`` and a disconnect is noticed only
  when the next echo request fails (up to ``echo_request_interval`` later).

``GuardedOFPHandler`` replaces ``os_ken.controller.ofp_handler.OFPHandler`` (same app name, same
handshake handlers): ``launcher.start_apps`` swaps it in. TCP only (no TLS listener).
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
from typing import Any, Callable, Sequence

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.controller import Datapath
from os_ken.controller.handler import DEAD_DISPATCHER
from os_ken.controller.ofp_handler import OFPHandler
from os_ken.lib import hub
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp_v13

from viplanes.controller import flowstats, guard

LOG = logging.getLogger("viplanes.controller.ofserver")
HEADER = 8
READ_SIZE = 65536
HANDSHAKE_TIMEOUT_S = 10.0  # a peer that is no switch by then is dropped (it holds 3 threads)
ECHO_MAX_UNREPLIED = 3  # os-ken's default 0 never drops a silent peer
MAX_CONNECTIONS = 512
# (datapath, xid, entries, more) for flow-stats replies decoded without os-ken (flowstats.py);
# set by the app. None: every reply goes through os-ken's parser and the app's event handler.
FlowStatsHook = Callable[[Any, int, list, bool], None]
_flow_stats_hook: FlowStatsHook | None = None


def set_flow_stats_hook(hook: FlowStatsHook | None) -> None:
    global _flow_stats_hook
    _flow_stats_hook = hook


class GuardedDatapath(Datapath):
    """One switch connection whose reader refuses messages the guard rejects."""

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self._stopping = threading.Event()
        super().__init__(sock, address)
        self.rejected: str | None = None
        self.max_unreplied_echo_requests = self.max_unreplied_echo_requests or ECHO_MAX_UNREPLIED
        self._handshake_timer = threading.Timer(HANDSHAKE_TIMEOUT_S, self._handshake_expired)
        self._handshake_timer.daemon = True

    def send_msgs(self, msgs: Sequence[Any]) -> bool:
        """Serialise ``msgs`` in order and queue them as one buffer; False when the connection is
        closing (then nothing of the batch was queued).

        ``send_msg`` per message means one send-queue put, i.e. one wake-up of the send thread and
        one GIL hand-off, per message (9 for an activation). Xids already set are kept, so the
        barrier/xid tracking of ``LaneRuntime`` sees exactly the xids it assigned.
        """
        chunks = []
        for msg in msgs:
            msg.datapath = self
            if msg.xid is None:
                self.set_xid(msg)
            msg.serialize()
            chunks.append(msg.buf)
        return bool(self.send(b"".join(chunks)))

    def _handshake_expired(self) -> None:
        if self.id is None:
            LOG.warning("closing OpenFlow connection from %s: no features reply within %g s",
                        self.address, HANDSHAKE_TIMEOUT_S)
            self.shutdown()

    def _dispatch(self, raw: bytes) -> None:
        version, msg_type, msg_len, xid = struct.unpack_from("!BBHI", raw, 0)
        msg = ofproto_parser.msg(self, version, msg_type, msg_len, xid, raw)
        if not msg:
            return
        ev = ofp_event.ofp_msg_to_ev(msg)
        if self.ofp_brick is None:
            return
        self.ofp_brick.send_event_to_observers(ev, self.state)
        handlers = [h for h in self.ofp_brick.get_handlers(ev)
                    if self.state in h.callers[ev.__class__].dispatchers]
        for handler in handlers:  # chosen before any runs: a handler may change the state
            handler(ev)

    def _recv_loop(self) -> None:
        buf = bytearray()
        try:
            while self.state != DEAD_DISPATCHER:
                try:
                    chunk = self.socket.recv(READ_SIZE)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                while len(buf) >= HEADER:
                    msg_len = struct.unpack_from("!H", buf, 2)[0]
                    if msg_len < HEADER:
                        self._reject(f"header length {msg_len} < {HEADER}")
                        return
                    if len(buf) < msg_len:
                        break
                    raw = bytes(buf[:msg_len])
                    del buf[:msg_len]
                    verdict = guard.check_message(raw)
                    if verdict.action == guard.REJECT:
                        self._reject(verdict.reason)
                        return
                    if verdict.action == guard.DROP:
                        LOG.debug("dropped from %s: %s", self.address, verdict.reason)
                        continue
                    if self._fast_flow_stats(raw):
                        continue
                    try:
                        self._dispatch(raw)
                    except Exception:  # noqa: BLE001 - a handler bug must not kill this switch
                        LOG.exception("handling a message from %s (dpid=%s)", self.address,
                                      self.id)
        finally:
            self._stopping.set()
            try:
                self.socket.close()
            except OSError:
                pass

    def _fast_flow_stats(self, raw: bytes) -> bool:
        """Hand a flow-stats reply to the hook, decoded by us; False: use os-ken's parser."""
        hook = _flow_stats_hook
        if hook is None or raw[1] != ofp_v13.OFPT_MULTIPART_REPLY or self.id is None:
            return False
        decoded = flowstats.decode_flow_stats_reply(raw)
        if decoded is None:
            return False
        entries, more = decoded
        hook(self, struct.unpack_from("!I", raw, 4)[0], entries, more)
        return True

    def _reject(self, reason: str) -> None:
        self.rejected = reason
        LOG.warning("closing OpenFlow connection from %s (dpid=%s): malformed message: %s",
                    self.address, self.id, reason)

    def _echo_request_loop(self) -> None:
        if not self.max_unreplied_echo_requests:
            return
        while not self._stopping.is_set() and self.send_q and (
                len(self.unreplied_echo_requests) <= self.max_unreplied_echo_requests):
            echo = self.ofproto_parser.OFPEchoRequest(self)
            self.unreplied_echo_requests.append(self.set_xid(echo))
            self.send_msg(echo)
            self._stopping.wait(self.echo_request_interval)
        if not self._stopping.is_set():  # the peer stopped answering echoes: drop it
            LOG.warning("closing OpenFlow connection from %s (dpid=%s): no echo replies",
                        self.address, self.id)
            self.shutdown()

    def shutdown(self) -> None:
        """Make the reader return (from any thread); the connection then closes itself."""
        self._stopping.set()
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def serve(self) -> None:
        self._handshake_timer.start()
        send_thread = hub.spawn(self._send_loop)
        self.send_msg(self.ofproto_parser.OFPHello(self))
        echo_thread = hub.spawn(self._echo_request_loop)
        try:
            self._recv_loop()
        finally:
            self._handshake_timer.cancel()
            self._stopping.set()
            if self.send_q is not None:
                self.send(b"", close_socket=True)  # wakes the send loop so it ends
            send_thread.join(5)
            echo_thread.join(5)
            self.is_active = False


class OpenFlowServer:
    """Accepts switch connections on (host, port); ``close`` stops accepting and drops them all."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
            self.sock.listen(64)
        except OSError:
            self.sock.close()
            raise
        self.address = self.sock.getsockname()[:2]
        self.datapaths: set[GuardedDatapath] = set()
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def serve_forever(self) -> None:
        while not self._closed.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            with self._lock:
                full = len(self.datapaths) >= MAX_CONNECTIONS
            if full:
                LOG.warning("refusing OpenFlow connection from %s: %d connections open",
                            addr, MAX_CONNECTIONS)
                conn.close()
                continue
            hub.spawn(self._serve_connection, conn, addr)

    def _serve_connection(self, conn: socket.socket, addr: Any) -> None:
        try:
            dp = GuardedDatapath(conn, addr)
        except OSError:
            conn.close()
            return
        with self._lock:
            self.datapaths.add(dp)
        try:
            dp.serve()
        except Exception:  # noqa: BLE001 - one connection's failure stays with it
            LOG.exception("OpenFlow connection from %s failed", addr)
        finally:
            with self._lock:
                self.datapaths.discard(dp)
            dp.close()  # -> DEAD_DISPATCHER: apps forget the switch

    def close(self) -> None:
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept()
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            datapaths = list(self.datapaths)
        for dp in datapaths:
            dp.shutdown()


class GuardedOFPHandler(OFPHandler):
    """os-ken's handshake app with our listener instead of ``OpenFlowController``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server: OpenFlowServer | None = None

    def start(self) -> Any:
        app_manager.OSKenApp.start(self)
        conf = cfg.CONF
        host = conf.ofp_listen_host or "127.0.0.1"
        self.server = OpenFlowServer(host, conf.ofp_tcp_listen_port or 6653)
        LOG.info("OpenFlow listening on %s:%d", *self.server.address)
        return hub.spawn(self.server.serve_forever)

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        super().stop()
