"""The long fault soak: the controller away for 60 s (issue 10: no lane-traffic gap > 1 s), and
the whole fault suite, each repeated.

    .venv/bin/python -m bench.probes.faults_soak                  # 60 s outage x2, suite x2
    .venv/bin/python -m bench.probes.faults_soak --outage 60 --repeat 3

Runs tests/integration/test_faults*.py through pytest (private OVS in its own namespace, real
`viplanes serve`), so it needs root, Open vSwitch binaries, iperf3 and PostgreSQL 15. Not part of
``bench.run_all``. The outage test prints where every gap of 0.2 s or more sat (kill at 2 s,
restart at 2 s + outage), so a failure says whether the kill, the outage or the restart made it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pytest(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-m", "integration", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    return proc.returncode, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.probes.faults_soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--outage", type=float, default=60.0, help="controller outage, seconds")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each part")
    opts = ap.parse_args(argv)
    env = {**os.environ, "VIPLANES_FAULTS_OUTAGE_S": f"{opts.outage:g}", "VIPLANES_FAULTS_FORCE_OUTAGE": "1"}
    failed = 0
    for run in range(1, opts.repeat + 1):
        for part, args in (
            ("outage", ["tests/integration/test_faults.py", "-k", "controller_outage"]),
            (
                "suite",
                [
                    "tests/integration/test_faults.py",
                    "tests/integration/test_faults_load.py",
                    "-k",
                    "not controller_outage",
                ],
            ),
        ):
            code, out = _pytest(args, env)
            failed += code != 0
            lines = [
                ln
                for ln in out.splitlines()
                if re.search(r"gap|answered|restart|expired|passed|failed", ln) and not ln.startswith(" ")
            ]
            print(f"--- {part} run {run}: {'ok' if code == 0 else 'FAILED'}")
            print("\n".join(lines[-12:]))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
