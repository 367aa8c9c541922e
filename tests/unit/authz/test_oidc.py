"""Every refusal of a provider JWT, each an attack reproduced with locally made keys."""

from __future__ import annotations

import time

import pytest
from joserfc.jwk import RSAKey

from tests.support.oidc_tokens import AUDIENCE, ISSUER, FakeIssuer, alg_none_token, hs256_with_public_key
from viplanes.authz.oidc import KeyCache, OidcRefused, OidcSettings, Verifier, parse_group_roles
from viplanes.settings import Settings

SETTINGS = OidcSettings(issuer=ISSUER, audience=AUDIENCE, group_roles={"hpc-users": "researcher", "netops": "operator"})


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def idp() -> FakeIssuer:
    return FakeIssuer()


def verifier(idp: FakeIssuer, clock: Clock | None = None) -> Verifier:
    return Verifier(SETTINGS, KeyCache(SETTINGS, idp.fetch_json, clock or Clock()))


def refused(v: Verifier, token: str) -> str:
    with pytest.raises(OidcRefused) as exc:
        v.verify(token)
    assert exc.value.status == 401
    return exc.value.code


def test_a_good_token_is_accepted(idp: FakeIssuer) -> None:
    claims = verifier(idp).verify(idp.token())
    assert claims["sub"] == "5f0c-rita" and claims["groups"] == ["hpc-users"]


def test_es256_and_ps256_are_accepted(idp: FakeIssuer) -> None:
    idp.rotate("ec1", ec=True)
    v = verifier(idp)
    assert v.verify(idp.token(kid="ec1", alg="ES256"))["sub"] == "5f0c-rita"
    assert v.verify(idp.token(alg="PS256"))["sub"] == "5f0c-rita"


def test_expired(idp: FakeIssuer) -> None:
    now = int(time.time())
    assert refused(verifier(idp), idp.token(exp=now - 120, iat=now - 600, nbf=now - 600)) == "token_expired"


def test_expiry_within_the_leeway_is_still_accepted(idp: FakeIssuer) -> None:
    assert verifier(idp).verify(idp.token(exp=int(time.time()) - 5))  # 30 s leeway for clock skew


def test_not_yet_valid(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), idp.token(nbf=int(time.time()) + 600)) == "token_not_yet_valid"


def test_no_expiry_is_refused(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), idp.token(exp=None)) == "missing_claim"


def test_no_subject_is_refused(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), idp.token(sub=None)) == "missing_claim"


def test_wrong_audience(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), idp.token(aud="account")) == "wrong_audience"


def test_no_audience(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), idp.token(aud=None)) == "missing_claim"


def test_audience_in_a_list_is_accepted(idp: FakeIssuer) -> None:
    assert verifier(idp).verify(idp.token(aud=["account", AUDIENCE]))


def test_wrong_issuer(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), idp.token(iss="https://evil.test/realms/viplanes")) == "wrong_issuer"


def test_alg_none(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), alg_none_token(idp.claims())) == "bad_algorithm"


def test_hs256_signed_with_the_public_key(idp: FakeIssuer) -> None:
    pem = idp.keys["k1"].as_pem(private=False)
    assert refused(verifier(idp), hs256_with_public_key(idp.claims(), pem)) == "bad_algorithm"


def test_unknown_kid(idp: FakeIssuer) -> None:
    other = RSAKey.generate_key(2048, parameters={"kid": "nope"})
    assert refused(verifier(idp), idp.token(kid="nope", key=other)) == "unknown_key"


def test_signed_by_another_key_under_our_kid(idp: FakeIssuer) -> None:
    forged = idp.token(key=RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    assert refused(verifier(idp), forged) == "bad_signature"


def test_tampered_payload(idp: FakeIssuer) -> None:
    head, _, sig = idp.token().split(".")
    other = idp.token(groups=["netops"]).split(".")[1]
    assert refused(verifier(idp), f"{head}.{other}.{sig}") == "bad_signature"


def test_garbage(idp: FakeIssuer) -> None:
    assert refused(verifier(idp), "not.a.jwt") == "malformed_token"
    assert refused(verifier(idp), idp.token(padding="x" * 9000)) == "malformed_token"  # no 9 KB to parse


def test_rotated_key_is_fetched_once_without_restart(idp: FakeIssuer) -> None:
    clock = Clock()
    v = verifier(idp, clock)
    v.verify(idp.token())
    jwks_fetches = sum(not u.endswith("configuration") for u in idp.fetched)
    idp.rotate("k2")
    clock.t += SETTINGS.jwks_refetch_s
    assert v.verify(idp.token(kid="k2"))["sub"] == "5f0c-rita"
    assert sum(not u.endswith("configuration") for u in idp.fetched) == jwks_fetches + 1


def test_a_flood_of_made_up_kids_fetches_at_most_once_per_gap(idp: FakeIssuer) -> None:
    clock = Clock()
    v = verifier(idp, clock)
    v.verify(idp.token())
    before = len(idp.fetched)
    attacker = RSAKey.generate_key(2048)
    tokens = [idp.token(kid=f"x{n}", key=attacker) for n in range(30)]
    for token in tokens:
        assert refused(v, token) == "unknown_key"
    assert len(idp.fetched) == before  # within the gap after the first fetch: none
    clock.t += SETTINGS.jwks_refetch_s
    for token in tokens:
        refused(v, token)
    assert len(idp.fetched) == before + 1


def test_settings_refuse_symmetric_and_none_algorithms() -> None:
    for algs in (("HS256",), ("none",), ("RS256", "HS512")):
        with pytest.raises(ValueError, match="not allowed"):
            OidcSettings(issuer=ISSUER, audience=AUDIENCE, algorithms=algs)


def test_settings_from_env() -> None:
    assert OidcSettings.from_settings(Settings.from_env({})) is None
    s = OidcSettings.from_settings(
        Settings.from_env(
            {
                "VIPLANES_OIDC_ISSUER": ISSUER + "/",
                "VIPLANES_OIDC_AUDIENCE": AUDIENCE,
                "VIPLANES_OIDC_GROUP_ROLES": "netops=operator, hpc-users=researcher",
            }
        )
    )
    assert s is not None and s.issuer == ISSUER and s.group_roles == {"netops": "operator", "hpc-users": "researcher"}
    with pytest.raises(ValueError, match="not roles"):
        OidcSettings(issuer=ISSUER, audience=AUDIENCE, group_roles=parse_group_roles("x=admin"))
    with pytest.raises(ValueError, match="GROUP=ROLE"):
        parse_group_roles("netops")
    with pytest.raises(ValueError, match="audience"):
        OidcSettings.from_settings(Settings.from_env({"VIPLANES_OIDC_ISSUER": ISSUER}))
