"""Log lines as text or JSON, carrying who and what they are about (request id, principal, lane).

Why context variables: the request id is assigned by the API (``api/requestid.py``) but the
lines worth reading are written deep in the lane service and the store, which know nothing of
HTTP. A :class:`contextvars.ContextVar` set at the start of a request reaches every log call
made by that request's thread, and a logging filter copies it onto each record, so no function
signature grows a ``request_id`` argument. Stdlib only: every layer may import this module.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"

request_id_var: ContextVar[str | None] = ContextVar("viplanes_request_id", default=None)
principal_var: ContextVar[str | None] = ContextVar("viplanes_principal", default=None)
lane_id_var: ContextVar[int | None] = ContextVar("viplanes_lane_id", default=None)

# What an incoming X-Request-ID may be: a proxy's id (uuid, hex, base64url) fits; anything else
# (newlines that would forge log lines, 10 kB of padding, JSON fragments) is replaced, not trusted.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def acceptable_request_id(value: str | None) -> str | None:
    """The caller's X-Request-ID if it is well formed, else None (the caller gets a fresh one)."""
    if value is not None and _REQUEST_ID.fullmatch(value):
        return value
    return None


def new_request_id() -> str:
    return uuid.uuid4().hex


@contextmanager
def lane_scope(lane_id: int) -> Iterator[None]:
    """Every line logged inside names this lane (activation, data-plane refusals...)."""
    token = lane_id_var.set(lane_id)
    try:
        yield
    finally:
        lane_id_var.reset(token)


class ContextFilter(logging.Filter):
    """Copies the context variables onto each record (a record's own ``extra`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for attr, var in (("request_id", request_id_var), ("principal", principal_var), ("lane_id", lane_id_var)):
            if getattr(record, attr, None) is None:
                setattr(record, attr, var.get())
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and the context
    keys that are known; the message is escaped by ``json.dumps``, so it can never end the line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "principal", "lane_id"):
            value = record.__dict__.get(key)
            if value is not None:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def setup_logging(fmt: str = "text", level: str = "INFO", stream: IO[str] | None = None) -> logging.Handler:
    """Configure the root logger once for a command: one handler, the context filter, the format.

    Replaces handlers installed before (a second call in one process, tests) rather than
    stacking them, which would print every line twice."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return handler
