"""Nothing leaves the machine, and what the user deletes is gone from the database file."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli import app

runner = CliRunner()
SECRET = "Zanzibar treasury passphrase"


pytestmark = pytest.mark.usefixtures("active_tiny")


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "private").mkdir(parents=True)
    (root / "notes.txt").write_text("The river bridge was built in one year.\n")
    (root / "private" / "secret.txt").write_text(f"The {SECRET} is kept in the green book.\n")
    return root


def test_no_network_socket_is_opened(docs: Path, monkeypatch):
    """index, ask, status and eval run with socket creation made impossible."""

    def refuse(*args, **kwargs):
        raise AssertionError("sparc-local tried to open a network socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for args in (["index", str(docs), "-q"], ["ask", "river bridge", "--json"], ["status", "--json"]):
        result = runner.invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    networking = {"requests", "urllib3", "httpx", "huggingface_hub", "http.client", "aiohttp"}
    assert not networking & set(sys.modules) - _preloaded


_preloaded = set(sys.modules)  # modules pytest or plugins loaded before any sparc-local command ran


def test_forget_scrubs_text_from_database_file(docs: Path, sparc_home: Path):
    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    db = sparc_home / "index.db"
    raw = db.read_bytes() + Path(str(db) + "-wal").read_bytes() if Path(str(db) + "-wal").exists() else db.read_bytes()
    assert SECRET.encode() in raw

    result = runner.invoke(app, ["forget", str(docs / "private")])
    assert result.exit_code == 0
    assert result.output == (f"Forgot 1 files under {docs / 'private'}; "
                             f"`sparc-local index {docs / 'private'}` brings them back.\n")
    for f in sparc_home.iterdir():
        if f.name.startswith("index.db"):
            assert SECRET.encode() not in f.read_bytes(), f"secret text still in {f.name}"
    answers = json.loads(runner.invoke(app, ["ask", "green book passphrase", "--json"]).output)
    assert all("secret" not in a["path"] for a in answers)

    # a refresh keeps it forgotten; naming the path again brings it back
    assert runner.invoke(app, ["index", "-q"]).exit_code == 0
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["files"] == 1
    assert runner.invoke(app, ["index", str(docs / "private"), "-q"]).exit_code == 0
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["files"] == 2


def test_data_dir_and_database_modes(docs: Path, sparc_home: Path):
    runner.invoke(app, ["index", str(docs), "-q"])
    for f in sparc_home.iterdir():
        if f.name.startswith("index.db"):
            assert f.stat().st_mode & 0o077 == 0, f.name
