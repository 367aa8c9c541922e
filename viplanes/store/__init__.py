"""Where state is kept: tables, engine, records of people and grants, the lane SQL, automation's
rows, migrations.

May import domain, policy, authz, topologies, ``viplanes.lanes.states`` (the lane state table,
which imports nothing of ours) and automation's pure policy types (``viplanes.auto.policy``,
``viplanes.auto.index``, for ``automation``). Lane state changes only as that table says: the
statements that move a lane live in ``lanesql`` and take their states from it.

Modules: ``automation``, ``backup``, ``backupcheck``, ``db``, ``filemode``, ``identities``,
``memberships``, ``models``, ``pgbegin``, ``pgconnect``, ``ratelimit``, ``records``, ``retention``,
``sqlite_wal``, ``writeprobe``.

Subpackages: ``lanesql``.

Imports today: auto (policy, index), authz, domain, errors, lanes, policy, privatefile, topologies.
Never (.importlinter): click, tests, api, cli, cluster, controller, dataplane, lanes; nor automation's
acceptor, services or wiring.
"""
