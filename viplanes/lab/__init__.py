"""The campus lab: build a topology in Mininet, run transfers, report them.

Importing Mininet swaps the process-wide logger class for its own, whose loggers default to
level OUTPUT (25); every logger created afterwards (the controller's, the API's) would then drop
INFO. We let Mininet do its import-time set-up once, here, and put the standard class back.

Modules: ``cpulimit``, ``ctzones``, ``datasets``, ``demo``, ``dns``, ``estimate``, ``experiments``,
``fidelity``, ``fidelity_curves``, ``fidelity_seeds``, ``fidelity_table2``, ``fidelity_tools``,
``filetools``, ``finding``, ``findings_doc``, ``labpki``, ``measure``, ``net``, ``nodes``,
``paper``, ``papergrid``, ``paperplots``, ``plots``, ``ports``, ``prereqs``, ``records``,
``report``, ``runner``, ``servechild``, ``services``, ``session``, ``sflowlab``, ``shellinfo``,
``stack``, ``startup``, ``sweep``, ``topo``, ``v6lab``, ``v6series``, ``wanendpoint``, ``wanmodel``,
``wanproxy``.

Imports today: client, config, controller, lifecycle, sampling, topologies. Never (.importlinter):
click, tests, cli.
"""

import logging

try:
    import mininet.log  # noqa: F401 - for its side effect, undone below
except ImportError:  # the lab needs Mininet; the rest of the package does not
    pass
logging.setLoggerClass(logging.Logger)
