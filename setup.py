"""One distribution, ``viplanes``; the component folders map into the ``viplanes.*`` namespace."""

from setuptools import find_packages, setup

COMPONENTS = {
    "viplanes.topologies": "topologies",
    "viplanes.policy": "policy",
    "viplanes.authz": "authz",
    "viplanes.controller": "controller",
    "viplanes.api": "api",
}

setup(
    name="viplanes",
    version="0.1.0",
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
    install_requires=[
        "os-ken>=4.2",
        "flask>=3.0",
        "flask-smorest>=0.44",
        "marshmallow>=3.20",
        "sqlalchemy>=2.0",
        "alembic>=1.13",
        "waitress>=3.0",
        "psycopg2-binary>=2.9",
        "pyyaml>=6.0",
        "networkx>=3.0",
        "click>=8.1",
        "rich>=13.0",
        "cryptography>=38.0",
        "matplotlib>=3.7",
        "prometheus-client>=0.19",
        "requests>=2.31",
        "Authlib>=1.6",  # OpenID Connect; its JOSE layer joserfc verifies provider JWTs (authz/oidc.py)
        "joserfc>=1.0",
        "dnspython>=2.6",  # lane dst_host: A/AAAA with their TTLs (viplanes/lanes/resolver.py)
    ],
    extras_require={
        "dev": [
            "pytest>=8",
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
    },
    entry_points={"console_scripts": ["viplanes=viplanes.cli.main:main"]},
)
