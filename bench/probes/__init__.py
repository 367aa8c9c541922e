"""One-off probes: profiles, A/B runs and experiments that answered one question each.

Not run by ``bench.run_all``; each is ``python -m bench.probes.NAME --help``. May import anything in
``bench``.
"""
