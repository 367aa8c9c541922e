"""schemathesis against the served OpenAPI document: no 5xx, every response matches its schema.

Runs with the operator's token (the widest view), a researcher grant in place so that lane
requests can succeed, and few examples per operation to stay well under a minute.
"""

from __future__ import annotations

import pytest

from tests.support.schema import run_all_operations
from tests.support.world import make_world


@pytest.fixture
def world_for_schema(tmp_path, clock, dataplane, topo):
    w = make_world(f"sqlite:///{tmp_path / 'st.db'}", clock, dataplane, topo)
    w.lane()  # lane 1 exists, so /lanes/{lane_id} paths sometimes hit something real
    yield w
    w.app.extensions["viplanes"].db.dispose()


PARTS = 4  # the operations in four tests (~5 s each), so the two xdist workers share them


@pytest.mark.parametrize("part", range(PARTS))
def test_api_conforms(world_for_schema, part):
    run_all_operations(world_for_schema, part, PARTS)
