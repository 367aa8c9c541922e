"""Switch readiness in the runtime (for /readyz and the 503 gate) and the bounded wait of an
activation for a switch that is reconnecting."""

from __future__ import annotations

import threading
import time

from tests.support.fake_switches import inline_runtime, spec


def test_ready_only_after_connect_and_reconcile_and_not_after_a_disconnect(topo, clock, switches):
    rt = inline_runtime(topo, clock, switches)
    assert rt.readiness()["ready"] is False  # connected, nothing reconciled yet
    assert rt.unready(spec()) == ["switch s1 (dpid 1)", "switch s2 (dpid 2)", "switch s3 (dpid 3)"]
    for dpid in (1, 2, 3, 4):
        rt.reconcile_switch(dpid)
    assert rt.readiness()["ready"] is True and rt.unready(spec()) == []
    rt.switch_down(2)
    report = rt.readiness()
    s2 = next(sw for sw in report["switches"] if sw["name"] == "s2")
    assert report["ready"] is False and s2 == {"name": "s2", "dpid": 2, "connected": False, "reconciled": False}
    assert rt.unready(spec()) == ["switch s2 (dpid 2)"]
    rt.switch_up(2)  # inline spawn: reconciled at once
    assert rt.unready(spec()) == []


def test_activation_waits_for_a_reconnecting_switch_within_the_bound(topo, clock, switches):
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    rt.switch_down(2)
    threading.Timer(0.5, lambda: rt.switch_up(2)).start()
    t0 = time.monotonic()
    result = rt.activate(spec())
    assert result.ok, result.reason
    assert 0.4 < time.monotonic() - t0 < rt.switch_wait_s


def test_activation_gives_up_after_the_bound_with_a_transient_reason(topo, clock, switches):
    from viplanes.dataplane.base import is_transient

    rt = inline_runtime(topo, clock, switches, base_flows=True)
    rt.switch_wait_s = 0.3
    rt.switch_down(2)
    t0 = time.monotonic()
    result = rt.activate(spec())
    assert not result.ok and is_transient(result.reason) and time.monotonic() - t0 < 1.0
