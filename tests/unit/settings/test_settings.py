"""The one settings table: every setting has one type, one default and the same boolean grammar;
only the settings package, the config-file loader and the client read the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from viplanes.settings import DEFAULTS, ENV_SETTINGS, SettingError, Settings

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("viplanes", "api", "authz", "controller", "policy", "topologies")
# the settings package, the configuration file's loader and the CLI client (docs/configuration.md)
ALLOWED = {"viplanes/settings/environ.py", "viplanes/cli/config/file.py"}
ALLOWED_DIRS = ("viplanes/client/",)


NAMES = ("environ", "getenv", "environb")


def _reads_environment(tree: ast.AST) -> bool:
    """``os.environ``/``os.getenv`` anywhere, or ``from os import environ``."""
    for node in ast.walk(tree):
        attr = isinstance(node, ast.Attribute) and node.attr in NAMES
        if attr and isinstance(node.value, ast.Name) and node.value.id == "os":  # type: ignore[attr-defined]
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in NAMES for a in node.names):
            return True
    return False


def environment_readers() -> list[str]:
    found = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED or rel.startswith(ALLOWED_DIRS):
                continue
            if _reads_environment(ast.parse(path.read_text(), rel)):
                found.append(rel)
    return found


def test_no_product_module_reads_the_environment_outside_settings_configfile_and_client() -> None:
    assert environment_readers() == []


def test_every_setting_has_one_name_one_type_and_a_default_of_that_type() -> None:
    names = [s.env for s in ENV_SETTINGS]
    assert len(names) == len(set(names))
    assert len({(s.table, s.key) for s in ENV_SETTINGS}) == len(ENV_SETTINGS)
    for s in ENV_SETTINGS:
        assert s.kind in (str, int, float, bool), s.env
        default = DEFAULTS.raw(s.env)
        if default is not None:
            assert isinstance(default, s.kind) and (s.kind is bool or not isinstance(default, bool)), s.env
            assert s.parse(str(default).lower() if s.kind is bool else str(default)) == default, s.env


@pytest.mark.parametrize("setting", [s for s in ENV_SETTINGS if s.kind is bool], ids=lambda s: s.env)
@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("TRUE", True), ("1", True), ("yes", True), ("On", True)]
    + [("false", False), ("False", False), ("0", False), ("no", False), ("OFF", False)],
)
def test_every_flag_takes_the_one_boolean_grammar(setting, text: str, value: bool) -> None:
    assert Settings.from_env({setting.env: text}).flag(setting.env) is value


@pytest.mark.parametrize("setting", [s for s in ENV_SETTINGS if s.kind is bool], ids=lambda s: s.env)
def test_a_bad_flag_is_one_error_naming_the_variable_and_the_form(setting) -> None:
    with pytest.raises(SettingError) as err:
        Settings.from_env({setting.env: "maybe"})
    assert str(err.value) == f"{setting.env}='maybe': expected true/false, 1/0, yes/no or on/off"


@pytest.mark.parametrize("setting", [s for s in ENV_SETTINGS if s.kind in (int, float)], ids=lambda s: s.env)
def test_a_bad_number_is_one_error_naming_the_variable_and_the_form(setting) -> None:
    with pytest.raises(SettingError) as err:
        Settings.from_env({setting.env: "lots"})
    assert str(err.value).startswith(f"{setting.env}='lots': expected a")


def test_bounds_come_from_the_table() -> None:
    with pytest.raises(SettingError, match="VIPLANES_MAX_LANE_MATCHES='0': expected an integer >= 1"):
        Settings.from_env({"VIPLANES_MAX_LANE_MATCHES": "0"})
    with pytest.raises(SettingError, match="VIPLANES_FIREFLY_PORT='70000': expected an integer from 0 to 65535"):
        Settings.from_env({"VIPLANES_FIREFLY_PORT": "70000"})
    assert Settings.from_env({"VIPLANES_CT_ZONE_BASE": "0x2000"}).optional_integer("VIPLANES_CT_ZONE_BASE") == 8192


def test_an_empty_value_is_the_default_and_not_given() -> None:
    s = Settings.from_env({"VIPLANES_AUTO_QUEUE": "  "})
    assert s.integer("VIPLANES_AUTO_QUEUE") == DEFAULTS.integer("VIPLANES_AUTO_QUEUE")
    assert "VIPLANES_AUTO_QUEUE" not in s.given
