"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def sparc_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point SPARC_LOCAL_HOME at a fresh temp dir so no test reads or writes the real home."""
    home = tmp_path_factory.mktemp("sparc_home")
    monkeypatch.setenv("SPARC_LOCAL_HOME", str(home))
    return home
