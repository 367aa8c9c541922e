"""Every API operation driven with generated valid and invalid requests (schemathesis + hypothesis),
on SQLite (unit/api/test_schemathesis.py) and PostgreSQL (integration/test_postgres_api.py)."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def run_all_operations(world, part: int = 0, parts: int = 1) -> None:
    """Every operation, 40 valid and 20 invalid generated cases each (hypothesis directly:
    schemathesis's pytest plugin does not load under pytest 9). ``part`` of ``parts``: every
    ``parts``-th operation from the ``part``-th, so parallel workers can share the run."""
    api = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", world.app)
    headers = world.h("root")
    operations = [r.ok() for r in api.get_all_operations()]
    assert len(operations) >= 16
    for op in operations[part::parts]:
        for mode, n in ((GenerationMode.POSITIVE, 40), (GenerationMode.NEGATIVE, 20)):

            @settings(
                max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None
            )
            @given(case=op.as_strategy(mode))
            def run(case):
                case.call_and_validate(headers=headers, checks=CHECKS)

            run()
