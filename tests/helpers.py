"""Helpers of the tests that run a watcher, or the CLI as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sparc_local.index.store import Index


def wait_until(pred: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll pred until it holds; fail with `what` after timeout seconds."""
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"timed out waiting for: {what}"
        time.sleep(0.05)


def indexed_paths() -> set[str]:
    """The paths of the files in the index (read as `ask` reads it)."""
    with Index() as idx:
        return {f.path for f in idx.all_files()}


def cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`sparc-local ARGS` as a process of its own, on the data dir `home`."""
    return subprocess.run([sys.executable, "-m", "sparc_local", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "SPARC_LOCAL_HOME": str(home)})
