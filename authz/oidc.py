"""Access tokens from the campus identity provider (OpenID Connect): settings and JWT checks.

The API accepts the provider's signed access tokens (JWTs) next to its own ``vl_`` tokens. A JWT
is trusted only when every check below holds; each refusal names its reason so a person (or the
CLI) can tell an expired token from a misconfigured client:

- the header's ``alg`` is on the allow-list (RS256, ES256, PS256 by default). ``none`` and every
  HMAC algorithm are refused before any key is touched: with HS256 an attacker who knows our
  *public* key could sign tokens with it as the shared secret.
- the ``kid`` names a key of the issuer's JWKS (fetched from its discovery document); an unknown
  ``kid`` triggers one refetch (the provider rotated its keys), at most once per
  ``jwks_refetch_s`` (1 s) so a stream of made-up ``kid`` values cannot make us hammer the
  provider, and never under a lock a token with a known ``kid`` waits on (``KeyCache``);
- the signature verifies (joserfc, the JOSE layer of Authlib);
- ``iss`` equals the configured issuer, ``aud`` contains the configured audience, ``exp`` is in
  the future and ``nbf``/``iat`` not, within ``leeway_s`` of clock skew; ``sub`` is present.

No network or database here: the JWKS and discovery documents come through an injected
``fetch_json`` (``viplanes.api.oidc`` passes one that uses HTTP), so the checks are unit-tested
with locally made keys.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import ECKey, KeySet, RSAKey

from viplanes.settings import DEFAULTS, Settings

DEFAULT_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256", "PS256")
_NEVER = frozenset({"none", "HS256", "HS384", "HS512"})
MAX_JWT_LEN = 8192  # a Keycloak access token with a few groups is ~1.5 KB


class OidcRefused(Exception):
    """A token that is not accepted; ``code`` is the API's error code (401 unless said)."""

    def __init__(self, code: str, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class OidcSettings:
    """What the API needs to trust one issuer. A plain object: env vars fill it today
    (:meth:`from_settings`).

    ``group_roles`` maps a group name (as the provider sends it in ``groups_claim``) to a role;
    a person in no mapped group is refused (403 ``no_role``)."""

    issuer: str
    audience: str
    groups_claim: str = "groups"
    group_roles: Mapping[str, str] = field(default_factory=dict)
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_s: int = 30
    jwks_refetch_s: float = 1.0  # the shortest gap between two JWKS fetches (a made-up kid costs a rotation this)
    jwks_max_age_s: float = 3600.0  # keys are fetched again after this even without a new kid
    # group grants (viplanes/domain/memberships.py): a token proves membership until its exp + this,
    # and lanes whose evidence ran out end at a sweep every membership_sweep_s
    membership_grace_s: float = 30.0
    membership_sweep_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.issuer or not self.audience:
            raise ValueError("OIDC needs both an issuer URL and an audience")
        bad = sorted(set(self.algorithms) & _NEVER | {a for a in self.algorithms if a[:2] not in ("RS", "ES", "PS")})
        if bad:
            raise ValueError(f"OIDC algorithms {bad} are not allowed (asymmetric RS/ES/PS only)")
        unknown = sorted(set(self.group_roles.values()) - {"operator", "researcher"})
        if unknown:
            raise ValueError(f"OIDC group roles {unknown} are not roles (operator, researcher)")
        if not (0 <= self.membership_grace_s <= 3600 and 1 <= self.membership_sweep_s <= 3600):
            raise ValueError("OIDC membership grace must be 0-3600 s and the sweep interval 1-3600 s")

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcSettings | None:
        """``VIPLANES_OIDC_ISSUER``, ``_AUDIENCE``, ``_GROUPS_CLAIM``, ``_GROUP_ROLES``
        (``netops=operator,hpc-users=researcher``), ``_MEMBERSHIP_GRACE_S``, ``_MEMBERSHIP_SWEEP_S``;
        None when no issuer is set (OIDC off)."""
        issuer = settings.text("VIPLANES_OIDC_ISSUER")
        if not issuer:
            return None
        return cls(
            issuer=issuer.rstrip("/"),
            audience=settings.text("VIPLANES_OIDC_AUDIENCE"),
            groups_claim=settings.text("VIPLANES_OIDC_GROUPS_CLAIM") or DEFAULTS.text("VIPLANES_OIDC_GROUPS_CLAIM"),
            group_roles=parse_group_roles(settings.text("VIPLANES_OIDC_GROUP_ROLES")),
            membership_grace_s=settings.number("VIPLANES_OIDC_MEMBERSHIP_GRACE_S"),
            membership_sweep_s=settings.number("VIPLANES_OIDC_MEMBERSHIP_SWEEP_S"),
        )


def parse_group_roles(text: str) -> dict[str, str]:
    """``"netops=operator, hpc-users=researcher"`` -> ``{"netops": "operator", ...}``."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        group, sep, role = item.partition("=")
        if not sep or not group.strip() or not role.strip():
            raise ValueError(f"OIDC group role {item!r} is not GROUP=ROLE")
        out[group.strip()] = role.strip()
    return out


def looks_like_jwt(token: str) -> bool:
    """Our own tokens are ``vl_`` + url-safe base64 with no dots; a JWS has exactly two."""
    return token.count(".") == 2 and not token.startswith("vl_")


def _header(token: str) -> dict[str, Any]:
    try:
        raw = token.split(".", 1)[0]
        header = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, UnicodeDecodeError):
        raise OidcRefused("malformed_token", "the token is not a JWT") from None
    if not isinstance(header, dict):
        raise OidcRefused("malformed_token", "the token's header is not a JSON object")
    return header


class KeyCache:
    """The issuer's signing keys by ``kid``: fetched on first use, again when an unknown ``kid``
    arrives (at most once per ``jwks_refetch_s``) or in the background when they are older than
    ``jwks_max_age_s``. Thread-safe, and a fetch never holds a lock a request waits on: a token
    whose ``kid`` is known is checked with the keys at hand at once, even while the provider
    hangs; only a request whose ``kid`` is unknown waits for the fetch under way (at most
    ``FETCH_WAIT_S``). So a made-up ``kid`` delays a key rotated right after it by at most one
    gap (1 s by default), and with no keys at all (the provider down since start) a token is
    answered 503 ``issuer_unavailable``, never 401."""

    FETCH_WAIT_S = 10.0

    def __init__(
        self,
        settings: OidcSettings,
        fetch_json: Callable[[str], Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.fetch_json = fetch_json
        self.clock = clock
        self.fetches = 0
        self._lock = threading.Lock()  # guards the fields below; never held across a fetch
        self._keys: dict[str, RSAKey | ECKey] = {}  # replaced whole, so read without the lock
        self._fetched_at: float | None = None  # the last attempt, successful or not
        self._got_at: float | None = None  # the last successful fetch
        self._jwks_uri: str | None = None
        self._done = threading.Event()  # set when no fetch is under way
        self._done.set()
        self._last_error: OidcRefused | None = None

    def key(self, kid: str) -> RSAKey | ECKey:
        now = self.clock()
        found = self._keys.get(kid)
        if found is not None:
            if self._got_at is not None and now - self._got_at >= self.settings.jwks_max_age_s and self._claim(now):
                threading.Thread(target=self._fetch_quietly, name="jwks-refresh", daemon=True).start()
            return found
        if self._claim(now):
            self._fetch_quietly()
        else:
            self._done.wait(self.FETCH_WAIT_S)  # a fetch under way (or just made) may bring it
        found = self._keys.get(kid)
        if found is not None:
            return found
        if not self._keys:
            err = self._last_error
            message = err.message if err is not None else "the issuer's keys are being fetched"
            raise OidcRefused("issuer_unavailable", f"cannot check the token yet: {message}", 503)
        raise OidcRefused("unknown_key", f"the issuer has no signing key {kid!r}")

    def _claim(self, now: float) -> bool:
        """True when this caller may fetch now: none under way and the gap since the last passed."""
        with self._lock:
            if not self._done.is_set():
                return False
            if self._fetched_at is not None and now - self._fetched_at < self.settings.jwks_refetch_s:
                return False
            self._fetched_at = now  # a failed fetch also waits out the gap: no retry storm
            self.fetches += 1
            self._done.clear()
            return True

    def _fetch_quietly(self) -> None:
        """Fetch (the caller claimed it); a failure keeps the keys we had and is remembered."""
        try:
            self._keys = self._fetch()
            self._got_at = self.clock()
            self._last_error = None
        except OidcRefused as exc:
            self._last_error = exc
        except Exception as exc:  # network, JSON, key import: keep the keys we had
            self._last_error = OidcRefused("issuer_unavailable", f"cannot fetch the issuer's keys: {exc}", 503)
        finally:
            self._done.set()

    def _fetch(self) -> dict[str, RSAKey | ECKey]:
        if self._jwks_uri is None:
            doc = self.fetch_json(self.settings.issuer + "/.well-known/openid-configuration")
            if doc.get("issuer", "").rstrip("/") != self.settings.issuer:
                raise OidcRefused("issuer_unavailable", "the discovery document names another issuer", 503)
            self._jwks_uri = str(doc["jwks_uri"])
        keyset = KeySet.import_key_set(
            {"keys": [k for k in self.fetch_json(self._jwks_uri)["keys"] if _signing_key(k)]}
        )
        return {str(k.kid): k for k in keyset.keys if isinstance(k, RSAKey | ECKey) and k.kid}


def _signing_key(jwk: Any) -> bool:
    return isinstance(jwk, dict) and jwk.get("use", "sig") == "sig" and jwk.get("kty") in ("RSA", "EC")


class Verifier:
    """``verify(token)`` -> the claims of a token that passed every check, else :class:`OidcRefused`."""

    def __init__(self, settings: OidcSettings, keys: KeyCache, now: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.keys = keys
        self.now = now

    def verify(self, token: str) -> dict[str, Any]:
        if len(token) > MAX_JWT_LEN:
            raise OidcRefused("malformed_token", f"the token is longer than {MAX_JWT_LEN} bytes")
        header = _header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.settings.algorithms:
            raise OidcRefused(
                "bad_algorithm", f"algorithm {alg!r} is not accepted ({', '.join(self.settings.algorithms)})"
            )
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise OidcRefused("unknown_key", "the token names no key (kid)")
        key = self.keys.key(kid)
        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except BadSignatureError:
            raise OidcRefused("bad_signature", "the token's signature does not verify") from None
        except JoseError as exc:
            raise OidcRefused("malformed_token", f"the token cannot be decoded: {exc.error}") from None
        except ValueError:
            raise OidcRefused("malformed_token", "the token cannot be decoded") from None
        self._check_claims(decoded.claims)
        return dict(decoded.claims)

    def _check_claims(self, claims: dict[str, Any]) -> None:
        s = self.settings
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self.now()),
            leeway=s.leeway_s,
            iss={"essential": True, "value": s.issuer},
            aud={"essential": True, "value": s.audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise OidcRefused("token_expired", "the token has expired; sign in again") from None
        except MissingClaimError as exc:
            raise OidcRefused("missing_claim", str(exc.description)) from None
        except InvalidClaimError as exc:
            raise _claim_refusal(exc) from None
        except JoseError as exc:
            raise OidcRefused("invalid_claims", str(exc.description)) from None


def _claim_refusal(exc: InvalidClaimError) -> OidcRefused:
    if exc.claim == "iss":
        return OidcRefused("wrong_issuer", "the token was issued by another issuer")
    if exc.claim == "aud":
        return OidcRefused("wrong_audience", "the token is meant for another audience (aud)")
    if exc.claim in ("nbf", "iat"):
        return OidcRefused("token_not_yet_valid", "the token is not valid yet (nbf/iat in the future)")
    return OidcRefused("invalid_claims", str(exc.description))
