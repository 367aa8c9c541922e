"""The API over TLS (``--tls-cert``/``--tls-key``), and no plain HTTP off loopback without a flag.

Why TLS inside waitress rather than a proxy in front: the failed-login budgets count per source
address (viplanes/store/ratelimit.py), which a proxy on the same host would collapse to one.
waitress has no TLS of its own, so the listening socket is wrapped by the ``ssl`` module (TLS
1.2 or newer) with the handshake left to the event loop: a client that stalls its handshake
holds one connection slot until waitress's channel timeout, never the loop. The channel below
only teaches waitress's non-blocking reads and writes the two "try again" answers of TLS
(waitress 3.0: ``handle_read`` mirrors HTTPChannel's, ``send`` its dispatcher's).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from waitress.channel import HTTPChannel

from viplanes.cli.configfile import ConfigFileError
from viplanes.domain.urls import is_loopback_host

log = logging.getLogger("viplanes.cli.https")
_META = "viplanes.api_tls"


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if param.name is not None:
        ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def api_tls_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--tls-cert``, ``--tls-key`` and ``--insecure-http`` on the command serving the API."""
    fn = click.option(
        "--insecure-http",
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_remember,
        help="serve plain HTTP on a non-loopback address (tokens in clear: behind a TLS proxy only; logged)",
    )(fn)
    fn = click.option(
        "--tls-key",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_remember,
        help="the API's private key (PEM)",
    )(fn)
    fn = click.option(
        "--tls-cert",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_remember,
        help="the API's certificate chain (PEM): HTTPS with TLS 1.2 or newer",
    )(fn)
    return fn


def is_loopback(host: str) -> bool:
    return is_loopback_host(host)


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def listen_tls(host: str, option: str) -> ssl.SSLContext | None:
    """The TLS context the options ask for, or None for plain HTTP on loopback (or with the
    override). ConfigFileError (exit 78) for plain HTTP off loopback or unusable files."""
    given = click.get_current_context().meta.get(_META, {})
    cert, key, insecure = given.get("tls_cert"), given.get("tls_key"), bool(given.get("insecure_http"))
    if (cert is None) != (key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if cert is not None and key is not None:
        try:
            return server_context(cert, key)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ConfigFileError(f"--tls-cert {cert} --tls-key {key}: {exc}") from None
    if is_loopback(host):
        return None
    if not insecure:
        raise ConfigFileError(
            f"{option} {host}: plain HTTP off loopback sends bearer tokens in clear; give --tls-cert and "
            "--tls-key ([serve]/[api] tls_cert, tls_key), or --insecure-http behind a TLS proxy"
        )
    log.warning("API on %s in plain HTTP (--insecure-http): bearer tokens cross the network in clear", host)
    click.echo(f"WARNING: API on {host} in plain HTTP (--insecure-http): tokens in clear", err=True)
    return None


class TLSChannel(HTTPChannel):
    """waitress's channel on an ``ssl.SSLSocket``: "want read/write" is "nothing yet", a TLS
    error closes the connection (one INFO line, no traceback), and bytes TLS already decrypted
    are drained at once (select() cannot see them)."""

    def handle_read(self) -> None:
        sock: ssl.SSLSocket = self.socket
        try:
            data = sock.recv(self.adj.recv_bytes)
            while data and sock.pending():
                data += sock.recv(sock.pending())
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return  # the handshake (or a record) is not complete yet
        except (ssl.SSLError, OSError) as exc:
            log.info("TLS connection from %s closed: %s", self.addr[0] if self.addr else "?", exc)
            self.handle_close()
            return
        if data:
            self.last_activity = time.time()
            self.received(data)
        else:
            self.connected = False  # what waitress does on a client's EOF

    def send(self, data: bytes, do_close: bool = True) -> int:
        try:
            return int(self.socket.send(data))
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return 0
        except (ssl.SSLError, OSError) as exc:
            log.info("TLS connection from %s closed on send: %s", self.addr[0] if self.addr else "?", exc)
            if do_close:
                self.handle_close()
            return 0


def listen_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    return sock


def create_api_server(app: Any, sock: socket.socket, tls: ssl.SSLContext | None, threads: int) -> Any:
    """A waitress server on ``sock``, speaking HTTPS when ``tls`` is given."""
    from waitress import create_server

    if tls is None:
        return create_server(app, sockets=[sock], threads=threads, ident="viplanes")
    wrapped = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    server = create_server(app, sockets=[wrapped], threads=threads, ident="viplanes", url_scheme="https")
    server.channel_class = TLSChannel
    return server
