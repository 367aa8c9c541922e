"""Settings of the API process and of the CLI client, typed and validated on load."""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from viplanes.db import resolve_db_url


@dataclass(frozen=True)
class AppConfig:
    """What ``create_app`` needs besides the data plane, topology and clock."""

    db_url: str = ""
    migrate: bool = True  # bring the schema to head on start (idempotent)
    auth_max_failures: int = 10
    auth_window_s: float = 60.0
    db_pool_size: int = 10

    def resolved_db_url(self) -> str:
        return resolve_db_url(self.db_url or None)


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
    """The CLI's API URL and token: flags > $VIPLANES_API_URL/$VIPLANES_TOKEN > config file."""

    api_url: str = "http://127.0.0.1:8080"
    token: str | None = None

    @classmethod
    def load(cls, api_url: str | None = None, token: str | None = None) -> "ClientConfig":
        path = _config_path()
        data: dict[str, object] = {}
        if path.exists():
            try:
                data = tomllib.loads(path.read_text())
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: {exc}") from None
            unknown = set(data) - {"api_url", "token"}
            if unknown:
                raise ConfigError(f"{path}: unknown keys {sorted(unknown)} (allowed: api_url, token)")
            for key in ("api_url", "token"):
                if key in data and not isinstance(data[key], str):
                    raise ConfigError(f"{path}: {key} must be a string")
        url = api_url or os.environ.get("VIPLANES_API_URL") or data.get("api_url") or cls.api_url
        tok = token or os.environ.get("VIPLANES_TOKEN") or data.get("token")
        return cls(api_url=str(url).rstrip("/"), token=str(tok) if tok else None)
