"""The liveness lock's names (``viplanes.cluster.liveness``): the same key in every process, and
only a holder that says it holds one is ever taken over early. The lock itself is exercised on a
real PostgreSQL in ``tests/integration/test_lease_liveness_pg.py``."""

from __future__ import annotations

from viplanes.cluster.liveness import MARK, holder_key, marked


def test_a_holders_key_is_a_stable_signed_64_bit_number() -> None:
    key = holder_key("ctl-a:4711:abc123:s")
    assert key == holder_key("ctl-a:4711:abc123:s") and -(2**63) <= key < 2**63
    assert key != holder_key("ctl-a:4711:abc124:s")


def test_only_a_marked_holder_may_be_taken_early() -> None:
    assert marked("host:12:abcdef" + MARK)
    assert not marked("host:12:abcdef")  # an older controller: expiry only
    assert not marked("")
