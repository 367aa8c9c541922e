"""The process environment, read here and nowhere else in the product (issue 43): the settings
parsed once, the configuration file's path, and the environment a child process inherits."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from viplanes.settings.table import BY_ENV, CONFIG_ENV, ENV_SETTINGS, Value


@dataclass(frozen=True)
class Settings:
    """Every ``VIPLANES_*`` setting of one process, typed and checked: built once by
    :meth:`from_env` (SettingError on the first bad value) and handed to the parts that need it."""

    values: Mapping[str, Value]
    given: frozenset[str]  # the names the environment set (not defaults)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Value] = {}
        given: set[str] = set()
        for s in ENV_SETTINGS:
            raw = env.get(s.env, "")
            if raw.strip() == "":  # set but empty is unset, as a shell's VAR= means
                values[s.env] = s.typed_default()
            else:
                values[s.env] = s.parse(raw)
                given.add(s.env)
        return cls(values, frozenset(given))

    @classmethod
    def defaults(cls) -> Settings:
        return cls.from_env({})

    def raw(self, name: str) -> Value:
        return self.values[BY_ENV[name].env]

    def text(self, name: str) -> str:
        value = self.raw(name)
        assert isinstance(value, str), name
        return value

    def integer(self, name: str) -> int:
        value = self.raw(name)
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    def optional_integer(self, name: str) -> int | None:
        value = self.raw(name)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool)), name
        return value

    def number(self, name: str) -> float:
        value = self.raw(name)
        assert isinstance(value, (int, float)) and not isinstance(value, bool), name
        return float(value)

    def flag(self, name: str) -> bool:
        value = self.raw(name)
        assert isinstance(value, bool), name
        return value


DEFAULTS = Settings.defaults()


def environment_value(name: str) -> str:
    """The raw text of one variable ("" when unset): for `config show` and `doctor`, which say
    where a value came from, and for the configuration file's own name."""
    return os.environ.get(name, "")


def config_file_env() -> str:
    return environment_value(CONFIG_ENV)


def user_config_dir() -> Path:
    """$XDG_CONFIG_HOME/viplanes, or ~/.config/viplanes."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "viplanes"


def child_environment(
    extra: Mapping[str, str] | None = None, drop: Iterable[str] = (), drop_prefixes: Iterable[str] = ()
) -> dict[str, str]:
    """This process's environment for a child process, less ``drop`` and any name starting with
    one of ``drop_prefixes``, plus ``extra``."""
    gone = set(drop)
    prefixes = tuple(drop_prefixes)
    env = {k: v for k, v in os.environ.items() if k not in gone and not (prefixes and k.startswith(prefixes))}
    env.update(extra or {})
    return env


def set_for_children(values: Mapping[str, str]) -> None:
    """Put values into this process's environment for the shells and commands it starts."""
    os.environ.update(values)


def one_setting(name: str) -> str:
    """One text setting parsed alone (the lab's directories at import: another variable's bad
    value is the command's to refuse, not an import error)."""
    spec = BY_ENV[name]
    raw = os.environ.get(name, "")
    value = spec.typed_default() if raw.strip() == "" else spec.parse(raw)
    return str(value) if value is not None else ""
