"""Group membership evidence (viplanes/domain/memberships.py): which rows a token writes, which
groups it shows gone. Pure: no database."""

from __future__ import annotations

from viplanes.domain.memberships import Evidence, TokenGroups, plan_renewal

GRACE = 30.0


def seen(groups: set[str], iat: float = 1000.0, exp: float = 1300.0) -> TokenGroups:
    return TokenGroups(principal_id=7, groups=frozenset(groups), iat=iat, exp=exp)


def test_a_token_with_the_group_proves_it_until_its_expiry_plus_grace() -> None:
    out = plan_renewal({}, seen({"hpc-users", "library"}), {"hpc-users"}, GRACE)
    assert out.write == {"hpc-users": Evidence(1330.0, 1000.0)}  # library: no grant names it
    assert out.gone == []


def test_the_same_token_again_writes_nothing() -> None:
    have = {"hpc-users": Evidence(1330.0, 1000.0)}
    out = plan_renewal(have, seen({"hpc-users"}), {"hpc-users"}, GRACE)
    assert (out.write, out.gone) == ({}, [])


def test_a_newer_token_renews() -> None:
    have = {"hpc-users": Evidence(1330.0, 1000.0)}
    out = plan_renewal(have, seen({"hpc-users"}, iat=1200, exp=1500), {"hpc-users"}, GRACE)
    assert out.write == {"hpc-users": Evidence(1530.0, 1200.0)}


def test_a_token_without_the_group_ends_it_at_once() -> None:
    """The attack it stops: keep a lane after being removed from the group by not asking again."""
    have = {"hpc-users": Evidence(1330.0, 1000.0)}
    out = plan_renewal(have, seen(set(), iat=1100, exp=1400), {"hpc-users"}, GRACE)
    assert out.gone == ["hpc-users"]
    assert out.write == {"hpc-users": Evidence(0.0, 1100.0)}


def test_an_older_token_cannot_undo_a_removal() -> None:
    """The attack: keep a token saved from before the removal and present it afterwards."""
    have = {"hpc-users": Evidence(0.0, 1100.0)}  # a token of iat 1100 showed the group gone
    out = plan_renewal(have, seen({"hpc-users"}, iat=1000, exp=1300), {"hpc-users"}, GRACE)
    assert (out.write, out.gone) == ({}, [])


def test_a_group_already_gone_is_not_ended_twice() -> None:
    have = {"hpc-users": Evidence(0.0, 1100.0)}
    out = plan_renewal(have, seen(set(), iat=1200), {"hpc-users"}, GRACE)
    assert (out.write, out.gone) == ({}, [])


def test_rejoining_with_a_newer_token_proves_it_again() -> None:
    have = {"hpc-users": Evidence(0.0, 1100.0)}
    out = plan_renewal(have, seen({"hpc-users"}, iat=1200, exp=1500), {"hpc-users"}, GRACE)
    assert out.write == {"hpc-users": Evidence(1530.0, 1200.0)} and out.gone == []
