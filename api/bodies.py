"""Every JSON request body is checked here, once, before any view or parser sees it.

Python's ``json`` accepts things the rest of the stack cannot handle, and each used to surface as a
500 somewhere later: a 30,000-deep array (RecursionError inside the parser), a lone surrogate such
as ``"\\ud800"`` (a valid JSON escape that no UTF-8 database column can store), ``NaN``/``Infinity``
(not JSON at all), integers with thousands of digits (ValueError from the int-size guard), keys
given twice (which one wins depends on the parser), and bytes that are not UTF-8 (``json.loads`` on bytes would guess UTF-16/32). This check refuses all
of them with ``400 bad_request`` (the code malformed JSON always had) for every endpoint, present and future, because it runs as a
``before_request`` hook rather than inside one schema.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Flask, Response, request
from flask.typing import ResponseReturnValue

from .errors import error_response

MAX_DEPTH = 32  # our deepest schema nests 3 levels; 32 leaves room and stays far from recursion limits


class BadJson(ValueError):
    """Why a body is refused (the message goes to the client)."""


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """Deepest ``[``/``{`` nesting outside strings, scanning without recursion; stops past ``limit``."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise BadJson(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``{"dst_ip": A, "dst_ip": B}`` is refused: parsers disagree on which one wins, so a proxy
    or log reader could see a different request than the one decided on."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadJson(f"duplicate key {key[:64]!r}")
        out[key] = value
    return out


def _check_strings(value: Any) -> None:
    """No lone surrogates in any key or string (iterative: the depth is already bounded)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict):
            for k, v in item.items():
                _check_text(k)
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadJson("string contains a lone surrogate (not valid Unicode)") from None


def parse_strict(raw: bytes) -> Any:
    """Bytes -> JSON value, or :class:`BadJson` saying what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadJson(f"body is not UTF-8 (byte {exc.start})") from None
    if nesting_depth(text) > MAX_DEPTH:
        raise BadJson(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except BadJson:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int digits limit
        raise BadJson(f"not valid JSON: {str(exc)[:200]}") from None
    _check_strings(value)
    return value


def register(app: Flask) -> None:
    @app.after_request
    def _no_store(resp: Response) -> Response:
        """API answers carry tokens (principal create/rotate) and private lane data: no cache may
        keep them, and no browser may sniff them into something other than JSON."""
        if request.path.startswith("/api/v1/"):
            resp.headers.setdefault("Cache-Control", "no-store")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        return resp

    @app.before_request
    def _strict_json() -> ResponseReturnValue | None:
        if not request.is_json or request.method in ("GET", "HEAD", "OPTIONS"):
            return None
        raw = request.get_data(cache=True)  # MAX_CONTENT_LENGTH bounds it (413 above)
        if not raw:
            return None
        try:
            parse_strict(raw)
        except BadJson as exc:
            return error_response(400, "bad_request", f"request body is not valid JSON: {exc}", {"json": [str(exc)]})
        return None
