"""The peers benchmark's like-for-like parts: the floor sends what ``serve`` sends for the same
lane, and the history seeded into our database looks like a campus's past."""

from __future__ import annotations

import time
from pathlib import Path

from os_ken.ofproto import ofproto_v1_3_parser as parser
from sqlalchemy import create_engine, text

from bench.harness.floor import full_install, full_removal, lane_flow_counts
from bench.harness.history import RETENTION_S, seed
from bench.harness.workload import flows, grant_body, lane_body, lane_spec
from tests.support.apps import make_app
from viplanes.api.app import default_topology
from viplanes.controller.compile import conntrack, ctlane
from viplanes.controller.compile.lane import compile_lane
from viplanes.controller.compile.removal import CookieDelete
from viplanes.controller.compile.shared import compile_shared
from viplanes.store import records as store


def _deleted_cookies(msgs: list) -> set[int]:
    return {m.cookie for m in msgs if isinstance(m, (CookieDelete, parser.OFPFlowMod)) and m.command == 3}


def test_the_floor_sends_what_serve_sends_for_a_lane_alone() -> None:
    """Its add: the compiled lane and the shared flows of its addresses; its release deletes every
    cookie the add installed. The watcher counts the lane's own flows only."""
    topo = default_topology()
    for host in ("desktop", "server", "dtn"):
        spec = lane_spec(topo, 4242, host, next(flows(1)))
        lane_only = compile_lane(spec, topo, time.time())
        added = full_install(spec, topo)
        shared = {m.cookie for ms in compile_shared(topo, [spec]).values() for m in ms}
        assert shared and shared <= {
            m.cookie for ms in added.values() for m in ms if isinstance(m, parser.OFPFlowMod)
        }, host
        assert lane_flow_counts(spec, added) == {
            d: sum(isinstance(m, parser.OFPFlowMod) for m in ms) for d, ms in lane_only.items()
        }
        removal = full_removal(spec, topo, added.keys())
        for dpid, msgs in added.items():
            installed = {m.cookie for m in msgs if isinstance(m, parser.OFPFlowMod)}
            assert installed <= _deleted_cookies(removal.get(dpid, [])), (host, dpid)


def test_the_floors_release_flushes_the_lane_addresss_zone() -> None:
    topo = default_topology()
    spec = lane_spec(topo, 4242, "desktop", next(flows(1)))
    assert spec.nat_ip is not None
    removal = full_removal(spec, topo, compile_lane(spec, topo, time.time()).keys())
    layout = ctlane.zone_layout(topo)
    flush = conntrack.flush_zone(layout.nat(spec.nat_ip))
    sent = [m for ms in removal.values() for m in ms if isinstance(m, parser.OFPExperimenter)]
    assert [(m.exp_type, m.data) for m in sent] == [(flush.exp_type, flush.data)]


def one_lane(tmp_path: Path, released: bool) -> tuple[str, int]:
    """A SQLite database the product made, holding one lane of alice's (released or live)."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    app = make_app({"db_url": url})
    ctx = app.extensions["viplanes"]
    src = str(ctx.topology.host("desktop").iface.ip.ip)
    with ctx.db.write() as s:
        _, token = store.create_principal(s, "alice", "researcher", time.time())
        store.create_grant(s, store.GrantInput(**grant_body("alice", src, 5)), "bench", time.time())
    client, headers = app.test_client(), {"Authorization": f"Bearer {token}"}
    lane = client.post("/api/v1/lanes", json=lane_body(src, next(flows(1))), headers=headers).json
    if released:
        assert client.post(f"/api/v1/lanes/{lane['id']}/release", headers=headers).status_code == 200
    ctx.db.dispose()
    return url, lane["id"]


def test_history_is_ended_lanes_spread_over_the_retention_window(tmp_path: Path) -> None:
    url, lane_id = one_lane(tmp_path, released=True)
    now = time.time()
    assert seed(url, 300, lane_id) == 301
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT state, ended_at, dst_port FROM lanes WHERE id <> :id"), {"id": lane_id}).all()
    engine.dispose()
    assert len(rows) == 300
    assert {r.state for r in rows} == {"released"}
    ends = sorted(r.ended_at for r in rows)
    assert now - RETENTION_S - 60 < ends[0] and ends[-1] < now  # in the past, inside the window
    assert ends[-1] - ends[0] > RETENTION_S * 0.9  # spread over it, not bunched
    assert len({r.dst_port for r in rows}) == 300


def test_history_refuses_a_lane_that_has_not_ended(tmp_path: Path) -> None:
    url, lane_id = one_lane(tmp_path, released=False)
    try:
        seed(url, 10, lane_id)
    except ValueError as exc:
        assert "has not ended" in str(exc)
    else:
        raise AssertionError("a live lane was copied into the history")
