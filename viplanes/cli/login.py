"""`viplanes login` / `viplanes logout`: sign in at the campus provider with the device grant
(viplanes/client/login.py says how and why) and keep the login for the other commands."""

from __future__ import annotations

import base64
import json
import sys
import time
from typing import Any, NoReturn

import click
import requests

from viplanes.cli import exitcodes
from viplanes.client.login import (
    LoginError,
    StoredLogin,
    discover,
    login_path,
    poll_token,
    start_device,
    why_unreachable,
)
from viplanes.client.login import (
    logout as forget_login,
)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _username(access_token: str) -> str:
    """For the greeting only (the API verifies the token; we just read a label from it)."""
    try:
        payload = access_token.split(".")[1]
        claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return str(claims.get("preferred_username") or claims.get("email") or claims.get("sub") or "?")
    except (IndexError, ValueError):
        return "?"


@click.command()
@click.option("--issuer", envvar="VIPLANES_OIDC_ISSUER", default=None, help="[oidc] issuer of the config file")
@click.option(
    "--client-id",
    envvar="VIPLANES_OIDC_CLI_CLIENT_ID",
    default="viplanes-cli",
    show_default=True,
    help="the provider's client for this CLI ([oidc] cli_client_id)",
)
@click.option("--scope", default="openid", show_default=True, help="scopes to ask for")
def login(issuer: str | None, client_id: str, scope: str) -> None:
    """Sign in (OAuth device-code flow) at the campus provider; works over SSH.

    \b
    What you do:
      1. run `viplanes login`; it prints a URL and a short code;
      2. open the URL in a browser on any device (your laptop, a phone);
      3. enter the code, sign in at the campus page (password, MFA) and approve;
      4. the command, which was waiting, says "signed in as ...".

    The login is kept in $XDG_CONFIG_HOME/viplanes/login.json (mode 0600) and used by every
    command that is given no API token; access tokens are refreshed silently. The provider is
    [oidc] issuer of the config file (docs/identity.md). Exit codes: 3 the provider cannot be
    reached, 6 the login was refused or the code expired."""
    if not issuer:
        _fail("no issuer: set [oidc] issuer in the config file, VIPLANES_OIDC_ISSUER or --issuer", exitcodes.USAGE)
    session = requests.Session()
    try:
        ep = discover(session, issuer)
        code = start_device(session, ep, client_id, scope)
        click.echo(f"To sign in, open {code.verification_uri} and enter the code {code.user_code}", err=True)
        if code.verification_uri_complete:
            click.echo(f"(or open {code.verification_uri_complete})", err=True)
        click.echo(f"Waiting for the approval ({code.expires_in // 60} min) ...", err=True)
        sys.stderr.flush()
        answer = poll_token(session, ep, client_id, code)
    except LoginError as exc:
        _fail(str(exc), exitcodes.UNREACHABLE if exc.code == "unreachable" else exitcodes.LOGIN)
    except requests.RequestException as exc:
        _fail(f"cannot reach the identity provider at {issuer}: {why_unreachable(exc)}", exitcodes.UNREACHABLE)
    stored = StoredLogin.from_answer(issuer, client_id, answer, time.time())
    path = login_path()
    try:
        stored.save(path)
    except LoginError as exc:
        _fail(str(exc), exitcodes.BAD_CONFIG)
    except OSError as exc:
        _fail(f"cannot store the login in {path}: {exc.strerror}", exitcodes.BAD_CONFIG)
    click.echo(f"signed in as {_username(stored.access_token)}; login stored in {path}")


@click.command()
def logout() -> None:
    """Forget the stored login (and revoke its refresh token at the provider)."""
    path = login_path()
    click.echo(f"signed out; {path} removed" if forget_login(path) else "not signed in")
