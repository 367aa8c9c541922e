"""A verified token's claims -> who the person is here: a stable key, a display name, a role.

The key is the pair (issuer, ``sub``): a provider may let people change their username or e-mail,
and may reuse an old username for a new person, but ``sub`` is stable and never reassigned. So
names are only labels; the principal a token maps to is found by (issuer, sub) alone, never by
name (a provider user calling themselves ``admin`` must not become our ``admin``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .oidc import OidcRefused, OidcSettings
from .tokens import Role

_NAME_BAD = re.compile(r"[^A-Za-z0-9_.@-]+")


@dataclass(frozen=True)
class Identity:
    issuer: str
    subject: str
    name: str  # a suggestion: the store makes it unique
    role: Role


def groups_of(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups claim as a list of names. Keycloak sends ``["hpc-users"]`` (or full paths
    ``["/hpc-users"]``); Entra ID sends object ids; a lone string counts as one group."""
    raw = claims.get(claim)
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, Sequence):
        return []
    return [normal_group(g) for g in raw if isinstance(g, str)]


def normal_group(name: str) -> str:
    """A top-level group's path ``/hpc-users`` is the name ``hpc-users``; a subgroup keeps its
    full path (``/campus/hpc-users`` is not ``hpc-users`` of another parent). Grants store names
    the same way, so a grant for ``/hpc-users`` and one for ``hpc-users`` mean one group."""
    name = name.strip()
    return name[1:] if name.startswith("/") and name.count("/") == 1 else name


def role_for(groups: Sequence[str], group_roles: Mapping[str, str]) -> Role | None:
    """The strongest role any of ``groups`` maps to (operator beats researcher), else None."""
    roles = {group_roles[g] for g in groups if g in group_roles}
    if "operator" in roles:
        return "operator"
    if "researcher" in roles:
        return "researcher"
    return None


def display_name(claims: Mapping[str, Any]) -> str:
    """``preferred_username``, else the e-mail, else ``sub``; cut to our name rules (1-64 of
    letters, digits, _ . @ -)."""
    for key in ("preferred_username", "email", "upn", "sub"):
        value = claims.get(key)
        if isinstance(value, str) and value.strip():
            name = _NAME_BAD.sub("-", value.strip()).strip("-._@")[:48]
            if name:
                return name
    return "user"


def identity_of(claims: Mapping[str, Any], settings: OidcSettings) -> Identity:
    """Map verified claims; a person in no mapped group is refused with 403 ``no_role``."""
    role = role_for(groups_of(claims, settings.groups_claim), settings.group_roles)
    if role is None:
        raise OidcRefused(
            "no_role",
            f"signed in, but none of your groups ({settings.groups_claim!r} claim) grants a role here",
            403,
        )
    return Identity(str(claims.get("iss", settings.issuer)), str(claims["sub"]), display_name(claims), role)
