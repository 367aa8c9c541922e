"""The API with a provider configured: its JWTs next to our tokens, people created on first
sight by (issuer, sub), each refusal a 401/403 naming why."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.oidc_tokens import AUDIENCE, ISSUER, FakeIssuer, alg_none_token
from tests.support.world import World
from viplanes.api.oidc import OidcAuth
from viplanes.authz.oidc import KeyCache, OidcSettings, Verifier

SETTINGS = OidcSettings(issuer=ISSUER, audience=AUDIENCE, group_roles={"hpc-users": "researcher", "netops": "operator"})


@pytest.fixture
def idp(world: World) -> FakeIssuer:
    issuer = FakeIssuer()
    verifier = Verifier(SETTINGS, KeyCache(SETTINGS, issuer.fetch_json))
    world.app.extensions["viplanes"].oidc = OidcAuth(SETTINGS, verifier)
    return issuer


def get(world: World, token: str, path: str = "/api/v1/whoami") -> Any:
    return world.client.get(path, headers={"Authorization": f"Bearer {token}"})


def test_first_sight_creates_a_researcher(world: World, idp: FakeIssuer) -> None:
    r = get(world, idp.token())
    assert r.status_code == 200, r.json
    assert (r.json["name"], r.json["role"]) == ("rita", "researcher")
    again = get(world, idp.token(preferred_username="rita.renamed"))  # same sub: same principal
    assert again.json["name"] == "rita"
    ops = world.client.get("/api/v1/audit", headers=world.h("root")).json
    items = ops["items"] if isinstance(ops, dict) else ops
    assert any(e["action"] == "principal.create" and e["actor"] == "oidc" for e in items)


def test_our_own_tokens_still_work(world: World, idp: FakeIssuer) -> None:
    assert world.client.get("/api/v1/whoami", headers=world.h("alice")).json["name"] == "alice"


def test_a_provider_user_named_like_our_operator_does_not_become_it(world: World, idp: FakeIssuer) -> None:
    """The attack: register `root` at a provider (or be renamed to it) and expect our root's rights."""
    r = get(world, idp.token(sub="attacker", preferred_username="root"))
    assert r.status_code == 200
    assert r.json["name"] != "root" and r.json["role"] == "researcher"
    assert get(world, idp.token(sub="attacker", preferred_username="ROOT")).json["name"] == r.json["name"]


def test_groups_decide_the_role_at_every_sign_in(world: World, idp: FakeIssuer) -> None:
    assert get(world, idp.token(groups=["netops"])).json["role"] == "operator"
    assert get(world, idp.token(groups=["hpc-users"])).json["role"] == "researcher"
    assert get(world, idp.token(groups=["hpc-users"]), "/api/v1/audit").status_code == 403
    listed = world.client.get("/api/v1/principals", headers=world.h("root")).json
    items = listed["items"] if isinstance(listed, dict) else listed
    assert [p["role"] for p in items if p["name"] == "rita"] == ["researcher"]  # the stored role follows too


def test_no_mapped_group_is_403_no_role(world: World, idp: FakeIssuer) -> None:
    r = get(world, idp.token(groups=["library"]))
    assert (r.status_code, r.json["error"]) == (403, "no_role")


@pytest.mark.parametrize(
    "make,code",
    [
        (lambda i: i.token(exp=int(time.time()) - 600, iat=int(time.time()) - 900), "token_expired"),
        (lambda i: i.token(nbf=int(time.time()) + 900), "token_not_yet_valid"),
        (lambda i: i.token(aud="account"), "wrong_audience"),
        (lambda i: i.token(iss="https://evil.test/realms/viplanes"), "wrong_issuer"),
        (lambda i: alg_none_token(i.claims()), "bad_algorithm"),
    ],
    ids=["expired", "not-yet-valid", "wrong-audience", "wrong-issuer", "alg-none"],
)
def test_refusals_are_401_naming_why(world: World, idp: FakeIssuer, make: Any, code: str) -> None:
    r = get(world, make(idp))
    assert (r.status_code, r.json["error"]) == (401, code)
    assert "invalid_token" in r.headers["WWW-Authenticate"]


def test_refusals_count_as_failed_authentications(world: World, idp: FakeIssuer) -> None:
    expired = idp.token(exp=int(time.time()) - 600, iat=int(time.time()) - 900)
    codes = [get(world, expired).status_code for _ in range(12)]
    assert codes[-1] == 429


def test_disabled_here_stays_out_whatever_the_provider_says(world: World, idp: FakeIssuer) -> None:
    name = get(world, idp.token()).json["name"]
    r = world.client.post(f"/api/v1/principals/{name}/disable", headers=world.h("root"))
    assert r.status_code == 200, r.json
    r = get(world, idp.token())
    assert (r.status_code, r.json["error"]) == (401, "principal_disabled")


def test_without_oidc_configured_a_jwt_is_just_an_unknown_token(world: World) -> None:
    r = get(world, FakeIssuer().token())
    assert (r.status_code, r.json["error"]) == (401, "unauthorized")


def test_a_researcher_from_the_provider_requests_a_lane_within_a_grant(world: World, idp: FakeIssuer) -> None:
    name = get(world, idp.token()).json["name"]
    grant = {
        "principal": name,
        "src_prefixes": ["10.1.0.0/24"],
        "dst_prefixes": ["203.0.113.0/24"],
        "protocols": ["tcp"],
        "ports": [9000],
        "max_duration_s": 600,
    }
    assert world.client.post("/api/v1/grants", json=grant, headers=world.h("root")).status_code == 201
    body = {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": 9000,
        "duration_s": 60,
        "purpose": "campus sign-in",
    }
    r = world.client.post("/api/v1/lanes", json=body, headers={"Authorization": f"Bearer {idp.token()}"})
    assert r.status_code == 201, r.json
    outside = dict(body, dst_port=22)
    r = world.client.post("/api/v1/lanes", json=outside, headers={"Authorization": f"Bearer {idp.token()}"})
    assert r.status_code == 403
