"""A campus console session lives only as long as the provider's evidence of its role (issue 41):
the ID token's exp + the membership grace, renewed by a refresh with the provider, never by the
browser's say-so. Without the refresh cookie (dropped by the browser, or a stolen session cookie
alone) or with a provider that gives no refresh token, the session ends when the evidence does.
The Keycloak version is tests/integration/test_campus_session_keycloak.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from tests.support.fake_campus import CONSOLE, FakeCampus
from tests.support.oidc_tokens import ISSUER
from tests.support.world import World
from viplanes.api.oidc import OidcAuth
from viplanes.api.ui.campusclient import CampusClient
from viplanes.api.ui.campusfresh import RT_COOKIE
from viplanes.api.ui.session import COOKIE
from viplanes.authz.oidc import KeyCache, OidcSettings, Verifier

GRACE_S = 30
TOKEN_S = 300  # FakeCampus's ID tokens live 300 s
SETTINGS = OidcSettings(
    issuer=ISSUER, audience="viplanes-api", group_roles={"netops": "operator"}, membership_grace_s=GRACE_S
)


@pytest.fixture
def idp(world: World) -> FakeCampus:
    world.clock.now = time.time()
    fake = FakeCampus()
    fake.clock = world.clock
    ctx = world.app.extensions["viplanes"]
    ctx.oidc = OidcAuth(SETTINGS, Verifier(SETTINGS, KeyCache(SETTINGS, fake.fetch_json)))
    world.app.extensions["viplanes_ui"].campus = CampusClient(
        SETTINGS, CONSOLE, fake.fetch_json, fake.exchange, clock=world.clock, refresher=fake.refresh
    )
    return fake


def olaf_signs_in(world: World, idp: FakeCampus) -> None:
    r = world.client.get("/ui/login/campus", query_string={"next": "/ui/principals"})
    back = idp.authorize(str(r.headers["Location"]), sub="5f0c-olaf", preferred_username="olaf", groups=["netops"])
    assert world.client.get("/ui/login/callback", query_string=back).status_code == 200
    assert world.client.get("/ui/principals").status_code == 200


def ended(r: Any) -> bool:
    return r.status_code == 302 and "/ui/login" in r.headers["Location"] and "expired=1" in r.headers["Location"]


@pytest.mark.parametrize(
    ("now", "until", "due", "verdict"),
    [
        (100, 200, None, "keep"),  # no refresh token, inside the evidence
        (100, 200, 150, "keep"),
        (150, 200, 150, "refresh"),  # due: an unreachable provider keeps the session until 200
        (200, 200, None, "end"),  # the evidence ran out and nothing can renew it
        (250, 200, 150, "must_refresh"),  # past it with a refresh token: renew now or end
        (1, 0, None, "end"),  # a cookie carrying no evidence at all
    ],
)
def test_the_rule(now: float, until: float, due: float | None, verdict: str) -> None:
    from viplanes.api.ui.campusfresh import freshness  # here: the module imports on code without it

    assert freshness(now, until, due) == verdict


def test_without_the_refresh_cookie_the_session_ends_with_its_evidence(world: World, idp: FakeCampus) -> None:
    """The attack: the provider disabled olaf; his browser (or a thief of the session cookie)
    simply stops sending vl_rt, so no refresh ever asks the provider."""
    olaf_signs_in(world, idp)
    world.client.delete_cookie(RT_COOKIE, path="/ui")
    idp.disabled = True
    world.clock.advance(TOKEN_S + GRACE_S - 1)
    assert world.client.get("/ui/principals").status_code == 200  # the evidence still holds
    world.clock.advance(2)
    assert ended(world.client.get("/ui/principals"))
    assert world.client.get_cookie(COOKIE, path="/ui") is None
    assert idp.refreshes == 0


def test_a_provider_without_refresh_tokens_ends_the_session_with_its_evidence(world: World, idp: FakeCampus) -> None:
    idp.issue_refresh = False
    olaf_signs_in(world, idp)
    assert world.client.get_cookie(RT_COOKIE, path="/ui") is None
    world.clock.advance(TOKEN_S + GRACE_S + 1)
    assert ended(world.client.get("/ui/principals"))


def test_a_used_console_renews_its_evidence_and_lives_on(world: World, idp: FakeCampus) -> None:
    olaf_signs_in(world, idp)
    for _ in range(4):  # 4 x 250 s: far past the first token's exp + grace
        world.clock.advance(250)
        assert world.client.get("/ui/principals").status_code == 200
    assert idp.refreshes == 4


def test_an_idle_console_renews_on_return_or_ends(world: World, idp: FakeCampus) -> None:
    """Past the evidence with the refresh cookie: one refresh decides; a refused one ends it."""
    olaf_signs_in(world, idp)
    world.clock.advance(TOKEN_S + GRACE_S + 100)
    assert world.client.get("/ui/principals").status_code == 200
    assert idp.refreshes == 1
    idp.disabled = True
    world.clock.advance(TOKEN_S + GRACE_S + 100)
    assert ended(world.client.get("/ui/principals"))


def test_an_unreachable_provider_keeps_the_session_only_until_the_evidence_ends(world: World, idp: FakeCampus) -> None:
    olaf_signs_in(world, idp)

    def down(*_: Any) -> Any:
        raise requests.ConnectionError("the provider is down")

    world.app.extensions["viplanes_ui"].campus.refresher = down
    world.clock.advance(TOKEN_S - 30)  # a refresh is due; the provider cannot be reached
    assert world.client.get("/ui/principals").status_code == 200
    world.clock.advance(30 + GRACE_S)
    assert ended(world.client.get("/ui/principals"))
