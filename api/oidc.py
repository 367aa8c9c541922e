"""The API's side of OpenID Connect: fetch the issuer's documents over HTTP, verify a bearer JWT
and turn it into a caller (creating the person's principal on first sight)."""

from __future__ import annotations

from typing import Any

import requests

from viplanes.authz.oidc import KeyCache, OidcRefused, OidcSettings, Verifier
from viplanes.authz.oidcclaims import identity_of
from viplanes.authz.tokens import Caller
from viplanes.store.db import Database
from viplanes.store.identities import caller_for_identity, find_identity

FETCH_TIMEOUT_S = 5.0
MAX_DOC_BYTES = 512 * 1024


def fetch_json(url: str) -> Any:
    """GET a discovery or JWKS document; https, or http to the loopback (tests, a local proxy)."""
    if not (url.startswith("https://") or url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))):
        raise OidcRefused("issuer_unavailable", f"refusing to fetch keys over plain http from {url}", 503)
    resp = requests.get(url, timeout=FETCH_TIMEOUT_S, allow_redirects=False, headers={"Accept": "application/json"})
    resp.raise_for_status()
    if len(resp.content) > MAX_DOC_BYTES:
        raise ValueError(f"{url}: document larger than {MAX_DOC_BYTES} bytes")
    return resp.json()


class OidcAuth:
    """One per app: the issuer's keys are fetched once and shared by every request thread."""

    def __init__(self, settings: OidcSettings, verifier: Verifier | None = None) -> None:
        self.settings = settings
        self.verifier = verifier or Verifier(settings, KeyCache(settings, fetch_json))

    def caller(self, db: Database, token: str, now: float) -> Caller:
        """The caller a provider token stands for, or :class:`OidcRefused` naming why not."""
        ident = identity_of(self.verifier.verify(token), self.settings)
        found: Caller | None = None
        with db.read() as s:  # the common case, a known person with the same role: no write
            known = find_identity(s, ident.issuer, ident.subject)
            fast = known is not None and (known[1] or known[0].role == ident.role)
            if known is not None and fast and not known[1]:
                found = Caller(id=known[0].id, name=known[0].name, role=ident.role)
        if not fast:
            with db.write() as s:
                found = caller_for_identity(s, ident, now)
        if found is None:
            raise OidcRefused("principal_disabled", f"principal {ident.name!r} is disabled here")
        return found
