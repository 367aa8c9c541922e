"""Benchmarks: scripts that measure on real userspace Open vSwitch and print numbers.

`make bench` runs ``python -m bench.run_all``; each benchmark writes ``bench/results/<name>.json``.
``suite/`` holds what ``run_all`` runs, ``harness/`` what they share, ``probes/`` one-off experiments
(bench/README.md lists every script). Nothing here is a timed test: the pure helpers (percentiles, tables) have unit tests, the
measurements do not.
"""
