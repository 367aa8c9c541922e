"""The component folders mapped into the ``viplanes.*`` namespace; everything else is pyproject.toml.

pyproject.toml cannot compute this list: each folder (api, authz, ...) is installed as
``viplanes.<name>`` with ``package_dir``, so nothing generic like ``api`` lands in site-packages,
and every package below it must be named (a hand-kept list once left viplanes.cli out of the wheel).
"""

from setuptools import find_packages, setup

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
            for sub in ["", *find_packages(folder)]
        ),
    ],
    package_dir={"viplanes": "viplanes", **COMPONENTS},
)
