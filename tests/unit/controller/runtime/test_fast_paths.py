"""The controller-side speed-ups keep their promises: a switch batch is one buffer written at once,
long-lived state leaves the cyclic GC, desired lanes come from columns, and a change on several
switches is serialised whole before its first write (moved from tests/unit/store/test_fast_paths.py)."""

from __future__ import annotations

# --- one buffer per switch batch -----------------------------------------------------------------


def test_a_batch_is_one_buffer_with_its_xids_written_at_once_unless_something_is_queued():
    import socket
    import struct

    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from viplanes.controller.openflow.server import GuardedDatapath

    with socket.create_server(("127.0.0.1", 0)) as srv:
        b = socket.create_connection(srv.getsockname())
        a, _ = srv.accept()
    try:
        dp = GuardedDatapath(a, ("127.0.0.1", 1))  # no send loop runs: only a direct write arrives
        mods = [parser.OFPFlowMod(None, cookie=i, priority=100 + i, match=parser.OFPMatch(in_port=i)) for i in (1, 2)]
        mods[0].set_xid(1234)  # the runtime's xid must survive; the unset one gets the datapath's
        barrier = parser.OFPBarrierRequest(None)
        barrier.set_xid(1235)
        assert dp.send_msgs([*mods, barrier]) is True
        assert dp.send_q.qsize() == 0  # written on this thread: no hand-off to the send thread
        singles = []
        for m in (*mods, barrier):
            assert m.datapath is dp
            singles.append(bytes(m.buf))
        want = b"".join(singles)
        b.settimeout(2.0)
        buf = b""
        while len(buf) < len(want):
            buf += b.recv(65536)
        assert buf == want
        xids, off = [], 0
        while off < len(buf):
            _v, _t, length, xid = struct.unpack_from("!BBHI", buf, off)
            xids.append(xid)
            off += length
        assert xids == [1234, mods[1].xid, 1235] and mods[1].xid is not None
        # something queued and not yet written: the batch goes behind it, never ahead
        dp.send(b"earlier")
        later = parser.OFPBarrierRequest(None)
        assert dp.send_msgs([later]) is True
        assert [dp.send_q.get()[0] for _ in range(2)] == [b"earlier", bytes(later.buf)]
        dp.send_q = None  # the connection is closing: nothing is queued
        assert dp.send_msgs([parser.OFPBarrierRequest(None)]) is False
    finally:
        a.close()
        b.close()


# --- long-lived controller state leaves the cyclic GC --------------------------------------------


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_freeze_survivors_collects_garbage_first_and_freezes_the_rest(monkeypatch):
    import gc
    import weakref

    from viplanes.controller.runtime import heap

    now = [0.0]
    freezer = heap.HeapFreezer(clock=lambda: now[0])
    try:
        garbage = _Node()
        dead = weakref.ref(garbage)
        del garbage
        kept = _Node()
        freezer.freeze_survivors()
        assert dead() is None  # cyclic garbage was collected, not frozen forever
        assert gc.get_freeze_count() > 0
        frozen = gc.get_freeze_count()
        old = weakref.ref(kept)
        del kept  # now garbage, but frozen: only the hourly restart can free it
        now[0] += 10
        freezer.freeze_survivors()
        assert old() is not None and gc.get_freeze_count() >= frozen
        now[0] += heap.REFREEZE_EVERY_S
        freezer.freeze_survivors()
        assert old() is None
    finally:
        gc.unfreeze()


def test_bulk_warm_up_and_reconcile_freeze_what_they_built(topo, monkeypatch):
    """A bulk of newly compiled lanes is frozen once; a restart's 140 switch reconciles of the
    same lanes do not each run a full collection again."""
    from tests.support.clock import FakeClock
    from tests.support.fake_switches import FakeSwitches
    from viplanes.controller.runtime import heap
    from viplanes.controller.runtime.lane_runtime import LaneRuntime

    calls: list[str] = []
    monkeypatch.setattr(heap.gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(heap.gc, "freeze", lambda: None)
    monkeypatch.setattr(heap.gc, "unfreeze", lambda: None)
    monkeypatch.setattr(heap, "BULK_LANES", 2)
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = switches.attach(LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()))
    lanes = [_spec(1, clock())]
    rt.attach_source(lambda: lanes)
    rt.warm_up()
    assert calls == ["collect"]  # one lane, but every switch's base flows: long-lived
    dpids = sorted(rt.connected)
    assert rt.reconcile_switch(dpids[0]) is not None
    assert calls == ["collect"]  # one lane: nothing bulky was built
    lanes.append(_spec(2, clock()))
    rt.warm_up()
    assert calls == ["collect"] * 2  # the bulk the warm-up compiled
    for dpid in dpids:  # every switch reconciles the same lanes: nothing new to freeze
        assert rt.reconcile_switch(dpid) is not None
    assert calls == ["collect"] * 2
    lanes.extend([_spec(3, clock()), _spec(4, clock())])  # a bulk more, met by a reconcile
    rt.forget_lane_read()
    assert rt.reconcile_switch(dpids[0]) is not None
    assert calls == ["collect"] * 3


def test_a_warm_up_with_few_lanes_still_lets_the_first_bulk_freeze(topo, monkeypatch):
    """The warm-up's freeze of the base flows does not count as a bulk of lanes: 1,000 lanes
    made later are still frozen when they arrive."""
    from tests.support.clock import FakeClock
    from tests.support.fake_switches import FakeSwitches
    from viplanes.controller.runtime import heap
    from viplanes.controller.runtime.lane_runtime import LaneRuntime

    monkeypatch.setattr(heap.gc, "collect", lambda *a: 0)
    monkeypatch.setattr(heap.gc, "freeze", lambda: None)
    monkeypatch.setattr(heap.gc, "unfreeze", lambda: None)
    monkeypatch.setattr(heap, "BULK_LANES", 3)
    clock = FakeClock()
    rt = FakeSwitches(topo, clock).attach(LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()))
    rt.attach_source(lambda: [_spec(1, clock()), _spec(2, clock())])
    rt.warm_up()
    assert rt.state.heap.grew_by_a_bulk(3)


def _spec(lane_id: int, now: float):
    from viplanes.domain.values import LaneSpec

    return LaneSpec(
        lane_id=lane_id,
        src_ip="10.1.0.10",
        dst_ip="203.0.113.10",
        protocol="tcp",
        dst_port=5200 + lane_id,
        src_port=None,
        nat_ip="198.51.100.200",
        expires_at=now + 3600,
    )


def test_desired_lanes_from_columns_equal_the_specs_of_the_rows(world):
    import datetime as dt

    from sqlalchemy import select

    from viplanes.lanes.specs import spec_of
    from viplanes.store.models import Lane

    assert world.lane("alice", src_port=40000, rate_mbps=50.0, dst_port=9005).status_code == 201
    assert world.lane("bob", dst_port=9006).status_code == 201
    later = dt.datetime.fromtimestamp(world.clock() + 600, dt.UTC).isoformat()
    assert world.lane("alice", dst_port=9007, start_at=later).status_code == 201  # scheduled
    ctx = world.app.extensions["viplanes"]
    with ctx.db.read() as s:
        rows = s.scalars(select(Lane).where(Lane.state.in_(("installing", "active")))).all()
        want = sorted((spec_of(r) for r in rows), key=lambda sp: sp.lane_id)
    got = sorted(ctx.manager.desired_lanes(), key=lambda sp: sp.lane_id)
    assert len(got) == 2 and got == want
    assert {sp.rate_mbps for sp in got} == {50.0, None} and 40000 in {sp.src_port for sp in got}


def test_a_change_on_several_switches_is_serialised_whole_before_the_first_write():
    """Serialising switch 2 after writing switch 1 let a reader thread take the GIL at each
    write (issue 13: an activation's three writes spread over ~1.2 ms). ``send_many`` serialises
    every switch's batch, then writes them back to back; the tracker expects every barrier
    before anything is written (a reply may come at once)."""
    import socket

    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from viplanes.controller.openflow.app import VipLanesApp
    from viplanes.controller.openflow.server import GuardedDatapath
    from viplanes.controller.runtime.lane_runtime import LaneRuntime

    runtime = LaneRuntime(None)
    app = VipLanesApp(switch_events=runtime)
    events: list[tuple[str, int]] = []
    pairs, dps = [], {}
    with socket.create_server(("127.0.0.1", 0)) as srv:
        for dpid in (1, 2, 3):
            b = socket.create_connection(srv.getsockname())
            a, _ = srv.accept()
            pairs.append((a, b))
            dp = GuardedDatapath(a, ("127.0.0.1", dpid))
            dp.id = dpid
            real_ser, real_write = dp.serialize_batch, dp.write_batch
            dp.serialize_batch = lambda msgs, d=dpid, f=real_ser: events.append(("serialize", d)) or f(msgs)
            dp.write_batch = lambda data, d=dpid, f=real_write: (
                events.append(("write", d, len({id(b) for b in runtime.tracker._batches.values()})))
                and False
                or f(data)
            )
            dps[dpid] = dp
    try:
        app.datapaths.update(dps)
        runtime.connected.update(dps)
        per_dpid = {
            d: [parser.OFPFlowMod(None, cookie=d, priority=100, match=parser.OFPMatch(in_port=d))] for d in (1, 2, 3)
        }
        wait = runtime.wire.send_all(per_dpid, 1.0)
        kinds = [e[0] for e in events]
        assert kinds == ["serialize"] * 3 + ["write"] * 3, events
        assert all(e[2] == 3 for e in events if e[0] == "write")  # all barriers expected first
        for _, b in pairs:  # one pair per switch 1, 2, 3
            b.settimeout(2.0)
            assert len(b.recv(65536)) > 0  # each switch got its bytes
        assert wait is not None
    finally:
        for a, b in pairs:
            a.close()
            b.close()
