"""The campus lab: build a topology in Mininet, run transfers, report them.

Importing Mininet swaps the process-wide logger class for its own, whose loggers default to
level OUTPUT (25); every logger created afterwards (the controller's, the API's) would then drop
INFO. We let Mininet do its import-time set-up once, here, and put the standard class back.

Modules: ``cpulimit``, ``ctzones``, ``datasets``, ``demo``, ``dns``, ``estimate``, ``experiments``,
``filetools``, ``finding``, ``findings_doc``, ``labpki``, ``measure``, ``net``, ``nodes``,
``plots``, ``ports``, ``prereqs``, ``records``, ``report``, ``runner``, ``servechild``,
``services``, ``session``, ``sflowlab``, ``shellinfo``, ``stack``, ``startup``, ``sweep``,
``topo``, ``v6lab``, ``v6series``.

Subpackages: ``fidelity`` (the lab held against the papers), ``paper`` (what the papers measured,
the paper grid and its figures), ``wan`` (the WAN model and its pacing proxy).

Imports today: client, config, controller, detection, lifecycle, topologies. Never (.importlinter):
click, tests, cli.
"""

import logging

try:
    import mininet.log  # noqa: F401 - for its side effect, undone below
except ImportError:  # the lab needs Mininet; the rest of the package does not
    pass
logging.setLoggerClass(logging.Logger)
