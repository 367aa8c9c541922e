"""The product composes its parts instead of mixing them in, and modules keep their private names.

Rule (issue 43): a product class that inherits a product class (other than a ``Protocol``: an
interface extending another) has that one base and no other (``Protocol`` and ``Generic`` aside).
A second base next to a product class is a mixin: the product base then declares the attributes they expect of their host (``LaneManager(LaneActivation,
LaneReads)`` declared 15, ``GuardedDatapath(BatchWriter, Datapath)`` 12) and nothing checks that
the host has them. A part that needs the host's things gets them as constructor arguments (see
``viplanes/lanes/context.py``). Second rule: no product module imports another module's private
(``_name``) names; a name used elsewhere is public.
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
