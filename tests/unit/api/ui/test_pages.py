"""Every console form does what its API twin does, through the same manager and store: requests,
extend/release/revoke, grants, principals, audit filters and CSV, researcher isolation."""

from __future__ import annotations

import csv
import io

from tests.support.ui import post, sign_in
from tests.support.world import World
from viplanes.store import records as store
from viplanes.store.models import Lane

REQUEST = {
    "src_ip": "10.1.0.10",
    "dst_ip": "203.0.113.10",
    "protocol": "tcp",
    "dst_port": "9000",
    "duration_min": "10",
    "purpose": "nightly sync",
}


def _lane(world: World, lane_id: int) -> Lane:
    with world.app.extensions["viplanes"].db.read() as s:
        return s.get(Lane, lane_id)


def _request(world: World, client, **over) -> int:
    r = post(client, "/ui/mine/request", {**REQUEST, **over})
    assert r.status_code == 302, r.text
    return int(r.headers["Location"].rsplit("/", 1)[1])


def test_researcher_page_offers_only_what_the_grant_allows(world: World):
    sign_in(world.client, world.tokens["alice"])
    page = world.client.get("/ui/mine").text
    assert 'value="10.1.0.10">desktop 10.1.0.10' in page and "10.1.0.20" in page
    assert "cloud" not in page.split("From host")[1].split("</select>")[0]  # not a campus source
    assert 'min="443" max="9100"' in page and 'max="60"' in page  # ports and 3600 s
    assert '<option value="203.0.113.10">' in page


def test_request_extend_release_through_the_lane_manager(world: World):
    sign_in(world.client, world.tokens["alice"])
    lane_id = _request(world, world.client)
    lane = _lane(world, lane_id)
    assert lane.state == "active" and lane.duration_s == 600 and lane_id in world.dataplane.active
    page = world.client.get(f"/ui/lanes/{lane_id}").text
    assert "10.0 kB" in page and "inside grant" in page  # the counters and the decision's reason
    assert "Revoke" not in page and "History" not in page  # no revoke, no audit log (as in the API)
    r = post(world.client, f"/ui/lanes/{lane_id}/extend", {"add_min": "5"})
    assert r.status_code == 302 and _lane(world, lane_id).duration_s == 900
    assert "Release lane" in world.client.get(f"/ui/lanes/{lane_id}/release").text  # asks first
    r = post(world.client, f"/ui/lanes/{lane_id}/release", {"back": "mine"})
    assert r.headers["Location"].endswith("/ui/mine")
    assert _lane(world, lane_id).state == "released" and lane_id not in world.dataplane.active


def test_api_refusals_are_shown_as_such(world: World):
    sign_in(world.client, world.tokens["alice"])
    r = post(world.client, "/ui/mine/request", {**REQUEST, "dst_port": "22"})
    assert r.status_code == 403 and "port_not_granted</strong>: port 22 is not in grant" in r.text
    r = post(world.client, "/ui/mine/request", {**REQUEST, "duration_min": "9999"})
    assert r.status_code == 403 and "duration_too_long" in r.text
    r = post(world.client, "/ui/mine/request", {**REQUEST, "dst_port": "many"})
    assert r.status_code == 422 and "<strong>dst_port</strong>: Not a valid integer" in r.text
    lane_id = _request(world, world.client)
    r = post(world.client, "/ui/mine/request", REQUEST)
    assert r.status_code == 409 and "duplicate_lane" in r.text
    post(world.client, f"/ui/lanes/{lane_id}/release")
    r = post(world.client, f"/ui/lanes/{lane_id}/release")
    assert r.status_code == 409 and "already released" in r.text


def test_researchers_see_and_act_on_only_their_own_lanes(world: World):
    sign_in(world.client, world.tokens["alice"])
    lane_id = _request(world, world.client)
    bob = world.app.test_client()
    sign_in(bob, world.tokens["bob"])
    assert bob.get(f"/ui/lanes/{lane_id}").status_code == 404
    assert f"Lane {lane_id}<" not in bob.get("/ui/lanes/rows").text
    assert f"Lane {lane_id}<" not in bob.get("/ui/mine").text
    for action in ("release", "extend"):
        assert bob.get(f"/ui/lanes/{lane_id}/{action}").status_code == 404
        assert post(bob, f"/ui/lanes/{lane_id}/{action}", {"add_min": "1"}).status_code == 404
    assert post(world.client, f"/ui/lanes/{lane_id}/revoke").status_code == 403
    assert _lane(world, lane_id).state == "active"
    assert f"Lane {lane_id}<" in world.client.get("/ui/lanes/rows").text


def test_operator_sees_every_live_lane_with_counters_and_revokes(world: World):
    alice = world.app.test_client()
    sign_in(alice, world.tokens["alice"])
    lane_id = _request(world, alice)
    sign_in(world.client, world.tokens["root"])
    rows = world.client.get("/ui/lanes/rows").text
    assert f"Lane {lane_id}<" in rows and "alice" in rows and "10.0 kB" in rows
    world.clock.advance(2)
    world.dataplane.counters = lambda _lid: type("C", (), {"packets": 30, "bytes": 260_000})()
    assert "1.0 Mbit/s" in world.client.get("/ui/lanes/rows").text  # 250 kB in 2 s
    assert "lane.request" in world.client.get(f"/ui/lanes/{lane_id}").text  # the lane's history
    assert "Revoke lane" in world.client.get(f"/ui/lanes/{lane_id}/revoke").text  # confirmation first
    assert _lane(world, lane_id).state == "active"
    post(world.client, f"/ui/lanes/{lane_id}/revoke")
    assert _lane(world, lane_id).state == "revoked" and lane_id not in world.dataplane.active
    assert f"Lane {lane_id}<" not in world.client.get("/ui/lanes/rows").text
    assert "revoked by root" in alice.get("/ui/mine").text


def test_grant_create_edit_revoke(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(
        world.client,
        "/ui/grants",
        {
            "principal": "bob",
            "src_prefixes": "10.1.0.20/32",
            "dst_prefixes": "203.0.113.0/24",
            "protocols": ["tcp"],
            "ports": "5201, 9000-9010",
            "max_duration_min": "10",  # minutes on every page
            "max_lanes": "2",
            "max_rate_mbps": "",
        },
    )
    assert r.status_code == 302, r.text
    gid = int(r.headers["Location"].split("?")[0].rsplit("/", 1)[1])  # ?created=1: the banner
    with world.app.extensions["viplanes"].db.read() as s:
        g = store.get_grant(s, gid)
        assert g.ports == ["5201", "9000-9010"] and g.max_lanes == 2 and g.created_by == "root"
    bad = post(
        world.client,
        "/ui/grants",
        {
            "principal": "bob",
            "src_prefixes": "10.1.0.0/24",
            "dst_prefixes": "10.1.0.0/24",
            "protocols": ["tcp"],
            "ports": "1",
            "max_duration_min": "1",
        },
    )
    assert bad.status_code == 422 and "invalid_grant" in bad.text  # a campus destination
    r = post(
        world.client,
        f"/ui/grants/{gid}",
        {"max_duration_min": "20", "max_lanes": "1", "max_rate_mbps": "50", "valid_until": ""},
    )
    assert r.status_code == 302 and "Limits saved" in world.client.get(r.headers["Location"]).text
    with world.app.extensions["viplanes"].db.read() as s:
        g = store.get_grant(s, gid)
        assert (g.max_duration_s, g.max_lanes, g.max_rate_mbps) == (1200, 1, 50.0)
    bob = world.app.test_client()
    sign_in(bob, world.tokens["bob"])
    lane_id = _request(world, bob, src_ip="10.1.0.20", dst_port="5201", rate_mbps="40")
    assert _lane(world, lane_id).grant_id in (gid, world.grants["bob"])
    page = world.client.get("/ui/grants").text
    assert f'/ui/lanes/{lane_id}"' in page
    assert "live lane" in world.client.get(f"/ui/grants/{_lane(world, lane_id).grant_id}/revoke").text
    post(world.client, f"/ui/grants/{_lane(world, lane_id).grant_id}/revoke")
    assert _lane(world, lane_id).state == "revoked" and lane_id not in world.dataplane.active


def test_principals_create_rotate_disable(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(world.client, "/ui/principals", {"name": "carol", "role": "researcher"})
    token = r.text.split('id="new-token" class="token" readonly value="')[1].split('"')[0]
    assert token.startswith("vl_") and "shown once" in r.text
    assert token not in world.client.get("/ui/principals").text
    carol = world.app.test_client()
    sign_in(carol, token)
    r = post(world.client, "/ui/principals/carol/rotate")
    new = r.text.split('readonly value="')[1].split('"')[0]
    assert new != token and carol.get("/ui/mine").status_code == 302
    sign_in(carol, token, expect=401)
    sign_in(carol, new)
    post(world.client, "/ui/principals/carol/disable")
    assert carol.get("/ui/mine").status_code == 302
    assert post(world.client, "/ui/principals", {"name": "CAROL", "role": "researcher"}).status_code == 409
    r = post(world.client, "/ui/principals/root/disable")
    assert r.status_code == 409 and "last enabled operator" in r.text


def test_audit_filters_and_csv_is_injection_safe(world: World):
    alice = world.app.test_client()
    sign_in(alice, world.tokens["alice"])
    lane_id = _request(world, alice)
    with world.app.extensions["viplanes"].db.write() as s:
        store.audit(s, world.clock(), "alice", "lane.note", "=HYPERLINK(\"x\")", "done", "+1-2 @sum")
    sign_in(world.client, world.tokens["root"])
    page = world.client.get(f"/ui/audit?lane={lane_id}").text
    assert "lane.request" in page and "lane.note" not in page
    assert "lane.note" in world.client.get("/ui/audit?actor=alice&action=lane.note").text
    assert "No events match" in world.client.get("/ui/audit?until=2020-01-01T00:00").text
    assert world.client.get("/ui/audit?lane=x").status_code == 422
    rows = list(csv.reader(io.StringIO(world.client.get("/ui/audit.csv?actor=alice").text)))
    assert rows[0][:3] == ["id", "at", "actor"]
    note = next(r for r in rows if r[3] == "lane.note")
    assert note[4] == "'=HYPERLINK(\"x\")" and note[6] == "'+1-2 @sum"


def test_switch_pages_without_a_controller_say_so(world: World):
    sign_in(world.client, world.tokens["root"])
    assert "memory data plane" in world.client.get("/ui/switches").text
    assert "memory data plane" in world.client.get("/ui/drift").text


def test_an_operators_own_page_lists_only_their_own_lanes(world: World):
    alice = world.app.test_client()
    sign_in(alice, world.tokens["alice"])
    lane_id = _request(world, alice)
    sign_in(world.client, world.tokens["root"])
    assert f"Lane {lane_id}<" in world.client.get("/ui/lanes/rows").text
    assert f"Lane {lane_id}<" not in world.client.get("/ui/mine").text
    assert f"Lane {lane_id}<" not in world.client.get("/ui/lanes/rows?back=mine").text


def test_disabling_a_principal_from_the_console_revokes_its_lanes(world: World):
    alice = world.app.test_client()
    sign_in(alice, world.tokens["alice"])
    lane_id = _request(world, alice)
    assert lane_id in world.dataplane.active
    sign_in(world.client, world.tokens["root"])
    assert "live lanes end now" in world.client.get("/ui/principals/alice/disable").text  # confirmation first
    post(world.client, "/ui/principals/alice/disable")
    assert _lane(world, lane_id).state == "revoked" and lane_id not in world.dataplane.active
