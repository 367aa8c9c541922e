"""Why the API could not be reached, in one line that names the fix.

requests reports a wrong scheme, a TLS server spoken to in plain HTTP (and the reverse) and a
certificate for another name as exception classes ("InvalidSchema", "ConnectionError",
"ReadTimeout"). The CLI turns each into what is wrong and what to do; where the exception alone
cannot tell, one short probe of the same address asks the port which protocol it speaks.
"""

from __future__ import annotations

import re
import socket
import ssl
from urllib.parse import urlsplit

import requests

PROBE_S = 3.0


def url_problem(url: str) -> str | None:
    """What is wrong with an API URL before any connection, or None."""
    parts = urlsplit(url if "://" in url else f"//{url}")
    if "://" not in url or parts.scheme not in ("http", "https"):
        where = parts.netloc or url
        return (
            f"API URL {url!r} needs https:// (or http:// for an API on this machine's loopback): "
            f"--api-url https://{where}, $VIPLANES_API_URL or [client] api_url"
        )
    if not parts.hostname:
        return f"API URL {url!r} names no host: --api-url https://HOST:PORT"
    return None


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _swap_scheme(url: str, scheme: str) -> str:
    return f"{scheme}://{url.split('://', 1)[1]}"


def speaks_tls(host: str, port: int, timeout_s: float = PROBE_S) -> bool:
    """Whether ``host:port`` completes a TLS handshake (its certificate unchecked: only the protocol)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, ctx.wrap_socket(raw):
            return True
    except (OSError, ssl.SSLError):
        return False


def speaks_plain_http(host: str, port: int, timeout_s: float = PROBE_S) -> bool:
    """Whether ``host:port`` answers a plain HTTP request with an HTTP status line."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(f"HEAD /healthz HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            return sock.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def names_in_certificate(host: str, port: int, ca_file: str | None, timeout_s: float = PROBE_S) -> list[str]:
    """The DNS names and addresses the server's certificate carries (it must chain to ``ca_file``,
    or to the system store), or [] when it cannot be read."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.check_hostname = False
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, ctx.wrap_socket(raw) as tls:
            cert = tls.getpeercert() or {}
    except (OSError, ssl.SSLError):
        return []
    sans = cert.get("subjectAltName", ())
    return [str(entry[1]) for entry in sans if isinstance(entry, tuple) and len(entry) == 2]


def tls_failure(url: str, exc: Exception, ca_file: str | None) -> tuple[str, str]:
    """(error code, message) for a TLS failure: a certificate refused, or no TLS at all there."""
    text = str(exc)
    host, port = _address(url)
    if "mismatch" in text and "not valid for" in text:
        names = names_in_certificate(host, port, ca_file)
        named = f" (it names {', '.join(names)})" if names else ""
        use = "use one of those names in the API URL, or " if names else ""
        return "tls_verify", (
            f"the API's certificate at {url} is not valid for {host}{named}: {use}reissue it for {host} "
            f"on the API host (`viplanes pki rotate-controller --host {host}`)"
        )
    if "certificate verify failed" not in text and speaks_plain_http(host, port):
        return "wrong_scheme", plain_http_at_https(url)
    reason = re.search(r"certificate verify failed: ([^(']+)", text) or re.search(r"\[SSL[^]]*\] ([^(']+)", text)
    why = reason.group(1).strip() if reason else exc.__class__.__name__
    return "tls_verify", f"cannot verify {url}: {why} (give the API's CA with --ca-file or [client] ca_file)"


def plain_http_at_https(url: str) -> str:
    return (
        f"{url} answers plain HTTP, not HTTPS: use {_swap_scheme(url, 'http')} (an API on loopback), "
        "or start the API with --tls-cert and --tls-key"
    )


def https_at_plain_http(url: str) -> str:
    return f"{url} speaks HTTPS, not plain HTTP: use {_swap_scheme(url, 'https')} (and --ca-file with the campus CA)"


def unreachable(url: str, exc: requests.RequestException) -> tuple[str, str]:
    """(error code, message) for a request that got no HTTP answer; probes the port once."""
    if isinstance(
        exc, (requests.exceptions.InvalidSchema, requests.exceptions.MissingSchema, requests.exceptions.InvalidURL)
    ):
        return "bad_url", url_problem(url) or f"API URL {url!r}: {exc}"
    host, port = _address(url)
    scheme = urlsplit(url).scheme
    refused = isinstance(exc, requests.exceptions.ConnectionError) and "refused" in str(exc).lower()
    if not refused and scheme == "https" and speaks_plain_http(host, port):
        return "wrong_scheme", plain_http_at_https(url)
    if not refused and scheme == "http" and speaks_tls(host, port):
        return "wrong_scheme", https_at_plain_http(url)
    if refused:
        return "unreachable", f"cannot reach {url}: connection refused (is the API running on {host}:{port}?)"
    if isinstance(exc, requests.exceptions.Timeout):
        return (
            "unreachable",
            f"cannot reach {url}: no answer in time (API down or overloaded, or a firewall); try again",
        )
    return "unreachable", f"cannot reach {url}: {exc.__class__.__name__} (is the API running at {host}:{port}?)"
