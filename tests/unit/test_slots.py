"""PrioritySlots (the reconcile slots): at most N holders, a freed slot goes to the waiter with
the most lanes, equals in arrival order; a restart then reconciles the switches crossed by the
most lanes first instead of last (issue 13)."""
from __future__ import annotations

import threading
import time

from tests.unit.fake_switches import Clock
from tests.unit.test_switch_count import lane, restarted, synth
from viplanes.controller import runtime as runtime_module
from viplanes.controller.slots import PrioritySlots


def _wait_for(cond, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_freed_slots_go_to_the_highest_priority_then_the_earliest():
    slots = PrioritySlots(1)
    order: list[str] = []
    blocker = slots.held(0)
    blocker.__enter__()
    threads = []
    for name, prio in (("a", 1), ("b", 5), ("c", 3), ("d", 5)):
        t = threading.Thread(target=lambda n=name, p=prio: _enter(slots, p, order, n))
        t.start()
        threads.append(t)
        _wait_for(lambda k=len(threads): slots.waiting == k)  # arrivals in this order
    blocker.__exit__(None, None, None)
    for t in threads:
        t.join(5)
    assert order == ["b", "d", "c", "a"]
    assert slots.waiting == 0


def _enter(slots: PrioritySlots, prio: int, order: list[str], name: str) -> None:
    with slots.held(prio):
        order.append(name)


def test_never_more_holders_than_slots():
    slots = PrioritySlots(3)
    inside, peak, lock = [0], [0], threading.Lock()

    def work(prio: int) -> None:
        with slots.held(prio):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.002)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=work, args=(i % 4,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] == 3 and inside[0] == 0 and slots.waiting == 0


def test_a_restart_reconciles_the_switches_with_the_most_lanes_first(monkeypatch):
    monkeypatch.setattr(runtime_module, "RECONCILES_AT_ONCE", 1)
    topo = synth(6)
    lanes = [lane(i, i % 6, Clock()()) for i in range(1, 25)]
    rt, switches, _source = restarted(topo, lanes)
    rt.warm_up()  # the read that gives each switch's lanes
    order: list[int] = []
    real = rt.flow_stats
    monkeypatch.setattr(rt, "flow_stats", lambda dpid, *a, **k: order.append(dpid) or real(dpid, *a, **k))
    blocker = rt._reconcile_slots.held(0)
    blocker.__enter__()
    dpids = sorted(switches.net.tables)
    threads = [threading.Thread(target=rt.reconcile_switch, args=(d,)) for d in dpids]
    for t in threads:
        t.start()
    _wait_for(lambda: rt._reconcile_slots.waiting == len(dpids))
    blocker.__exit__(None, None, None)
    for t in threads:
        t.join(10)
    through = [rt._lanes_through(d) for d in order]
    assert sorted(order) == dpids
    assert through == sorted(through, reverse=True) and through[0] > through[-1]
    assert all(plan.empty for plan in rt.reconciled.values())
