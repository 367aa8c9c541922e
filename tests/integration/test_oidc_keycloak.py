"""A real Keycloak (dev mode, the realm in tests/fixtures/keycloak/) and a real `viplanes serve`:
its access tokens accepted next to our own, people created from them, refusals named."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.keycloak import Keycloak, realm
from tests.support.serve import bootstrap, lane_body, memory_serve
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def keycloak(keycloak_server: Keycloak) -> Iterator[Keycloak]:
    with realm(keycloak_server, "oidcapi") as kc:
        yield kc


@pytest.fixture(scope="module")
def serve(keycloak: Keycloak, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeChild, str]]:
    work = tmp_path_factory.mktemp("serve")
    db = f"sqlite:///{work / 'oidc.db'}"
    op = bootstrap(db)
    env = dict(
        os.environ,
        VIPLANES_OIDC_ISSUER=keycloak.issuer,
        VIPLANES_OIDC_AUDIENCE="viplanes-api",
        VIPLANES_OIDC_GROUP_ROLES="hpc-users=researcher,netops=operator",
    )
    s = memory_serve(db, Path(work), env=env).start()
    yield s, op
    s.stop()


def call(serve: ServeChild, token: str, path: str = "/api/v1/whoami", **kw: object) -> requests.Response:
    method = "POST" if "json" in kw else "GET"
    return requests.request(
        method,
        serve.url + path,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        **kw,  # type: ignore[arg-type]
    )


def test_a_keycloak_user_signs_in_and_requests_a_lane(keycloak: Keycloak, serve: tuple[ServeChild, str]) -> None:
    s, op = serve
    token = keycloak.password_token("rita", "rita-test-pass")
    r = call(s, token)
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["role"]) == ("rita", "researcher")
    listed = call(s, op, "/api/v1/principals").json()
    items = listed["items"] if isinstance(listed, dict) else listed
    assert any(p["name"] == "rita" and p["role"] == "researcher" for p in items)
    grant = {
        "principal": "rita",
        "src_prefixes": ["10.1.0.0/24"],
        "dst_prefixes": ["203.0.113.0/24"],
        "protocols": ["tcp"],
        "ports": ["9000-9300"],
        "max_duration_s": 3600,
    }
    assert call(s, op, "/api/v1/grants", json=grant).status_code == 201
    lane = call(s, token, "/api/v1/lanes", json=lane_body(9000))
    assert lane.status_code == 201 and lane.json()["state"] == "active", lane.text
    assert call(s, token, "/api/v1/lanes", json=lane_body(22)).status_code == 403  # outside the grant


def test_an_operator_from_netops(keycloak: Keycloak, serve: tuple[ServeChild, str]) -> None:
    s, _ = serve
    r = call(s, keycloak.password_token("olaf", "olaf-test-pass"), "/api/v1/audit")
    assert r.status_code == 200, r.text


def test_a_user_in_no_mapped_group_is_refused(keycloak: Keycloak, serve: tuple[ServeChild, str]) -> None:
    s, _ = serve
    r = call(s, keycloak.password_token("lena", "lena-test-pass"))
    assert (r.status_code, r.json()["error"]) == (403, "no_role")


def test_a_token_for_another_client_is_wrong_audience(keycloak: Keycloak, serve: tuple[ServeChild, str]) -> None:
    s, _ = serve
    r = call(s, keycloak.password_token("rita", "rita-test-pass", client_id="other-app"))
    assert (r.status_code, r.json()["error"]) == (401, "wrong_audience")  # aud: other-api


def test_a_tampered_keycloak_token_is_bad_signature(keycloak: Keycloak, serve: tuple[ServeChild, str]) -> None:
    s, _ = serve
    head, body, sig = keycloak.password_token("rita", "rita-test-pass").split(".")
    flipped = sig[:10] + ("A" if sig[10] != "A" else "B") + sig[11:]
    r = call(s, f"{head}.{body}.{flipped}")
    assert (r.status_code, r.json()["error"]) == (401, "bad_signature")
