"""The pure automation checks, and the store's list of automation-enabled grants."""

from __future__ import annotations

import pytest

from tests.unit.auto.conftest import set_policy, sighting
from viplanes.auto.policy import AutoPolicy, trigger_refusal
from viplanes.domain.sighting import SightingKind, SightingState
from viplanes.errors import Invalid
from viplanes.store import automation as auto


def test_a_disabled_policy_refuses_every_sighting():
    off = AutoPolicy(enabled=False, fireflies=True, min_rate_mbps=1)
    assert trigger_refusal(off, sighting()) == "grant_auto_off"
    fast = sighting(kind=SightingKind.SFLOW, state=SightingState.ONGOING, rate_bps=1e9)
    assert trigger_refusal(off, fast) == "grant_auto_off"
    assert trigger_refusal(AutoPolicy(enabled=True, fireflies=True), sighting()) is None


def test_thresholds_by_rate_or_bytes():
    p = AutoPolicy(enabled=True, min_rate_mbps=100, min_bytes=10**9)
    s = lambda **kw: sighting(kind=SightingKind.SFLOW, state=SightingState.ONGOING, **kw)  # noqa: E731
    assert trigger_refusal(p, s(rate_bps=99e6)) == "below_threshold"
    assert trigger_refusal(p, s(rate_bps=100e6)) is None
    assert trigger_refusal(p, s(bytes_seen=10**9)) is None
    assert trigger_refusal(p, s()) == "below_threshold"
    assert trigger_refusal(p, sighting(dst_port=None)) == "unsupported_flow"


@pytest.mark.parametrize(
    "bad",
    [
        {"enabled": True},  # no threshold, no fireflies
        {"idle_s": 0},
        {"max_auto_lanes": 0},
        {"min_rate_mbps": -1},
        {"max_duration_s": 5},
    ],
)
def test_invalid_policies_are_refused(bad):
    with pytest.raises(Invalid):
        AutoPolicy(**bad)


def test_the_store_lists_only_enabled_usable_grants(world):
    db, now = world.app.extensions["viplanes"].db, world.clock()
    set_policy(world, "alice")
    set_policy(world, "bob", enabled=False)
    with db.read() as s:
        assert [g.grant_id for g in auto.auto_grants(s, now)] == [world.grants["alice"]]
    world.client.post(f"/api/v1/grants/{world.grants['alice']}/revoke", headers=world.h("root"))
    with db.read() as s:
        assert auto.auto_grants(s, now) == []


def test_the_api_refuses_a_bad_policy_with_a_reason(world):
    r = set_policy(world, fireflies=False, min_rate_mbps=None)
    assert r.status_code == 422 and r.get_json()["error"] == "invalid_auto_policy"
    r = set_policy(world, idle_s="soon")
    assert r.status_code == 422
    assert (
        world.client.put("/api/v1/grants/999/auto", json={"enabled": False}, headers=world.h("root")).status_code == 404
    )
    r = world.client.get(f"/api/v1/grants/{world.grants['bob']}/auto", headers=world.h("alice"))
    assert r.status_code == 404  # another researcher's grant does not exist for alice
