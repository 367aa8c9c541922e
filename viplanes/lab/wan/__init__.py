"""The lab's WAN model: what the cloud link does to a transfer (docs/lab.md, "The WAN model").

Modules: ``endpoint`` (a storage endpoint's shape from ``--endpoint``), ``model`` (delay line,
request framing, reads vs writes), ``proxy`` (the pacing proxy on the cloud host, run as
``python -m viplanes.lab.wan.proxy``).

Imports today: nothing of ours outside this folder. Never (.importlinter): click, tests, api, cli.
"""
