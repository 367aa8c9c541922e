"""The data-plane seam: every implementation has every member ``Dataplane`` declares, with a
signature the service can call, and nothing in the product asks a data plane what it can do
with ``getattr``/``hasattr`` (the interface says it, as httpx's transports do)."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from viplanes.controller.openflow.embedded import EmbeddedController
from viplanes.controller.openflow.roles import RoleController
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.dataplane.base import Dataplane, PlaneCapabilities
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.dataplane.remote import RemoteDataplane

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("viplanes", "controller", "api", "policy", "authz", "topologies")
IMPLEMENTATIONS = [MemoryDataplane, RemoteDataplane, LaneRuntime, EmbeddedController]
# not a data plane, but holds one: inside it ``self`` must not be probed either
PLANE_PARTS = [*IMPLEMENTATIONS, RoleController]
# what a data plane is called where it is used: ``self.dataplane``, ``m.dataplane``, ``plane``,
# ``self.runtime`` (the console's inspector, the status reporter, the entry points)
PLANE_NAMES = re.compile(r"(^|\.)(dataplane|plane|runtime|lane_runtime)$")
PROBES = ("getattr", "hasattr")


def declared_methods() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(Dataplane).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def declared_attributes() -> dict[str, typing.Any]:
    return typing.get_type_hints(Dataplane)


def test_the_protocol_declares_what_the_service_used_to_probe() -> None:
    members = set(declared_methods()) | set(declared_attributes())
    probed = {"activate_many", "begin_deactivate", "expect_wake", "capabilities"}
    assert probed <= members
    assert "carries_lane_sets" not in members  # True everywhere: gone with its refusal path


def test_the_seam_has_no_mode_flags_and_takes_no_database_connection() -> None:
    """How a plane carries lanes is one value fixed at construction (``capabilities``), not
    flags the service branches on one by one; and no member takes the caller's SQL connection
    (a wake-up in the caller's transaction is the lane service's own statement)."""
    assert declared_attributes() == {"capabilities": PlaneCapabilities}
    for name, signature in declared_methods().items():
        for param in signature.parameters.values():
            assert not re.search(r"Connection|Session", str(param.annotation)), f"Dataplane.{name}({param.name})"


def callable_with(protocol: inspect.Signature, impl: inspect.Signature) -> list[str]:
    """Why a call written against ``protocol`` would not fit ``impl`` ([] = it fits)."""
    wanted = [p for p in protocol.parameters.values() if p.name != "self"]
    have = [p for p in impl.parameters.values() if p.name != "self"]
    problems = []
    for i, param in enumerate(wanted):
        if i >= len(have) or have[i].name != param.name:
            problems.append(f"parameter {i} should be {param.name!r}")
        elif param.default is not inspect.Parameter.empty and have[i].default is inspect.Parameter.empty:
            problems.append(f"{param.name!r} needs a default")
    extra = [p.name for p in have[len(wanted) :] if p.default is inspect.Parameter.empty]
    if extra:
        problems.append(f"extra required parameters {extra}")
    return problems


@pytest.mark.parametrize("plane", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_every_implementation_has_every_declared_member(plane: type) -> None:
    # every member written out in the class itself (no base class of defaults): never missing
    for name, signature in declared_methods().items():
        member = vars(plane).get(name)
        assert inspect.isfunction(member), f"{plane.__name__}.{name} is not a method of its own"
        assert callable_with(signature, inspect.signature(member)) == [], f"{plane.__name__}.{name}"
    for name, kind in declared_attributes().items():
        value = vars(plane).get(name)
        assert isinstance(value, kind), f"{plane.__name__}.{name} = {value!r}, declared {kind}"


def test_a_signature_that_does_not_fit_is_caught() -> None:
    def activate(self: object, spec: object, timeout_s: float) -> None: ...

    problems = callable_with(declared_methods()["activate"], inspect.signature(activate))
    assert problems == ["parameter 0 should be 'lane'", "'timeout_s' needs a default"]


def test_the_implementations_answer_as_declared() -> None:
    """The defaults and overrides the service branches on, as each plane really is."""
    assert MemoryDataplane.capabilities == PlaneCapabilities()
    assert LaneRuntime.capabilities == PlaneCapabilities(batches=True, removes_early=True)
    assert RemoteDataplane.capabilities == PlaneCapabilities(records_outcome=True, wake_channel="viplanes_lanes")
    assert MemoryDataplane().switch_view() is None and LaneRuntime(None).switch_view() is not None
    assert MemoryDataplane().begin_deactivate(1) is None and MemoryDataplane().openflow_transport() is None
    assert EmbeddedController(LaneRuntime(None), port=0).openflow_transport() == "insecure-tcp"


def product_files(root: Path) -> Iterator[Path]:
    for top in PRODUCT:
        yield from sorted((root / top).rglob("*.py"))


def plane_classes() -> set[str]:
    """Names of every class a data plane is made of: inside them ``self`` is a data plane."""
    return {cls.__name__ for plane in PLANE_PARTS for cls in plane.__mro__} - {"object", "Protocol", "Generic"}


def probes_in(source: str, classes: set[str]) -> list[tuple[int, str]]:
    """(line, call) of every ``getattr``/``hasattr`` applied to a data plane in ``source``."""
    found = []

    def visit(node: ast.AST, in_plane: bool) -> None:
        if isinstance(node, ast.ClassDef):
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
            in_plane = node.name in classes or bool(bases & classes)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES and node.args:
            target = ast.unparse(node.args[0])
            if PLANE_NAMES.search(target) or (in_plane and target == "self"):
                found.append((node.lineno, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, in_plane)

    visit(ast.parse(source), False)
    return found


def test_nothing_in_the_product_probes_a_data_plane() -> None:
    classes = plane_classes()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {call}"
        for path in product_files(ROOT)
        for line, call in probes_in(path.read_text(), classes)
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        'wake = getattr(self.dataplane, "wake_in", None)',
        'ok = getattr(m.dataplane, "carries_lane_sets", False)',
        'security = getattr(dataplane, "security", None)',
        'epoch = int(getattr(self.plane, "epoch", 0))',
        'ready = all(hasattr(plane, a) for a in ("connected",))',
        "class LaneRuntime:\n    def f(self):\n        return getattr(self, 'role', None)",
    ],
)
def test_the_probe_check_finds_a_probe(source: str) -> None:
    assert len(probes_in(source, plane_classes())) == 1


def test_the_probe_check_leaves_other_objects_alone() -> None:
    source = "x = getattr(exc, 'reason', None)\nclass Node:\n    def f(self):\n        return getattr(self, 'a', '')"
    assert probes_in(source, plane_classes()) == []


def test_the_service_calls_only_declared_members() -> None:
    """Every ``<...>.dataplane.<member>`` the product reads is declared in ``Dataplane``."""
    declared = set(declared_methods()) | set(declared_attributes())
    used: set[str] = set()
    for path in product_files(ROOT):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Attribute, ast.Name)):
                owner = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
                if owner == "dataplane" and not isinstance(node.ctx, ast.Store):
                    used.add(node.attr)
    assert used and used <= declared, used - declared
