"""The console as an OpenID Connect client (authorization code flow with PKCE), without Flask.

``start`` makes a sign-in transaction (state, nonce, PKCE verifier) and the provider's
authorization URL; ``finish`` checks what the provider sent back and returns the verified ID
token's claims. Each check below stops an attack, and each refusal names itself:

- ``state`` must equal the transaction's (kept in a signed cookie of the browser that started it):
  otherwise an attacker could make a victim's browser finish the *attacker's* sign-in (login CSRF);
- the ID token's ``nonce`` must equal the transaction's: an ID token taken from another sign-in
  cannot be replayed into this one;
- PKCE (S256): a code intercepted on its way back is useless without the verifier;
- a transaction is used once: a replayed transaction cookie is refused before the provider is
  asked anything, so one cookie cannot send made-up codes to the provider;
- a code is redeemed once in this process (and the provider refuses a second redemption too),
  at most ``MAX_CODE_LEN`` characters; the memory of used transactions and codes holds digests,
  never more than ``MAX_USED_CODES`` each;
- the ID token is verified like an access token (``authz.oidc.Verifier``: algorithm allow-list,
  signature against the JWKS, refetched on an unknown ``kid``, ``iss``, ``exp``) with the
  console's client id as audience, and ``azp`` when present.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError

from viplanes.authz.oidc import KeyCache, OidcRefused, OidcSettings, Verifier
from viplanes.authz.oidcconsole import ConsoleOidcSettings

from .session import same_secret

TRANSACTION_S = 600  # a sign-in must come back within 10 minutes
DISCOVERY_MAX_AGE_S = 3600.0
TOKEN_TIMEOUT_S = 10.0
MAX_USED_CODES = 10_000
MAX_CODE_LEN = 512  # Keycloak's codes are ~110 characters


class UsedOnce:
    """Digests of values already used, each remembered ``keep_s`` and never more than ``cap``
    (the oldest go first). Not thread-safe: the caller holds its lock."""

    def __init__(self, cap: int, keep_s: float) -> None:
        self.cap, self.keep_s = cap, keep_s
        self._seen: dict[bytes, float] = {}  # insertion order is age order

    def first_use(self, value: str, now: float) -> bool:
        """True the first time ``value`` is offered (and remember it), False after."""
        key = hashlib.sha256(value.encode()).digest()
        if key in self._seen:
            return False
        while self._seen and (len(self._seen) >= self.cap or now - next(iter(self._seen.values())) >= self.keep_s):
            del self._seen[next(iter(self._seen))]
        self._seen[key] = now
        return True

    def __len__(self) -> int:
        return len(self._seen)


class CampusRefused(Exception):
    """A sign-in that did not succeed; shown as a page with ``status`` (4xx, or 503)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True)
class Transaction:
    """One sign-in in flight, kept in a signed cookie between the two legs."""

    state: str
    nonce: str
    verifier: str
    redirect_uri: str
    next: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"s": self.state, "n": self.nonce, "v": self.verifier, "r": self.redirect_uri, "x": self.next}

    @classmethod
    def from_dict(cls, d: Any) -> Transaction | None:
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in "snvr"):
            return None
        nxt = d.get("x")
        return cls(d["s"], d["n"], d["v"], d["r"], nxt if isinstance(nxt, str) else None)


# (token endpoint, code, transaction, settings) -> the token response (a dict with id_token)
Exchange = Callable[[str, str, Transaction, ConsoleOidcSettings], dict[str, Any]]


# (token endpoint, refresh token, settings) -> the token response (with a new id_token)
Refresh = Callable[[str, str, ConsoleOidcSettings], dict[str, Any]]


def authlib_refresh(token_endpoint: str, refresh_token: str, console: ConsoleOidcSettings) -> dict[str, Any]:
    """Trade the console's refresh token for new tokens (client_secret_basic), with Authlib."""
    with OAuth2Session(console.client_id, console.client_secret) as client:
        token = client.refresh_token(
            token_endpoint, refresh_token=refresh_token, timeout=TOKEN_TIMEOUT_S, allow_redirects=False
        )
    return dict(token)


def authlib_exchange(token_endpoint: str, code: str, tx: Transaction, console: ConsoleOidcSettings) -> dict[str, Any]:
    """Redeem the code at the token endpoint with Authlib (client_secret_basic, PKCE verifier)."""
    with OAuth2Session(
        console.client_id,
        console.client_secret,
        redirect_uri=tx.redirect_uri,
        code_challenge_method="S256",
    ) as client:
        token = client.fetch_token(
            token_endpoint,
            grant_type="authorization_code",
            code=code,
            code_verifier=tx.verifier,
            timeout=TOKEN_TIMEOUT_S,
            allow_redirects=False,
        )
    return dict(token)


class CampusClient:
    """One per app, shared by request threads; ``fetch_json`` fetches discovery and the JWKS."""

    def __init__(
        self,
        oidc: OidcSettings,
        console: ConsoleOidcSettings,
        fetch_json: Callable[[str], Any],
        exchange: Exchange = authlib_exchange,
        clock: Callable[[], float] = time.time,
        refresher: Refresh = authlib_refresh,
    ) -> None:
        self.oidc = oidc
        self.refresher = refresher
        self.console = console
        self.fetch_json = fetch_json
        self.exchange = exchange
        self.clock = clock
        id_settings = replace(oidc, audience=console.client_id)  # an ID token's audience is our client id
        self.verifier = Verifier(id_settings, KeyCache(id_settings, fetch_json), now=clock)
        self._lock = threading.Lock()
        self._meta: dict[str, Any] | None = None
        self._meta_at = 0.0
        self._used_tx = UsedOnce(MAX_USED_CODES, TRANSACTION_S)  # transactions (by state) finished or tried
        self._used = UsedOnce(MAX_USED_CODES, TRANSACTION_S)  # codes redeemed

    @property
    def display_name(self) -> str:
        return self.console.display_name

    def metadata(self) -> dict[str, Any]:
        """The provider's discovery document, fetched once an hour."""
        with self._lock:
            if self._meta is not None and self.clock() - self._meta_at < DISCOVERY_MAX_AGE_S:
                return self._meta
        try:
            doc = self.fetch_json(self.oidc.issuer + "/.well-known/openid-configuration")
        except OidcRefused as exc:
            raise CampusRefused(exc.code, exc.message, 503) from None
        except (requests.RequestException, ValueError) as exc:
            raise CampusRefused("provider_unavailable", f"cannot reach the identity provider: {exc}", 503) from None
        if not isinstance(doc, dict) or str(doc.get("issuer", "")).rstrip("/") != self.oidc.issuer:
            raise CampusRefused("provider_unavailable", "the provider's discovery document names another issuer", 503)
        for key in ("authorization_endpoint", "token_endpoint"):
            if not isinstance(doc.get(key), str):
                raise CampusRefused("provider_unavailable", f"the provider's discovery document has no {key}", 503)
        with self._lock:
            self._meta, self._meta_at = doc, self.clock()
        return doc

    def start(self, redirect_uri: str, next_path: str | None, fresh_login: bool = False) -> tuple[str, Transaction]:
        """The provider's authorization URL for a new sign-in, and its transaction.
        ``fresh_login`` asks the provider for its login page even when it holds a session
        (``prompt=login``): after a refusal the person may choose another account."""
        tx = Transaction(
            secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48), redirect_uri, next_path
        )
        client = OAuth2Session(
            self.console.client_id, scope=self.console.scope, redirect_uri=redirect_uri, code_challenge_method="S256"
        )
        extra = {"prompt": "login"} if fresh_login else {}
        url, _ = client.create_authorization_url(
            self.metadata()["authorization_endpoint"],
            state=tx.state,
            code_verifier=tx.verifier,
            nonce=tx.nonce,
            **extra,
        )
        return url, tx

    def finish(self, tx: Transaction | None, args: dict[str, str]) -> tuple[dict[str, Any], str, str | None]:
        """The verified ID token's claims, the ID token itself and the refresh token the provider
        gave (None when it gave none), or :class:`CampusRefused`."""
        if tx is None:
            raise CampusRefused(
                "no_sign_in_in_progress",
                "This browser did not start a sign-in here, or it took longer than 10 minutes. Start again.",
            )
        error = args.get("error")
        if error:
            described = args.get("error_description", "")[:200]
            if error == "access_denied":
                raise CampusRefused("access_denied", f"The identity provider refused the sign-in. {described}", 403)
            raise CampusRefused("provider_error", f"The identity provider answered {error[:64]!r}. {described}")
        if not same_secret(args.get("state"), tx.state):
            raise CampusRefused(
                "state_mismatch", "This answer belongs to another sign-in (state mismatch). Start again."
            )
        code = args.get("code", "")
        if not code:
            raise CampusRefused("missing_code", "The identity provider sent no authorization code.")
        if len(code) > MAX_CODE_LEN:
            raise CampusRefused("bad_code", f"The authorization code is longer than {MAX_CODE_LEN} characters.")
        self._redeem_once(tx.state, code)
        meta = self.metadata()
        try:
            token = self.exchange(meta["token_endpoint"], code, tx, self.console)
        except OAuthError as exc:
            raise CampusRefused(
                "code_rejected", f"The identity provider refused the code ({exc.error}): it may be used or expired."
            ) from None
        except (requests.RequestException, ValueError) as exc:
            raise CampusRefused("provider_unavailable", f"cannot redeem the code: {exc}", 503) from None
        claims, id_token = self._id_token(token, 400)
        if not same_secret(claims.get("nonce") if isinstance(claims.get("nonce"), str) else None, tx.nonce):
            raise CampusRefused("nonce_mismatch", "The ID token belongs to another sign-in (nonce mismatch).")
        refresh = token.get("refresh_token")
        return claims, id_token, refresh if isinstance(refresh, str) else None

    def _id_token(self, token: dict[str, Any], status: int) -> tuple[dict[str, Any], str]:
        """The verified claims of the token response's ID token (audience: our client id, ``azp`` too)."""
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise CampusRefused(
                "no_id_token", "The identity provider sent no ID token (is 'openid' in the scope?).", status
            )
        try:
            claims = self.verifier.verify(id_token)
        except OidcRefused as exc:
            raise CampusRefused(
                exc.code, f"The ID token was refused: {exc.message}", 503 if exc.status == 503 else status
            ) from None
        azp = claims.get("azp")
        if azp is not None and azp != self.console.client_id:
            raise CampusRefused("wrong_audience", "The ID token was issued to another client (azp).", status)
        return claims, id_token

    def refresh(self, refresh_token: str, subject: str) -> tuple[dict[str, Any], str]:
        """A console session's new ID token claims (and the rotated refresh token, else the same),
        or :class:`CampusRefused`: 401 when the provider refuses (session ended, account disabled)
        or the ID token is not this person's, 503 when the provider cannot be reached."""
        meta = self.metadata()
        try:
            token = self.refresher(meta["token_endpoint"], refresh_token, self.console)
        except OAuthError as exc:
            raise CampusRefused(
                "refresh_refused", f"The identity provider refused to renew the sign-in ({exc.error}).", 401
            ) from None
        except (requests.RequestException, ValueError) as exc:
            raise CampusRefused("provider_unavailable", f"cannot renew the sign-in: {exc}", 503) from None
        claims, _ = self._id_token(token, 401)
        if claims.get("sub") != subject:
            raise CampusRefused("wrong_subject", "The renewed ID token names another person.", 401)
        rotated = token.get("refresh_token")
        return claims, rotated if isinstance(rotated, str) else refresh_token

    def _redeem_once(self, state: str, code: str) -> None:
        now = self.clock()
        with self._lock:
            if not self._used_tx.first_use(state, now):
                raise CampusRefused("transaction_replayed", "This sign-in was already finished or tried. Start again.")
            if not self._used.first_use(code, now):
                raise CampusRefused("code_replayed", "This authorization code was already used. Sign in again.")

    def end_session_url(self, id_token: str | None, post_logout_redirect_uri: str) -> str | None:
        """Where to send the browser to end the provider's session too (RP-initiated logout),
        or None when the provider does not offer it."""
        try:
            endpoint = self.metadata().get("end_session_endpoint")
        except CampusRefused:
            return None
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            return None
        params = {"post_logout_redirect_uri": post_logout_redirect_uri, "client_id": self.console.client_id}
        if id_token:
            params["id_token_hint"] = id_token
        return endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)
