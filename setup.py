"""Packages and package data for ``pip install .`` / ``pipx install .`` (metadata is in pyproject.toml).

The repository's ``matrices/`` folder stays where contributors edit it; the installed package gets
it as ``preflight/_matrices`` (the same path the zipapp uses, so :mod:`preflight.matrix` finds it
either way). The published report schema ``preflight/schema/*.json`` is package data too.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["preflight", "preflight.*"]) + ["preflight._matrices", "preflight.schema"],
    package_dir={"preflight._matrices": "matrices"},
    package_data={
        "preflight._matrices": ["*.toml", "*.md", "*.json", "metadata/*.json", "verl_config/*.json", "verl_config/*/*.json",
                                "verl_config/*/*.yaml", "verl_config/*/*/*.yaml"],
        "preflight.schema": ["*.json"],
    },
    include_package_data=False,
)
