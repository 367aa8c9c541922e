"""Claims -> identity: the groups claim decides the role; names are labels, never keys."""

from __future__ import annotations

import pytest

from viplanes.authz.oidc import OidcRefused, OidcSettings
from viplanes.authz.oidcclaims import display_name, groups_of, identity_of, role_for

S = OidcSettings(
    issuer="https://idp.test/realms/v",
    audience="viplanes-api",
    group_roles={"hpc-users": "researcher", "netops": "operator"},
)


def test_groups_claim_shapes() -> None:
    assert groups_of({"groups": ["hpc-users", "/netops"]}, "groups") == ["hpc-users", "netops"]
    assert groups_of({"groups": "hpc-users"}, "groups") == ["hpc-users"]
    assert groups_of({"groups": ["/org/sub", 7, None]}, "groups") == ["/org/sub"]  # nested path kept whole
    assert groups_of({"groups": 5}, "groups") == []
    assert groups_of({}, "groups") == []


def test_operator_beats_researcher() -> None:
    assert role_for(["hpc-users", "netops"], S.group_roles) == "operator"
    assert role_for(["hpc-users", "library"], S.group_roles) == "researcher"
    assert role_for(["library"], S.group_roles) is None


def test_no_mapped_group_is_403_no_role() -> None:
    with pytest.raises(OidcRefused) as exc:
        identity_of({"iss": S.issuer, "sub": "x", "groups": ["library"]}, S)
    assert (exc.value.status, exc.value.code) == (403, "no_role")


def test_group_names_are_case_sensitive() -> None:
    """`NetOps` is not `netops`: a provider where users may create groups must not grant operator."""
    with pytest.raises(OidcRefused):
        identity_of({"iss": S.issuer, "sub": "x", "groups": ["NetOps"]}, S)


def test_configurable_claim_name() -> None:
    s = OidcSettings(issuer=S.issuer, audience="a", groups_claim="roles", group_roles={"Lanes.Operator": "operator"})
    assert identity_of({"sub": "x", "roles": ["Lanes.Operator"], "groups": ["hpc-users"]}, s).role == "operator"


def test_display_name() -> None:
    assert display_name({"preferred_username": "rita", "email": "r@x"}) == "rita"
    assert display_name({"email": "rita.r@campus.edu"}) == "rita.r@campus.edu"
    assert display_name({"preferred_username": "Rita Smith (Physics)"}) == "Rita-Smith-Physics"
    assert display_name({"sub": "0123"}) == "0123"
    assert len(display_name({"preferred_username": "x" * 200})) == 48
    assert display_name({"preferred_username": "  ", "sub": "!!!"}) == "user"


def test_identity_is_issuer_and_sub() -> None:
    ident = identity_of({"iss": S.issuer, "sub": "abc", "preferred_username": "root", "groups": ["hpc-users"]}, S)
    assert (ident.issuer, ident.subject, ident.name, ident.role) == (S.issuer, "abc", "root", "researcher")
