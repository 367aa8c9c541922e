"""Form fields -> the API's own schemas, so a form and a JSON body are validated by one rule."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import marshmallow as ma

from viplanes.errors import Invalid


def int_field(form: Mapping[str, str], name: str, low: int, high: int) -> int:
    raw = (form.get(name) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise Invalid(f"{name}: a whole number is needed, got {raw!r}", code="invalid_form") from None
    if not low <= value <= high:
        raise Invalid(f"{name}: must be between {low} and {high}", code="invalid_form")
    return value


def as_number(raw: str | None) -> Any:
    """'12' -> 12, '1.5' -> 1.5, '' -> None; anything else stays text for the schema to refuse."""
    raw = (raw or "").strip()
    if raw == "":
        return None
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def split_list(raw: str | None) -> list[str]:
    return [x.strip() for x in (raw or "").replace("\n", ",").split(",") if x.strip()]


def as_datetime(raw: str | None) -> str | None:
    """An <input type=datetime-local> value (UTC, as the page says) -> ISO 8601 with Z."""
    raw = (raw or "").strip()
    if not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw).replace(tzinfo=dt.UTC).isoformat()
    except ValueError:
        raise Invalid(f"not a date and time: {raw!r}", code="invalid_form") from None


def load(schema: ma.Schema, data: dict[str, Any]) -> dict[str, Any]:
    """Validate with an API schema; its messages become a 422 page listing each field."""
    try:
        return schema.load({k: v for k, v in data.items() if v is not None})
    except ma.ValidationError as exc:
        raise Invalid("the form has errors; see below", {"fields": exc.messages}, code="invalid") from None


def csv_safe(value: Any) -> str:
    """A cell a spreadsheet will not run as a formula (CSV injection)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
