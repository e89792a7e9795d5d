"""A full disk under the index: a clear error, and the index stays intact and searchable.

The disk is a real one: a 2 MB tmpfs mounted by the test (we run as root in a container). Where
mounting is not permitted the test is skipped, saying so.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app

pytestmark = pytest.mark.usefixtures("active_tiny")


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def small_disk(tmp_path: Path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_is_a_clear_error_and_the_index_stays_intact(tmp_path: Path, small_disk: Path,
                                                                sparc_home: Path, monkeypatch: pytest.MonkeyPatch):
    home = small_disk / "home"
    home.mkdir()
    (home / "active-model").write_text((sparc_home / "active-model").read_text())
    monkeypatch.setenv("SPARC_LOCAL_HOME", str(home))
    first = tmp_path / "first"
    first.mkdir()
    (first / "tea.txt").write_text("Green tea should steep for three minutes.\n")
    (first / "city.txt").write_text("Paris is the capital of France.\n")
    assert run("index", str(first), "-q").exit_code == 0

    big = tmp_path / "big"  # ~4 MB of text: more than the disk holds once indexed
    big.mkdir()
    rng = random.Random(3)
    words = "river bridge tower museum ticket bread oven piano school book king war train station".split()
    for i in range(40):
        (big / f"doc{i:02d}.txt").write_text("\n\n".join(
            " ".join(rng.choice(words) for _ in range(12)).capitalize() + f" {i} {j}." for j in range(800)))
    result = run("index", str(big), "-q")
    assert result.exit_code == 1
    db = home / "index.db"
    assert result.output == (f"Error: the disk holding the index is full ({home})\n"
                             "Free some disk space and run `sparc-local index` again: "
                             "the files indexed so far are kept.\n")

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    answers = json.loads(run("ask", "green tea steep", "--json", "-k", "1").output)
    assert answers[0]["sentence"] == "Green tea should steep for three minutes."
    assert answers[0]["path"] == str(first / "tea.txt")
    assert json.loads(run("ask", "capital of france", "--json", "-k", "1").output)[0]["path"] == str(first / "city.txt")
    st = json.loads(run("status", "--json").output)
    from sparc_local.index.store import Index

    with Index(db) as idx:
        assert idx.verify() == []
        ok = {f.path: f.n_sentences for f in idx.all_files() if f.status == "ok"}
    assert ok[str(first / "tea.txt")] == 1 and ok[str(first / "city.txt")] == 1
    # every file the index holds is whole: all its sentences are there (no half-written batch)
    assert all(n > 0 for n in ok.values()) and st["errors"] == []
