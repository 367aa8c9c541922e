"""`make demo`: the paper's headline in a few minutes, on the Mininet campus.

Builds the campus, starts `viplanes serve` (temporary SQLite database, free local ports),
bootstraps an operator, who creates a researcher and a grant over the API; measures the desktop's
upload to the cloud through the firewall and NAT (iperf3 and rclone), requests a VIP lane with the
researcher's token, measures again, releases the lane, and prints Table 2 and the plots' paths.
Everything is torn down at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from viplanes.settings.environ import one_setting

from .labpki import LAB_PKI_DIR, LabPKIError
from .report import rich_table, table2, write_report
from .runner import Runner
from .session import session
from .stack import StackError
from .sweep import RunSpec

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "topologies" / "campus.yaml"
SIZE_MB = 24
SECONDS = 6.0
# campus.yaml's WAN model caps each connection at 10 Mbit/s: 10 of them fill the desktop's NIC
PARALLEL = 10


def demo_specs() -> list[RunSpec]:
    """Desktop upload: iperf3 with 10 streams, rclone with 10 transfers of 10 files, both paths."""
    runs = []
    for path in ("default", "lane"):
        for rep in (1, 2):
            runs.append(RunSpec("desktop", "upload", path, "iperf3", PARALLEL, rep, seconds=SECONDS))
            runs.append(RunSpec("desktop", "upload", path, "rclone", PARALLEL, rep, chunk_mb=8, dataset="split10"))
    return runs


def _print_result(console: Console) -> Callable[[RunSpec, dict[str, Any]], None]:
    def on_result(spec: RunSpec, rec: dict) -> None:
        what = (
            f"iperf3 -P {spec.parallel} -t {spec.seconds:g}"
            if spec.tool == "iperf3"
            else f"rclone copy {SIZE_MB} MiB in 10 files, --transfers {spec.parallel}"
        )
        res = f"[bold]{rec['mbps']:.1f} Mbit/s[/]" if rec["ok"] else f"[red]failed: {rec['error']}"
        extra = "" if rec["intact"] is None else (", checksums match" if rec["intact"] else ", [red]checksums differ")
        console.print(f"  {spec.path:7} {what:42} {res}{extra}")

    return on_result


def _print_lane(console: Console) -> Callable[[str, dict[str, Any]], None]:
    def on_lane(event: str, lane: dict) -> None:
        if event == "granted":
            console.print(
                f"  [cyan]lane {lane['id']} {lane['state']}[/]: {lane['src_ip']} -> "
                f"{lane['dst_ip']}:{lane['dst_port']} (seen outside as "
                f"{lane.get('nat_ip')}), expires {lane.get('expires_at')}"
            )
        else:
            console.print(f"  [cyan]lane {lane['id']} released")

    return on_lane


def main() -> int:
    console = Console(width=None if sys.stdout.isatty() else 120)
    if os.geteuid() != 0:
        console.print("[red]the demo needs root (network namespaces and OVS bridges)")
        return 1
    started = time.monotonic()
    out = Path(one_setting("VIPLANES_DEMO_DIR") or tempfile.mkdtemp(prefix="viplanes-demo-"))
    results = out / "results.jsonl"
    results.unlink(missing_ok=True)
    console.rule("VIP Lanes demo: desktop upload to cloud storage, campus path vs VIP lane")
    console.print(f"work directory: {out}")
    try:
        console.print(
            "building the campus: 4 userspace OVS switches, firewall (15 Mbit/s DPI "
            "cap), NAT, edge router, cloud (iperf3 + rclone serve s3); starting "
            "viplanes serve ..."
        )
        with session(TOPOLOGY, out, ("split10",), SIZE_MB, need_lanes=True) as sess:
            assert sess.stack is not None
            console.print(
                f"built in {time.monotonic() - started:.0f}s. viplanes serve: API "
                f"{sess.stack.api_url}, OpenFlow {sess.stack.openflow[0]}:"
                f"{sess.stack.openflow[1]} (TLS, lab PKI {LAB_PKI_DIR}); operator "
                "bootstrapped with `viplanes "
                "principal add`; researcher 'lab-researcher' and its grant "
                "(campus hosts -> cloud, tcp 5201 and 9000) created over the API"
            )
            console.print(
                f"lab run {sess.lab.run_id}: bridges "
                f"{', '.join(sess.lab.bridge(s.name) for s in sess.topology.switches)}"
            )
            console.print("measuring; the researcher's token requests the lanes over the REST API")
            Runner(sess, results, on_result=_print_result(console), on_lane=_print_lane(console)).run_all(
                demo_specs(), lane_duration_s=600
            )
            console.print("tearing down ...")
        for bulky in ("datasets", "cloud", "downloads"):  # keep results, report and logs
            shutil.rmtree(out / bulky, ignore_errors=True)
    except (StackError, LabPKIError, RuntimeError, OSError) as exc:
        console.print(f"[red]demo failed: {exc}")
        return 1
    except KeyboardInterrupt:
        console.print("[red]interrupted; everything was torn down")
        return 130
    from .report import load_results

    records, _ = load_results(results)
    files = write_report(records, out / "report")
    console.print(rich_table(table2(records), title="Table 2 (lab, desktop upload), Mbit/s"))
    for kind, path in files.items():
        console.print(f"{kind}: {path}")
    console.print(f"results: {results}  (viplanes lab report {results})")
    console.print(f"demo took {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
