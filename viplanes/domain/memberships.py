"""Group membership evidence: how long a lane allowed only through a group grant may live.

A grant to a provider group (``grants.group_name``) lets every member request lanes. Membership
is known only from the person's verified access tokens (their groups claim), so each lane under
such a grant is bound to *evidence*: per (person, group), until when a token proved it. The rules
(docs/identity.md, "Groups and grants"):

- a token listing the group renews the evidence to that token's ``exp`` + a grace
  (``VIPLANES_OIDC_MEMBERSHIP_GRACE_S``): the CLI refreshes before expiry, so an active user's
  lanes never lapse;
- a token *not* listing a group the person has evidence of ends the group's lanes at once;
- a token older (``iat``) than the newest one seen says nothing: a token issued before the
  removal cannot bring the membership back. So a token *not* listing a granted group records
  that too (no evidence, as of its ``iat``), even when the person never held the group here:
  otherwise a token saved before a removal would prove the group to a place that never heard
  of it;
- evidence that runs out (no fresh token: removed from the group, account disabled so refresh
  fails, or the person simply stopped) ends the lanes at the next sweep.

So a removed member keeps a lane at most one access token lifetime + the grace + one sweep
interval. This module is the pure part: which rows to write, which groups are gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Evidence:
    until: float  # unix seconds; 0 once a token showed the group gone
    seen_iat: float  # iat of the newest token that spoke about the group


@dataclass(frozen=True)
class TokenGroups:
    """What one verified token says: whose it is, their groups, when it was issued and expires."""

    principal_id: int
    groups: frozenset[str]
    iat: float
    exp: float


@dataclass(frozen=True)
class Renewal:
    write: dict[str, Evidence] = field(default_factory=dict)  # group -> its new evidence
    gone: list[str] = field(default_factory=list)  # groups whose lanes end now


def plan_renewal(have: Mapping[str, Evidence], seen: TokenGroups, granted: Set[str], grace_s: float) -> Renewal:
    """The evidence changes ``seen`` makes, for the groups some grant names (``granted``)."""
    out = Renewal()
    for group in sorted(granted):
        ev = have.get(group)
        if ev is not None and seen.iat < ev.seen_iat:
            continue  # an older token than one already seen: it cannot undo a removal
        if group in seen.groups:
            new = Evidence(seen.exp + grace_s, seen.iat)
            if ev != new:  # the same token again writes nothing
                out.write[group] = new
        elif ev is None:
            out.write[group] = Evidence(0.0, seen.iat)  # "not a member as of iat": older tokens say nothing
        elif ev.until > 0:
            out.write[group] = Evidence(0.0, seen.iat)
            out.gone.append(group)
    return out
