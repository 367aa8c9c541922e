"""Every command line: ``viplanes ...`` (``main`` wires the groups) and the long-running entry points
(``serve``, ``api``, ``controller``). The only package that imports click; it may import anything.

Modules: ``api``, ``apiserver``, ``autocmd``, ``autoopts``, ``backup``, ``campusfile``, ``client``,
``clockopt``, ``controller``, ``db``, ``exitcodes``, ``extras``, ``https``, ``lab``, ``labreport``,
``labshell``, ``lanecmd``, ``login``, ``logopts``, ``main``, ``openflow_options``, ``options``,
``osken``, ``pki``, ``serve``, ``services``, ``settingsload``, ``switch_causes``, ``topology``,
``transfer``.

Subpackages: ``config`` (the configuration file and ``viplanes config``), ``doctor`` (``viplanes
doctor`` and its checks).

Imports today: api, authz, auto, client, cluster, config, controller, dataplane, detection, domain,
errors, lab, lanes, lifecycle, logs, store, topologies. Never (.importlinter): tests.
"""
