"""Shared fixtures. Integration tests are marked `integration` and need root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CAMPUS_YAML = REPO / "topologies" / "campus.yaml"


@pytest.fixture
def campus_yaml() -> Path:
    return CAMPUS_YAML


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root (CI runs as root)")
        for item in items:
            if "integration" in item.keywords:
                item.add_marker(skip)
