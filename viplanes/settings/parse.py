"""How one environment value becomes a typed one: one boolean grammar, one error for a bad value."""

from __future__ import annotations

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
BOOL_FORM = "true/false, 1/0, yes/no or on/off"


class SettingError(ValueError):
    """A bad value: the message names the variable, what it was given and the form it accepts."""

    def __init__(self, name: str, raw: str, accepted: str) -> None:
        super().__init__(f"{name}={raw!r}: expected {accepted}")
        self.name = name
        self.raw = raw
        self.accepted = accepted


def parse_bool(text: str) -> bool | None:
    """True or False for a word of the grammar (any case), None for anything else."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def parse_int(text: str) -> int | None:
    """A decimal integer, or 0x/0o/0b (a conntrack zone base is often written in hex)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(text, 0)
    except ValueError:
        return None


def parse_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None
