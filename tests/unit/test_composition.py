"""The product composes its parts instead of mixing them in, and modules keep their private names.

Rule (issue 43): a product class that inherits a product class (other than a ``Protocol``: an
interface extending another) has that one base and no other (``Protocol`` and ``Generic`` aside).
A second base next to a product class is a mixin: the product base then declares the attributes they expect of their host (``LaneManager(LaneActivation,
LaneReads)`` declared 15, ``GuardedDatapath(BatchWriter, Datapath)`` 12) and nothing checks that
the host has them. A part that needs the host's things gets them as constructor arguments (see
``viplanes/lanes/context.py``). Second rule: no product module imports another module's private
(``_name``) names; a name used elsewhere is public.

Third rule: no product class inherits behaviour from another product class at all (one base
included): ``DataplaneDefaults <- LaneRuntime <- EmbeddedController <- RoleController`` made the
os-ken app's event handlers overrides three classes up; the embedded and role-aware controllers
now hold a runtime and the handlers are one declared protocol (``controller/openflow/events.py``).
A base that carries no behaviour is fine: a ``Protocol``, an exception, an ``Enum``, a dataclass,
a ``NamedTuple``, a ``TypedDict``, or a class without methods (the ORM's declarative ``Base``, a
marshmallow schema's fields). ``ALLOWED`` names the exceptions, each with its reason. Fourth: one
product module builds the lane service.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.unit.test_module_size import ROOT, _product_folders


@functools.cache
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    return tuple(
        (str(path.relative_to(ROOT)), ast.parse(path.read_text()))
        for folder in _product_folders()
        for path in sorted(folder.rglob("*.py"))
    )


def _base_names(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]


INTERFACE_BASES = {"Protocol", "Generic", "object"}


def mixins(modules: tuple[tuple[str, ast.Module], ...]) -> list[str]:
    """``path: Class(A, B)`` for every class with a product base (not a Protocol) and another base."""
    classes = [(path, n) for path, tree in modules for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    product = {n.name for _, n in classes}
    protocols = {n.name for _, n in classes if "Protocol" in _base_names(n)}
    found = []
    for path, node in classes:
        bases = [b.split("[", 1)[0] for b in _base_names(node)]
        kept = [b for b in bases if b not in INTERFACE_BASES]
        if len(kept) > 1 and any(b in product and b not in protocols for b in kept):
            found.append(f"{path}: {node.name}({', '.join(kept)})")
    return found


VALUE_BASES = {"Protocol", "Generic", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "NamedTuple", "TypedDict"}


def _is_value(node: ast.ClassDef, by_name: dict[str, ast.ClassDef]) -> bool:
    """A class with no behaviour to inherit: a Protocol, an exception, an Enum, a dataclass, a
    NamedTuple or TypedDict (directly, or through a product base that is one)."""
    bases = {b.split("[", 1)[0] for b in _base_names(node)}
    if bases & VALUE_BASES or any(b.endswith(("Error", "Exception", "Warning")) for b in bases):
        return True
    if any(ast.unparse(d).split("(", 1)[0].endswith("dataclass") for d in node.decorator_list):
        return True
    return any(b in by_name and by_name[b] is not node and _is_value(by_name[b], by_name) for b in bases)


def _behaves(node: ast.ClassDef, by_name: dict[str, ast.ClassDef]) -> bool:
    """Methods of its own, or from a product base that has some; and not a value (above)."""
    if _is_value(node, by_name):
        return False
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body):
        return True
    bases = {b.split("[", 1)[0] for b in _base_names(node)}
    return any(b in by_name and by_name[b] is not node and _behaves(by_name[b], by_name) for b in bases)


# Subclasses of a product class with behaviour that stay, and why.
ALLOWED = {
    # Mininet builds every node from a class (``addHost(name, cls=...)``) and calls its
    # ``config``/``terminate``: overriding them is that framework's extension point, and each
    # router kind adds its own addresses and rules to the plain router's
    "viplanes/lab/nodes.py: EdgeRouter(Router)",
    "viplanes/lab/nodes.py: Firewall(Router)",
    "viplanes/lab/nodes.py: Nat(Router)",
}


def subclassings(modules: tuple[tuple[str, ast.Module], ...]) -> list[str]:
    """``path: Class(Base)`` for every product class with a product base that has behaviour."""
    classes = [(path, n) for path, tree in modules for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    by_name = {n.name: n for _, n in classes}
    found = []
    for path, node in classes:
        if _is_value(node, by_name):
            continue
        bases = [b.split("[", 1)[0] for b in _base_names(node)]
        behaving = [b for b in bases if b in by_name and _behaves(by_name[b], by_name)]
        if behaving:
            found.append(f"{path}: {node.name}({', '.join(behaving)})")
    return found


def calls_of(name: str, modules: tuple[tuple[str, ast.Module], ...]) -> list[str]:
    """The product modules that call ``name(...)`` (as ``name`` or ``x.name``)."""
    return sorted(
        {
            path
            for path, tree in modules
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and ast.unparse(n.func).rsplit(".", 1)[-1] == name
        }
    )


def private_imports(modules: tuple[tuple[str, ast.Module], ...]) -> list[str]:
    """``path: from X import _name`` for every import of another product module's private name."""
    found = []
    for path, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("viplanes"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    found.append(f"{path}: from {node.module} import {', '.join(private)}")
    return found


def test_no_product_class_mixes_in_two_product_bases() -> None:
    assert mixins(_modules()) == []


def test_no_product_module_imports_another_modules_private_names() -> None:
    assert private_imports(_modules()) == []


def test_no_product_class_inherits_behaviour_from_another() -> None:
    found = subclassings(_modules())
    assert [f for f in found if f not in ALLOWED] == []
    assert sorted(ALLOWED - set(found)) == [], "an allowed subclass is gone: take it off ALLOWED"


def test_one_product_module_builds_the_lane_service() -> None:
    """``LaneManager`` is built by ``lanes/build.py`` only, and that builder is called only by the
    process builder (``cli/services.py``): ``create_app`` receives the parts, never builds them."""
    modules = _modules()
    assert calls_of("LaneManager", modules) == ["viplanes/lanes/build.py"]
    assert calls_of("build_lane_service", modules) == ["viplanes/cli/services.py"]


def test_the_subclass_check_finds_behaviour_and_spares_values() -> None:
    source = (
        "class Defaults:\n    def start(self): ...\nclass Runtime(Defaults): ...\nclass Roles(Runtime): ...\n"
        "class P(Protocol): ...\nclass Impl(P): ...\nclass Bad(ValueError): ...\nclass Worse(Bad): ...\n"
        "class Kind(Enum): ...\nclass More(Kind): ...\n@dataclass\nclass V: ...\nclass W(V): ...\n"
        "class Row(NamedTuple): ...\nclass Row2(Row): ...\nclass App(OSKenApp): ...\n"
        "class Base(DeclarativeBase):\n    pass\nclass Lane(Base):\n    id = 1\n"
    )
    tree = (("x.py", ast.parse(source)),)
    assert subclassings(tree) == ["x.py: Runtime(Defaults)", "x.py: Roles(Runtime)"]
    assert calls_of("LaneManager", (("a.py", ast.parse("m = lanes.LaneManager(db)")),)) == ["a.py"]


def test_the_checks_find_what_they_look_for() -> None:
    source = (
        "class Reads: ...\nclass Activation: ...\nclass Manager(Activation, Reads): ...\n"
        "class P(Protocol): ...\nclass Q(Protocol): ...\nclass R(P, Q, Protocol): ...\n"
        "class One(Reads): ...\nclass Conn(Reads, Datapath): ...\nclass Fine(dict[int, str]): ...\n"
        "from viplanes.cli.client import _fail, show_rows\n"
    )
    tree = (("x.py", ast.parse(source)),)
    assert mixins(tree) == ["x.py: Manager(Activation, Reads)", "x.py: Conn(Reads, Datapath)"]
    assert private_imports(tree) == ["x.py: from viplanes.cli.client import _fail"]


def test_the_scan_covers_the_product() -> None:
    paths = {path for path, _ in _modules()}
    assert {"viplanes/lanes/manager.py", "controller/openflow/server.py", "viplanes/cli/lanecmd.py"} <= paths
    assert Path(ROOT / "viplanes/lanes/context.py").is_file()
