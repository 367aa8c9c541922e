"""Which topology file a service runs: the one named, or (outside a deployment) the lab campus.

Why a rule and not a default: `serve` without `--topology` used to load the lab campus bundled in
site-packages, so a deployment that forgot `[serve] topology` ran, and `doctor` checked, a campus
that is not theirs, silently. The rule: a flag or a config key names the file; with no
configuration file at all (a developer's or the lab's shell) the bundled lab campus is used and
a WARNING says so; a configuration file in effect (a deployment) that names none is an error
for a command that talks to switches. Pure: what was given in, a decision out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEPLOYMENT_PATH = "/etc/viplanes/campus.yaml"  # the name docs/deploy.md uses


def bundled_campus() -> str:
    """The lab campus shipped in the package (topologies/campus.yaml)."""
    import viplanes.topologies as pkg

    return str(Path(pkg.__file__).resolve().parent / "campus.yaml")


@dataclass(frozen=True)
class TopologyChoice:
    path: str | None  # None: refused (``problem`` says why)
    warning: str = ""  # using the bundled lab campus
    problem: str = ""


def choose_topology(given: str | None, config_file: Path | None, table: str, for_switches: bool) -> TopologyChoice:
    """``given``: the flag's or the config key's value; ``config_file``: the file in effect;
    ``table``: where the key goes ([serve], [api], ...); ``for_switches``: the command's answers
    depend on the real campus (serve with OpenFlow, api, doctor), not a memory demo."""
    if given:
        return TopologyChoice(given)
    if config_file is not None and for_switches:
        return TopologyChoice(
            None,
            problem=(
                f"{config_file}: [{table}] topology: not set; name the campus file "
                f'(topology = "{DEPLOYMENT_PATH}"), or --topology {bundled_campus()} for the lab campus'
            ),
        )
    path = bundled_campus()
    return TopologyChoice(
        path, warning=f"no topology given: using the bundled lab campus {path} (a deployment sets [{table}] topology)"
    )
