"""The benchmark suite: the modules ``python -m bench.run_all`` runs, each ``run(**options) -> Result``.

May import ``bench.harness`` and the product; nothing in ``bench.probes``.
"""
