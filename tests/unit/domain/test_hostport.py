"""HOST:PORT parsing shared by `serve` (strict) and `controller run` (defaults allowed)."""

from __future__ import annotations

import pytest

from viplanes.domain.hostport import parse_hostport


def test_strict_needs_both_parts():
    assert parse_hostport("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_hostport("[::1]:8080") == ("::1", 8080)
    for bad in ("nonsense", ":8080", "[]:80"):
        with pytest.raises(ValueError, match="expected HOST:PORT"):
            parse_hostport(bad)


def test_defaults_fill_missing_parts():
    assert parse_hostport("10.0.0.1", 6653) == ("10.0.0.1", 6653)
    assert parse_hostport(":7000", 6653) == ("127.0.0.1", 7000)


@pytest.mark.parametrize(
    "bad,msg",
    [("h:abc", "must be a number"), ("h:²", "must be a number"), ("h:0", "out of range"), ("h:65536", "out of range")],
)
def test_bad_port_is_named(bad, msg):
    for default in (None, 6653):
        with pytest.raises(ValueError, match=msg):
            parse_hostport(bad, default)
