"""setuptools' dynamic part: the packages are every folder with an ``__init__.py`` under the ``package-dir`` mapping
of pyproject.toml, found at build time, so a new subpackage reaches the wheel without a list to keep up to date."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent


def mapped_packages() -> list[str]:
    """Each mapped package and every package below its folder, with the mapped name as prefix."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    packages: list[str] = []
    for name, folder in mapping.items():
        packages += [name, *(f"{name}.{sub}" for sub in find_packages(str(ROOT / folder)))]
    return packages


setup(packages=mapped_packages())
