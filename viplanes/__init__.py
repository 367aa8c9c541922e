"""VIP Lanes: pre-authorized big-data flows steered around campus middleboxes.

Modules: ``config``, ``errors``, ``lifecycle``, ``logs``, ``privatefile``, ``settings``.

Subpackages: ``auto``, ``cli``, ``client``, ``cluster``, ``dataplane``, ``detection``, ``domain``,
``lab``, ``lanes``, ``pki``, ``store``; and, from the repository's top-level folders (setup.py's
package_dir), ``topologies``, ``policy``, ``authz``, ``controller``, ``api``.

May import: each subpackage only downward, as the contracts in .importlinter say (drawn in
docs/architecture.md).
"""

__version__ = "0.1.0"
