"""EmbeddedController in this process against a bare-bytes switch: start returns listening, a switch
is reconciled on connect, stop closes the listener and every connection, start works again."""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp

from tests.support.peer import Peer, msg
from tests.support.procs import free_port, port_free
from viplanes.controller.openflow.embedded import EmbeddedController
from viplanes.controller.openflow.launcher import SWITCH_INTERVAL_S
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology


def _wait(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_start_connect_reconcile_stop_restart(topo: Topology) -> None:
    port = free_port()
    baseline = threading.active_count()
    ctl = EmbeddedController(LaneRuntime(topo), port=port, refresh_period_s=3600)
    ctl.attach_source(lambda: [])
    sys.setswitchinterval(0.005)  # CPython's default
    ctl.start()
    try:
        assert not port_free(port)  # listening when start() returns
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)  # I/O threads wait less
        s2 = Peer(port, dpid=2)
        s2.handshake()
        flow_mod = s2.serve_until(ofp.OFPT_FLOW_MOD)
        assert flow_mod is not None  # base flows for s2 (reconciled against an empty table)
        threading.Thread(target=s2.serve_until, args=(-1, 2.0), daemon=True).start()
        assert _wait(lambda: 2 in ctl.runtime.reconciled)
        # table-miss, bypass drop, 4 + 3 x (IPv4, ARP) guards; the RA guard: router port 2 x (RA,
        # redirect), trunk 1 x 4 ND types, 3 drops (ndguard.py); the other 4 router MACs on the
        # firewall's port (macguard.py); the cabling probes' punt on its 2 link ports and drop
        # elsewhere (linkprobe.py)
        assert len(ctl.runtime.reconciled[2].adds) == 12 + 9 + 4 + 3
        lane = LaneSpec(1, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, "198.51.100.200", time.time() + 60)
        result = ctl.activate(lane, timeout_s=1.0)
        assert not result.ok and result.reason == "switch s1 (dpid 1) not connected"
    finally:
        ctl.stop()
    assert _wait(lambda: port_free(port)), "listener still bound after stop()"
    assert s2.closed_by_controller(3.0)
    assert _wait(lambda: threading.active_count() <= baseline + 1, 10.0), [t.name for t in threading.enumerate()]
    s2.close()

    again = EmbeddedController(LaneRuntime(topo), port=port, refresh_period_s=3600)
    again.start()
    try:
        s2 = Peer(port, dpid=2)
        s2.handshake()
        threading.Thread(target=s2.serve_until, args=(-1, 3.0), daemon=True).start()
        assert _wait(lambda: 2 in again.runtime.connected)
    finally:
        again.stop()
        s2.close()


def test_start_on_a_busy_port_says_so(topo: Topology) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ctl = EmbeddedController(LaneRuntime(topo), port=port)
        try:
            ctl.start()
        except RuntimeError as exc:
            assert f"127.0.0.1:{port}" in str(exc) and "in use" in str(exc)
        else:
            ctl.stop()
            raise AssertionError("start() on a busy port succeeded")


def test_silent_peers_are_dropped_and_connections_capped(topo: Topology, monkeypatch) -> None:
    from viplanes.controller.openflow import server as ofserver
    from viplanes.controller.openflow.admission import Limits, ListenerSecurity
    from viplanes.controller.openflow.peerauth import SwitchTrust

    monkeypatch.setattr(ofserver, "HANDSHAKE_TIMEOUT_S", 0.3)
    security = ListenerSecurity(tls=None, trust=SwitchTrust(topo), limits=Limits(max_switches=2))
    port = free_port()
    ctl = EmbeddedController(LaneRuntime(topo), port=port, refresh_period_s=3600, security=security)
    ctl.start()
    try:
        silent = Peer(port, dpid=0)  # connects, never says hello
        t0 = time.monotonic()
        assert silent.closed_by_controller(3.0)
        assert time.monotonic() - t0 < 2.0
        silent.close()
        server = ctl._running.app("GuardedOFPHandler").server
        assert _wait(lambda: not server.datapaths)  # its connection is gone, threads and all
        monkeypatch.setattr(ofserver, "HANDSHAKE_TIMEOUT_S", 30.0)
        first, second = Peer(port, dpid=0), Peer(port, dpid=0)
        time.sleep(0.2)
        third = Peer(port, dpid=0)
        assert third.closed_by_controller(2.0)  # over the cap: refused at once
        assert not first.closed_by_controller(0.3)
        for peer in (first, second, third):
            peer.close()
    finally:
        ctl.stop()


def test_start_compiles_the_desired_lanes_before_it_listens(topo: Topology) -> None:
    """After a restart every switch reconnects at once: the lanes are compiled while nothing else
    runs (bounded by WARM_UP_ALONE_S), not while 140 handshakes and reconciles share the GIL."""
    lanes = [
        LaneSpec(i, "10.1.0.10", "203.0.113.10", "tcp", 1000 + i, None, "198.51.100.200", time.time() + 600)
        for i in range(1, 301)
    ]
    ctl = EmbeddedController(LaneRuntime(topo), port=free_port(), refresh_period_s=3600)
    ctl.attach_source(lambda: lanes)
    ctl.start()
    try:
        assert ctl.runtime.state.flows is not None
        assert all(ctl.runtime.state.flows.compiled(lane) for lane in lanes)  # when start() returns
    finally:
        ctl.stop()


def test_stop_ends_a_reconcile_waiting_on_a_silent_switch(topo: Topology) -> None:
    """stop() closes every connection but no disconnect event reaches the stopped apps: a
    reconcile waiting for the switch's flow stats must still end at once, not after its 10 s
    timeout, since it holds the cyclic GC off meanwhile (heap.gc_held)."""
    import gc

    from viplanes.controller.runtime.lane_runtime import WORKER_THREAD

    def workers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == WORKER_THREAD]

    assert not workers() and gc.isenabled()
    port = free_port()
    ctl = EmbeddedController(LaneRuntime(topo), port=port, refresh_period_s=3600)
    ctl.attach_source(lambda: [])
    ctl.start()
    try:
        s2 = Peer(port, dpid=2)
        s2.handshake()
        while True:  # answer the rest (port descriptions), not the reconcile's read-back
            request = s2.serve_until(ofp.OFPT_MULTIPART_REQUEST)
            assert request is not None
            kind = struct.unpack_from("!H", request, 8)[0]
            if kind == ofp.OFPMP_FLOW:
                break
            s2.sock.sendall(
                msg(
                    ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", kind, 0), xid=struct.unpack_from("!I", request, 4)[0]
                )
            )
        assert workers() and not gc.isenabled()  # waiting for a reply that will not come
    finally:
        ctl.stop()
    try:
        assert _wait(lambda: not workers(), 2.0), "reconcile still waiting after stop()"
        assert gc.isenabled()
        assert 2 not in ctl.runtime.connected and 2 not in ctl.runtime.reconciled
    finally:
        s2.close()


def test_stop_returns_after_a_periodic_round_under_way(topo: Topology) -> None:
    """A drift check still at work when stop() is called ends before stop() returns: a periodic
    thread that outlived stop() ran its round against a stopped controller."""
    runtime = LaneRuntime(topo)
    started, release = threading.Event(), threading.Event()

    def slow_drift() -> None:
        started.set()
        release.wait(0.5)

    runtime.check_drift = slow_drift  # type: ignore[method-assign]
    ctl = EmbeddedController(runtime, port=free_port(), refresh_period_s=3600, drift_period_s=0.05)
    ctl.attach_source(lambda: [])
    ctl.start()
    try:
        assert started.wait(5.0), "the drift round never started"
    finally:
        ctl.stop()
    alive = [t.name for t in threading.enumerate() if t.name in ("viplanes-refresh", "viplanes-drift")]
    assert alive == [], f"periodic threads outlived stop(): {alive}"
