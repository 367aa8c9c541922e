"""The console's client at the campus identity provider: its id, its secret and its name.

The console signs people in with the authorization code flow (``viplanes.api.ui.campus``); for
that it is a *confidential* client of the provider, so it holds a secret. The secret comes from
the config file (``[oidc] client_secret``) or, better, from a file only the service can read
(``[oidc] client_secret_file``): a secret file readable by group or others is refused at start,
because anyone who can read it can redeem authorization codes as the console.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from viplanes.settings import DEFAULTS, Settings

MAX_SECRET_BYTES = 4096
DEFAULT_SCOPE = DEFAULTS.text("VIPLANES_OIDC_SCOPE")


@dataclass(frozen=True)
class ConsoleOidcSettings:
    """``redirect_uri`` None: derived from the address the browser used (``/ui/login/callback``);
    set it when a proxy rewrites the host or scheme."""

    client_id: str
    client_secret: str
    display_name: str = "campus sign-in"
    redirect_uri: str | None = None
    scope: str = DEFAULT_SCOPE

    def __post_init__(self) -> None:
        if not self.client_id or not self.client_secret:
            raise ValueError("console sign-in needs an OIDC client id and a client secret")
        if "openid" not in self.scope.split():
            raise ValueError("OIDC scope must include 'openid' (the ID token is what signs a person in)")
        if self.redirect_uri is not None:
            parts = urlsplit(self.redirect_uri)
            if (
                parts.scheme not in ("http", "https")
                or not parts.netloc
                or not parts.path.endswith("/ui/login/callback")
            ):
                raise ValueError(
                    f"OIDC redirect URI {self.redirect_uri!r} must be an http(s) URL ending /ui/login/callback"
                )

    def __repr__(self) -> str:  # the secret never reaches a log line
        return f"ConsoleOidcSettings(client_id={self.client_id!r}, display_name={self.display_name!r})"

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsoleOidcSettings | None:
        """``VIPLANES_OIDC_CLIENT_ID`` and ``_CLIENT_SECRET`` or ``_CLIENT_SECRET_FILE``, plus
        ``_DISPLAY_NAME``, ``_REDIRECT_URI`` and ``_SCOPE``; None when no client id is set (console sign-in off)."""
        client_id = settings.text("VIPLANES_OIDC_CLIENT_ID")
        if not client_id:
            return None
        if not settings.text("VIPLANES_OIDC_ISSUER"):
            raise ValueError("VIPLANES_OIDC_CLIENT_ID is set but VIPLANES_OIDC_ISSUER is not")
        secret = settings.text("VIPLANES_OIDC_CLIENT_SECRET")
        secret_file = settings.text("VIPLANES_OIDC_CLIENT_SECRET_FILE")
        if secret and secret_file:
            raise ValueError("set the OIDC client secret or its file, not both")
        if secret_file:
            secret = read_secret_file(Path(secret_file))
        return cls(
            client_id=client_id,
            client_secret=secret,
            display_name=settings.text("VIPLANES_OIDC_DISPLAY_NAME") or DEFAULTS.text("VIPLANES_OIDC_DISPLAY_NAME"),
            redirect_uri=settings.text("VIPLANES_OIDC_REDIRECT_URI") or None,
            scope=" ".join(settings.text("VIPLANES_OIDC_SCOPE").split()) or DEFAULT_SCOPE,
        )


def read_secret_file(path: Path) -> str:
    """The secret in ``path``: a regular file, not readable by group or others (0600 or 0400)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise ValueError(f"OIDC client secret file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"OIDC client secret file {path} is not a regular file")
    if st.st_mode & 0o077:
        raise ValueError(
            f"OIDC client secret file {path} has mode {stat.S_IMODE(st.st_mode):04o}: others can read it; chmod 600 it"
        )
    if st.st_size > MAX_SECRET_BYTES:
        raise ValueError(f"OIDC client secret file {path} is larger than {MAX_SECRET_BYTES} bytes")
    secret = path.read_text().strip()
    if not secret:
        raise ValueError(f"OIDC client secret file {path} is empty")
    return secret
