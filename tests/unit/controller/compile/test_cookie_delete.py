"""CookieDelete (controller/compile/removal.py) is a removal's delete-by-cookie built from a
prototype and packed in one call: it must be, attribute for attribute and byte for byte, the
flow-mod os-ken builds and serialises from the same arguments, for any cookie and xid, and what
``compile_lane_removal`` and ``compile_shared_removal`` send must not change."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.paths import REPO
from tests.support.rawof import FakeDatapath
from viplanes.controller.compile.cookies import EXACT_MASK, lane_cookie, shared_cookie
from viplanes.controller.compile.lane import compile_lane_removal, newconn_border
from viplanes.controller.compile.removal import CookieDelete, cookie_delete, group_holders
from viplanes.controller.compile.shared import compile_shared_removal
from viplanes.topologies.loader import load_topology

TOPO = load_topology(REPO / "topologies" / "campus.yaml")


def os_ken_delete(cookie: int) -> parser.OFPFlowMod:
    return parser.OFPFlowMod(
        None,
        cookie=cookie,
        cookie_mask=EXACT_MASK,
        table_id=ofp.OFPTT_ALL,
        command=ofp.OFPFC_DELETE,
        out_port=ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY,
        match=parser.OFPMatch(),
    )


def wire(msg: Any, xid: int | None) -> bytes:
    msg.datapath = FakeDatapath()
    msg.xid = xid
    msg.serialize()
    return bytes(msg.buf)


def plain(msgs: list[Any]) -> list[Any]:
    """The same messages with every CookieDelete rebuilt by os-ken's constructor."""
    return [os_ken_delete(m.cookie) if isinstance(m, CookieDelete) else m for m in msgs]


@given(cookie=st.integers(0, 2**64 - 1), xid=st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_bytes_are_os_kens(cookie: int, xid: int | None) -> None:
    ours, theirs = cookie_delete(cookie), os_ken_delete(cookie)
    assert wire(ours, xid) == wire(theirs, xid)
    assert (ours.version, ours.msg_type, ours.msg_len, ours.xid) == (
        theirs.version,
        theirs.msg_type,
        theirs.msg_len,
        theirs.xid,
    )


def test_attributes_are_os_kens() -> None:
    cookie = lane_cookie(12)
    ours, theirs = vars(cookie_delete(cookie)), vars(os_ken_delete(cookie))
    assert ours.keys() == theirs.keys()
    assert {k: v for k, v in ours.items() if k != "match"} == {k: v for k, v in theirs.items() if k != "match"}
    assert list(ours["match"].items()) == list(theirs["match"].items()) == []
    assert isinstance(cookie_delete(cookie), parser.OFPFlowMod)


def test_messages_share_no_list_and_keep_their_xid() -> None:
    a, b = cookie_delete(1), cookie_delete(2)
    a.instructions.append("x")
    assert b.instructions == []
    a.set_xid(7)  # os-ken's own setter: refuses a second xid
    with pytest.raises(AssertionError):
        a.set_xid(8)
    assert b.xid is None and wire(a, 7)[4:8] == (7).to_bytes(4, "big")


@pytest.mark.parametrize("lane_id", [1, 5, 4000])
@pytest.mark.parametrize("with_meter", [False, True])
def test_lane_removal_sends_what_it_sent(lane_id: int, with_meter: bool) -> None:
    dpids = [sw.dpid for sw in TOPO.switches]
    removal = compile_lane_removal(
        lane_id,
        dpids,
        with_meter=with_meter,
        newconn_at=newconn_border(TOPO),
        groups_at=group_holders(TOPO, dpids),
    )
    assert all(isinstance(msgs[0], CookieDelete) for msgs in removal.values())
    for msgs in removal.values():
        assert [wire(m, 9) for m in msgs] == [wire(m, 9) for m in plain(msgs)]


def test_shared_removal_sends_what_it_sent() -> None:
    addresses = {sw.dpid: {"10.0.1.10", "10.0.9.200"} for sw in TOPO.switches}
    removal = compile_shared_removal(addresses, TOPO)
    for msgs in removal.values():
        deletes = [m for m in msgs if isinstance(m, CookieDelete)]
        assert [m.cookie for m in deletes] == [shared_cookie("10.0.1.10"), shared_cookie("10.0.9.200")]
        assert [wire(m, 3) for m in msgs] == [wire(m, 3) for m in plain(msgs)]
