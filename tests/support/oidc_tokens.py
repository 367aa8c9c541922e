"""A stand-in issuer for unit tests: local key pairs, a JWKS served from memory, tokens signed
the way Keycloak signs them, and the forged kinds an attacker would try."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

ISSUER = "https://idp.campus.test/realms/viplanes"
AUDIENCE = "viplanes-api"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class FakeIssuer:
    """Keys by kid; ``fetch_json`` is what ``KeyCache`` calls, counting the fetches."""

    def __init__(self) -> None:
        self.keys: dict[str, RSAKey | ECKey] = {"k1": RSAKey.generate_key(2048, parameters={"kid": "k1"})}
        self.fetched: list[str] = []

    def rotate(self, kid: str, ec: bool = False) -> None:
        self.keys[kid] = (
            ECKey.generate_key("P-256", parameters={"kid": kid})
            if ec
            else RSAKey.generate_key(2048, parameters={"kid": kid})
        )

    def fetch_json(self, url: str) -> Any:
        self.fetched.append(url)
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": ISSUER, "jwks_uri": ISSUER + "/protocol/openid-connect/certs"}
        return {"keys": [k.as_dict(private=False) | {"use": "sig"} for k in self.keys.values()]}

    def claims(self, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        base: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "5f0c-rita",
            "exp": now + 300,
            "iat": now,
            "nbf": now,
            "preferred_username": "rita",
            "email": "rita@campus.test",
            "groups": ["hpc-users"],
        }
        base.update(over)
        return {k: v for k, v in base.items() if v is not None}

    def token(self, kid: str = "k1", alg: str = "RS256", key: RSAKey | ECKey | None = None, **over: Any) -> str:
        return jwt.encode(
            {"alg": alg, "kid": kid, "typ": "JWT"}, self.claims(**over), key or self.keys[kid], algorithms=[alg]
        )


def alg_none_token(claims: dict[str, Any], kid: str = "k1") -> str:
    header = b64(json.dumps({"alg": "none", "kid": kid}).encode())
    return f"{header}.{b64(json.dumps(claims).encode())}."


def hs256_with_public_key(claims: dict[str, Any], public_pem: bytes, kid: str = "k1") -> str:
    """The classic confusion attack: HMAC-sign with the RSA public key (which anyone can fetch)."""
    signing = b64(json.dumps({"alg": "HS256", "kid": kid}).encode()) + "." + b64(json.dumps(claims).encode())
    return signing + "." + b64(hmac.new(public_pem, signing.encode(), hashlib.sha256).digest())
