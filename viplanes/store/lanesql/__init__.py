"""The SQL of the lane hot path, one module per dialect.

``core``: SQLAlchemy Core statements every database runs; ``postgres``: the same change as one
statement; ``gather``: a PostgreSQL request's locks and reads as one message; ``sqlite``: the hot
statements on SQLite's own cursor; ``prepared``: server-side prepared statements for psycopg2.
Imports only ``store.models``, ``policy`` and ``lanes.states``, whose table every state in these
statements comes from.

Modules: ``core``, ``gather``, ``postgres``, ``prepared``, ``sqlite``.

Imports today: lanes, policy. Never (.importlinter): click, tests, api, cli, cluster, controller,
dataplane, lanes.
"""
