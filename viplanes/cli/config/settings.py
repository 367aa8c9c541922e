"""How the configuration file's settings are shown: secrets masked. The settings themselves
(names, types, bounds, defaults) are ``viplanes/settings/table.py``; the file only supplies a value
where the environment has none, so an env var still overrides the file (docs/configuration.md).
"""

from __future__ import annotations

from viplanes.domain.urls import redact_url
from viplanes.settings.table import CONFIG_ENV, ENV_SETTINGS, EnvSetting

__all__ = ["CONFIG_ENV", "ENV_SETTINGS", "EnvSetting", "holds_secret", "is_secret_name", "mask"]

_SECRET_WORDS = ("token", "secret", "password", "db_url", "db")


def is_secret_name(name: str) -> bool:
    """A command option whose value may be a credential (a token, a database URL)."""
    return any(name == w or name.endswith(f"_{w}") or name.startswith(f"{w}_") for w in _SECRET_WORDS)


def mask(value: object, secret: bool) -> str:
    """How a value is shown: a URL keeps its host and loses its password; other secrets are ***."""
    text = str(value)
    if not secret or text == "":
        return text
    if "://" in text:
        return redact_url(text)
    return "***"


def holds_secret(value: object, secret: bool) -> bool:
    """A value that masking would change: a token, or a URL with a password."""
    return secret and mask(value, secret) != str(value)
