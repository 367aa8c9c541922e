"""What the suite and the probes share: bridges, serve processes, workloads, statistics, reports.

May import the product and other harness modules; never ``bench.suite`` or ``bench.probes``.
"""
