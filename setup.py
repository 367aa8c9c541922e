"""One distribution, ``viplanes``; the component folders map into the ``viplanes.*`` namespace."""

import re
from pathlib import Path

from setuptools import find_packages, setup

# the version lives in one place, viplanes/__init__.py (`viplanes --version` reads the installed metadata)
VERSION = re.search(
    r'^__version__ = "([^"]+)"', Path(__file__).with_name("viplanes").joinpath("__init__.py").read_text(), re.M
)
assert VERSION is not None, "viplanes/__init__.py has no __version__"

COMPONENTS = {
    "viplanes.topologies": "topologies",
    "viplanes.policy": "policy",
    "viplanes.authz": "authz",
    "viplanes.controller": "controller",
    "viplanes.api": "api",
}

CLIENT = [
    "click>=8.1",
    "rich>=13.0",
    "requests>=2.31",
]
SERVER = [
    "os-ken>=4.2",
    "flask>=3.0",
    "flask-smorest>=0.44",
    "marshmallow>=3.20",
    "sqlalchemy>=2.0",
    "alembic>=1.13",
    "cheroot>=11.1,<12",  # the API server, TLS included (viplanes/cli/apiserver.py)
    "psycopg2-binary>=2.9",
    "pyyaml>=6.0",
    "networkx>=3.0",
    "cryptography>=38.0",
    "prometheus-client>=0.19",
    "Authlib>=1.6",  # OpenID Connect; its JOSE layer joserfc verifies provider JWTs (authz/oidc.py)
    "joserfc>=1.0",
    "dnspython>=2.6",  # lane dst_host: A/AAAA with their TTLs (viplanes/lanes/resolver.py)
]
LAB = [
    "matplotlib>=3.7",  # the lab's and the benchmarks' plots; Mininet itself comes from apt (scripts/setup.sh)
]
DEV = [
    "pytest>=8",
    "pytest-timeout>=2.3",  # pytest.ini: a hung test fails with its name, never a stuck run
    "hypothesis>=6.90",
    "schemathesis>=3.25",
    "py-spy>=0.3",
    "selenium>=4.20",
    "import-linter>=2.0",
    "mypy>=1.8",
    # scripts/lint; the tree is formatted by 0.17.6, and the formatter's style may change
    # with a minor version, which would fail `ruff format --check`
    "ruff>=0.17.6,<0.18",
]

setup(
    name="viplanes",
    version=VERSION.group(1),
    description="SDN VIP lanes: pre-authorized big-data flows that bypass campus middleboxes",
    python_requires=">=3.11",
    # every package under viplanes/ and under each component folder: a hand-kept list left
    # viplanes.cli out of the wheel (a non-editable install had no `viplanes` command)
    packages=[
        *find_packages(include=["viplanes", "viplanes.*"]),
        *(
            f"{name}.{sub}" if sub else name
            for name, folder in COMPONENTS.items()
            for sub in ["", *find_packages(folder)]
        ),
    ],
    package_dir={"viplanes": "viplanes", **COMPONENTS},
    package_data={
        "viplanes.topologies": ["*.yaml"],
        "viplanes.store.migrations": ["*.ini", "*.mako"],
        "viplanes.api.ui": ["templates/ui/*.html", "static/*"],
    },
    # the base install is the client: the CLI's API commands and `viplanes transfer` (CLIENT);
    # server and lab commands say which extra they need when it is missing (viplanes/cli/extras.py)
    install_requires=CLIENT,
    extras_require={
        "client": [],
        "server": SERVER,
        "lab": [*SERVER, *LAB],
        "dev": [*SERVER, *LAB, *DEV],
    },
    entry_points={"console_scripts": ["viplanes=viplanes.cli.main:main"]},
)
