"""The lane service: the manager that moves lanes through their states, and its helpers.

Request checks (targets, overlap, names, pool addresses), activation against a data plane and the
lifecycle clock. The manager builds its parts (activation, reads, admission) from one
``context.LaneContext``; its neighbours take a ``desk.LaneDesk``. May import domain, dataplane.base, store, policy, authz and topologies; never the
controller, the API or an entry point.

Modules: ``activation``, ``admit``, ``budgets``, ``build``, ``committed``, ``context``, ``desk``,
``extension``, ``features``, ``idempotency``, ``interruptions``, ``manager``, ``membersweep``,
``names``, ``outcomes``, ``overlap``, ``owners``, ``pool``, ``reads``, ``refusals``, ``requests``,
``resolver``, ``scheduler``, ``specs``, ``states``, ``targets``.

Imports today: authz, config, controller, dataplane, domain, errors, logs, policy, store, topologies.
Never (.importlinter): click, tests, api, cli.
"""
