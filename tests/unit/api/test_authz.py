"""Authorization matrix: every endpoint x role x owner. Another researcher's lane is a 404."""

from __future__ import annotations

import pytest

WHO = ("root", "alice", "bob", None)  # operator, owner, other researcher, anonymous

# (method, path, body, expected status for root, alice (owner), bob (other researcher))
LANE = "/api/v1/lanes/{lane}"
MATRIX = [
    ("POST", "/api/v1/lanes", "lane", (403, 201, 201)),  # root has no grant: a policy denial
    ("GET", "/api/v1/lanes", None, (200, 200, 200)),
    ("GET", LANE, None, (200, 200, 404)),
    ("POST", LANE + "/extend", {"add_s": 60}, (200, 200, 404)),
    ("POST", LANE + "/release", None, (200, 200, 404)),
    ("POST", LANE + "/revoke", None, (200, 403, 403)),
    ("GET", LANE + "/stats", None, (200, 200, 404)),
    ("POST", "/api/v1/grants", "grant", (201, 403, 403)),
    ("GET", "/api/v1/grants", None, (200, 200, 200)),
    ("GET", "/api/v1/grants/{grant}", None, (200, 200, 404)),
    ("POST", "/api/v1/grants/{grant}/revoke", None, (200, 403, 403)),
    ("POST", "/api/v1/principals", {"name": "carol", "role": "researcher"}, (201, 403, 403)),
    ("GET", "/api/v1/principals", None, (200, 403, 403)),
    ("POST", "/api/v1/principals/bob/rotate", None, (200, 403, 403)),
    ("POST", "/api/v1/principals/bob/disable", None, (200, 403, 403)),
    ("GET", "/api/v1/audit", None, (200, 403, 403)),
    ("GET", "/api/v1/whoami", None, (200, 200, 200)),
]


def _body(kind, who):
    if kind == "lane":
        src = "10.1.0.20" if who == "bob" else "10.1.0.10"
        return {
            "src_ip": src,
            "dst_ip": "203.0.113.10",
            "protocol": "tcp",
            "dst_port": 9050,
            "duration_s": 60,
            "purpose": "matrix",
        }
    if kind == "grant":
        return {
            "principal": "bob",
            "src_prefixes": ["10.1.0.20/32"],
            "dst_prefixes": ["0.0.0.0/0"],
            "protocols": ["udp"],
            "ports": ["5000-5010"],
            "max_duration_s": 60,
        }
    return kind


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("method,path,body,expected", MATRIX, ids=[f"{m} {p}" for m, p, *_ in MATRIX])
def test_matrix(world, who, method, path, body, expected):
    lane = world.lane("alice").json["id"]  # alice owns lane and grant
    url = path.format(lane=lane, grant=world.grants["alice"])
    headers = world.h(who) if who else {}
    r = world.client.open(url, method=method, json=_body(body, who), headers=headers)
    want = 401 if who is None else expected[WHO.index(who)]
    assert r.status_code == want, (who, method, url, r.json)
    if want >= 400:
        assert set(r.json) == {"error", "message", "details"}


def test_researcher_lists_only_their_own(world):
    world.lane("alice")
    world.lane("bob")
    assert {ln["principal"] for ln in world.client.get("/api/v1/lanes", headers=world.h("bob")).json} == {"bob"}
    assert {
        ln["principal"] for ln in world.client.get("/api/v1/lanes?principal=alice", headers=world.h("bob")).json
    } == {"bob"}
    assert len(world.client.get("/api/v1/lanes", headers=world.h("root")).json) == 2
    grants = world.client.get("/api/v1/grants", headers=world.h("bob")).json
    assert [g["principal"] for g in grants] == ["bob"]


def test_disabled_principal_and_rotated_token_stop_working(world):
    old = world.tokens["bob"]
    r = world.client.post("/api/v1/principals/bob/rotate", headers=world.h("root"))
    new = r.json["token"]
    assert new != old
    assert world.client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {old}"}).status_code == 401
    assert world.client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {new}"}).json["name"] == "bob"
    world.client.post("/api/v1/principals/bob/disable", headers=world.h("root"))
    assert world.client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {new}"}).status_code == 401


def test_failed_auth_is_limited_but_a_valid_token_is_always_served(world):
    bad = {"Authorization": "Bearer nope"}
    for _ in range(10):
        assert world.client.get("/api/v1/whoami", headers=bad).status_code == 401
    r = world.client.get("/api/v1/whoami", headers=bad)
    assert r.status_code == 429 and r.json["error"] == "rate_limited" and int(r.headers["Retry-After"]) > 0
    assert world.client.get("/api/v1/whoami").status_code == 429  # no token at all counts as a failure
    assert world.client.get("/api/v1/whoami", headers=world.h("alice")).status_code == 200  # never refused
    other = world.client.get("/api/v1/whoami", headers=bad, environ_base={"REMOTE_ADDR": "10.9.9.9"})
    assert other.status_code == 401


def test_failed_auth_budget_is_shared_by_two_apps_on_one_database(world, clock, dataplane, topo):
    from tests.support.apps import make_app

    second = make_app(
        {"db_url": world.app.extensions["viplanes"].db.url, "migrate": False},
        dataplane=dataplane,
        topology=topo,
        clock=clock,
    ).test_client()
    bad = {"Authorization": "Bearer nope"}
    for client in (world.client, second) * 5:
        assert client.get("/api/v1/whoami", headers=bad).status_code == 401
    assert world.client.get("/api/v1/whoami", headers=bad).status_code == 429
    assert second.get("/api/v1/whoami", headers=bad).status_code == 429
    assert second.get("/api/v1/whoami", headers=world.h("root")).status_code == 200


def test_tokens_are_stored_hashed(world):
    from sqlalchemy import select

    from viplanes.store.models import ApiToken

    with world.app.extensions["viplanes"].db.read() as s:
        hashes = set(s.scalars(select(ApiToken.token_hash)))
    assert hashes and not (set(world.tokens.values()) & hashes)
