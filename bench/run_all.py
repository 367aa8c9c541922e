"""Run the benchmarks, write ``bench/results/<name>.json`` each, print one table.

    .venv/bin/python -m bench.run_all                 # everything (about 10 minutes)
    .venv/bin/python -m bench.run_all --quick         # smoke run: short and small
    .venv/bin/python -m bench.run_all --only activation --only policy
    .venv/bin/python -m bench.run_all --only nat_takeover --busy 4   # at load 4 above the machine's

Needs root and Open vSwitch (started here via scripts/ovs-up). Each benchmark creates and deletes
its own bridges (prefix ``vb<pid>``) and its own ``viplanes serve`` processes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from bench.harness.busy import busy
from bench.harness.report import Result, print_table, write_json

BUSY_WARM_S = 60.0

BENCHMARKS = {  # name -> module with run(**options) -> Result
    "activation": "bench.suite.activation",
    "churn": "bench.suite.churn",
    "scale": "bench.suite.scale",
    "policy": "bench.suite.policy_bench",
    "failover": "bench.suite.failover",  # kill -9 of the master controller, split deployment (issue 12)
    "switches": "bench.suite.switches",  # 4/32/128 synthetic access switches (issue 13)
    "peers": "bench.suite.peers",  # os-ken 1.4.1 ofctl_rest and Faucet 1.10, in venvs under bench/
    "fireflies": "bench.suite.fireflies",  # scitags firefly -> automatic lane active (issue 32)
    "sflow": "bench.suite.sflow_detect",  # first packet -> sFlow sighting, collector CPU (issue 32)
    "sflow_lanes": "bench.suite.sflow_lanes",  # first packet -> sFlow-made lane, Mininet lab (issue 32)
    "nat_takeover": "bench.suite.nat_takeover",  # NAT'd first packet -> takeover lane, Mininet lab (issue 32)
    "https_soak": "bench.suite.https_soak",  # 50 HTTPS clients, serve and api --workers 2, then idle (issue 40)
    "reroute": "bench.suite.reroute",  # one failed link carrying 1,000 lanes -> all re-routed (issue 42)
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(
        prog="python -m bench.run_all", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="short runs for a smoke check")
    ap.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    ap.add_argument(
        "--duration",
        type=float,
        default=None,
        help="churn duration in seconds (default 60, 10 with --quick); https_soak's per target (default 600, 30)",
    )
    ap.add_argument("--clients", type=int, default=8, help="concurrent churn clients (default 8)")
    ap.add_argument(
        "--lanes", type=int, default=None, help="active lanes for the scale benchmark (default 10000, 500 with --quick)"
    )
    ap.add_argument(
        "--reroute-lanes",
        type=int,
        default=None,
        help="lanes on the failed link for the reroute benchmark (default 1000, 200 with --quick)",
    )
    ap.add_argument(
        "--dataplane",
        choices=["openflow", "memory"],
        default="openflow",
        help="memory: exercise the scripts without a controller (numbers are not the product's)",
    )
    ap.add_argument(
        "--db",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="store of the serve process (postgresql: a throwaway local cluster)",
    )
    ap.add_argument(
        "--deployment",
        choices=["embedded", "split", "both"],
        default="both",
        help="churn against serve (embedded), api+controller on PostgreSQL (split), or both",
    )
    ap.add_argument(
        "--soak-minutes",
        type=float,
        default=None,
        help="failover: then both controllers up this long, counting false takeovers and lanes lost",
    )
    ap.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N processes spinning on the CPU beside every benchmark: load N above the machine's own",
    )
    ap.add_argument(
        "--profile", action="store_true", help="sample the serve process with py-spy during churn (pip install py-spy)"
    )
    args = ap.parse_args(argv)
    options = {
        "quick": args.quick,
        "duration": args.duration,
        "clients": args.clients,
        "lanes": args.lanes,
        "reroute_lanes": args.reroute_lanes,
        "dataplane": args.dataplane,
        "profile": args.profile,
        "db": args.db,
        "deployment": args.deployment,
        "soak_minutes": args.soak_minutes,
    }
    results: list[Result] = []
    with busy(args.busy):
        if args.busy:  # the 1-min load average climbs to the workers' count in about a minute
            print(f"== {args.busy} busy workers, {BUSY_WARM_S:.0f} s before the first benchmark", file=sys.stderr)
            time.sleep(BUSY_WARM_S)
        for name in args.only or list(BENCHMARKS):
            results.append(_run_one(name, options, argv, args.busy))
    print_table(results)
    return 1 if any(r.error for r in results) else 0


def _run_one(name: str, options: dict[str, object], argv: list[str], busy_workers: int) -> Result:
    print(f"== {name} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        result: Result = importlib.import_module(BENCHMARKS[name]).run(**options)
    except Exception as exc:  # one broken benchmark must not hide the others' numbers
        traceback.print_exc()
        result = Result(name, error=f"{exc.__class__.__name__}: {exc}")
    result.details["wall_s"] = round(time.perf_counter() - t0, 1)
    result.details["busy_workers"] = busy_workers
    path = write_json(result, ["python", "-m", "bench.run_all", *argv])
    print(f"== {name}: {result.details['wall_s']} s -> {path}", file=sys.stderr, flush=True)
    return result


if __name__ == "__main__":
    sys.exit(main())
