"""Where state is kept: tables, engine, records of people and grants, the lane SQL, migrations.

May import domain, policy, authz, topologies and ``viplanes.lanes.states`` (the lane state table,
which imports nothing of ours). Lane state changes only as that table says: the statements that
move a lane live in ``lanesql`` and take their states from it.

Modules: ``backup``, ``backupcheck``, ``db``, ``filemode``, ``identities``, ``memberships``,
``models``, ``pgconnect``, ``ratelimit``, ``records``, ``retention``, ``sqlite_wal``,
``writeprobe``.

Subpackages: ``lanesql``.

Imports today: authz, domain, errors, lanes, policy, privatefile, topologies. Never (.importlinter):
click, tests, api, cli, cluster, controller, dataplane, lanes.
"""
