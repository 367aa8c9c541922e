"""The API's HTTP client (``http``) and how ``viplanes transfer`` finds a command's destination.

Imports only ``domain`` and ``config``: a researcher's machine needs nothing else.

Modules: ``diagnose``, ``http``, ``login``, ``targets``.

Imports today: config, domain. Never (.importlinter): click, tests, api, cli.
"""
