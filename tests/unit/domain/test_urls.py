"""Where a token may travel (issue 41): https anywhere, plain http only to loopback, decided on
the parsed URL. Each "evil" URL below starts like a loopback URL and goes elsewhere; the
string-prefix check used by the login and the API's key fetch let all three through."""

from __future__ import annotations

import pytest

from viplanes.api.oidc import fetch_json
from viplanes.authz.oidc import OidcRefused
from viplanes.client.login import _allowed_url
from viplanes.domain.urls import is_loopback_host, token_safe_url

EVIL = [
    "http://127.0.0.1@evil.example/realms/x",
    "http://localhost.evil.example/realms/x",
    "http://127.0.0.1.nip.io/realms/x",
    "http://localhost@evil.example:8080/",
    "http://[::1]@evil.example/",
    "http://127.0.0.1:80@evil.example/",
    "http://evil.example/127.0.0.1",
    "ftp://127.0.0.1/",
    "http://127.0.0.1:notaport/",
    "https://user:pw@idp.example/",  # userinfo only serves to disguise a host
]
GOOD = [
    "https://idp.example/realms/x",
    "http://127.0.0.1:8080/realms/x",
    "http://127.1.2.3/realms/x",
    "http://localhost:8080/realms/x",
    "http://LOCALHOST/",
    "http://[::1]:8080/realms/x",
]


@pytest.mark.parametrize("url", EVIL)
def test_a_disguised_host_is_not_loopback(url: str) -> None:
    assert not token_safe_url(url)


@pytest.mark.parametrize("url", GOOD)
def test_https_and_real_loopback_pass(url: str) -> None:
    assert token_safe_url(url)


@pytest.mark.parametrize("url", EVIL[:3])
def test_the_login_refuses_a_disguised_issuer(url: str) -> None:
    assert not _allowed_url(url)


@pytest.mark.parametrize("url", EVIL[:3])
def test_the_api_refuses_to_fetch_keys_from_a_disguised_host(url: str) -> None:
    with pytest.raises(OidcRefused) as exc:
        fetch_json(url)
    assert exc.value.code == "issuer_unavailable" and "plain http" in exc.value.message


def test_loopback_hosts() -> None:
    assert is_loopback_host("127.0.0.1") and is_loopback_host("::1") and is_loopback_host("[::1]")
    assert not is_loopback_host("127.0.0.1.nip.io") and not is_loopback_host("10.0.0.1")
