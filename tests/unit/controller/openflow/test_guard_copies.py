"""Host source guards are built once per (port, address, kind) and copied per switch (issue 13:
a 128-access-switch campus compiled 133,833 guard flow-mods for ~2,000 distinct ones). A copy
must be the flow-mod a fresh build gives, byte for byte and key for key, and it must be its own
message: sending it to one switch (xid, buffer, datapath) leaves every other copy untouched."""

from __future__ import annotations

import pytest

from tests.support.paths import REPO
from tests.support.rawof import FakeDatapath
from viplanes.controller.compile import hostguard as guardflows
from viplanes.controller.compile.flowkey import cached_key, flow_key_of
from viplanes.controller.compile.lane import compile_base
from viplanes.topologies.loader import load_topology

TOPOLOGIES = REPO / "topologies"


def _wire(msg) -> bytes:
    msg.datapath = FakeDatapath()
    msg.set_xid(77)
    msg.serialize()
    return bytes(msg.buf)


@pytest.mark.parametrize("name", ["campus", "campus-dualstack"])
def test_copied_guards_are_what_a_fresh_build_gives(name: str, monkeypatch) -> None:
    topo = load_topology(TOPOLOGIES / f"{name}.yaml")
    guardflows._KEPT_GUARDS.clear()
    copied = compile_base(topo)  # cold: builds and keeps
    again = compile_base(topo)  # warm: copies only
    monkeypatch.setattr(guardflows, "_guard", lambda port, address, kind, build: build())
    fresh = compile_base(topo)
    assert sorted(copied) == sorted(fresh) == sorted(again)
    for dpid in fresh:
        assert len(copied[dpid]) == len(fresh[dpid]) == len(again[dpid])
        for a, b, c in zip(copied[dpid], again[dpid], fresh[dpid], strict=True):
            if hasattr(c, "priority"):  # flow-mods (a border's meter has no flow key)
                assert cached_key(a) == cached_key(b) == flow_key_of(c)
            assert _wire(a) == _wire(b) == _wire(c)


def test_a_copy_sent_to_one_switch_leaves_the_others_untouched() -> None:
    topo = load_topology(TOPOLOGIES / "campus.yaml")
    guardflows._KEPT_GUARDS.clear()
    first = guardflows._v4_source_guards(3, "10.1.0.10")
    second = guardflows._v4_source_guards(3, "10.1.0.10")
    assert first[0] is not second[0] and first[0].match is second[0].match  # shared, never changed
    sent = _wire(first[0])
    assert second[0].xid is None and second[0].buf is None and second[0].datapath is None
    kept = guardflows._KEPT_GUARDS[(3, "10.1.0.10", "ipv4")]
    assert kept.xid is None and kept.buf is None
    assert _wire(second[0]) == sent
    assert topo.switches  # the campus loads (the guards above are its desktop's on port 3)
