"""Shared facts: lane specs, activation results, port masks, lane matches, HOST:PORT values, the
steady clock lane windows are judged on, and the rule a NAT watch's counters meet.

Pure values and functions, stdlib only. Imports nothing of ours: everything else may import it.

Modules: ``clock``, ``flowcost``, ``hostport``, ``inspection``, ``matches``, ``memberships``,
``natproof``, ``portmasks``, ``sighting``, ``switchfacts``, ``urls``, ``values``.

Imports today: nothing of ours. Never (.importlinter): click, tests, api, authz, cli, client, cluster,
config, controller, dataplane, lab, lanes, pki, policy, store, topologies.
"""
