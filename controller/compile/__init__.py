"""Pure: a lane and the topology -> OpenFlow 1.3 messages as data (``datapath=None``), and the diff
of what a switch holds against what it should (``reconcile``). No threads, no sockets, no clock.

May import domain and topologies; never ``runtime`` or ``openflow``.

Modules: ``bands``, ``base``, ``budget``, ``checks``, ``conntrack``, ``cookies``, ``ctlane``,
``desired``, ``failover``, ``fastmatch``, ``flowkey``, ``groups``, ``hold``, ``hopflows``,
``hostguard``, ``lane``, ``lanediff``, ``linkprobe``, ``macguard``, ``moves``, ``ndguard``,
``path``, ``proxyarp``, ``reconcile``, ``removal``, ``repath``, ``shared``, ``takeover``, ``watch``.

Imports today: domain, topologies. Never (.importlinter): click, tests, api, authz, cli, client,
cluster, controller.openflow, controller.runtime, lab, lanes, policy, store.
"""
