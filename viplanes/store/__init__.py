"""Where state is kept: tables, engine, records of people and grants, the lane SQL, migrations.

May import domain, policy, authz, topologies and ``viplanes.lanes.states`` (the lane state table,
which imports nothing of ours). Lane state changes only as that table says: the statements that
move a lane live in ``lanesql`` and take their states from it.
"""
