"""Where sparc-local keeps its data. Every path is resolved here and nowhere else."""

from __future__ import annotations

import os
from pathlib import Path

ENV_HOME = "SPARC_LOCAL_HOME"


def user_dir(create: bool = True) -> Path:
    """The data dir: $SPARC_LOCAL_HOME, else the platform's app-data dir.

    Created 0700 because it holds private text extracted from the user's files.
    """
    env = os.environ.get(ENV_HOME)
    if env:
        path = Path(env).expanduser()
    else:
        from platformdirs import user_data_dir

        path = Path(user_data_dir("sparc-local", appauthor=False))
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def db_path() -> Path:
    return user_dir() / "index.db"


def models_dir() -> Path:
    """Adapted model versions live here (the shipped model stays inside the package)."""
    path = user_dir() / "models"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
