"""heap.gc_held: the cyclic GC stays off while any reconcile is inside (threads counted) and
comes back as it was after the last one (a restart's reconciles overlap, 8 at a time)."""

from __future__ import annotations

import gc
import threading

from tests.support.clock import FakeClock
from tests.support.switch_cost import lane, restarted, synth
from viplanes.controller.runtime import heap


def test_held_across_threads_until_the_last_holder_leaves():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with heap.gc_held():
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    with heap.gc_held():
        thread.start()
        inside.wait(5)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still holds it
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_gc_that_was_off_stays_off():
    gc.disable()
    try:
        with heap.gc_held():
            with heap.gc_held():
                pass
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_switch_reconcile_runs_with_the_gc_held_and_gives_it_back(monkeypatch):
    topo = synth(4)
    runtime, switches, _source = restarted(topo, [lane(1, 0, FakeClock()())])
    seen: list[bool] = []
    real = runtime.wire.flow_stats

    def flow_stats(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(runtime.wire, "flow_stats", flow_stats)
    for dpid in sorted(switches.net.tables):
        runtime.switch_up(dpid)
    assert seen == [False] * len(topo.switches)
    assert all(plan.empty for plan in runtime.reconciled.values())
    assert gc.isenabled()
