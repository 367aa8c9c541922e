"""The second client of the device grant: a person approving a `viplanes login` code at
Keycloak's real pages (device page, login form, consent), driven with requests as a browser
would: follow redirects, keep cookies, submit each page's form.

Keycloak marks its cookies ``Secure`` even on a loopback http dev server; a browser treats
127.0.0.1 as a secure context and sends them, requests does not, so the jar is told they are
not secure (only here, for the test's own loopback Keycloak).
"""

from __future__ import annotations

import html
import re
from urllib.parse import urljoin

import requests

_FORM = re.compile(r'<form[^>]*action="([^"]+)"')
_INPUT = re.compile(r"<input[^>]*>")


def _go(s: requests.Session, method: str, url: str, data: dict[str, str] | None = None) -> requests.Response:
    for _ in range(10):
        r = s.request(method, url, data=data, allow_redirects=False, timeout=30)
        for cookie in s.cookies:
            cookie.secure = False
        if r.status_code not in (301, 302, 303, 307):
            return r
        url, method, data = urljoin(r.url, r.headers["location"]), "GET", None
    raise RuntimeError(f"too many redirects from {url}")


def _form(r: requests.Response) -> tuple[str, dict[str, str]]:
    m = _FORM.search(r.text)
    if m is None:
        raise AssertionError(f"no form on {r.url} ({r.status_code}): {_text(r)}")
    fields: dict[str, str] = {}
    for tag in _INPUT.findall(r.text):
        name, value = re.search(r'name="([^"]+)"', tag), re.search(r'value="([^"]*)"', tag)
        if name:
            fields[name.group(1)] = html.unescape(value.group(1)) if value else ""
    return urljoin(r.url, html.unescape(m.group(1))), fields


def _text(r: requests.Response) -> str:
    body = re.sub(r"(?s)<script.*?</script>", "", r.text)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).strip()[:300]


def approve(verification_uri: str, user_code: str, username: str, password: str) -> str:
    """Open the device page, enter the code, sign in, grant consent; the final page's text."""
    s = requests.Session()
    r = _go(s, "GET", verification_uri)
    action, fields = _form(r)
    if "device_user_code" in fields:
        r = _go(s, "POST", action, {**fields, "device_user_code": user_code})
        action, fields = _form(r)
    r = _go(s, "POST", action, {**fields, "username": username, "password": password})
    if "consent" in r.url or "OAUTH_GRANT" in r.url:
        action, fields = _form(r)
        r = _go(s, "POST", action, {**{k: v for k, v in fields.items() if k != "cancel"}, "accept": "Yes"})
    return _text(r)
