"""Which credentials a group grant answers (issue 41): only a provider token (or a campus
sign-in) carrying the group, and never one issued before a token showed the group gone, even
where the person had never held the group here before."""

from __future__ import annotations

import time

from tests.support.oidc_tokens import FakeIssuer
from tests.support.world import World
from tests.unit.api.test_group_grants import idp, lane  # noqa: F401  (the fixture)
from viplanes.domain.memberships import Evidence, TokenGroups, plan_renewal


def test_a_token_saved_before_a_removal_gets_no_group_lane_where_the_group_was_never_used(
    world: World,
    idp: FakeIssuer,  # noqa: F811
) -> None:
    """rita saved a token listing hpc-users, was removed, then used a fresh token (without the
    group) here first: the saved one must not bring the group back."""
    now = int(time.time())
    saved = idp.token(iat=now - 10, nbf=now - 10)
    fresh = idp.token(groups=["library"], iat=now, nbf=now - 10)
    assert world.client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    r = lane(world, saved)
    assert r.status_code == 403, r.json


def test_a_vl_token_of_a_provider_person_gets_nothing_from_group_grants(
    world: World,
    idp: FakeIssuer,  # noqa: F811
) -> None:
    """An operator issues rita (signed in at the provider, evidence fresh) an API token."""
    assert lane(world, idp.token()).status_code == 201  # her provider token: the group grant applies
    r = world.client.post("/api/v1/principals/rita/rotate", headers=world.h("root"))
    assert r.status_code == 200, r.json
    vl = r.json["token"]
    refused = lane(world, vl, port=5002)
    assert refused.status_code == 403, refused.json
    listed = world.client.get("/api/v1/grants", headers={"Authorization": f"Bearer {vl}"}).json
    assert [g for g in listed if g["group"] == "hpc-users"] == []


def test_a_token_without_a_group_never_held_records_its_absence() -> None:
    seen = TokenGroups(principal_id=7, groups=frozenset({"library"}), iat=1100.0, exp=1400.0)
    out = plan_renewal({}, seen, {"hpc-users"}, 30.0)
    assert out.write == {"hpc-users": Evidence(0.0, 1100.0)} and out.gone == []
    older = TokenGroups(principal_id=7, groups=frozenset({"hpc-users"}), iat=1000.0, exp=1300.0)
    assert plan_renewal(out.write, older, {"hpc-users"}, 30.0).write == {}
