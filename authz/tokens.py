"""API tokens, roles and who may do what. No database access here; the store calls these.

Tokens are 256-bit random strings from ``secrets.token_urlsafe``, shown once and stored only as a
SHA-256 hash. A plain fast hash is enough *because* the token is high-entropy random data: there is
no dictionary to try, so a slow password hash (bcrypt, argon2) would only add latency to every
request without adding safety. Lookup is by the hash, so no constant-time compare is needed.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal

Role = Literal["operator", "researcher"]
ROLES: tuple[Role, ...] = ("operator", "researcher")
TOKEN_PREFIX = "vl_"  # makes a leaked token easy to recognise in logs and secret scanners


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of one request."""

    id: int
    name: str
    role: Role
    # the request's credential carries the provider's groups (a provider JWT, a campus console
    # sign-in): only then do grants to a group apply; a ``vl_`` token gets nothing from them
    from_provider: bool = False

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def parse_bearer(header: str | None, max_len: int = 256) -> str | None:
    """``Authorization: Bearer <token>`` -> token; anything else -> None. Our tokens are short;
    the API passes a larger ``max_len`` when it also accepts a provider's JWTs."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value or len(value) > max_len:
        return None
    return value


# --- permissions --------------------------------------------------------------------------

OPERATOR_ONLY = frozenset(
    {
        "grant.create",
        "grant.revoke",
        "principal.create",
        "principal.list",
        "principal.rotate",
        "principal.disable",
        "audit.read",
        "lane.revoke",
        "readiness.read",
    }
)


def may(caller: Caller, action: str) -> bool:
    """Role check for an action; ownership of a lane is checked separately (see ``sees_lane``)."""
    return caller.is_operator or action not in OPERATOR_ONLY


def sees_lane(caller: Caller, owner_id: int) -> bool:
    """Researchers see only their own lanes; to everyone else the lane does not exist (404)."""
    return caller.is_operator or caller.id == owner_id
