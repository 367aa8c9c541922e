"""docs/configuration.md, written from the commands' own options and the env-var settings:
``python -m viplanes.cli.config.doc > docs/configuration.md`` (tests/unit/cli/test_configfile.py
fails when a key is missing from the doc)."""

from __future__ import annotations

from viplanes.cli.config.command import command_named
from viplanes.cli.config.options import keys_of
from viplanes.cli.config.settings import ENV_SETTINGS

INTRO = """# Configuration

One file for every command: `/etc/viplanes/viplanes.toml`, or the file named by `--config PATH`
(before the command: `viplanes --config PATH serve`) or `$VIPLANES_CONFIG`. A file named by
`--config` must exist; `$VIPLANES_CONFIG` naming no file, or no file at the default path, means
defaults. The default path unreadable by the user running the CLI (the service's file, mode 0640)
is skipped.

**Precedence**: a flag, then an environment variable, then the file, then the built-in default.
`viplanes config show` prints the effective settings of the services (`--all`: of every command)
and where each came from, with database passwords, tokens and secrets masked;
`viplanes config check` checks every table; `viplanes config keys TABLE` lists a table's keys.

**Tables**: one per command (`[serve]`, `[api]`, `[controller]`, `[db]`, `[pki]`, ...); a key is
the option's long name without `--` and with `_` for `-` (`--max-clock-skew` is
`max_clock_skew`). A group's table (`[controller]`, `[db]`) sets the option in every subcommand
that has it. Repeatable options take a list (`switch_cert_pin = ["ab12..."]`). Tables that are
environment variables (`[db] url`, `[retention]`, `[auth]`, `[dns]`, `[ui]`, `[client]`,
`[lab]`) are exported to the command's environment when it does not set them, so an env var
still overrides the file.

**One table, one grammar**: every `VIPLANES_*` setting (the table below) is declared once in
`viplanes/settings/table.py` with its type, bounds and default, and a command parses them all
once at start (`viplanes config show` and `viplanes doctor` report that same parse). A flag takes
`true`/`false`, `1`/`0`, `yes`/`no` or `on`/`off` in any case; an empty value means the default.
A bad value stops the command with one line naming the variable and the form it accepts, exit
code **78**:

    error: settings: VIPLANES_AUTO_QUEUE='lots': expected an integer >= 0

**Checked at start**: an unknown table or key, a value of the wrong TOML type (`threads = "8"`)
or out of range stops the command with one line naming the key and exit code **78**:

    error: /etc/viplanes/viplanes.toml: [serve] threads: expected an integer, got "abc"

A command's own table is checked when that command runs; `viplanes config check` checks all.
A file holding a secret (a token, `[ui] secret`, a database URL with a password) that every
local user can read is refused (exit 78): install it `0640 root:viplanes` or `0600`.

## The API over TLS

`serve` and `api` speak HTTPS when given `tls_cert` and `tls_key` (PEM; TLS 1.2 or newer,
terminated by the API's own server, cheroot, so the failed-login budgets still see each client's
address; docs/deploy.md, "The API server"). The
controller certificate of `viplanes pki init --host NAME` is a server certificate for NAME and
can serve the API. Plain HTTP on an address other than loopback is refused (exit 78) unless
`--insecure-http` is given (for a TLS proxy on the same host; logged as a WARNING).

The CLI verifies the API's certificate against the system trust store (`update-ca-certificates`),
or the CA in `--ca-file`, `$VIPLANES_CA_FILE` or `[client] ca_file`. A certificate that does not
verify stops the command with one line and exit code **76**; the token is not sent.
The client's settings may also sit in a flat per-user file (`~/.config/viplanes/config.toml`
with `api_url`, `token`, `ca_file`), read when `$VIPLANES_CONFIG` does not name a file.

## Example

```toml
[db]
url = "postgresql://viplanes:SECRET@db.campus.example/viplanes"

[serve]
api = "0.0.0.0:8443"
tls_cert = "/etc/viplanes/pki/controller.crt"
tls_key = "/etc/viplanes/pki/controller.key"
pki = "/etc/viplanes/pki"
topology = "/etc/viplanes/campus.yaml"

[retention]
lane_days = 90
```
"""

DOC_COMMANDS = ("serve", "api", "controller", "db", "doctor", "pki", "topology", "lab", "transfer")
CLIENT_COMMANDS = ("principal", "grant", "lane", "audit")


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The whole of docs/configuration.md."""
    out = [
        INTRO,
        "## Settings that are environment variables\n",
        "| key | env | default | meaning |",
        "|---|---|---|---|",
    ]
    for s in ENV_SETTINGS:
        out.append(f"| `[{s.table}] {s.key}` | `{s.env}` | {_cell(s.default)} | {_cell(s.help)} |")
    out.append("\n`VIPLANES_CONFIG` names the file itself.\n")
    for name in (*DOC_COMMANDS, *CLIENT_COMMANDS):
        out += [f"## [{name}]\n", "| key | env | default | meaning |", "|---|---|---|---|"]
        for key, places in sorted(keys_of(command_named(name)).items()):
            param = places[0][1]
            env = f"`{param.envvar}`" if isinstance(param.envvar, str) else ""
            subs = sorted({" ".join(p) for p, _ in places if p})
            where = f" ({', '.join(subs)})" if subs else ""
            default = param.default
            shown = f"`{default}`" if isinstance(default, (str, int, float)) and default not in ("", False) else ""
            out.append(f"| `{key}` | {env} | {shown} | {_cell(param.help)}{where} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def documented_keys() -> set[tuple[str, str]]:
    """Every (table, key) the doc must list."""
    keys = {(s.table, s.key) for s in ENV_SETTINGS}
    for name in (*DOC_COMMANDS, *CLIENT_COMMANDS):
        keys |= {(name, k) for k in keys_of(command_named(name))}
    return keys


if __name__ == "__main__":
    print(render(), end="")
