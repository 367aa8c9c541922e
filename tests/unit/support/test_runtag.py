"""Per-run names for what a test run puts in the machine's shared places (tests/support/runtag)."""

from __future__ import annotations

import pytest

from tests.support import runtag


def test_live_pids_give_distinct_tags_where_pid_mod_100000_collides() -> None:
    a, b = 123456, 223456  # the same name under the old ``pid % 100000``
    assert a % 100000 == b % 100000
    assert runtag.base36(a) != runtag.base36(b)
    assert len(runtag.base36(4194304)) <= 5  # Linux's largest PID fits the names below


def test_names_over_15_characters_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIPLANES_TEST_RUN_TAG", "zzzzz")
    assert runtag.ifname("vlclk", "-s1") == "vlclkzzzzz-s1"
    with pytest.raises(ValueError, match="exceeds 15"):
        runtag.ifname("vlh", "h1", longest_suffix="-eth10")


def test_a_bad_override_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIPLANES_TEST_RUN_TAG", "Bad-Tag")
    with pytest.raises(ValueError, match="VIPLANES_TEST_RUN_TAG"):
        runtag.run_tag()


def test_the_link_octet_moves_past_one_in_use() -> None:
    lines = "3: eth0    inet 169.254.40.1/30 scope global vlfabc\n4: x inet 10.0.0.1/8 scope global x"
    used = runtag.used_link_octets(lines)
    assert used == {40}
    start = runtag.pick_link_octet("k", set())  # int("k", 36) = 20 -> 40
    assert start == 40
    assert runtag.pick_link_octet("k", used) == 41
    assert runtag.pick_link_octet("k", set(range(20, 220)) - {39}) == 39
