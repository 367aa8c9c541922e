"""Where state is kept: tables, engine, records of people and grants, the lane SQL, migrations.

May import domain, policy, authz and topologies. Lane state itself changes only through the lane
service (``viplanes.lanes``); the statements it runs live in ``lanesql``.
"""
