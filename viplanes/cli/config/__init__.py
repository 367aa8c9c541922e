"""The configuration file and ``viplanes config``: one folder for what the file holds, how it is
read and checked, how its settings are shown, and the doc written from it (docs/configuration.md).

- ``file``: ``/etc/viplanes/viplanes.toml`` found, read and checked before any command runs.
- ``options``: the command tables, click options turned into keys and back.
- ``settings``: the env-var settings as the file shows them (secrets masked).
- ``command``: ``viplanes config show|check|keys``.
- ``doc``: docs/configuration.md, written from the options and settings.

Modules: ``command``, ``doc``, ``file``, ``options``, ``settings``.

Imports today: cli (main, settingsload), domain, settings. Never (.importlinter): tests, and of the
API only its factory.
"""
