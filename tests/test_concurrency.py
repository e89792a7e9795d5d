"""`ask` while `sparc-local index` writes: 1,000 questions, zero errors, never "database is locked".

A real `sparc-local index` subprocess writes batches (and merges) into the real SQLite index while
this process asks 1,000 questions through Asker (the CLI's query path), reopening the index every
10 questions, plus a few real `sparc-local ask` subprocesses. When an index run ends before the
questions do, the corpus is rewritten and another run starts, so every question overlaps a writer.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparc_local.index.store import Index
from sparc_local.model.info import active_model
from sparc_local.query.ask import Asker

CALLS = 1000
WORDS = "tea green river bridge tower paris museum ticket bread oven piano school book king war".split()


def _write_corpus(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(60):
        paras = [" ".join(rng.choice(WORDS) for _ in range(8)).capitalize() + f" {seed} {i} {j}." for j in range(40)]
        (root / f"doc{i:02d}.txt").write_text("\n\n".join(paras))


@pytest.mark.usefixtures("active_tiny")
def test_asks_during_index_runs(tmp_path: Path, sparc_home: Path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tea.txt").write_text("Green tea should steep for three minutes.\n")
    env = {**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)}
    cli = [sys.executable, "-m", "sparc_local"]
    assert subprocess.run(cli + ["index", str(corpus), "-q"], env=env).returncode == 0

    def start_index(seed: int) -> subprocess.Popen:
        _write_corpus(corpus, seed)
        # --normal-priority: a niced, idle-I/O writer waits behind this loop's busy asking (and any
        # other load) for minutes; the lock and snapshot rules it exercises are the same
        return subprocess.Popen(cli + ["index", str(corpus), "-q", "--threads", "1", "--normal-priority"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    info = active_model()
    rng = random.Random(0)
    errors: list[str] = []
    runs = 0
    proc = start_index(runs)
    clis: list[subprocess.Popen] = []
    t0 = time.perf_counter()
    idx = None
    done = 0
    seen_sizes: set[int] = set()  # sentence counts seen: they grow while we ask
    while done < CALLS or runs == 0:  # at least CALLS, and through one whole index run
        if proc.poll() is not None:
            out, err = proc.communicate()
            if proc.returncode != 0:
                errors.append(f"index exited {proc.returncode}: {err}")
            runs += 1
            if done < CALLS:
                proc = start_index(runs)
            continue
        if done % 10 == 0:
            if idx is not None:
                idx.close()
            idx = Index(sparc_home / "index.db")
            asker = Asker(idx, info)
            seen_sizes.add(idx.conn.execute("SELECT count(*) FROM sentences").fetchone()[0])
        if done % 200 == 0:  # a real `sparc-local ask` now and then
            clis.append(subprocess.Popen(cli + ["ask", "green tea steep", "--json"], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        try:
            answers = asker.ask("green tea " + " ".join(rng.sample(WORDS, 2)), k=5)
            if not answers:
                errors.append("no answer")
        except Exception as e:  # every failure counts
            errors.append(f"{type(e).__name__}: {e}")
        done += 1
    seconds = time.perf_counter() - t0
    if proc.returncode is None:  # a restarted run still going
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    idx.close()
    for p in clis:
        out, err = p.communicate(timeout=60)
        if p.returncode != 0 or '"sentence"' not in out:
            errors.append(f"sparc-local ask exited {p.returncode}: {err}")
    print(f"\n{done} asks + {len(clis)} CLI asks during {runs} index runs in {seconds:.1f}s: "
          f"{len(errors)} errors; {len(seen_sizes)} distinct index sizes seen")
    assert errors == []
    assert len(seen_sizes) >= 3  # the writer committed batches while we asked
    assert not any("locked" in e for e in errors)


def test_an_index_opened_while_another_connection_writes_it_waits_instead_of_failing(tmp_path: Path):
    """The watcher and an `ask` may open a new index at the same moment. SQLite refuses the switch
    to WAL at once, without the busy handler, while another connection holds a write lock (its
    deadlock rule): the opener waits for that write instead of failing with "database is locked"."""
    import sqlite3
    import threading

    path = tmp_path / "index.sqlite"
    first = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    first.execute("CREATE TABLE early (x)")  # a database still in the rollback journal's mode
    first.execute("BEGIN IMMEDIATE")
    first.execute("INSERT INTO early VALUES (1)")
    threading.Timer(0.3, first.execute, ["COMMIT"]).start()
    with Index(path) as idx:
        assert idx.encoded_counts() == (0, 0)
        assert idx.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    first.close()
