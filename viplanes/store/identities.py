"""Principals of people who sign in at the campus identity provider (OpenID Connect).

A provider's token is matched to a principal by (issuer, sub) only (``authz.oidcclaims``). The
first token of a new subject creates the principal, named after the provider's username (made
unique here: ``rita``, else ``rita-2``, ...), with no API token of its own; its role follows the
groups claim at every sign-in. A locally disabled principal stays disabled whatever the provider
says: the operator's word outranks the provider's for this product.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from viplanes.authz.oidcclaims import Identity
from viplanes.authz.tokens import Caller
from viplanes.store.models import AuditEvent, Principal, PrincipalIdentity

ACTOR = "oidc"


def find_identity(s: Session, issuer: str, subject: str) -> tuple[Principal, bool] | None:
    """The principal linked to (issuer, subject), or None if this person is new here."""
    p = s.scalar(
        select(Principal)
        .join(PrincipalIdentity, PrincipalIdentity.principal_id == Principal.id)
        .where(PrincipalIdentity.issuer == issuer, PrincipalIdentity.subject == subject)
    )
    return None if p is None else (p, p.disabled)


def caller_for_identity(s: Session, ident: Identity, now: float) -> Caller | None:
    """The caller for a verified provider identity, creating or updating its principal inside the
    caller's write transaction; None when the principal is disabled here."""
    found = find_identity(s, ident.issuer, ident.subject)
    if found is None:
        p = _create(s, ident, now)
    else:
        p = found[0]
        if p.disabled:
            return None
        if p.role != ident.role:  # groups at the provider changed: the role follows
            s.add(
                AuditEvent(
                    at=now,
                    actor=ACTOR,
                    action="principal.role",
                    target=f"principal:{p.name}",
                    decision="done",
                    reason=f"{p.role} -> {ident.role} from the provider's groups",
                )
            )
            p.role = ident.role
            s.flush()
    return Caller(id=p.id, name=p.name, role=ident.role, from_provider=True)


def _free_name(s: Session, base: str) -> str:
    taken = {
        n.lower() for n in s.scalars(select(Principal.name).where(func.lower(Principal.name).like(base.lower() + "%")))
    }
    if base.lower() not in taken:
        return base
    n = 2
    while f"{base}-{n}".lower() in taken:
        n += 1
    return f"{base}-{n}"


def _create(s: Session, ident: Identity, now: float) -> Principal:
    for _ in range(5):  # a concurrent first sign-in may take the same name or link first
        name = _free_name(s, ident.name)
        p = Principal(name=name, role=ident.role, disabled=False, created_at=now)
        try:
            with s.begin_nested():
                s.add(p)
                s.flush()
                s.add(PrincipalIdentity(principal_id=p.id, issuer=ident.issuer, subject=ident.subject, created_at=now))
                s.flush()
        except IntegrityError:
            found = find_identity(s, ident.issuer, ident.subject)
            if found is not None:
                return found[0]
            continue
        s.add(
            AuditEvent(
                at=now,
                actor=ACTOR,
                action="principal.create",
                target=f"principal:{name}",
                decision="done",
                reason=f"first sign-in of {ident.subject} at {ident.issuer} as {ident.role}",
            )
        )
        s.flush()
        return p
    raise RuntimeError("could not create a principal for a new OIDC subject")
