"""Nothing leaves the machine, and what the user deletes is gone from the database file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.index.segments import SCRUB_PENDING

runner = CliRunner()
SECRET = "Zanzibar treasury passphrase"


pytestmark = pytest.mark.usefixtures("active_tiny")


@pytest.fixture
def private_docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "private").mkdir(parents=True)
    (root / "notes.txt").write_text("The river bridge was built in one year.\n")
    (root / "private" / "secret.txt").write_text(f"The {SECRET} is kept in the green book.\n")
    return root


# Runs in a fresh interpreter, so sys.modules shows only what the commands themselves imported.
_CHILD = r"""
import json, os, socket, sys, time
from pathlib import Path
from tests.tiny import make_tiny_adapt_model

opened = []
def audit(event, args):
    if event == "socket.__new__":
        opened.append(int(args[1]))
    elif event in ("socket.connect", "socket.getaddrinfo", "socket.bind"):
        opened.append(event)
sys.addaudithook(audit)

def refuse(*args, **kwargs):
    raise AssertionError("sparc-local tried to open a network socket")
socket.socket = socket.create_connection = refuse

from typer.testing import CliRunner
from sparc_local import power
from sparc_local.cli.app import app
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.watch.config import WatchConfig
from sparc_local.watch.watcher import Watcher

home, private_docs = Path(os.environ["SPARC_LOCAL_HOME"]), Path(sys.argv[1])
# as tests/conftest.py does in the test process: the commands keep this process's priority
power.lower = lambda: power.Priority(os.getpriority(os.PRIO_PROCESS, 0), None, "unchanged (tests)")
model = make_tiny_adapt_model(home.parent / "model")
(home / "active-model").write_text(str(model.path))
runner = CliRunner()
codes = {}
for args in (["index", str(private_docs), "-q"], ["ask", "river bridge", "--json"], ["status", "--json"],
             ["adapt", "--steps", "3", "-q"], ["ask", "river bridge", "--json"], ["adapt", "--revert", "-q"]):
    result = runner.invoke(app, args, catch_exceptions=False)
    codes[" ".join(args[:2])] = result.exit_code
info = ModelInfo.load(model.path)
w = Watcher([str(private_docs)], info, lambda: Encoder(info, threads=1), WatchConfig(quiet_period=0.1, max_delay=1.0))
w.start(timeout=60)
(private_docs / "new.txt").write_text("The ferry leaves at noon.\n")
time.sleep(1.5)
w.stop(timeout=60)
codes["watch"] = w.status().last_error
net = {"requests", "urllib3", "httpx", "huggingface_hub", "http.client", "aiohttp"}
print(json.dumps({"codes": codes, "sockets": opened, "network_modules": sorted(net & set(sys.modules))}))
"""


def test_no_network_socket_is_opened(private_docs: Path, sparc_home: Path):
    """index, ask, status, adapt and watch run with socket creation made impossible, and an audit
    hook records any socket a C extension might open behind Python's back."""
    for i in range(120):  # adapt needs a corpus of 100+ sentences
        (private_docs / f"filler{i}.txt").write_text(f"The bridge number {i} was painted in a year of music.\n")
    out = subprocess.run([sys.executable, "-c", _CHILD, str(private_docs)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=600,
                         env={**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)})
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"codes": {"index " + str(private_docs): 0, "ask river bridge": 0, "status --json": 0,
                                "adapt --steps": 0, "adapt --revert": 0, "watch": None},
                      "sockets": [], "network_modules": []}


def test_forget_scrubs_text_from_database_file(private_docs: Path, sparc_home: Path):
    assert runner.invoke(app, ["index", str(private_docs), "-q"]).exit_code == 0
    db = sparc_home / "index.db"
    raw = db.read_bytes() + Path(str(db) + "-wal").read_bytes() if Path(str(db) + "-wal").exists() else db.read_bytes()
    assert SECRET.encode() in raw

    result = runner.invoke(app, ["forget", str(private_docs / "private")])
    assert result.exit_code == 0
    assert result.output == (f"Forgot 1 file under {private_docs / 'private'}; "
                             f"`sparc-local index {private_docs / 'private'}` brings it back.\n")
    for f in sparc_home.iterdir():
        if f.name.startswith("index.db"):
            assert SECRET.encode() not in f.read_bytes(), f"secret text still in {f.name}"
    answers = json.loads(runner.invoke(app, ["ask", "green book passphrase", "--json"]).output)
    assert all("secret" not in a["path"] for a in answers)

    # a refresh keeps it forgotten; naming the path again brings it back
    assert runner.invoke(app, ["index", "-q"]).exit_code == 0
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["files"] == 1
    assert runner.invoke(app, ["index", str(private_docs / "private"), "-q"]).exit_code == 0
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["files"] == 2


def test_forget_while_a_reader_holds_the_wal_scrubs_at_the_next_index(private_docs: Path, sparc_home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """A reader (an `ask` in progress) holding old WAL frames keeps the scrub from emptying the
    WAL: `forget` says so, the text is out of every table at once, and the next `index` run
    finishes the scrub. The WAL checkpoint waits out the busy timeout before it gives up: 0.5 s
    here instead of the default 5 s (the reader holds its frames for as long as the test likes)."""
    import contextlib
    import sqlite3

    from sparc_local.index.db import Database

    monkeypatch.setitem(Database.__init__.__kwdefaults__, "busy_timeout_ms", 500)

    def raw() -> bytes:
        return b"".join(f.read_bytes() for f in sparc_home.iterdir() if f.name.startswith("index.db"))

    assert runner.invoke(app, ["index", str(private_docs), "-q"]).exit_code == 0
    db = sparc_home / "index.db"
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sentences").fetchone()  # a snapshot from before the forget
        result = runner.invoke(app, ["forget", str(private_docs / "private")])
        assert result.exit_code == 0
        assert result.output == (
            f"Forgot 1 file under {private_docs / 'private'}; `sparc-local index {private_docs / 'private'}` brings it back.\n"
            "Note: another program was reading the index, so the forgotten text stays in unused space of the "
            "database file until the next `sparc-local index` or `forget`.\n")
        assert SECRET.encode() in raw()  # in the old frames the reader still needs
        with contextlib.closing(sqlite3.connect(db)) as check:
            assert check.execute("SELECT count(*) FROM sentences WHERE text LIKE ?",
                                 (f"%{SECRET}%",)).fetchone()[0] == 0
            assert check.execute("SELECT value FROM meta WHERE key = ?", (SCRUB_PENDING,)).fetchone() == ("1",)
        reader.execute("COMMIT")
        assert runner.invoke(app, ["index", "-q"]).exit_code == 0
        assert reader.execute("SELECT value FROM meta WHERE key = ?", (SCRUB_PENDING,)).fetchone() is None
        assert SECRET.encode() not in raw()
    finally:
        reader.close()


def test_data_dir_and_database_modes(private_docs: Path, sparc_home: Path):
    result = runner.invoke(app, ["index", str(private_docs), "-q"])
    assert (result.exit_code, result.output) == (0, "")
    for f in sparc_home.iterdir():
        if f.name.startswith("index.db"):
            assert f.stat().st_mode & 0o077 == 0, f.name
