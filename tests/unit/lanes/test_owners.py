"""The memory of who owns the lanes this process made active (viplanes/lanes/owners.py)."""

from __future__ import annotations

from viplanes.lanes.owners import ActiveOwners


def test_an_owner_is_known_until_the_lane_window_passes_or_it_is_discarded():
    owners = ActiveOwners()
    owners.add(7, principal_id=3, expires_at=100.0, now=0.0)
    assert owners.owner(7, now=99.9) == 3
    assert owners.owner(7, now=100.0) is None  # its window passed: a read decides
    assert owners.owner(8, now=0.0) is None
    owners.discard(7)
    owners.discard(7)  # twice is fine
    assert owners.owner(7, now=0.0) is None and len(owners) == 0


def test_the_table_stays_bounded_by_the_live_lanes():
    owners = ActiveOwners(sweep_from=8)
    for lane_id in range(10_000):  # every lane ends at lane_id + 5: at most ~5 live at a time
        owners.add(lane_id, 1, expires_at=lane_id + 5.0, now=float(lane_id))
    assert len(owners) <= 16
    assert owners.owner(9_999, now=9_999.0) == 1


def test_a_sweep_keeps_every_live_lane():
    owners = ActiveOwners(sweep_from=4)
    for lane_id in range(1_000):
        owners.add(lane_id, lane_id % 7, expires_at=1e9, now=0.0)
    assert len(owners) == 1_000
    assert all(owners.owner(i, now=1.0) == i % 7 for i in range(1_000))
