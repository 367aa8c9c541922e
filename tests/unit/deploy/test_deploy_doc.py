"""docs/deploy.md's commands are the ones the tests run, and the docs never send anyone to a
package index that does not serve viplanes. Before: the container test added --ulimit, --network
host and --workers 1 that the doc lacked (the doc's command failed: "error setting rlimit type 7"),
the docs said `pip install viplanes`, and two names for the topology file were in use."""

from __future__ import annotations

import re

from tests.support.deploydoc import argv, block
from tests.support.paths import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "deploy" / "Containerfile"]


def test_the_container_run_lines_carry_what_this_host_needs_and_no_setting() -> None:
    runs = [argv(c) for c in block("container-run") if argv(c)[:2] == ["podman", "run"]]
    assert len(runs) == 2, runs
    for run in runs:
        assert "--network" in run and run[run.index("--network") + 1] == "host", run
        assert "nofile=4096:4096" in run, run
        assert "/etc/viplanes:/etc/viplanes:ro" in run, run
        after_image = run[run.index("viplanes") + 1 :]
        assert after_image in (["api"], ["controller", "cluster"]), f"settings go in viplanes.toml: {after_image}"


def test_the_build_and_install_blocks_use_a_wheel_not_an_index() -> None:
    build = block("build")
    assert any("pip wheel --no-deps -w dist ." in c for c in build), build
    install = block("install")
    assert any(re.search(r"pip install '\./viplanes-X\.Y\.Z-py3-none-any\.whl\[server\]'", c) for c in install)


def test_no_doc_installs_viplanes_from_an_index() -> None:
    # `pip install viplanes`, `pip install 'viplanes[server]'`, not followed by " @ git+..."
    bare = re.compile(r"pip install ['\"]?viplanes(\[[a-z]+\])?['\"]?(?! @)(?=[\s`)]|$)")
    found = [
        f"{p.name}: {line.strip()}"
        for p in DOCS
        for line in p.read_text().splitlines()
        # a quoted CLI error line, and the warning against it, are not instructions
        if bare.search(line) and not line.startswith("error:") and "never" not in line
    ]
    assert not found, found


def test_one_topology_file_name() -> None:
    found = [p.name for p in DOCS if "/etc/viplanes/topology.yaml" in p.read_text()]
    assert not found, f"the deployment's topology file is /etc/viplanes/campus.yaml: {found}"


def test_no_doc_calls_a_bare_python() -> None:
    """`$(python -m viplanes.lab.labpki)` fails on Debian, which has no `python` (only python3,
    and the module is in the project's venv)."""
    found = [p.name for p in DOCS if "$(python -m" in p.read_text()]
    assert not found, found


def test_the_stale_lines_of_issue_40_are_gone() -> None:
    operating = (REPO / "docs" / "operating.md").read_text()
    head = max(p.name[:4] for p in (REPO / "viplanes" / "store" / "migrations" / "versions").glob("[0-9]*.py"))
    assert f"at {head} (head)" in operating and f"schema {head}" in operating, head
    login = operating.index("- People sign in from the CLI with `viplanes login`")
    assert not operating[login:].split("\n- ", 1)[0].rstrip().endswith("break-glass operators."), "fragment"
    assert "\n  reads the principal. Add" not in operating
    assert "wan:" in (REPO / "topologies" / "README.md").read_text()
    changelog = (REPO / "CHANGELOG.md").read_text().split("\n## [", 2)[1]
    assert "A running flow through the campus NAT gets no automatic lane." not in changelog
