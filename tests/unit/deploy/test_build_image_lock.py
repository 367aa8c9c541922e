"""scripts/build-image run twice at once on one cache: one debootstrap, one base import, builds
one after the other. Before, both debootstrapped into the same hard-coded rootfs.tmp under
/var/cache/viplanes/ctr and imported the base twice. podman, debootstrap and chroot are stand-ins
on PATH that log when they start and end; nothing real is built."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.paths import REPO

FAKE_PODMAN = """#!/usr/bin/env bash
log() { echo "$(date +%s.%N) $*" >>"$FAKE_LOG"; }
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift 2; done   # global options: --root X ...
case "$1 $2" in
  "image exists") [ -e "$FAKE_STATE/$(echo "$3" | tr '/:' '__')" ] ;;
  "import -") cat >/dev/null; log import-start; sleep 0.5; touch "$FAKE_STATE/$(echo "$3" | tr '/:' '__')"; log import-end ;;
  *) if [ "$1" = build ]; then
       tag=$(echo "$@" | sed -E 's/.* -t ([^ ]+) .*/\\1/'); log build-start; sleep 0.5
       touch "$FAKE_STATE/$(echo "$tag" | tr '/:' '__')"; log build-end
     fi ;;
esac
"""
FAKE_DEBOOTSTRAP = """#!/usr/bin/env bash
echo "$(date +%s.%N) debootstrap-start" >>"$FAKE_LOG"; sleep 1
mkdir -p "$4/usr/bin" "$4/usr/local/share/ca-certificates"; touch "$4/usr/bin/python3"; chmod +x "$4/usr/bin/python3"
echo "$(date +%s.%N) debootstrap-end" >>"$FAKE_LOG"
"""


def test_two_builds_at_once_share_one_base_and_take_turns(tmp_path: Path) -> None:
    bindir, state, cache = tmp_path / "bin", tmp_path / "state", tmp_path / "cache"
    for d in (bindir, state):
        d.mkdir()
    for name, text in (("podman", FAKE_PODMAN), ("debootstrap", FAKE_DEBOOTSTRAP), ("chroot", "#!/bin/sh\n")):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    log = tmp_path / "log"
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "FAKE_STATE": str(state),
        "VIPLANES_CTR_CACHE": str(cache),
    }
    script = str(REPO / "scripts" / "build-image")
    runs = [
        subprocess.Popen([script, f"localhost/viplanes:t{n}"], env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
        for n in (1, 2)
    ]
    outs = [p.communicate(timeout=60)[0] for p in runs]
    assert [p.returncode for p in runs] == [0, 0], outs
    events = [line.split()[1] for line in log.read_text().splitlines()]
    assert events.count("debootstrap-start") == 1 and events.count("import-start") == 1, events
    builds = [e for e in events if e.startswith("build")]
    assert builds == ["build-start", "build-end", "build-start", "build-end"], events
    assert (cache / "rootfs" / "usr" / "bin" / "python3").exists()
