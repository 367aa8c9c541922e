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


def field_messages(messages: Any, values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Marshmallow's nested messages -> one sentence per form field, naming a bad list entry by
    its value (``{"src_prefixes": {0: ["Not a valid prefix."]}}`` -> ``"10.1.0: not a valid
    prefix."``); ``names`` maps a schema field to the form field showing it."""
    out: dict[str, str] = {}
    for key, msgs in (messages or {}).items() if isinstance(messages, Mapping) else []:
        field = (names or {}).get(str(key), str(key))
        out[field] = _sentence(msgs, values.get(str(key)))
    return out


def _sentence(msgs: Any, value: Any) -> str:
    if isinstance(msgs, Mapping):  # {index: [messages]} for a list field
        parts = []
        for index, inner in msgs.items():
            item = value[index] if isinstance(value, list) and isinstance(index, int) and index < len(value) else None
            text = _sentence(inner, None)
            parts.append(f"{item}: {text[:1].lower()}{text[1:]}" if item is not None else text)
        return " ".join(parts)
    if isinstance(msgs, (list, tuple)):
        return " ".join(_sentence(m, value) for m in msgs)
    return str(msgs)


def _dates(body: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """datetime-local values -> ISO 8601; a bad one becomes its field's error."""
    out = dict(body)
    for key in ("valid_from", "valid_until", "start_at"):
        if isinstance(out.get(key), str):
            try:
                out[key] = as_datetime(out[key])
            except Invalid as exc:
                errors[key] = exc.message
    return out


def checked(
    schema: ma.Schema, data: dict[str, Any], names: Mapping[str, str] | None = None
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """(valid body, {}) or (None, {form field: one sentence}): the caller shows the form again
    with the user's values and each error beside its field, instead of an error page."""
    errors: dict[str, str] = {}
    data = _dates(data, errors)
    try:
        body = load(schema, data)
    except Invalid as exc:
        fields = exc.details.get("fields") if isinstance(exc.details, dict) else None
        errors.update(field_messages(fields, data, names))
        if not errors:
            errors[""] = exc.message
        return None, errors
    return (None, errors) if errors else (body, errors)
