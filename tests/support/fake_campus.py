"""A stand-in provider for the console's code flow: it authorizes (returns a code for the
browser's callback), redeems codes with the PKCE check a real provider makes, signs ID tokens
with the keys of ``FakeIssuer`` (so JWKS rotation works the same) and renews them for a refresh
token (``refresh``; ``now_groups`` plays an admin changing the person's groups, ``disabled`` an
account disabled at the provider, which refuses every refresh)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from authlib.integrations.requests_client import OAuthError
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from tests.support.oidc_tokens import ISSUER, FakeIssuer
from viplanes.api.ui.campusclient import Transaction
from viplanes.authz.oidcconsole import ConsoleOidcSettings

CLIENT_ID = "viplanes-console"
CONSOLE = ConsoleOidcSettings(client_id=CLIENT_ID, client_secret="console-test-secret", display_name="Campus U")


class FakeCampus(FakeIssuer):
    """``reject_reused=False`` plays a lax provider that redeems a code twice (our own check must hold)."""

    def __init__(self, reject_reused: bool = True) -> None:
        super().__init__()
        self.reject_reused = reject_reused
        self.codes: dict[str, dict[str, Any]] = {}
        self.redeemed: set[str] = set()
        self.kid = "k1"
        self.refresh_tokens: dict[str, dict[str, Any]] = {}  # refresh token -> the sign-in's claims
        self.now_groups: list[str] | None = None  # the person's groups today, when an admin changed them
        self.disabled = False
        self.refreshes = 0
        self.clock: Callable[[], float] = time.time
        self.issue_refresh = True  # False plays a provider that gives the console no refresh token

    def fetch_json(self, url: str) -> Any:
        if url.endswith("/.well-known/openid-configuration"):
            self.fetched.append(url)
            return {
                "issuer": ISSUER,
                "jwks_uri": ISSUER + "/protocol/openid-connect/certs",
                "authorization_endpoint": ISSUER + "/protocol/openid-connect/auth",
                "token_endpoint": ISSUER + "/protocol/openid-connect/token",
                "end_session_endpoint": ISSUER + "/protocol/openid-connect/logout",
            }
        return super().fetch_json(url)

    def authorize(self, authorize_url: str, nonce: str | None = None, **claims: Any) -> dict[str, str]:
        """The person signs in: the query the provider sends the browser back with."""
        q = {k: v[0] for k, v in parse_qs(urlsplit(authorize_url).query).items()}
        assert q["client_id"] == CLIENT_ID and q["response_type"] == "code"
        assert q["code_challenge_method"] == "S256" and "openid" in q["scope"].split()
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "challenge": q["code_challenge"],
            "nonce": nonce if nonce is not None else q["nonce"],
            "redirect_uri": q["redirect_uri"],
            "claims": claims,
        }
        return {"code": code, "state": q["state"]}

    def exchange(self, token_endpoint: str, code: str, tx: Transaction, console: ConsoleOidcSettings) -> dict[str, Any]:
        """The token endpoint: refuses unknown or reused codes, a wrong PKCE verifier, another redirect URI."""
        rec = self.codes.get(code)
        if rec is None or (code in self.redeemed and self.reject_reused):
            raise OAuthError(error="invalid_grant", description="Code not valid")
        if create_s256_code_challenge(tx.verifier) != rec["challenge"] or tx.redirect_uri != rec["redirect_uri"]:
            raise OAuthError(error="invalid_grant", description="PKCE verification failed")
        self.redeemed.add(code)
        now = int(self.clock())  # the same clock as ``refresh``: the sign-in's token must not be a second newer
        times = {"iat": now, "nbf": now, "exp": now + 300}
        claims = {"aud": CLIENT_ID, "azp": CLIENT_ID, "nonce": rec["nonce"]} | times | rec["claims"]
        rt = "rt-" + secrets.token_urlsafe(24)
        self.refresh_tokens[rt] = claims
        answer = {"access_token": "at", "token_type": "Bearer", "id_token": self.token(kid=self.kid, **claims)}
        return answer | ({"refresh_token": rt} if self.issue_refresh else {})

    def refresh(self, token_endpoint: str, refresh_token: str, console: ConsoleOidcSettings) -> dict[str, Any]:
        """The refresh grant: a new ID token (groups as they are now) and a rotated refresh token."""
        self.refreshes += 1
        claims = self.refresh_tokens.pop(refresh_token, None)
        if claims is None or self.disabled:
            raise OAuthError(error="invalid_grant", description="Token is not active")
        now = int(self.clock())
        claims = claims | {"iat": now, "nbf": now, "exp": now + 300}
        if self.now_groups is not None:
            claims["groups"] = self.now_groups
        rt = "rt-" + secrets.token_urlsafe(24)
        self.refresh_tokens[rt] = claims
        return {
            "access_token": "at",
            "token_type": "Bearer",
            "id_token": self.token(kid=self.kid, **claims),
            "refresh_token": rt,
        }
