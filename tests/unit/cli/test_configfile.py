"""viplanes.toml: values reach the commands, flags and env vars override, bad keys are one line
with exit 78, secrets are refused in a world-readable file and masked by `config show`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from viplanes.cli.config.doc import documented_keys
from viplanes.cli.main import main

REPO = Path(__file__).resolve().parents[3]
CLEAN = {"VIPLANES_DB_URL": "", "VIPLANES_TOKEN": "", "VIPLANES_CONFIG": "", "VIPLANES_LANE_RETENTION_DAYS": ""}


def _file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "viplanes.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def _run(cfg: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["--config", str(cfg), *args], env={**CLEAN, **(env or {})})


def test_the_database_url_of_the_file_reaches_every_command(tmp_path):
    cfg = _file(tmp_path, f'[db]\nurl = "sqlite:///{tmp_path / "from-file.db"}"\n')
    r = _run(cfg, "db", "upgrade")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "from-file.db").exists()


def test_a_flag_and_an_env_var_override_the_file(tmp_path):
    cfg = _file(tmp_path, f'[db]\nurl = "sqlite:///{tmp_path / "from-file.db"}"\n')
    assert _run(cfg, "db", "upgrade", "--db", f"sqlite:///{tmp_path / 'flag.db'}").exit_code == 0
    r = _run(cfg, "db", "upgrade", env={"VIPLANES_DB_URL": f"sqlite:///{tmp_path / 'env.db'}"})
    assert r.exit_code == 0, r.output
    assert (tmp_path / "flag.db").exists() and (tmp_path / "env.db").exists()
    assert not (tmp_path / "from-file.db").exists()


def test_a_command_table_sets_the_option_default_and_the_flag_wins(tmp_path):
    cfg = _file(tmp_path, f'[db]\nurl = "sqlite:///{tmp_path / "x.db"}"\nrevision = "nosuchrevision"\n')
    r = _run(cfg, "db", "upgrade")
    assert r.exit_code == 1 and "nosuchrevision" in r.output
    assert _run(cfg, "db", "upgrade", "--revision", "head").exit_code == 0


def test_the_environment_is_restored_after_the_command(tmp_path):
    cfg = _file(tmp_path, "[retention]\nlane_days = 7\n")
    os.environ.pop("VIPLANES_LANE_RETENTION_DAYS", None)
    r = CliRunner().invoke(main, ["--config", str(cfg), "config", "show"])
    assert r.exit_code == 0 and re.search(r"lane_days = 7 .*file", r.output)
    assert "VIPLANES_LANE_RETENTION_DAYS" not in os.environ


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('[serve]\nthreads = "abc"\n', '[serve] threads: expected an integer, got "abc"'),
        ("[serve]\nthreads = 0\n", "[serve] threads: 0 is not in the range"),
        ("[serve]\nthredz = 4\n", "[serve] thredz: unknown key"),
        ("[serve]\ndataplane = 3\n", "[serve] dataplane: expected a string, got 3"),
        ("[serve]\ninsecure_tcp = 1\n", "[serve] insecure_tcp: expected true or false, got 1"),
        ('[serve]\nswitch_cert_pin = "ab"\n', '[serve] switch_cert_pin: expected a list, got "ab"'),
        ("[srve]\nthreads = 4\n", "[srve]: unknown table"),
        ('[retention]\nlane_days = "x"\n', '[retention] lane_days: expected a number, got "x"'),
        ("[retention]\nlane_days = -1\n", "[retention] lane_days: expected a number >= 0"),
        ("[retention]\nlanes_days = 1\n", "[retention] lanes_days: unknown key"),
        ("threads = 4\n[serve]\n", "threads: unknown key"),
        ("[serve\n", "not TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key_and_exit_78(tmp_path, text, line):
    """The mistake a typo makes silently elsewhere (a misspelt key ignored, a service running on
    defaults) stops the service before it starts."""
    cfg = _file(tmp_path, text)
    r = _run(cfg, "serve", "--dataplane", "memory")
    assert r.exit_code == 78, r.output
    out = r.output.strip().splitlines()
    assert len(out) == 1 and line in out[0] and str(cfg) in out[0], r.output


def test_config_check_checks_every_command_table(tmp_path):
    cfg = _file(tmp_path, "[api]\nworkers = 0\n")
    r = _run(cfg, "config", "check")
    assert r.exit_code == 78 and "[api] workers" in r.output
    assert _run(_file(tmp_path, "[api]\nworkers = 3\n"), "config", "check").exit_code == 0


def test_a_missing_file_given_with_config_is_an_error(tmp_path):
    r = _run(tmp_path / "nope.toml", "config", "show")
    assert r.exit_code == 78 and "no such file" in r.output


@pytest.mark.parametrize(
    "text",
    ['[db]\nurl = "postgresql://vl:hunter2@db/viplanes"\n', '[client]\ntoken = "vl_secret"\n', '[ui]\nsecret = "s"\n'],
)
def test_a_secret_in_a_world_readable_file_is_refused(tmp_path, text):
    """The attack: any local account reads the database password or a token from a 0644 file."""
    r = _run(_file(tmp_path, text, 0o644), "config", "show")
    assert r.exit_code == 78 and "every user can read" in r.output, r.output
    assert _run(_file(tmp_path, text, 0o640), "config", "show").exit_code == 0


def test_a_world_readable_file_without_secrets_is_fine(tmp_path):
    cfg = _file(tmp_path, '[db]\nurl = "postgresql://vl@db/viplanes"\n[serve]\nthreads = 4\n', 0o644)
    assert _run(cfg, "config", "check").exit_code == 0


def test_config_show_masks_secrets_and_names_sources(tmp_path):
    cfg = _file(
        tmp_path,
        '[db]\nurl = "postgresql://vl:hunter2@db.example/viplanes"\n[ui]\nsecret = "uisecret"\n[serve]\nthreads = 4\n',
    )
    r = _run(cfg, "config", "show", env={"VIPLANES_TOKEN": "vl_tokentoken"})
    assert r.exit_code == 0, r.output
    for secret in ("hunter2", "uisecret", "vl_tokentoken"):
        assert secret not in r.output
    assert 'url = "postgresql://vl:***@db.example/viplanes"' in r.output
    assert re.search(r"token = \"\*\*\*\"  # env VIPLANES_TOKEN", r.output)
    assert re.search(r"threads = 4  # file", r.output)
    assert re.search(r"listen = \"127.0.0.1:8080\"  # default", r.output)


def test_the_client_table_serves_the_cli(tmp_path):
    from viplanes.config import ClientConfig

    cfg = _file(tmp_path, '[client]\napi_url = "https://api.example:8443/"\nca_file = "/etc/ca.pem"\n[serve]\n')
    env = {"VIPLANES_CONFIG": str(cfg), "VIPLANES_API_URL": "", "VIPLANES_CA_FILE": "", "VIPLANES_TOKEN": ""}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        loaded = ClientConfig.load()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert loaded.api_url == "https://api.example:8443" and loaded.ca_file == "/etc/ca.pem"


def test_the_doc_lists_every_key():
    """docs/configuration.md cannot go stale: regenerate it with
    `python -m viplanes.cli.config.doc > docs/configuration.md`."""
    doc = (REPO / "docs" / "configuration.md").read_text()
    sections: dict[str, str] = {}
    for part in re.split(r"^## ", doc, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        sections[title.strip()] = body
    missing = []
    for table, key in sorted(documented_keys()):
        shared = f"`[{table}] {key}`" in doc
        if not shared and f"| `{key}` |" not in sections.get(f"[{table}]", ""):
            missing.append(f"[{table}] {key}")
    assert not missing, f"not in docs/configuration.md: {missing}"


def test_every_viplanes_env_var_is_documented():
    text = "\n".join(
        p.read_text() for d in ("viplanes", "api", "controller", "authz") for p in (REPO / d).rglob("*.py")
    )
    names = set(re.findall(r"\b(VIPLANES_[A-Z][A-Z0-9_]*[A-Z0-9])\b", text)) - {"VIPLANES_AUTH"}
    doc = (REPO / "docs" / "configuration.md").read_text()
    assert sorted(n for n in names if n not in doc) == []
