"""kill -9 during indexing and segment merges never corrupts or half-writes the index."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparc_local.store import Index

TRIALS = 20
# index with tiny batches, so a run writes dozens of segments and triggers tiered merges
INDEX_SCRIPT = """
import sys
from pathlib import Path
from sparc_local.encode import Encoder
from sparc_local.indexer import run_index
from sparc_local.modelinfo import ModelInfo
from sparc_local.store import Index
info = ModelInfo.load(Path(sys.argv[2]))
with Index(Path(sys.argv[3])) as idx:
    run_index(idx, [sys.argv[1]], info, lambda: Encoder(info, threads=1), batch_sentences=4,
              on_progress=lambda files, sentences: print("batch", flush=True))
    idx.merge_all()
"""


def _corpus(root: Path) -> None:
    rng = random.Random(7)
    words = "tea green river bridge tower paris museum ticket bread oven piano school book king war".split()
    for i in range(100):
        sentences = [" ".join(rng.choice(words) for _ in range(6)).capitalize() + "." for _ in range(rng.randint(2, 6))]
        (root / f"doc{i:02d}.txt").write_text(" ".join(sentences) + "\n")


def _content(db: Path) -> tuple[set, dict]:
    """Live sentences by (path, position text) and postings keyed by content, not by ids."""
    with Index(db) as idx:
        rows = idx.conn.execute(
            "SELECT s.id, f.path, s.text, s.char_start FROM sentences s JOIN files f ON f.id = s.file_id"
            " WHERE s.id NOT IN (SELECT sentence_id FROM tombstones)").fetchall()
        key = {r[0]: (r[1], r[2], r[3]) for r in rows}
        postings: dict = {}
        dead = set(idx.tombstones().tolist())
        tokens = [r[0] for r in idx.conn.execute("SELECT DISTINCT token_id FROM postings")]
        for tok, ids, weights in idx.postings(tokens):
            for i, w in zip(ids.tolist(), weights.tolist()):
                if i not in dead:
                    postings[(tok, key[i])] = w
    return set(key.values()), postings


def _check_consistent(db: Path) -> None:
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with Index(db) as idx:
        assert idx.verify() == []
        c = idx.conn
        # no file half-indexed: every ok file has exactly its recorded number of live sentences
        bad = c.execute(
            "SELECT f.path, f.n_sentences, count(s.id) FROM files f LEFT JOIN sentences s ON s.file_id = f.id"
            " AND s.id NOT IN (SELECT sentence_id FROM tombstones) WHERE f.status = 'ok'"
            " GROUP BY f.id HAVING count(s.id) != f.n_sentences").fetchall()
        assert bad == []
        # no orphan: a sentence without a file is tombstoned; no duplicated sentence of a file
        assert c.execute("SELECT count(*) FROM sentences WHERE file_id IS NULL"
                         " AND id NOT IN (SELECT sentence_id FROM tombstones)").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM (SELECT file_id, char_start FROM sentences"
                         " WHERE id NOT IN (SELECT sentence_id FROM tombstones)"
                         " GROUP BY file_id, char_start HAVING count(*) > 1)").fetchone()[0] == 0


@pytest.mark.parametrize("seed", [0])
def test_kill_during_index_and_merge(tmp_path: Path, tiny_model_dir: Path, seed: int):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _corpus(corpus)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def run(db: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", INDEX_SCRIPT, str(corpus), str(tiny_model_dir), str(db)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    ref_db = tmp_path / "ref.db"
    proc = run(ref_db)
    n_batches = proc.stdout.read().count("batch")
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    _check_consistent(ref_db)
    reference = _content(ref_db)
    assert len(reference[0]) > 100 and n_batches > 20

    # kill after a random number of committed batches plus a random delay, so kills land inside
    # encoding, inside write transactions and inside the merges that follow some of them
    rng = random.Random(seed)
    killed_mid_run = 0
    segments_at_kill = []
    for trial in range(TRIALS):
        db = tmp_path / f"trial{trial}.db"
        proc = run(db)
        target = rng.randint(1, n_batches - 3)
        for _ in range(target):
            proc.stdout.readline()
        time.sleep(rng.uniform(0, 0.02))
        proc.send_signal(signal.SIGKILL)
        killed_mid_run += proc.wait() == -signal.SIGKILL
        _check_consistent(db)
        with Index(db) as idx:
            segments_at_kill.append(len(idx.segments()))
        done = run(db)  # a rerun completes...
        done.stdout.read()
        assert done.wait(timeout=120) == 0, done.stderr.read()
        _check_consistent(db)
        assert _content(db) == reference  # ...and equals the uninterrupted build
    assert killed_mid_run == TRIALS
    print(f"\n{TRIALS} kills after 1..{n_batches - 3} of {n_batches} batches; "
          f"segments at kill: {segments_at_kill}")


MERGE_SCRIPT = """
import sys, time
from pathlib import Path
from sparc_local.store import Index
with Index(Path(sys.argv[1])) as idx:
    print("start", flush=True)
    t0 = time.perf_counter()
    idx.merge_all()
    print(time.perf_counter() - t0, flush=True)
"""
UNMERGED_SCRIPT = INDEX_SCRIPT.replace("    idx.merge_all()\n", "").replace(
    "run_index(", "idx.maybe_merge = lambda *a, **k: 0\n    run_index(")


def test_kill_during_segment_merge(tmp_path: Path, tiny_model_dir: Path):
    """A database of ~100 segments is merged by a process killed at random points; each time the
    index stays consistent, and a rerun of the merge yields exactly the uninterrupted result."""
    import shutil

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _corpus(corpus)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    base = tmp_path / "base.db"
    build = subprocess.run([sys.executable, "-c", UNMERGED_SCRIPT, str(corpus), str(tiny_model_dir), str(base)],
                           env=env, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    with Index(base) as idx:
        n_segments = len(idx.segments())
        idx.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert n_segments > 50
    reference = _content(base)

    def merge(db: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", MERGE_SCRIPT, str(db)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    probe = tmp_path / "probe.db"
    shutil.copyfile(base, probe)
    proc = merge(probe)
    out = proc.stdout.read().split()
    assert proc.wait(timeout=120) == 0
    duration = float(out[-1])  # the merge itself, without interpreter start-up

    rng = random.Random(1)
    mid = 0
    for trial in range(TRIALS):
        db = tmp_path / f"m{trial}.db"
        shutil.copyfile(base, db)
        proc = merge(db)
        assert proc.stdout.readline().strip() == "start"  # the merge transaction begins now
        time.sleep(rng.uniform(0, 0.9 * duration))
        proc.send_signal(signal.SIGKILL)
        mid += proc.wait() == -signal.SIGKILL
        _check_consistent(db)
        assert _content(db) == reference  # killed or not, the live content never changes
        again = merge(db)
        again.stdout.read()
        assert again.wait(timeout=120) == 0
        with Index(db) as idx:
            assert len(idx.segments()) == 1 and len(idx.tombstones()) == 0
        assert _content(db) == reference
    assert mid >= TRIALS // 2
    print(f"\n{TRIALS} kills during a {duration:.2f}s merge of {n_segments} segments; {mid} mid-merge")
