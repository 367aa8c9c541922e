"""Settings of the API process and of the CLI client, typed and validated on load."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from viplanes.settings import DEFAULTS, Settings
from viplanes.settings.environ import config_file_env, environment_value, user_config_dir

if TYPE_CHECKING:  # the API's settings; the CLI client (viplanes[client]) has no authz/store deps
    from viplanes.authz.oidc import OidcSettings
    from viplanes.authz.oidcconsole import ConsoleOidcSettings


CT_ZONE_BASE_ENV = "VIPLANES_CT_ZONE_BASE"


def ct_zone_base(settings: Settings) -> int | None:
    """The deployment's first conntrack zone when the setting is given (``[switches]
    ct_zone_base``), else None (the topology's ``ct_zone_base``)."""
    return settings.optional_integer(CT_ZONE_BASE_ENV)


@dataclass(frozen=True)
class AppConfig:
    """What ``create_app`` needs besides the data plane, topology and clock; the defaults are the
    settings table's (viplanes/settings/table.py), a process's values come from :meth:`from_settings`."""

    db_url: str = ""
    migrate: bool = True  # bring the schema to head on start (idempotent)
    # failed-auth budgets per window (viplanes/store/ratelimit.py)
    auth_max_failures: int = DEFAULTS.integer("VIPLANES_AUTH_MAX_FAILURES")
    auth_net_max_failures: int = DEFAULTS.integer("VIPLANES_AUTH_NET_MAX_FAILURES")
    auth_global_max_failures: int = DEFAULTS.integer("VIPLANES_AUTH_GLOBAL_MAX_FAILURES")
    auth_window_s: int = DEFAULTS.integer("VIPLANES_AUTH_WINDOW_S")
    db_pool_size: int = 10
    # issue 11: the most (destination x masked port) matches one lane may need, and the window in
    # which a lane's DNS name is resolved again (its record TTL, raised to the floor, cut at the cap)
    max_lane_matches: int = DEFAULTS.integer("VIPLANES_MAX_LANE_MATCHES")
    dns_ttl_floor_s: int = DEFAULTS.integer("VIPLANES_DNS_TTL_FLOOR_S")
    dns_ttl_cap_s: int = DEFAULTS.integer("VIPLANES_DNS_TTL_CAP_S")
    dns_server: str = DEFAULTS.text("VIPLANES_DNS_SERVER")  # "": the system resolver
    token_cache_ttl_s: float = DEFAULTS.number("VIPLANES_TOKEN_CACHE_TTL")
    ui_secret: str = DEFAULTS.text("VIPLANES_UI_SECRET")  # "": a per-process secret
    ui_session_s: int = DEFAULTS.integer("VIPLANES_UI_SESSION_S")
    # issue 30: accept the campus identity provider's access tokens (docs/identity.md); None = off
    oidc: OidcSettings | None = None
    # the console's "Sign in with <campus>" (code flow + PKCE) client; None = token sign-in only
    oidc_console: ConsoleOidcSettings | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, oidc: bool = True, **given: Any) -> AppConfig:
        """The process's settings; ValueError (a SettingError or OIDC's own) on a bad value.
        ``oidc=False``: a process without the API (the controller) does not read OIDC."""
        from viplanes.authz.oidc import OidcSettings
        from viplanes.authz.oidcconsole import ConsoleOidcSettings

        values: dict[str, Any] = {
            "auth_max_failures": settings.integer("VIPLANES_AUTH_MAX_FAILURES"),
            "auth_net_max_failures": settings.integer("VIPLANES_AUTH_NET_MAX_FAILURES"),
            "auth_global_max_failures": settings.integer("VIPLANES_AUTH_GLOBAL_MAX_FAILURES"),
            "auth_window_s": settings.integer("VIPLANES_AUTH_WINDOW_S"),
            "max_lane_matches": settings.integer("VIPLANES_MAX_LANE_MATCHES"),
            "dns_ttl_floor_s": settings.integer("VIPLANES_DNS_TTL_FLOOR_S"),
            "dns_ttl_cap_s": settings.integer("VIPLANES_DNS_TTL_CAP_S"),
            "dns_server": settings.text("VIPLANES_DNS_SERVER"),
            "token_cache_ttl_s": settings.number("VIPLANES_TOKEN_CACHE_TTL"),
            "ui_secret": settings.text("VIPLANES_UI_SECRET"),
            "ui_session_s": settings.integer("VIPLANES_UI_SESSION_S"),
        }
        if oidc:
            values["oidc"] = OidcSettings.from_settings(settings)
            values["oidc_console"] = ConsoleOidcSettings.from_settings(settings)
        values.update(given)
        return cls(**values)

    def resolved_db_url(self) -> str:
        from viplanes.store.db import resolve_db_url

        return resolve_db_url(self.db_url or None)


def _config_path() -> Path:
    env = config_file_env()
    if env:
        return Path(env)
    return user_config_dir() / "config.toml"


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ClientConfig:
    """The CLI's API URL, token and CA: flags > $VIPLANES_API_URL/$VIPLANES_TOKEN/$VIPLANES_CA_FILE >
    config file (flat keys, or the [client] table of viplanes.toml). ``ca_file`` None: the
    system's trust store (docs/configuration.md)."""

    api_url: str = DEFAULTS.text("VIPLANES_API_URL")
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
        # the client's three strings only: a bad server setting must not stop `viplanes lanes list`
        url = api_url or environment_value("VIPLANES_API_URL") or data.get("api_url") or cls.api_url
        tok = token or environment_value("VIPLANES_TOKEN") or data.get("token")
        ca = ca_file or environment_value("VIPLANES_CA_FILE") or data.get("ca_file")
        return cls(api_url=str(url).rstrip("/"), token=str(tok) if tok else None, ca_file=str(ca) if ca else None)
