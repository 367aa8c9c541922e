"""The one rule for where a bearer token or a key document may travel: https anywhere, plain
http only to this machine's loopback. Decided on the parsed URL, never by string prefix:
``http://127.0.0.1@evil.example`` (userinfo), ``http://localhost.evil.example`` and
``http://127.0.0.1.nip.io`` all *start* like loopback and go elsewhere."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address literal (127.0.0.0/8, ::1); a name may resolve anywhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_safe_url(url: str) -> bool:
    """True for ``https://HOST...`` and ``http://LOOPBACK...``; False for anything else, and for
    a URL carrying userinfo (``user@``), which only serves to disguise the real host."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        return False
    if not host or "@" in parts.netloc:
        return False
    scheme = parts.scheme.lower()
    return scheme == "https" or (scheme == "http" and is_loopback_host(host))


_USERINFO_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:ssl)?password=)[^&#]*")


def redact_url(url: str) -> str:
    """``url`` fit to print: every password replaced by ``***``, in the userinfo
    (``postgresql://u:PW@host``, multi-host URLs included) and in the query
    (``?password=PW``, ``&sslpassword=PW``), where libpq takes it as well."""
    return _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", url))
