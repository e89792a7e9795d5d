"""Where sparc-local keeps its data. Every path is resolved here and nowhere else."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from sparc_local.errors import DataDirUnusable

ENV_HOME = "SPARC_LOCAL_HOME"
STORE_ENV = "SPARC_LOCAL_STORE"  # a Milvus store beside the index: milvus://HOST:PORT/COLLECTION or FILE.db[#COLLECTION]
DEMO_DIR = "demo"  # `demo`'s own data dir, inside the user's

_home: Path | None = None  # set by ``using``: the data dir of this process for a while


@contextlib.contextmanager
def using(folder: Path) -> Iterator[Path]:
    """Every path of this module resolves in ``folder`` until the block ends: `demo` keeps its own
    index and model pointer there, and the user's data dir (and the environment) stay untouched."""
    global _home
    saved, _home = _home, Path(folder)
    try:
        yield _home
    finally:
        _home = saved


def user_dir(create: bool = True) -> Path:
    """The data dir: the folder of ``using``, else $SPARC_LOCAL_HOME, else the platform's app-data dir.

    Created 0700 because it holds private text extracted from the user's files. Raises
    DataDirUnusable when it is a file, cannot be created, or is not readable and writable by us.
    """
    env = os.environ.get(ENV_HOME)
    if _home is not None:
        path = _home
    elif env:
        path = Path(env).expanduser()
    else:
        from platformdirs import user_data_dir

        path = Path(user_data_dir("sparc-local", appauthor=False))
    if create:
        remedy = f"Make it a folder you can read and write, or set {ENV_HOME} to another folder."
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except FileExistsError:
            raise DataDirUnusable(f"the data folder {path} is a file, not a folder", remedy) from None
        except OSError as err:
            raise DataDirUnusable(f"cannot create the data folder {path} ({err.strerror})", remedy) from err
        # one syscall: without it, a folder without permissions fails later in sqlite or the lock
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise DataDirUnusable(f"the data folder {path} is not readable and writable by you", remedy)
    return path


def db_path() -> Path:
    return user_dir() / "index.db"


def models_dir() -> Path:
    """Adapted model versions live here (the shipped model stays inside the package)."""
    path = user_dir() / "models"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def demo_dir() -> Path:
    """The data dir `demo` works in (with ``using``), so the user's index never holds the samples."""
    return user_dir() / DEMO_DIR


def is_under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or lies below it, by whole components (/a/bc is not under /a/b)."""
    return path == prefix or path.startswith(prefix.rstrip(os.sep) + os.sep)
