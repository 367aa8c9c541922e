"""Settings of the API process and of the CLI client, typed and validated on load."""

from __future__ import annotations

import logging
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the API's settings; the CLI client (viplanes[client]) has no authz/store deps
    from viplanes.authz.oidc import OidcSettings
    from viplanes.authz.oidcconsole import ConsoleOidcSettings


def _env_int(name: str, default: int) -> int:
    """A positive integer from the environment; a bad value is logged loudly and the default used."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        logging.getLogger(__name__).error("%s=%r is not a positive integer; using %d", name, raw, default)
        return default
    return value


CT_ZONE_BASE_ENV = "VIPLANES_CT_ZONE_BASE"


def ct_zone_base_from_env() -> int | None:
    """The deployment's first conntrack zone when the setting is given (``[switches]
    ct_zone_base``), else None (the topology's ``ct_zone_base``). ValueError for a non-integer:
    zones that silently fell back to another deployment's would flush its connections."""
    raw = os.environ.get(CT_ZONE_BASE_ENV, "").strip()
    if not raw:
        return None
    try:
        return int(raw, 0)
    except ValueError:
        raise ValueError(f"{CT_ZONE_BASE_ENV}={raw!r} is not an integer") from None


@dataclass(frozen=True)
class AppConfig:
    """What ``create_app`` needs besides the data plane, topology and clock."""

    db_url: str = ""
    migrate: bool = True  # bring the schema to head on start (idempotent)
    # failed-auth budgets per window (viplanes/store/ratelimit.py); VIPLANES_AUTH_* override the defaults
    auth_max_failures: int = field(default_factory=lambda: _env_int("VIPLANES_AUTH_MAX_FAILURES", 10))
    auth_net_max_failures: int = field(default_factory=lambda: _env_int("VIPLANES_AUTH_NET_MAX_FAILURES", 50))
    auth_global_max_failures: int = field(default_factory=lambda: _env_int("VIPLANES_AUTH_GLOBAL_MAX_FAILURES", 500))
    auth_window_s: int = field(default_factory=lambda: _env_int("VIPLANES_AUTH_WINDOW_S", 60))
    db_pool_size: int = 10
    # issue 11: the most (destination x masked port) matches one lane may need, and the window in
    # which a lane's DNS name is resolved again (its record TTL, raised to the floor, cut at the cap)
    max_lane_matches: int = field(default_factory=lambda: _env_int("VIPLANES_MAX_LANE_MATCHES", 64))
    dns_ttl_floor_s: int = field(default_factory=lambda: _env_int("VIPLANES_DNS_TTL_FLOOR_S", 30))
    dns_ttl_cap_s: int = field(default_factory=lambda: _env_int("VIPLANES_DNS_TTL_CAP_S", 3600))
    # issue 30: accept the campus identity provider's access tokens (docs/identity.md); None = off
    oidc: OidcSettings | None = field(default_factory=lambda: _oidc_from_env())
    # the console's "Sign in with <campus>" (code flow + PKCE) client; None = token sign-in only
    oidc_console: ConsoleOidcSettings | None = field(default_factory=lambda: _console_from_env())

    def resolved_db_url(self) -> str:
        from viplanes.store.db import resolve_db_url

        return resolve_db_url(self.db_url or None)


def _oidc_from_env() -> OidcSettings | None:
    from viplanes.authz.oidc import OidcSettings

    return OidcSettings.from_env()


def _console_from_env() -> ConsoleOidcSettings | None:
    from viplanes.authz.oidcconsole import ConsoleOidcSettings

    return ConsoleOidcSettings.from_env()


def _config_path() -> Path:
    env = os.environ.get("VIPLANES_CONFIG")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "viplanes" / "config.toml"


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ClientConfig:
    """The CLI's API URL, token and CA: flags > $VIPLANES_API_URL/$VIPLANES_TOKEN/$VIPLANES_CA_FILE >
    config file (flat keys, or the [client] table of viplanes.toml). ``ca_file`` None: the
    system's trust store (docs/configuration.md)."""

    api_url: str = "http://127.0.0.1:8080"
    token: str | None = None
    ca_file: str | None = None

    @classmethod
    def load(cls, api_url: str | None = None, token: str | None = None, ca_file: str | None = None) -> ClientConfig:
        path = _config_path()
        data: dict[str, object] = {}
        if path.exists():
            try:
                data = tomllib.loads(path.read_text())
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: {exc}") from None
            client = data.get("client")
            if isinstance(client, dict):  # viplanes.toml: its other tables are not the client's
                data = {**{k: v for k, v in data.items() if not isinstance(v, dict)}, **client}
            data = {k: v for k, v in data.items() if not isinstance(v, dict)}
            unknown = set(data) - {"api_url", "token", "ca_file"}
            if unknown:
                raise ConfigError(f"{path}: unknown keys {sorted(unknown)} (allowed: api_url, token, ca_file)")
            for key in ("api_url", "token", "ca_file"):
                if key in data and not isinstance(data[key], str):
                    raise ConfigError(f"{path}: {key} must be a string")
        url = api_url or os.environ.get("VIPLANES_API_URL") or data.get("api_url") or cls.api_url
        tok = token or os.environ.get("VIPLANES_TOKEN") or data.get("token")
        ca = ca_file or os.environ.get("VIPLANES_CA_FILE") or data.get("ca_file")
        return cls(api_url=str(url).rstrip("/"), token=str(tok) if tok else None, ca_file=str(ca) if ca else None)
