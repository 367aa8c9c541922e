"""Grants to a provider group (issue 30): members with a fresh token may request lanes; a token
showing the group gone ends those lanes at once, evidence that runs out ends them at the sweep,
each audited. Locally made JWTs (tests/support/oidc_tokens.py); the Keycloak version is
tests/integration/test_group_lanes_keycloak.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.oidc_tokens import AUDIENCE, ISSUER, FakeIssuer
from tests.support.world import World
from viplanes.api.oidc import OidcAuth
from viplanes.authz.oidc import KeyCache, OidcSettings, Verifier
from viplanes.lanes.membersweep import MembershipSweeper

SETTINGS = OidcSettings(
    issuer=ISSUER,
    audience=AUDIENCE,
    group_roles={"hpc-users": "researcher", "library": "researcher", "netops": "operator"},
    membership_grace_s=30,
)
GROUP_GRANT = {
    "group": "hpc-users",
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],  # ports 5000-5100: alice's and bob's own grants do not reach them
    "protocols": ["tcp"],
    "ports": ["5000-5100"],
    "max_duration_s": 3600,
    "max_lanes": 5,
}


@pytest.fixture
def idp(world: World) -> FakeIssuer:
    world.clock.now = time.time()  # the tokens' exp is real time; lanes are judged on this clock
    issuer = FakeIssuer()
    ctx = world.app.extensions["viplanes"]
    ctx.oidc = OidcAuth(
        SETTINGS, Verifier(SETTINGS, KeyCache(SETTINGS, issuer.fetch_json)), on_lanes_ended=ctx.manager.revoke_lanes
    )
    r = world.client.post("/api/v1/grants", json=GROUP_GRANT, headers=world.h("root"))
    assert r.status_code == 201, r.json
    assert (r.json["group"], r.json["principal"]) == ("hpc-users", None)
    return issuer


def lane(world: World, token: str, port: int = 5001) -> Any:
    body = {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.7",
        "protocol": "tcp",
        "dst_port": port,
        "duration_s": 600,
        "purpose": "cryo-EM upload",
    }
    return world.client.post("/api/v1/lanes", json=body, headers={"Authorization": f"Bearer {token}"})


def state(world: World, lane_id: int) -> str:
    return world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("root")).json["state"]


def revokes(world: World, lane_id: int) -> list[dict[str, Any]]:
    got = world.client.get(f"/api/v1/audit?target=lane:{lane_id}", headers=world.h("root")).json
    items = got["items"] if isinstance(got, dict) else got
    return [e for e in items if e["action"] == "lane.revoke"]


def test_a_member_requests_a_lane_under_the_group_grant(world: World, idp: FakeIssuer) -> None:
    r = lane(world, idp.token())
    assert r.status_code == 201 and r.json["state"] == "active", r.json
    assert r.json["id"] in world.dataplane.active


def test_a_non_member_is_refused(world: World, idp: FakeIssuer) -> None:
    """The attack: a signed-in person of another group asks under hpc-users' grant."""
    r = lane(world, idp.token(sub="5f0c-sam", preferred_username="sam", groups=["library"]))
    assert r.status_code == 403, r.json


def test_our_own_token_holder_gets_nothing_from_a_group_grant(world: World, idp: FakeIssuer) -> None:
    """A principal with a ``vl_`` token has no membership evidence: no group's grant applies."""
    r = world.client.post(
        "/api/v1/lanes",
        json={
            "src_ip": "10.1.0.10",
            "dst_ip": "203.0.113.7",
            "protocol": "tcp",
            "dst_port": 5001,
            "duration_s": 600,
            "purpose": "x",
        },
        headers=world.h("alice"),
    )
    assert r.status_code == 403, r.json


def test_a_token_showing_the_group_gone_ends_the_lane_at_once(world: World, idp: FakeIssuer) -> None:
    lane_id = lane(world, idp.token()).json["id"]
    later = int(time.time()) + 1
    r = world.client.get(
        "/api/v1/whoami",
        headers={"Authorization": f"Bearer {idp.token(groups=['library'], iat=later, nbf=later - 5)}"},
    )
    assert r.status_code == 200  # still a researcher (library), no longer in hpc-users
    assert state(world, lane_id) == "revoked"
    assert lane_id not in world.dataplane.active
    (event,) = revokes(world, lane_id)
    assert event["actor"] == "oidc" and "no longer in group hpc-users" in event["reason"]


def test_removed_from_the_only_group_is_403_and_still_ends_the_lane(world: World, idp: FakeIssuer) -> None:
    lane_id = lane(world, idp.token()).json["id"]
    later = int(time.time()) + 1
    r = world.client.get(
        "/api/v1/whoami", headers={"Authorization": f"Bearer {idp.token(groups=[], iat=later, nbf=later - 5)}"}
    )
    assert (r.status_code, r.json["error"]) == (403, "no_role")
    assert state(world, lane_id) == "revoked"


def test_an_older_token_replayed_after_the_removal_gets_no_new_lane(world: World, idp: FakeIssuer) -> None:
    """The attack: save a token from before the removal, present it after."""
    now = int(time.time())
    old = idp.token(iat=now - 10, nbf=now - 10)
    assert lane(world, old).status_code == 201
    gone = idp.token(groups=["library"], iat=now, nbf=now - 10)
    assert world.client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {gone}"}).status_code == 200
    r = lane(world, old, port=5002)
    assert r.status_code == 403, r.json


def test_evidence_that_runs_out_ends_the_lane_at_the_sweep(world: World, idp: FakeIssuer) -> None:
    """Removed at the provider and never asking again (or disabled: refresh fails)."""
    exp = int(time.time()) + 120
    lane_id = lane(world, idp.token(exp=exp)).json["id"]
    sweeper = MembershipSweeper(world.app.extensions["viplanes"].manager)
    world.clock.now = exp + SETTINGS.membership_grace_s - 1
    assert sweeper.sweep() == [] and state(world, lane_id) == "active"
    world.clock.now = exp + SETTINGS.membership_grace_s + 1
    assert sweeper.sweep() == [lane_id]
    assert state(world, lane_id) == "revoked" and lane_id not in world.dataplane.active
    (event,) = revokes(world, lane_id)
    assert "membership of group hpc-users not renewed" in event["reason"]


def test_members_see_their_groups_grants(world: World, idp: FakeIssuer) -> None:
    mine = world.client.get("/api/v1/grants", headers={"Authorization": f"Bearer {idp.token()}"}).json
    assert [g["group"] for g in mine] == ["hpc-users"]
    sams = world.client.get(
        "/api/v1/grants",
        headers={"Authorization": f"Bearer {idp.token(sub='5f0c-sam', preferred_username='sam', groups=['library'])}"},
    ).json
    assert sams == []


@pytest.mark.parametrize("names", [{"principal": "alice", "group": "hpc-users"}, {}], ids=["both", "neither"])
def test_a_grant_names_a_principal_or_a_group(world: World, names: dict[str, str]) -> None:
    body = {k: v for k, v in GROUP_GRANT.items() if k != "group"} | names
    r = world.client.post("/api/v1/grants", json=body, headers=world.h("root"))
    assert r.status_code == 422 and "principal" in str(r.json), r.json
