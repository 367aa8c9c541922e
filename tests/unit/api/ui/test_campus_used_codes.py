"""The console's memory of used sign-in transactions and codes (issue 41): one transaction cookie
replayed with made-up codes used to grow it past its cap (14,000 entries, ~27 MiB with 2 KB codes)
and sent every code to the provider. A transaction is now used once, codes are bounded in length,
and the memory never holds more than its cap."""

from __future__ import annotations

import secrets

import pytest

from tests.support.fake_campus import CONSOLE, FakeCampus
from tests.support.oidc_tokens import ISSUER
from tests.support.world import World
from viplanes.api.ui import campusclient
from viplanes.api.ui.campusclient import CampusClient
from viplanes.authz.oidc import OidcSettings

SETTINGS = OidcSettings(issuer=ISSUER, audience="viplanes-api", group_roles={"netops": "operator"})


class CountingCampus(FakeCampus):
    def __init__(self) -> None:
        super().__init__()
        self.exchanges = 0

    def exchange(self, *args: object) -> dict[str, object]:
        self.exchanges += 1
        return super().exchange(*args)  # type: ignore[arg-type]


@pytest.fixture
def idp(world: World, monkeypatch: pytest.MonkeyPatch) -> CountingCampus:
    monkeypatch.setattr(campusclient, "MAX_USED_CODES", 50)
    fake = CountingCampus()
    world.app.extensions["viplanes_ui"].campus = CampusClient(SETTINGS, CONSOLE, fake.fetch_json, fake.exchange)
    return fake


def start(world: World) -> dict[str, str]:
    r = world.client.get("/ui/login/campus", query_string={"next": "/ui/mine"})
    assert r.status_code == 302, r.text
    from urllib.parse import parse_qs, urlsplit

    return {"state": parse_qs(urlsplit(str(r.headers["Location"])).query)["state"][0]}


def test_a_replayed_transaction_never_reaches_the_provider(world: World, idp: CountingCampus) -> None:
    back = start(world)
    tx = world.client.get_cookie("vl_oidc", path="/ui").value
    pages = []
    for _ in range(20):
        world.client.set_cookie("vl_oidc", tx, path="/ui")
        pages.append(world.client.get("/ui/login/callback", query_string=back | {"code": secrets.token_urlsafe(30)}))
    assert idp.exchanges == 1, f"{idp.exchanges} made-up codes sent to the provider on one transaction"
    assert all(p.status_code == 400 for p in pages)
    assert all("transaction_replayed" in p.text for p in pages[1:])


def test_the_used_memory_stays_under_its_cap(world: World, idp: CountingCampus) -> None:
    campus = world.app.extensions["viplanes_ui"].campus
    for _ in range(70):  # 70 sign-ins within the 10 minutes, cap 50
        back = start(world)
        world.client.get("/ui/login/callback", query_string=back | {"code": secrets.token_urlsafe(30)})
    assert len(campus._used) <= 50, len(campus._used)


def test_a_long_code_is_refused_unsent(world: World, idp: CountingCampus) -> None:
    back = start(world)
    r = world.client.get("/ui/login/callback", query_string=back | {"code": "c" * 2000})
    assert r.status_code == 400 and "bad_code" in r.text
    assert idp.exchanges == 0
