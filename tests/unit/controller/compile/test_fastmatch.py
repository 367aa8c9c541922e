"""PackedMatch (controller/compile/fastmatch.py) serialises a match from a per-field cache of os-ken's
own encoding: every flow-mod the compiler emits must be byte for byte what os-ken encodes with a
plain OFPMatch, on both campuses, for every lane shape (v4/v6 destination sets, masked port
ranges, source ports, meters) and with the cache cold, warm and cleared."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.paths import REPO
from tests.support.rawof import FakeDatapath
from viplanes.controller.compile import fastmatch
from viplanes.controller.compile.lane import compile_base, compile_lane
from viplanes.controller.compile.shared import lane_addresses
from viplanes.domain.values import LaneSpec
from viplanes.topologies.loader import load_topology

NOW = 1000.0
TOPOLOGIES = {name: load_topology(REPO / "topologies" / f"{name}.yaml") for name in ("campus", "campus-dualstack")}


def wire(msg: parser.OFPFlowMod, plain: bool) -> bytes:
    """The flow-mod's bytes; ``plain``: with its match rebuilt as os-ken's own OFPMatch."""
    copy = parser.OFPFlowMod(
        None,
        cookie=msg.cookie,
        cookie_mask=msg.cookie_mask,
        table_id=msg.table_id,
        command=msg.command,
        idle_timeout=msg.idle_timeout,
        hard_timeout=msg.hard_timeout,
        priority=msg.priority,
        buffer_id=msg.buffer_id,
        out_port=msg.out_port,
        out_group=msg.out_group,
        flags=msg.flags,
        match=(parser.OFPMatch(_ordered_fields=list(msg.match._fields2)) if plain else msg.match),
        instructions=[_plain(i) for i in msg.instructions] if plain else msg.instructions,
    )
    copy.datapath = FakeDatapath()
    copy.set_xid(77)
    copy.serialize()
    return bytes(copy.buf)


def _plain(instruction):
    """The instruction with every cached set-field rebuilt as os-ken's own OFPActionSetField."""
    if not isinstance(instruction, parser.OFPInstructionActions):
        return instruction
    return parser.OFPInstructionActions(
        instruction.type,
        [
            parser.OFPActionSetField(**{a.key: a.value}) if isinstance(a, fastmatch.PackedSetField) else a
            for a in instruction.actions
        ],
    )


def flow_mods(per_dpid: dict[int, list]) -> list[parser.OFPFlowMod]:
    return [m for ms in per_dpid.values() for m in ms if isinstance(m, parser.OFPFlowMod)]


@st.composite
def lanes(draw: st.DrawFn) -> tuple[str, LaneSpec]:
    name = draw(st.sampled_from(sorted(TOPOLOGIES)))
    topo = TOPOLOGIES[name]
    host = draw(st.sampled_from([h for h in topo.hosts if h.role != "cloud"]))
    v6 = host.ip6 is not None and draw(st.booleans())
    nets = draw(
        st.lists(
            st.sampled_from(
                ["2001:db8:ff::10/128", "2001:db8:fe::/48"]
                if v6
                else ["203.0.113.10/32", "192.0.2.0/24", "8.8.8.8/32", "100.64.0.0/10"]
            ),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    lo = draw(st.integers(1, 65000))
    ports = ((lo, lo + draw(st.integers(0, 535))),)
    return name, LaneSpec(
        lane_id=draw(st.integers(1, 2**20)),
        src_ip=str(host.ip6 if v6 else host.iface.ip.ip),
        dst_ip=None,
        protocol=draw(st.sampled_from(["tcp", "udp"])),
        dst_port=None,
        src_port=draw(st.one_of(st.none(), st.integers(1, 65535))),
        nat_ip=str(topo.lane_addresses()[0]) if host.needs_nat and not v6 else None,
        expires_at=NOW + 60,
        rate_mbps=draw(st.one_of(st.none(), st.just(10.0))),
        dst_nets=tuple(nets),
        dst_ports=ports,
    )


@given(lanes(), st.booleans())
@settings(max_examples=150, deadline=None)
def test_every_lane_flow_mod_is_os_kens_bytes(case: tuple[str, LaneSpec], clear: bool) -> None:
    name, lane = case
    if clear:
        fastmatch._encoded.clear()
    shared = [m for per_dpid in lane_addresses(lane, TOPOLOGIES[name]).values() for m in flow_mods(per_dpid)]
    mods = flow_mods(compile_lane(lane, TOPOLOGIES[name], NOW)) + shared
    assert mods and any(isinstance(m.match, fastmatch.PackedMatch) for m in mods)
    assert any(
        isinstance(a, fastmatch.PackedSetField) for m in mods for i in m.instructions for a in getattr(i, "actions", ())
    )
    for msg in mods:
        assert wire(msg, plain=False) == wire(msg, plain=True)
        assert wire(msg, plain=False) == wire(msg, plain=True)  # and again from a warm cache


def test_base_flows_of_both_campuses_are_os_kens_bytes() -> None:
    for topo in TOPOLOGIES.values():
        for msg in flow_mods(compile_base(topo)):
            assert wire(msg, plain=False) == wire(msg, plain=True)


def test_a_full_cache_starts_over_and_an_unhashable_value_is_still_encoded(monkeypatch) -> None:
    monkeypatch.setattr(fastmatch, "_FIELD_CACHE_MAX", 2)
    fastmatch._encoded.clear()
    match = fastmatch.PackedMatch(_ordered_fields=[("in_port", 3), ("eth_type", 0x0800), ("ipv4_dst", "203.0.113.10")])
    mine, theirs = bytearray(b"xx"), bytearray(b"xx")  # at an offset, as inside a flow-mod
    match.serialize(mine, 2)
    parser.OFPMatch(_ordered_fields=list(match._fields2)).serialize(theirs, 2)
    assert mine == theirs and len(fastmatch._encoded) <= 2
    listed = fastmatch.PackedMatch(_ordered_fields=[("ipv4_dst", ["10.0.0.0", "255.0.0.0"])])
    mine, theirs = bytearray(), bytearray()
    listed.serialize(mine, 0)
    parser.OFPMatch(_ordered_fields=[("ipv4_dst", ["10.0.0.0", "255.0.0.0"])]).serialize(theirs, 0)
    assert mine == theirs


def _fields_passed(monkeypatch, work) -> list[dict]:
    """Every fields dict the compiler hands to ``exact_match`` while ``work()`` runs."""
    from viplanes.controller.compile import hopflows as compiler
    from viplanes.controller.compile import hostguard as guardflows
    from viplanes.controller.compile import shared as sharedflows

    seen: list[dict] = []

    def spy(fields):
        seen.append(dict(fields))
        return fastmatch.exact_match(fields)

    monkeypatch.setattr(compiler, "exact_match", spy)
    monkeypatch.setattr(guardflows, "exact_match", spy)
    monkeypatch.setattr(sharedflows, "exact_match", spy)
    work()
    return seen


@given(lanes(), st.booleans())
@settings(max_examples=100, deadline=None)
def test_every_lane_match_has_os_kens_fields_in_os_kens_order(case: tuple[str, LaneSpec], clear: bool) -> None:
    import pytest

    name, lane = case
    if clear:
        fastmatch._canonical.clear()
    with pytest.MonkeyPatch.context() as mp:
        passed = _fields_passed(
            mp, lambda: (compile_lane(lane, TOPOLOGIES[name], NOW), lane_addresses(lane, TOPOLOGIES[name]))
        )
    assert passed
    for fields in passed:  # cold for the first lane, warm for every repeated value after it
        assert fastmatch.exact_match(fields)._fields2 == parser.OFPMatch(**fields)._fields2, fields


def test_base_matches_and_experimenter_fields_keep_os_kens_order(monkeypatch) -> None:
    for topo in TOPOLOGIES.values():
        for fields in _fields_passed(monkeypatch, lambda topo=topo: compile_base(topo)):
            assert fastmatch.exact_match(fields)._fields2 == parser.OFPMatch(**fields)._fields2
    # experimenter fields of one experimenter share a sort key (ONF's tcp_flags, pbb_uca): os-ken
    # keeps them in the order given, and so must the cache; conntrack, masked values and a list
    # (not cached) as well
    for fields in (
        {"eth_type": 0x0800, "ct_state": (0x21, 0x21), "ct_zone": 7, "ip_proto": 6},
        {"tcp_flags": (0x010, 0x010), "pbb_uca": 1, "eth_type": 0x0800, "ip_proto": 6},
        {"pbb_uca": 1, "tcp_flags": (0x010, 0x010), "eth_type": 0x0800, "ip_proto": 6},
        {"tcp_dst": (0x1000, 0xF000), "ipv4_dst": ("10.0.0.0", "255.0.0.0"), "eth_type": 0x0800, "ip_proto": 6},
        {"eth_type": 0x86DD, "ipv6_dst": "2001:DB8::1", "eth_dst": "02:AA:00:00:00:01"},
        {"ipv4_dst": ["10.0.0.0", "255.0.0.0"], "eth_type": 0x0800},
    ):
        for _ in range(2):  # cold, then warm
            assert fastmatch.exact_match(fields)._fields2 == parser.OFPMatch(**fields)._fields2, fields


def test_a_full_conversion_cache_starts_over(monkeypatch) -> None:
    monkeypatch.setattr(fastmatch, "_FIELD_CACHE_MAX", 2)
    fastmatch._canonical.clear()
    fields = {"in_port": 3, "eth_type": 0x0800, "ipv4_dst": "203.0.113.10"}
    assert fastmatch.exact_match(fields)._fields2 == parser.OFPMatch(**fields)._fields2
    assert len(fastmatch._canonical) <= 2


def _wire(match) -> bytes:
    buf = bytearray()
    match.serialize(buf, 0)
    return bytes(buf)


def test_a_packed_match_builds_no_old_api_state_and_still_serves_old_api_code() -> None:
    """os-ken's __init__ made a FlowWildcards and a Flow for every match (and another
    FlowWildcards at every serialise); a packed match makes them only when old-API code asks."""
    fields = {"in_port": 3, "eth_type": 0x0800, "ipv4_dst": "203.0.113.10", "ip_proto": 6, "tcp_dst": 5201}
    packed = fastmatch.exact_match(fields)
    assert _wire(packed) == _wire(parser.OFPMatch(**fields))
    assert "_wc" not in packed.__dict__ and "_flow" not in packed.__dict__
    assert dict(packed.items()) == dict(parser.OFPMatch(**fields).items())
    old = fastmatch.exact_match({})  # composed with the old API, as os-ken allows
    old.set_in_port(7)
    old.set_dl_type(0x0806)
    reference = parser.OFPMatch()
    reference.set_in_port(7)
    reference.set_dl_type(0x0806)
    assert "_wc" in old.__dict__ and _wire(old) == _wire(reference)
    import copy

    assert _wire(copy.copy(packed)) == _wire(packed) and _wire(copy.deepcopy(packed)) == _wire(packed)
