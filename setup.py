"""The wheel's packages: every package under sparc_local/, found rather than listed (a new one
cannot miss the wheel), and the shipped model folder, which lives at the top level
(exported_models/) and installs as sparc_local.models (pyproject.toml maps it). pyproject.toml
cannot say both: its `packages.find` sees only folders, and sparc_local/models is not one.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["sparc_local", "sparc_local.*"]), "sparc_local.models"])
