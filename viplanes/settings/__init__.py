"""The settings of a process: ``table.py`` names every ``VIPLANES_*`` variable with its type,
bounds and default; ``parse.py`` is the one grammar (booleans: true/false, 1/0, yes/no, on/off,
any case) and the one error; ``environ.py`` reads the environment once into a typed
:class:`Settings`.

Modules: ``environ``, ``parse``, ``table``.

Imports today: nothing of ours (the standard library only); everything else may import it.
"""

from viplanes.settings.environ import DEFAULTS, Settings
from viplanes.settings.parse import SettingError
from viplanes.settings.table import CONFIG_ENV, ENV_SETTINGS, EnvSetting

__all__ = ["CONFIG_ENV", "DEFAULTS", "ENV_SETTINGS", "EnvSetting", "SettingError", "Settings"]
