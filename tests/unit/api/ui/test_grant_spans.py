"""The grants page says a grant's longest lane as people do ("60 min", "2 h"), not "60.0 min"."""

from __future__ import annotations

import pytest

from tests.support.ui import sign_in
from tests.support.world import World
from viplanes.api.ui.web import _span


@pytest.mark.parametrize(
    "seconds,said",
    [
        (45, "45 s"),
        (90, "1 min 30 s"),
        (3600, "60 min"),
        (5400, "90 min"),
        (7200, "2 h"),
        (9000, "2 h 30 min"),
        (86400, "1 d"),
        (90000, "25 h"),
    ],
)
def test_span(seconds: int, said: str) -> None:
    assert _span(seconds) == said


def test_grants_page_shows_whole_minutes(world: World) -> None:
    sign_in(world.client, world.tokens["root"])
    page = world.client.get("/ui/grants").text
    assert "60 min, 3 lane(s)" in page and "60.0 min" not in page
