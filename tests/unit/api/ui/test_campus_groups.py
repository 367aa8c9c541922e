"""Group grants from the console's campus sign-in (issue 30): the ID token's groups are membership
evidence like an access token's at the API, the console renews them server-side with the
provider's refresh token while the session is used, and a person removed from the group or
disabled at the provider loses the group's lanes and the session. Stand-in provider:
tests/support/fake_campus.py; the Keycloak version is tests/integration/test_oidc_console_browser.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.fake_campus import CONSOLE, FakeCampus
from tests.support.oidc_tokens import ISSUER
from tests.support.ui import csrf_for, post
from tests.support.world import World
from viplanes.api.oidc import OidcAuth
from viplanes.api.ui.campusclient import CampusClient
from viplanes.api.ui.campusfresh import RT_COOKIE, Held, RefreshBox
from viplanes.authz.oidc import KeyCache, OidcSettings, Verifier
from viplanes.lanes.membersweep import MembershipSweeper
from viplanes.store import records as store
from viplanes.store.memberships import evidence_of

GRACE_S = 30
SETTINGS = OidcSettings(
    issuer=ISSUER,
    audience="viplanes-api",
    group_roles={"hpc-users": "researcher", "library": "researcher", "netops": "operator"},
    membership_grace_s=GRACE_S,
)
GROUP_GRANT = {
    "group": "hpc-users",
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["tcp"],
    "ports": ["5000-5100"],
    "max_duration_s": 3600,
}


@pytest.fixture
def idp(world: World) -> FakeCampus:
    world.clock.now = time.time()  # the ID tokens' exp is real time; lanes are judged on this clock
    fake = FakeCampus()
    fake.clock = world.clock
    ctx = world.app.extensions["viplanes"]
    ctx.oidc = OidcAuth(
        SETTINGS, Verifier(SETTINGS, KeyCache(SETTINGS, fake.fetch_json)), on_lanes_ended=ctx.manager.revoke_lanes
    )
    world.app.extensions["viplanes_ui"].campus = CampusClient(
        SETTINGS, CONSOLE, fake.fetch_json, fake.exchange, clock=world.clock, refresher=fake.refresh
    )
    r = world.client.post("/api/v1/grants", json=GROUP_GRANT, headers=world.h("root"))
    assert r.status_code == 201, r.json
    world.grants["hpc-users"] = r.json["id"]
    return fake


def campus_sign_in(world: World, idp: FakeCampus, **claims: Any) -> Any:
    r = world.client.get("/ui/login/campus", query_string={"next": "/ui/mine"})
    assert r.status_code == 302, r.text
    return world.client.get("/ui/login/callback", query_string=idp.authorize(str(r.headers["Location"]), **claims))


def evidence(world: World) -> dict[str, Any]:
    with world.app.extensions["viplanes"].db.read() as s:
        return dict(evidence_of(s, store.get_principal(s, "rita").id))


def request_in_console(world: World, port: int = 5001) -> Any:
    form = {
        "grant": world.grants["hpc-users"],
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.7",
        "protocol": "tcp",
        "dst_port": port,
        "duration_min": 30,
        "purpose": "cryo-EM upload",
    }
    return post(world.client, "/ui/mine/request", form)


def rita_lanes(world: World) -> list[dict[str, Any]]:
    got = world.client.get("/api/v1/lanes", headers=world.h("root")).json
    items = got["items"] if isinstance(got, dict) else got
    return [x for x in items if x["principal"] == "rita"]


def revoke_reasons(world: World, lane_id: int) -> list[str]:
    got = world.client.get(f"/api/v1/audit?target=lane:{lane_id}", headers=world.h("root")).json
    items = got["items"] if isinstance(got, dict) else got
    return [f"{e['actor']}: {e['reason']}" for e in items if e["action"] == "lane.revoke"]


def test_sign_in_records_the_groups_until_exp_plus_grace(world: World, idp: FakeCampus) -> None:
    exp = int(time.time()) + 300
    assert campus_sign_in(world, idp, exp=exp).status_code == 200
    ev = evidence(world)
    assert list(ev) == ["hpc-users"]  # only groups some grant names are recorded
    assert ev["hpc-users"].until == exp + GRACE_S


def test_rita_sees_and_uses_her_groups_grant_in_the_console(world: World, idp: FakeCampus) -> None:
    campus_sign_in(world, idp)
    page = world.client.get("/ui/mine").text
    assert f'id="req-{world.grants["hpc-users"]}"' in page and "(group hpc-users)" in page
    r = request_in_console(world)
    assert r.status_code == 302, r.text
    (lane,) = rita_lanes(world)
    assert lane["state"] == "active" and lane["grant_id"] == world.grants["hpc-users"]
    assert lane["id"] in world.dataplane.active


def test_a_person_of_another_group_sees_no_grant_and_gets_no_lane(world: World, idp: FakeCampus) -> None:
    """The attack: signed in through the campus but not in hpc-users, post its grant's form anyway."""
    campus_sign_in(world, idp, groups=["library"])
    assert "(group hpc-users)" not in world.client.get("/ui/mine").text
    r = request_in_console(world)
    assert r.status_code == 403, r.text
    assert rita_lanes(world) == []


def test_the_session_renews_the_evidence_with_the_refresh_token(world: World, idp: FakeCampus) -> None:
    campus_sign_in(world, idp)
    assert request_in_console(world).status_code == 302
    first = evidence(world)["hpc-users"].until
    rt_before = world.client.get_cookie(RT_COOKIE, path="/ui")
    assert rt_before is not None and "rt-" not in rt_before.value  # encrypted, not just signed
    world.clock.advance(250)  # past exp - 60 s: the next console request refreshes
    assert world.client.get("/ui/mine").status_code == 200
    assert idp.refreshes == 1
    assert evidence(world)["hpc-users"].until == first + 250
    world.clock.advance(300)  # past the first token's exp + grace: the sweep would have ended the lane
    world.client.get("/ui/mine")
    assert MembershipSweeper(world.app.extensions["viplanes"].manager).sweep() == []
    assert rita_lanes(world)[0]["state"] == "active"


def test_removed_from_the_group_ends_the_lane_at_the_next_refresh(world: World, idp: FakeCampus) -> None:
    campus_sign_in(world, idp)
    request_in_console(world)
    (lane,) = rita_lanes(world)
    idp.now_groups = ["library"]  # an admin moves her out of hpc-users
    world.clock.advance(250)
    assert world.client.get("/ui/mine").status_code == 200  # still a researcher through library
    assert rita_lanes(world)[0]["state"] == "revoked"
    assert lane["id"] not in world.dataplane.active
    assert revoke_reasons(world, lane["id"]) == [
        "oidc: rita is no longer in group hpc-users (the provider's token says so)"
    ]
    assert "(group hpc-users)" not in world.client.get("/ui/mine").text


def test_removed_from_the_only_group_ends_the_lane_and_the_session(world: World, idp: FakeCampus) -> None:
    campus_sign_in(world, idp)
    request_in_console(world)
    idp.now_groups = []
    world.clock.advance(250)
    r = world.client.get("/ui/mine")
    assert r.status_code == 302 and "/ui/login" in r.headers["Location"]
    assert rita_lanes(world)[0]["state"] == "revoked"
    assert world.client.get("/ui/mine").status_code == 302  # the session cookie is gone


def test_disabled_at_the_provider_ends_the_session_and_the_lane_within_the_bound(world: World, idp: FakeCampus) -> None:
    campus_sign_in(world, idp)
    request_in_console(world)
    idp.disabled = True  # every refresh is refused from now on
    world.clock.advance(250)
    r = world.client.get("/ui/mine")
    assert r.status_code == 302 and "expired=1" in r.headers["Location"]
    assert world.client.get_cookie(RT_COOKIE, path="/ui") is None
    sweeper = MembershipSweeper(world.app.extensions["viplanes"].manager)
    assert sweeper.sweep() == []  # still inside exp + grace
    world.clock.advance(300 - 250 + GRACE_S + 1)
    (ended,) = sweeper.sweep()
    assert rita_lanes(world)[0]["state"] == "revoked" and ended not in world.dataplane.active


def test_an_older_id_token_cannot_undo_a_removal(world: World, idp: FakeCampus) -> None:
    """The attack: after the removal, finish a sign-in with an ID token issued before it."""
    old = int(time.time()) - 60
    campus_sign_in(world, idp)
    request_in_console(world)
    idp.now_groups = ["library"]
    world.clock.advance(250)
    world.client.get("/ui/mine")  # the refresh records the removal
    campus_sign_in(world, idp, iat=old, nbf=old)  # a token that still lists hpc-users
    assert evidence(world)["hpc-users"].until == 0
    assert "(group hpc-users)" not in world.client.get("/ui/mine").text
    assert request_in_console(world, 5002).status_code == 403


def test_a_refresh_cookie_moved_into_another_persons_session_is_not_used(world: World, idp: FakeCampus) -> None:
    """The attack: sam puts rita's sealed refresh token in his own console session to act as her."""
    campus_sign_in(world, idp)
    ritas = world.client.get_cookie(RT_COOKIE, path="/ui")
    assert ritas is not None
    world.client.delete_cookie(RT_COOKIE, path="/ui")
    campus_sign_in(world, idp, sub="5f0c-sam", preferred_username="sam", groups=["library"])
    world.client.set_cookie(RT_COOKIE, ritas.value, path="/ui")
    world.clock.advance(250)
    assert world.client.get("/ui/mine").status_code == 200
    assert idp.refreshes == 0  # not opened for sam's session: rita's refresh token never left


def test_the_refresh_cookie_is_bound_to_the_identity_and_the_secret() -> None:
    box = RefreshBox(b"server-secret", 3600)
    sealed = box.seal(7, ISSUER, "5f0c-rita", Held("rt-secret-value", 100.0))
    assert "rt-secret-value" not in sealed
    assert box.open(sealed, 7, ISSUER, "5f0c-rita") == Held("rt-secret-value", 100.0)
    assert box.open(sealed, 8, ISSUER, "5f0c-rita") is None
    assert box.open(sealed, 7, ISSUER, "5f0c-sam") is None
    assert RefreshBox(b"another-secret", 3600).open(sealed, 7, ISSUER, "5f0c-rita") is None
    assert box.open(sealed[:-4] + "AAAA", 7, ISSUER, "5f0c-rita") is None


def test_a_sign_in_refused_no_role_still_ends_the_groups_lanes(world: World, idp: FakeCampus) -> None:
    """Removed from her only mapped group, rita signs in again: refused, and her group lane ends."""
    campus_sign_in(world, idp)
    request_in_console(world)
    later = int(time.time()) + 1
    r = campus_sign_in(world, idp, groups=[], iat=later, nbf=later - 5)
    assert r.status_code == 403 and "no_role" in r.text
    (lane,) = rita_lanes(world)
    assert lane["state"] == "revoked" and lane["id"] not in world.dataplane.active


def test_sign_out_when_a_refresh_is_due_still_reaches_the_provider(world: World, idp: FakeCampus) -> None:
    """Signing out must not be turned into 'session ended' by a refresh the provider refuses:
    the person's single sign-on session at the provider has to end too."""
    campus_sign_in(world, idp)
    csrf = csrf_for(world.client)
    idp.disabled = True
    world.clock.advance(250)
    r = world.client.post("/ui/logout", data={"csrf": csrf})
    assert r.status_code == 200 and "/protocol/openid-connect/logout" in r.text
    assert idp.refreshes == 0
    assert world.client.get_cookie(RT_COOKIE, path="/ui") is None
