"""The budget of connections not through their TLS handshake (``preadmit.Unfinished``): per
prefix, in all, and who gives way when it is full (issue 28, item 2). Pure, no sockets."""

from __future__ import annotations

import pytest

from viplanes.controller.openflow.preadmit import Unfinished, prefix_of


@pytest.mark.parametrize(
    "address,prefix",
    [
        ("10.1.2.3", "10.1.2.0/24"),
        ("127.0.0.200", "127.0.0.0/24"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("::1", "::/64"),
        ("::ffff:10.1.2.3", "10.1.2.0/24"),  # a dual-stack listener's view of an IPv4 peer
        ("fe80::1%eth0", "fe80::/64"),
    ],
)
def test_sources_are_counted_by_their_slash24_or_slash64(address, prefix):
    assert prefix_of(address) == prefix


def test_one_prefix_holds_at_most_its_share_whatever_its_addresses():
    budget = Unfinished(total=100, per_prefix=3)
    entries = [budget.enter(f"192.0.2.{n}") for n in range(1, 6)]  # five hosts of one /24
    assert [e.ticket is not None for e in entries] == [True, True, True, False, False]
    assert "3 unfinished handshakes from 192.0.2.0/24" in entries[3].reason
    assert budget.enter("198.51.100.1").ticket is not None  # another /24 is not affected
    budget.leave(entries[0].ticket)  # type: ignore[arg-type]
    assert budget.enter("192.0.2.9").ticket is not None


def test_a_newcomer_displaces_the_oldest_connection_of_the_biggest_prefix_when_full():
    budget = Unfinished(total=4, per_prefix=4)
    flood = [budget.enter("203.0.113.7").ticket for _ in range(3)]
    other = budget.enter("198.51.100.5").ticket
    assert budget.count == 4
    switch = budget.enter("10.1.0.2")  # a switch from its own prefix
    assert switch.ticket is not None
    assert switch.evict == (flood[0],) and flood[0].evicted  # the flood's oldest gives way
    assert not other.evicted and budget.count == 4
    budget.leave(flood[0])  # the evicted connection's own clean-up later: no double count
    assert budget.count == 4 and budget.evicted_count == 1


def test_a_flood_never_displaces_a_smaller_prefix():
    budget = Unfinished(total=4, per_prefix=4)
    switch = budget.enter("10.1.0.2").ticket
    for _ in range(3):
        assert budget.enter("203.0.113.7").ticket is not None
    refused = budget.enter("203.0.113.8")  # the biggest prefix itself: it loses, not the switch
    assert refused.ticket is None and "4 unfinished handshakes in all" in refused.reason
    assert not switch.evicted  # type: ignore[union-attr]


def test_a_flood_from_more_prefixes_than_places_rotates_its_own_oldest_out():
    """One place per prefix everywhere: a newcomer from a prefix with none displaces the oldest,
    so a switch (new, done in milliseconds) outlives the flood's connections around it."""
    budget = Unfinished(total=8, per_prefix=8)
    flood = [budget.enter(f"127.{n}.0.1").ticket for n in range(8)]
    switch = budget.enter("10.1.0.2")
    assert switch.ticket is not None and switch.evict == (flood[0],)
    for n in range(8, 15):  # the flood goes on from fresh prefixes: its own connections go
        assert budget.enter(f"127.{n}.0.1").evict == (flood[n - 7],)
    assert not switch.ticket.evicted
    # the limit, stated: once the flood opened as many connections as there are places, the
    # switch's is the oldest; its handshake must end before that (milliseconds vs 128 connects)
    assert budget.enter("127.99.0.1").evict == (switch.ticket,)


def test_ties_between_big_prefixes_evict_the_oldest():
    budget = Unfinished(total=4, per_prefix=4)
    a = [budget.enter("127.1.0.1").ticket for _ in range(2)]
    b = [budget.enter("127.2.0.1").ticket for _ in range(2)]
    entry = budget.enter("10.1.0.2")
    assert entry.evict == (a[0],) and not b[0].evicted  # type: ignore[union-attr]


def test_log_budget_counts_what_it_does_not_log():
    from viplanes.controller.openflow.preadmit import LogBudget

    now = [0.0]
    budget = LogBudget(per_window=2, window_s=10.0, clock=lambda: now[0])
    assert [budget.take() for _ in range(5)] == [(True, 0), (True, 0), (False, 0), (False, 0), (False, 0)]
    now[0] = 10.0
    assert budget.take() == (True, 3)  # the next line says how many went unlogged
    assert budget.take() == (True, 0)


def test_a_displaced_waiting_connection_leaves_its_address_queue():
    from viplanes.controller.openflow.peerauth import SourceLimiter

    limiter = SourceLimiter(1, queue_limit=3)
    assert limiter.admit("10.0.0.1")
    for name in ("a", "b", "c"):
        assert limiter.wait("10.0.0.1", name)
    assert limiter.withdraw("10.0.0.1", lambda item: item == "b") == "b"
    assert limiter.withdraw("10.0.0.1", lambda item: item == "zz") is None
    assert list(limiter.waiting["10.0.0.1"]) == ["a", "c"] and limiter.wait("10.0.0.1", "d")


def test_a_known_switch_gets_in_past_a_flood_from_its_own_slash24():
    """Issue 41: an attacker at 127.0.0.2 held all of 127.0.0.0/24's places and the switch at
    127.0.0.1 got 0 of 17 reconnects. An address that brought a switch through its handshake
    before takes a stranger's oldest place in its own prefix."""
    budget = Unfinished(total=256, per_prefix=64)
    budget.mark_known("127.0.0.1")
    flood = [budget.enter("127.0.0.2").ticket for _ in range(64)]
    assert all(flood)
    served = 0
    for _ in range(17):  # the switch reconnects; the flood refills at once each time
        entry = budget.enter("127.0.0.1")
        if entry.ticket is not None:
            served += 1
            assert all(t.source == "127.0.0.2" for t in entry.evict)
            budget.leave(entry.ticket)  # its handshake finished
        budget.enter("127.0.0.2")
    assert served == 17


def test_a_stranger_never_displaces_a_known_switch_by_address():
    budget = Unfinished(total=256, per_prefix=2)
    budget.mark_known("10.1.0.2")
    switch = budget.enter("10.1.0.2").ticket
    assert budget.enter("10.1.0.66").ticket is not None
    refused = budget.enter("10.1.0.67")  # the prefix is full: a stranger is refused, evicts nobody
    assert refused.ticket is None and not refused.evict
    assert switch is not None and not switch.evicted


def test_known_addresses_are_compared_as_one_spelling():
    budget = Unfinished(total=256, per_prefix=1)
    budget.mark_known("::ffff:127.0.0.1")
    assert budget.enter("127.0.0.2").ticket is not None
    assert budget.enter("127.0.0.1").ticket is not None  # the mapped spelling counts as known
