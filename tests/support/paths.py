"""Where the repository and its topology files are, for tests at any depth of the tree."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOPOLOGIES = REPO / "topologies"
CAMPUS_YAML = TOPOLOGIES / "campus.yaml"
DUALSTACK_YAML = TOPOLOGIES / "campus-dualstack.yaml"
UNIT_FIXTURES = REPO / "tests" / "unit" / "fixtures"
