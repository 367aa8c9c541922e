"""The API's side of OpenID Connect: fetch the issuer's documents over HTTP, verify a bearer JWT
and turn it into a caller (creating the person's principal on first sight)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import requests
from sqlalchemy.exc import IntegrityError

from viplanes.authz.oidc import KeyCache, OidcRefused, OidcSettings, Verifier
from viplanes.authz.oidcclaims import groups_of, identity_of
from viplanes.authz.tokens import Caller
from viplanes.domain.memberships import TokenGroups
from viplanes.domain.urls import token_safe_url
from viplanes.store.db import Database
from viplanes.store.identities import caller_for_identity, find_identity
from viplanes.store.memberships import needs_write, renew

FETCH_TIMEOUT_S = 5.0
MAX_DOC_BYTES = 512 * 1024


def fetch_json(url: str) -> Any:
    """GET a discovery or JWKS document; https, or http to the loopback (tests, a local proxy)."""
    if not token_safe_url(url):
        raise OidcRefused("issuer_unavailable", f"refusing to fetch keys over plain http from {url}", 503)
    resp = requests.get(url, timeout=FETCH_TIMEOUT_S, allow_redirects=False, headers={"Accept": "application/json"})
    resp.raise_for_status()
    if len(resp.content) > MAX_DOC_BYTES:
        raise ValueError(f"{url}: document larger than {MAX_DOC_BYTES} bytes")
    return resp.json()


class OidcAuth:
    """One per app: the issuer's keys are fetched once and shared by every request thread.

    ``on_lanes_ended`` takes lanes the store ended (a token showed a granted group gone) off the
    switches: the app sets it to the lane manager's ``revoke_lanes``."""

    def __init__(
        self,
        settings: OidcSettings,
        verifier: Verifier | None = None,
        on_lanes_ended: Callable[[Sequence[int]], None] | None = None,
    ) -> None:
        self.settings = settings
        self.verifier = verifier or Verifier(settings, KeyCache(settings, fetch_json))
        self.on_lanes_ended = on_lanes_ended

    def caller(self, db: Database, token: str, now: float) -> Caller:
        """The caller a provider token stands for, or :class:`OidcRefused` naming why not. Group
        evidence is renewed first, so a token that lost every mapped group (403 ``no_role``)
        still ends the lanes its groups allowed."""
        claims = self.verifier.verify(token)
        try:
            ident = identity_of(claims, self.settings)
        except OidcRefused:
            self.renew_groups(db, claims, now)  # e.g. removed from their only mapped group
            raise
        found: Caller | None = None
        with db.read() as s:  # the common case, a known person with the same role: no write
            known = find_identity(s, ident.issuer, ident.subject)
            fast = known is not None and (known[1] or known[0].role == ident.role)
            if known is not None and fast and not known[1]:
                found = Caller(id=known[0].id, name=known[0].name, role=ident.role, from_provider=True)
        if not fast:
            with db.write() as s:
                found = caller_for_identity(s, ident, now)
        if found is None:
            raise OidcRefused("principal_disabled", f"principal {ident.name!r} is disabled here")
        self.renew_groups(db, claims, now)
        return found

    def renew_groups(self, db: Database, claims: dict[str, Any], now: float) -> None:
        """Record what a verified token (an access token, or the console's ID token) says about the
        person's granted groups (viplanes/domain/memberships.py), and take lanes it ended off the switches."""
        with db.read() as s:
            known = find_identity(s, str(claims.get("iss", self.settings.issuer)), str(claims["sub"]))
            if known is None:
                return  # never signed in here: no principal, no lanes
            iat = claims.get("iat")
            seen = TokenGroups(
                principal_id=known[0].id,
                groups=frozenset(groups_of(claims, self.settings.groups_claim)),
                iat=float(iat) if isinstance(iat, int | float) else now,
                exp=float(claims["exp"]),
            )
            who = known[0].name
            if not needs_write(s, seen, self.settings.membership_grace_s):
                return
        try:
            with db.write() as s:
                ended = renew(s, seen, self.settings.membership_grace_s, now, who)
        except IntegrityError:  # PostgreSQL: a concurrent request of this person recorded it first
            with db.write() as s:
                ended = renew(s, seen, self.settings.membership_grace_s, now, who)
        if ended and self.on_lanes_ended is not None:
            self.on_lanes_ended(ended)
