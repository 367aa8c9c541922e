"""The API's TLS options (``--tls-cert``/``--tls-key``), and no plain HTTP off loopback without a flag.

The server that speaks TLS with this context is viplanes/cli/apiserver.py (cheroot): TLS 1.2 or
newer, terminated in the API process itself rather than by a proxy in front, because the
failed-login budgets count per source address (viplanes/store/ratelimit.py), which a proxy on
the same host would collapse to one.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from viplanes.cli.config.file import ConfigFileError
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
