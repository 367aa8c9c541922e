"""Our OpenFlow listener for os-ken: every message passes ``guard`` before a parser sees it, and the
listener can be stopped.

os-ken 4.2's own listener has two problems we cannot live with:

- its read loop hands each message straight to parsers that loop forever on zero-length fields
  (see ``guard``); one hostile peer would pin a CPU and never let go of its thread;
- with native threads ``hub.kill`` is a no-op, so its accept loop and a dead connection's send
  thread never end: the listen socket stays bound after ``stop()`` and a disconnect is noticed only
  when the next echo request fails (up to ``echo_request_interval`` later).

``ofhandler.GuardedOFPHandler`` replaces os-ken's ``OFPHandler`` and starts the listener
(``oflistener.OpenFlowServer``: accept loop, TLS handshake, connection caps); this module is one
admitted connection (``GuardedDatapath``: screening, guard, reading, echo, shutdown; its
batched writes go through its ``writer``, a ``write.BatchWriter``).

Switches authenticate (``ListenerSecurity``): TLS with a campus-CA client certificate
(``oftls``), then ``admission`` decides after the features reply whether that certificate may
claim that dpid and whether an older connection of the dpid still answers. Until then only the
handshake messages reach os-ken, so nothing of the lane runtime reaches an unauthorized peer.
Per connection, PACKET_IN and echo requests pass a token bucket (``peerauth``; cabling probes
have a bucket of their own, ``punts``); connections per
source address that have not finished their TLS handshake are capped. Plain TCP
(``--insecure-tcp``) keeps the dpid checks and the limits, without certificates.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from os_ken.base import app_manager  # noqa: F401 - first: os_ken.controller.controller needs it
from os_ken.controller import ofp_event
from os_ken.controller.controller import Datapath
from os_ken.controller.handler import DEAD_DISPATCHER
from os_ken.lib import hub
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp_v13

from viplanes.controller.openflow import echo, flowstats, guard, punts, tablesizes
from viplanes.controller.openflow import tls as oftls
from viplanes.controller.openflow.admission import Admission, Limits
from viplanes.controller.openflow.peerauth import TokenBucket
from viplanes.controller.openflow.write import BatchWriter

LOG = logging.getLogger("viplanes.controller.openflow.server")
HEADER = 8
READ_SIZE = 65536
HANDSHAKE_TIMEOUT_S = 10.0  # a peer that is no switch by then is dropped (it holds 3 threads)
ECHO_MAX_UNREPLIED = 3  # os-ken's default 0 never drops a silent peer
# a reader waits this long for bytes before looking at its state again; os-ken's socket timeout
# (5 s, it bounds sends too) woke each idle reader just before OVS's 5 s inactivity probe came in
READ_IDLE_S = 60.0
# before admission only the handshake reaches os-ken; everything else is dropped unparsed
_PRE_AUTH = {
    ofp_v13.OFPT_HELLO,
    ofp_v13.OFPT_ERROR,
    ofp_v13.OFPT_ECHO_REQUEST,
    ofp_v13.OFPT_ECHO_REPLY,
    ofp_v13.OFPT_FEATURES_REPLY,
}


# (dpid, xid, entries, more) for flow-stats and table-features replies decoded without os-ken
# (flowstats.py, tablesizes.py): the runtime's ``on_flow_stats``, given by the listener. None:
# every reply goes through os-ken's parser and the app's event handler.
FlowStatsHook = Callable[[int, int, list, bool], None]


class GuardedDatapath(Datapath):
    """One switch connection whose reader refuses messages the guard rejects (its writes go
    through its ``writer``, a ``write.BatchWriter``)."""

    max_unreplied_echo_requests: int  # os-ken's Datapath sets it from its config (0: never)

    def __init__(
        self,
        sock: Any,
        address: Any,
        admission: Admission | None = None,
        limits: Limits | None = None,
        cert_der: bytes | None = None,
        *,
        echo_sweeper: echo.EchoSweeper | None = None,
        flow_stats_hook: FlowStatsHook | None = None,
    ) -> None:
        self._stopping = threading.Event()
        self.echo_sweeper = echo_sweeper  # the listener's; None: no echo checks (tests)
        self.flow_stats_hook = flow_stats_hook
        self.writer = BatchWriter(self, self._stopping)  # batched writes, and the send loop
        super().__init__(sock, address)
        self.rejected: str | None = None
        self.admission = admission
        self.cert_der = cert_der
        self.authorized = admission is None
        self.claimed_dpid: int | None = None
        limits = limits or Limits()
        self.packet_in_bucket = TokenBucket(
            limits.packet_in_per_s,
            limits.packet_in_burst,
            clock=time.monotonic,
            close_after=limits.packet_in_close_after,
        )
        self.probe_bucket = TokenBucket(limits.probe_in_per_s, limits.probe_in_burst, clock=time.monotonic)
        self.echo_bucket = TokenBucket(limits.echo_per_s, limits.echo_burst, clock=time.monotonic)
        self.unauthorized_dropped = 0
        self._probes: dict[int, threading.Event] = {}
        self.last_heard = time.monotonic()  # any bytes from the peer: it is alive (echo_tick)
        self._next_echo_at = 0.0  # while silent: no echo request before this time
        self.max_unreplied_echo_requests = self.max_unreplied_echo_requests or ECHO_MAX_UNREPLIED
        self._handshake_timer = threading.Timer(HANDSHAKE_TIMEOUT_S, self._handshake_expired)
        self._handshake_timer.daemon = True
        self._handshake_timer.name = "viplanes-of-handshake-timer"

    def peer_cert_der(self) -> bytes | None:
        return self.cert_der

    def probe(self, timeout_s: float) -> bool:
        """Does this connection still answer? An echo request with a deadline (takeover check)."""
        if self._stopping.is_set() or not self.send_q:
            return False
        echo = self.ofproto_parser.OFPEchoRequest(self, data=b"viplanes-probe")
        xid = self.set_xid(echo)
        echo.serialize()
        # never block here: a wedged peer with a full send queue is a dead one
        if not self._send_q_sem.acquire(blocking=False):
            return False
        queue = self.send_q
        if queue is None:
            self._send_q_sem.release()
            return False
        answered = threading.Event()
        self._probes[xid] = answered
        try:
            queue.put((echo.buf, False))
            return answered.wait(timeout_s)
        finally:
            self._probes.pop(xid, None)

    def _screen(self, raw: bytes) -> bool:
        """Admission and per-peer limits, before the guard and any parser. False: skip ``raw``;
        sets ``self.rejected`` when the connection must close."""
        msg_type = raw[1]
        if msg_type == ofp_v13.OFPT_PACKET_IN:
            if not self.authorized:
                self.unauthorized_dropped += 1
                return False
            if punts.is_probe(raw):  # its own budget: an ARP flood must not starve link checks
                return self.probe_bucket.take()
            if self.packet_in_bucket.take():
                return True
            if self.packet_in_bucket.abusive:
                self.rejected = (
                    f"PACKET_IN flood ({self.packet_in_bucket.dropped} dropped over {self.packet_in_bucket.rate:g}/s)"
                )
                LOG.warning("closing OpenFlow connection from %s (dpid=%s): %s", self.address, self.id, self.rejected)
            return False
        if msg_type == ofp_v13.OFPT_ECHO_REQUEST:
            return self.echo_bucket.take()
        if msg_type == ofp_v13.OFPT_ECHO_REPLY and len(raw) >= HEADER:
            probe = self._probes.get(struct.unpack_from("!I", raw, 4)[0])
            if probe is not None:
                probe.set()
                return False
            return True
        if msg_type == ofp_v13.OFPT_FEATURES_REPLY:
            if self.authorized and self.claimed_dpid is not None:
                return False  # one features reply per connection: a second could rename it
            return self._admit(raw)
        if not self.authorized and msg_type not in _PRE_AUTH:
            self.unauthorized_dropped += 1
            return False
        return True

    def _admit(self, raw: bytes) -> bool:
        if not guard.check_message(raw).ok:
            return True  # the guard rejects it next, with its reason
        dpid = struct.unpack_from("!Q", raw, HEADER)[0]
        self.claimed_dpid = dpid
        if self.admission is not None and not self.admission.admit(self, dpid):
            self.rejected = f"not admitted as dpid {dpid}"
            return False
        self.authorized = True
        self.id = dpid  # before any app sees the features reply (they run on their own threads)
        return True

    def _handshake_expired(self) -> None:
        if self.id is None:
            LOG.warning(
                "closing OpenFlow connection from %s: no features reply within %g s", self.address, HANDSHAKE_TIMEOUT_S
            )
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
        handlers = [h for h in self.ofp_brick.get_handlers(ev) if self.state in h.callers[ev.__class__].dispatchers]
        for handler in handlers:  # chosen before any runs: a handler may change the state
            handler(ev)

    def _recv_loop(self) -> None:
        buf = bytearray()
        try:
            while self.state != DEAD_DISPATCHER:
                try:
                    if not self._readable_within(READ_IDLE_S):
                        continue
                    chunk = self.socket.recv(READ_SIZE)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                self.last_heard = time.monotonic()
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
                    if not self._screen(raw):
                        if self.rejected is not None:
                            return
                        continue
                    if self._fast_flow_stats(raw):  # checked as it decodes (flowstats)
                        continue
                    verdict = guard.check_message(raw)
                    if verdict.action == guard.REJECT:
                        self._reject(verdict.reason)
                        return
                    if verdict.action == guard.DROP:
                        LOG.debug("dropped from %s: %s", self.address, verdict.reason)
                        continue
                    if self._answer_echo(raw):
                        continue
                    try:
                        self._dispatch(raw)
                    except Exception:
                        LOG.exception("handling a message from %s (dpid=%s)", self.address, self.id)
        finally:
            self._stopping.set()
            if self.admission is not None:
                self.admission.release(self, self.claimed_dpid)
            try:
                self.socket.close()
            except OSError:
                pass

    def _readable_within(self, timeout_s: float) -> bool:
        """Wait for bytes without waking every ``socket_timeout`` (one wake-up per idle switch
        per 5 s otherwise: background CPU that grows with the campus, issue 13)."""
        wait = getattr(self.socket, "readable_within", None)  # TLS: it may hold read records
        if wait is not None:
            return bool(wait(timeout_s))
        return oftls.readable(self.socket, timeout_s)

    def _answer_echo(self, raw: bytes) -> bool:
        """Echo request -> reply, echo reply -> acknowledged, without os-ken's parser, an event
        and a handler lookup (what ``OFPHandler`` does, byte for byte). Every switch sends one
        per inactivity probe (OVS: 5 s without a message from us), so a campus's echoes are
        background CPU that grows with its switches (issue 13). False: not an echo."""
        msg_type = raw[1]
        if msg_type == ofp_v13.OFPT_ECHO_REQUEST:  # same xid and data, our version
            self.send(bytes((self.ofproto.OFP_VERSION, ofp_v13.OFPT_ECHO_REPLY)) + raw[2:])
            return True
        if msg_type == ofp_v13.OFPT_ECHO_REPLY:
            self.acknowledge_echo_reply(struct.unpack_from("!I", raw, 4)[0])
            return True
        return False

    def _fast_flow_stats(self, raw: bytes) -> bool:
        """Hand a flow-stats or table-features reply to the hook, decoded by us; False: the guard,
        then os-ken's parser, decide. The decoders check every length they walk with the guard's
        rules, so a reply they accept is one the guard accepts (``test_flowstats_guard.py``,
        ``test_table_sizes.py``)."""
        hook = self.flow_stats_hook
        if hook is None or raw[1] != ofp_v13.OFPT_MULTIPART_REPLY or self.id is None:
            return False
        decoded = flowstats.decode_flow_stats_reply(raw) or tablesizes.decode_table_features_reply(raw)
        if decoded is None:
            return False
        entries, more = decoded
        hook(self.id, struct.unpack_from("!I", raw, 4)[0], entries, more)
        return True

    def _reject(self, reason: str) -> None:
        self.rejected = reason
        LOG.warning(
            "closing OpenFlow connection from %s (dpid=%s): malformed message: %s", self.address, self.id, reason
        )

    def echo_tick(self, now: float) -> None:
        """Ask a *silent* peer whether it is still there; drop it after too many unanswered asks
        (called by the listener's ``echo.EchoSweeper`` about once a second).

        Anything heard within ``echo_request_interval`` proves the peer alive, so no echo goes to
        a peer that talks (OVS sends its own echo request after 5 s without a message from us).
        A silent peer gets an echo every interval and is dropped after
        ``max_unreplied_echo_requests`` unanswered ones, as with os-ken's loop."""
        if self._stopping.is_set() or not self.send_q:
            return
        if now - self.last_heard < self.echo_request_interval:
            self.unreplied_echo_requests.clear()  # it spoke since: nothing is outstanding
            self._next_echo_at = 0.0
            return
        if now < self._next_echo_at:
            return
        if len(self.unreplied_echo_requests) > self.max_unreplied_echo_requests:
            LOG.warning("closing OpenFlow connection from %s (dpid=%s): no echo replies", self.address, self.id)
            self.shutdown()
            return
        request = self.ofproto_parser.OFPEchoRequest(self)
        self.unreplied_echo_requests.append(self.set_xid(request))
        self.send_msg(request)
        self._next_echo_at = now + self.echo_request_interval

    def send_msgs(self, msgs: Sequence[Any]) -> bool:
        """A change's messages as one buffer (``BatchWriter.send_msgs``)."""
        return self.writer.send_msgs(msgs)

    def serialize_batch(self, msgs: Sequence[Any]) -> bytes:
        return self.writer.serialize_batch(msgs)

    def write_batch(self, data: bytes) -> bool:
        return self.writer.write_batch(data)

    def shutdown(self) -> None:
        """Make the reader return (from any thread); the connection then closes itself."""
        self._stopping.set()
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def serve(self) -> None:
        self._handshake_timer.start()
        send_thread = hub.spawn(self.writer.send_loop)
        send_thread.name = f"{threading.current_thread().name}-send"
        self.send_msg(self.ofproto_parser.OFPHello(self))
        if self.max_unreplied_echo_requests and self.echo_sweeper is not None:
            self.echo_sweeper.add(self)  # one thread for every connection's echo (echo.py)
        try:
            self._recv_loop()
        finally:
            self._handshake_timer.cancel()
            self._stopping.set()
            if self.send_q is not None:
                self.send(b"", close_socket=True)  # wakes the send loop so it ends
            if self.echo_sweeper is not None:
                self.echo_sweeper.discard(self)
            send_thread.join(5)
            self.is_active = False


def __getattr__(name: str) -> Any:
    """``OpenFlowServer`` lives in ``oflistener`` (it builds on this module); importable from here."""
    if name == "OpenFlowServer":
        from viplanes.controller.openflow.listener import OpenFlowServer

        return OpenFlowServer
    raise AttributeError(name)
