"""The component folders mapped into the ``viplanes.*`` namespace; everything else is pyproject.toml.

pyproject.toml cannot compute this list: each folder (api, authz, ...) is installed as
``viplanes.<name>`` with ``package_dir``, so nothing generic like ``api`` lands in site-packages,
and every package below it must be named (a hand-kept list once left viplanes.cli out of the wheel).
A component's folders of data only (the console's ``static`` and ``templates``) are named too:
setuptools warns that data in a folder outside ``packages`` will stop being installed.
"""

from setuptools import find_namespace_packages, find_packages, setup

COMPONENTS = {
    "viplanes.topologies": "topologies",
    "viplanes.policy": "policy",
    "viplanes.authz": "authz",
    "viplanes.controller": "controller",
    "viplanes.api": "api",
}

setup(
    packages=[
        *find_packages(include=["viplanes", "viplanes.*"]),
        *(
            f"{name}.{sub}" if sub else name
            for name, folder in COMPONENTS.items()
            for sub in ["", *find_namespace_packages(folder, exclude=["__pycache__", "*.__pycache__"])]
        ),
    ],
    package_dir={"viplanes": "viplanes", **COMPONENTS},
)
