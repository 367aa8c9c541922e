"""After a restart every switch reconnects at once: a reconcile waits (bounded) until no switch
is in its TLS handshake, so the handshakes are not slowed past OVS's ~1 s connect timeout by
reconciles sharing the GIL (a dropped switch comes back only after OVS's backoff; issue 13)."""

from __future__ import annotations

import threading
import time

from viplanes.api.app import default_topology
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.runtime import resync
from viplanes.controller.runtime.lane_runtime import LaneRuntime


def _runtime_reading_flows() -> tuple[LaneRuntime, int, list[float]]:
    topo = default_topology()
    rt = LaneRuntime(topo, lambda dpid, msgs: True, spawn=lambda fn: fn())
    dpid = topo.switches[0].dpid
    rt.connected.add(dpid)
    reads: list[float] = []

    def flow_stats(*_args, **_kwargs):
        reads.append(time.monotonic())
        return None  # no answer: the reconcile ends there (and the switch is retried later)

    rt.wire.flow_stats = flow_stats  # type: ignore[method-assign]
    rt.handshakes = HandshakeGauge()
    return rt, dpid, reads


def test_gauge_is_idle_at_zero_and_wakes_its_waiters_when_the_last_handshake_ends():
    gauge = HandshakeGauge()
    assert gauge.wait_idle(0) and gauge.in_flight == 0
    gauge.enter()
    gauge.enter()
    assert not gauge.wait_idle(0.05)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(gauge.wait_idle(5)))
    waiter.start()
    gauge.leave()
    time.sleep(0.1)
    assert not woke  # one still in flight
    gauge.leave()
    waiter.join(2)
    assert woke == [True]
    gauge.leave()  # an extra leave (a close racing a handshake's end) never goes below zero
    assert gauge.in_flight == 0


def test_a_reconcile_waits_for_the_handshakes_in_flight_then_reads_the_switch():
    rt, dpid, reads = _runtime_reading_flows()
    rt.handshakes.enter()
    worker = threading.Thread(target=rt.reconcile_switch, args=(dpid,))
    worker.start()
    time.sleep(0.3)
    assert reads == []  # not a flow read while a switch is still connecting
    left = time.monotonic()
    rt.handshakes.leave()
    worker.join(5)
    assert len(reads) == 1 and reads[0] >= left


def test_the_wait_is_bounded_so_a_stream_of_connections_cannot_hold_reconciles_back(monkeypatch):
    monkeypatch.setattr(resync, "ADMISSION_FIRST_S", 0.2)
    rt, dpid, reads = _runtime_reading_flows()
    rt.handshakes.enter()  # never leaves
    t0 = time.monotonic()
    rt.reconcile_switch(dpid)
    assert len(reads) == 1 and 0.15 <= reads[0] - t0 < 2.0


def test_without_a_listener_nothing_waits():
    rt, dpid, reads = _runtime_reading_flows()
    rt.handshakes = None
    rt.reconcile_switch(dpid)
    assert len(reads) == 1
