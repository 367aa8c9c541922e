"""The issuer's keys under attack and outage (issue 41): a provider down since start answers 503,
not 401; a made-up ``kid`` does not hold off a key rotated right after it for the whole refetch
gap; and a fetch the provider leaves hanging never makes a token with a known ``kid`` wait."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests
from joserfc.jwk import RSAKey

from tests.support.oidc_tokens import AUDIENCE, ISSUER, FakeIssuer
from viplanes.authz.oidc import KeyCache, OidcRefused, OidcSettings, Verifier

SETTINGS = OidcSettings(issuer=ISSUER, audience=AUDIENCE, group_roles={"netops": "operator"})


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def refusal(v: Verifier, token: str) -> tuple[int, str]:
    with pytest.raises(OidcRefused) as exc:
        v.verify(token)
    return exc.value.status, exc.value.code


def test_a_provider_down_since_start_is_503_on_every_call() -> None:
    idp = FakeIssuer()

    def down(url: str) -> Any:
        raise requests.ConnectionError("connection refused")

    clock = Clock()
    v = Verifier(SETTINGS, KeyCache(SETTINGS, down, clock))
    token = idp.token()
    answers = []
    for _ in range(8):
        answers.append(refusal(v, token))
        clock.t += 0.1
    assert answers == [(503, "issuer_unavailable")] * 8


def test_a_made_up_kid_does_not_hold_off_a_rotated_key() -> None:
    idp = FakeIssuer()
    clock = Clock()
    v = Verifier(SETTINGS, KeyCache(SETTINGS, idp.fetch_json, clock))
    v.verify(idp.token())
    clock.t += 60
    attacker = RSAKey.generate_key(2048)
    assert refusal(v, idp.token(kid="made-up", key=attacker)) == (401, "unknown_key")  # spends a refetch
    idp.rotate("k2")  # the provider rotates right after
    clock.t += 2  # two seconds later the first token with the new key arrives
    assert v.verify(idp.token(kid="k2"))["sub"] == "5f0c-rita"


def test_a_hanging_fetch_never_delays_a_known_kid() -> None:
    idp = FakeIssuer()
    release = threading.Event()
    hang = {"on": False}

    def fetch(url: str) -> Any:
        if hang["on"]:
            release.wait(20)  # the provider hangs
        return idp.fetch_json(url)

    clock = Clock()
    v = Verifier(SETTINGS, KeyCache(SETTINGS, fetch, clock))
    v.verify(idp.token())
    clock.t += 60
    hang["on"] = True
    attacker = RSAKey.generate_key(2048)
    stuck = threading.Thread(target=lambda: refusal(v, idp.token(kid="made-up", key=attacker)), daemon=True)
    stuck.start()
    time.sleep(0.2)  # the made-up kid's refetch now hangs at the provider
    took: list[float] = []

    def valid() -> None:
        t0 = time.monotonic()
        v.verify(idp.token())
        took.append(time.monotonic() - t0)

    try:
        checker = threading.Thread(target=valid, daemon=True)
        checker.start()
        checker.join(3)
        assert took and took[0] < 0.5, "a valid token with a known kid waited behind the hanging fetch"
    finally:
        release.set()
        stuck.join(5)
