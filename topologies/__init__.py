"""The campus model: YAML files, the loader/validator and lane path computation (networkx).
Imports nothing of ours; everything else may import it.

Modules: ``capcheck``, ``capfacts``, ``capfields``, ``fields``, ``hostfields``, ``loader``,
``model``, ``paths``, ``profiles``, ``sflowfields``, ``switchfields``, ``wanfields``, ``zones``.

Imports today: domain. Never (.importlinter): click, tests, api, authz, cli, client, cluster,
controller, dataplane, lab, lanes, policy, store.
"""
