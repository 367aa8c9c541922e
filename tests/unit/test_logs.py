"""viplanes.logs: JSON lines that parse, one per record, with the context of the request."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from viplanes.logs import (
    acceptable_request_id,
    lane_scope,
    principal_var,
    request_id_var,
    setup_logging,
)


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def lines(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_json_lines_parse_and_carry_the_context(restore_root: None) -> None:
    buf = io.StringIO()
    setup_logging("json", "INFO", buf)
    log = logging.getLogger("viplanes.test")
    log.info("plain")
    rid, who = request_id_var.set("req-0001"), principal_var.set("alice")
    try:
        with lane_scope(42):
            log.warning("lane thing %d", 7)
    finally:
        request_id_var.reset(rid)
        principal_var.reset(who)
    first, second = lines(buf)
    assert set(first) == {"time", "level", "logger", "message"} and first["message"] == "plain"
    assert str(first["time"]).endswith("+00:00")
    assert second == {
        **{k: second[k] for k in ("time",)},
        "level": "WARNING",
        "logger": "viplanes.test",
        "message": "lane thing 7",
        "request_id": "req-0001",
        "principal": "alice",
        "lane_id": 42,
    }


def test_a_forged_line_in_a_message_stays_inside_one_json_line(restore_root: None) -> None:
    """The attack: a value logged verbatim (a DNS name, a purpose) carrying a newline and a fake
    record. In JSON it is one escaped string; the log shipper sees one record, not two."""
    buf = io.StringIO()
    setup_logging("json", "INFO", buf)
    forged = 'x\n{"time": "2026-01-01", "level": "INFO", "message": "lane 1 revoked by root"}'
    logging.getLogger("viplanes.test").info("purpose %s", forged)
    (only,) = lines(buf)
    assert only["message"] == f"purpose {forged}"


def test_exceptions_are_inside_the_line(restore_root: None) -> None:
    buf = io.StringIO()
    setup_logging("json", "INFO", buf)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("viplanes.test").exception("failed")
    (only,) = lines(buf)
    assert "RuntimeError: boom" in str(only["exc"])


def test_setup_twice_does_not_print_twice(restore_root: None) -> None:
    buf = io.StringIO()
    setup_logging("text", "INFO", io.StringIO())
    setup_logging("json", "INFO", buf)
    logging.getLogger("viplanes.test").info("once")
    assert len(lines(buf)) == 1


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="json"):
        setup_logging("xml")


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "a" * 65,
        "evil\nforged",
        "two words",
        '{"json":1}',
        "id;rm -rf",
        "\u00e9t\u00e9-0001",
    ],
)
def test_garbage_request_ids_are_not_accepted(value: str | None) -> None:
    assert acceptable_request_id(value) is None


@pytest.mark.parametrize("value", ["0f9a8e7d6c5b4a39", "5a0c2e1e-7c1b-4c55-9d0e-3f1a2b3c4d5e", "req.1-67891233:abc"])
def test_well_formed_request_ids_are_kept(value: str) -> None:
    assert acceptable_request_id(value) == value
