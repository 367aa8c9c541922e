"""Signing in to the console from a Flask test client, and reading CSRF tokens off pages."""

from __future__ import annotations

import re
from typing import Any

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    m = CSRF.search(html)
    assert m, "page has no CSRF field"
    return m.group(1)


def sign_in(client: Any, token: str, expect: int = 302) -> Any:
    page = client.get("/ui/login")
    resp = client.post("/ui/login", data={"csrf": csrf_of(page.text), "token": token})
    assert resp.status_code == expect, resp.text
    return resp


def csrf_for(client: Any, path: str = "/ui/mine") -> str:
    """The session's CSRF token, read from any signed-in page."""
    return csrf_of(client.get(path).text)


def post(client: Any, path: str, data: dict[str, Any] | None = None, **kw: Any) -> Any:
    return client.post(path, data={"csrf": csrf_for(client), **(data or {})}, **kw)
