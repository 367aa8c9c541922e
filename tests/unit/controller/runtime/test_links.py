"""Live link state from the switches' own port reports, with flap damping (issue 42)."""

from __future__ import annotations

from pathlib import Path

from tests.support.clock import FakeClock
from viplanes.controller.runtime.links import LinkBook, LinkSettings
from viplanes.topologies.loader import load_topology

REDUNDANT = Path(__file__).resolve().parents[4] / "topologies" / "campus-redundant.yaml"
A, B = "s2:3-s3:3", "s2:4-s3:5"


def _book(clock: FakeClock, **settings: float) -> LinkBook:
    return LinkBook(load_topology(REDUNDANT), LinkSettings(**settings), clock)


def _state(book: LinkBook, name: str) -> str:
    return next(v.state for v in book.views() if v.name == name)


def test_a_port_down_takes_its_link_out_and_the_hold_down_keeps_it_out() -> None:
    clock = FakeClock()
    book = _book(clock, hold_down_s=2.0)
    assert book.unusable() == frozenset()
    assert book.port_status(2, 3, up=False) is True
    assert book.unusable() == {A}
    reason = next(v.reason for v in book.views() if v.name == A)
    assert reason == "port s2:3 down"
    assert book.port_status(3, 3, up=False) is False  # the far end too: no second change
    clock.advance(5)
    assert book.port_status(2, 3, up=True) is False  # one end still down
    assert book.port_status(3, 3, up=True) is False  # both up: held for 2 s, still unusable
    assert _state(book, A) == "held" and book.next_change() == clock.now + 2.0
    clock.advance(1.9)
    assert book.tick() is False
    clock.advance(0.2)
    assert book.tick() is True and book.unusable() == frozenset()


def test_unknown_ports_and_other_switches_ports_change_nothing() -> None:
    clock = FakeClock()
    book = _book(clock)
    assert book.port_status(2, 2, up=False) is False  # the firewall's port: no declared link
    assert book.port_status(9, 3, up=False) is False  # a dpid with no link at port 3
    assert book.port_status(1, 3 + 100, up=False) is False
    assert book.unusable() == frozenset()


def test_a_port_flapped_every_100_ms_for_a_minute_changes_the_usable_set_twice() -> None:
    clock = FakeClock()
    book = _book(clock, hold_down_s=2.0, max_hold_down_s=60.0)
    changes = 0
    for _ in range(300):  # 30 s of 50 ms down, 50 ms up
        changes += book.port_status(2, 3, up=False)
        clock.advance(0.05)
        changes += book.port_status(2, 3, up=True)
        changes += book.tick()
        clock.advance(0.05)
    assert changes == 1  # out once; never back while it flaps
    drops = next(v.drops for v in book.views() if v.name == A)
    assert drops == 300
    deadline = book.next_change()
    assert deadline is not None and deadline - clock.now <= 60.0 + 1e-9
    clock.advance(60.0)
    assert book.tick() is True and book.unusable() == frozenset()


def test_hold_down_doubles_then_starts_afresh_after_a_quiet_spell() -> None:
    clock = FakeClock()
    book = _book(clock, hold_down_s=2.0, forget_s=60.0)
    holds = []
    for _ in range(3):
        book.port_status(2, 4, up=False)
        clock.advance(0.1)
        book.port_status(2, 4, up=True)
        holds.append(round((book.next_change() or 0) - clock.now, 3))
        clock.advance(20)
        book.tick()
    assert holds == [2.0, 4.0, 8.0]
    clock.advance(120)
    book.port_status(2, 4, up=False)
    book.port_status(2, 4, up=True)
    assert round((book.next_change() or 0) - clock.now, 3) == 2.0


def test_unverified_links_are_unusable_and_named() -> None:
    clock = FakeClock()
    book = _book(clock)
    assert book.set_unverified(B, "no probe from s2:4 seen at s3:5") is True
    assert book.unusable() == {B} and _state(book, B) == "unverified"
    assert book.set_unverified(B, "no probe from s2:4 seen at s3:5") is False
    assert book.set_unverified(B, "") is True and book.unusable() == frozenset()
