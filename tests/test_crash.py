"""kill -9 during indexing and segment merges never corrupts or half-writes the index."""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparc_local.index.store import Index
from tests.crash_index import index_and_merge
from tests.forkserver import ForkServer

TRIALS = 20
# tests/crash_index.py's run, printing "batch" at each committed batch
INDEX_SCRIPT = """
import sys
from tests.crash_index import index_and_merge
committed = [0]
def on_progress(p):
    if p.batches != committed[0]:  # a batch was committed
        committed[0] = p.batches
        print("batch", flush=True)
index_and_merge(*sys.argv[1:4], on_progress=on_progress)
"""


# what the killed runs import, once, in the fork server (tests/forkserver.py)
IMPORTS = ("from sparc_local.model.runtime import onnxruntime; onnxruntime(); import numpy, tokenizers; "
           "import sparc_local.pipeline, sparc_local.model.encoder, sparc_local.ingest.extract, sparc_local.forget, "
           "sparc_local.index.store, tests.crash_index")


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """One interpreter that has imported sparc_local and forks each run the tests kill."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "SPARC_LOCAL_HOME": str(tmp_path_factory.mktemp("crash_home"))}
    with ForkServer(IMPORTS, env=env) as server:
        yield server


def _corpus(root: Path, n_files: int = 100) -> None:
    rng = random.Random(7)
    words = "tea green river bridge tower paris museum ticket bread oven piano school book king war".split()
    for i in range(n_files):
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
def test_kill_during_index_and_merge(tmp_path: Path, tiny_model_dir: Path, seed: int, forks: ForkServer):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _corpus(corpus, n_files=50)  # ~290 sentences: ~70 batches of 4

    def run(db: Path):
        return forks.run(INDEX_SCRIPT, str(corpus), str(tiny_model_dir), str(db), stderr=tmp_path / "stderr")

    ref_db = tmp_path / "ref.db"
    proc = run(ref_db)
    n_batches = proc.read().count("batch")
    assert proc.wait(timeout=120) == 0, proc.stderr()
    _check_consistent(ref_db)
    reference = _content(ref_db)
    assert len(reference[0]) > 100 and n_batches > 20

    # kill after a random number of committed batches plus a random delay, so kills land inside
    # the storing pass, encoding, write transactions and the merges that follow some of them
    rng = random.Random(seed)
    killed_mid_run = 0
    segments_at_kill = []
    phases = set()  # progressive indexing: stored (text and BM25 postings), then encoded
    for trial in range(TRIALS):
        db = tmp_path / f"trial{trial}.db"
        proc = run(db)
        target = rng.randint(1, n_batches - 3)
        for _ in range(target):
            proc.readline()
        time.sleep(rng.uniform(0, 0.02))
        proc.kill()
        killed_mid_run += proc.wait() == -signal.SIGKILL
        _check_consistent(db)
        with Index(db) as idx:
            segments_at_kill.append(len(idx.segments()))
            encoded, total = idx.encoded_counts()
            phases.add("storing" if encoded == 0 else "encoding" if encoded < total else "finishing")
        index_and_merge(str(corpus), str(tiny_model_dir), str(db))  # a rerun (here, no process start-up) completes...
        _check_consistent(db)
        assert _content(db) == reference  # ...and equals the uninterrupted build
    assert killed_mid_run == TRIALS
    assert {"storing", "encoding"} <= phases, phases  # kills landed in both passes
    print(f"\n{TRIALS} kills after 1..{n_batches - 3} of {n_batches} batches; "
          f"segments at kill: {segments_at_kill}")


# `forget` with fault injection: the connection kills its own process (kill -9) just before its
# n-th SQL statement (n = 0: never), and prints each statement's first words as it runs it
FORGET_SCRIPT = """
import os, signal, sys
from sparc_local.forget import forget
from sparc_local.index.store import Index

class KillBefore:
    def __init__(self, conn, n):
        self._conn, self._n, self._count = conn, n, 0
    def _step(self, sql):
        self._count += 1
        if self._count == self._n:
            os.kill(os.getpid(), signal.SIGKILL)
        print(" ".join(sql.split()[:3]), flush=True)
    def execute(self, sql, *args):
        self._step(sql)
        return self._conn.execute(sql, *args)
    def executemany(self, sql, *args):
        self._step(sql)
        return self._conn.executemany(sql, *args)
    def executescript(self, sql):
        self._step(sql)
        return self._conn.executescript(sql)
    def __getattr__(self, name):
        return getattr(self._conn, name)

idx = Index(sys.argv[1])
idx._conn = KillBefore(idx._conn, int(sys.argv[3]))
forget(idx, sys.argv[2])
idx.close()
"""
SECRET = "Zanzibar vault passphrase"


def _db_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


def test_kill_during_forget(tmp_path: Path, tiny_model_dir: Path, forks: ForkServer):
    """`forget` of an indexed folder, killed just before each of its SQL statements in turn: the
    index is consistent and holds either the folder, untouched, or nothing of it (no root, no
    file, no text row) and remembers it as forgotten, never a mix that the next `index` would
    re-add. The user's next command (a plain `index`, or `forget` again if nothing was
    forgotten) leaves the folder forgotten and its text gone from the database files."""
    import shutil

    from sparc_local.forget import forget
    from sparc_local.model.encoder import Encoder
    from sparc_local.model.info import ModelInfo
    from sparc_local.pipeline import run_index
    from sparc_local.query.pathfilter import is_under

    docs, private = tmp_path / "docs", tmp_path / "private"
    docs.mkdir()
    private.mkdir()
    _corpus(docs)
    for i in range(3):
        (private / f"p{i}.txt").write_text(f"The {SECRET} number {i} is in the green book. Keep it safe.\n")
    info = ModelInfo.load(tiny_model_dir)
    encoder = lambda: Encoder(info, threads=1)
    base = tmp_path / "base.db"
    with Index(base) as idx:
        run_index(idx, [str(docs), str(private)], info, encoder)
        roots = idx.roots()
        assert roots == [str(docs), str(private)]
    before = _content(base)

    def run(db: Path, kill_at: int) -> tuple[int, str, str]:
        """The exit code, stdout and stderr of FORGET_SCRIPT on a fresh copy of the base index."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(base, db)
        proc = forks.run(FORGET_SCRIPT, str(db), str(private), str(kill_at), stderr=tmp_path / "stderr")
        out = proc.read(timeout=120)
        return proc.wait(), out, proc.stderr()

    db = tmp_path / "trial.db"
    code, out, err = run(db, 0)
    assert code == 0, err
    statements = out.splitlines()
    assert SECRET.encode() not in _db_bytes(db)
    outcomes = []
    for n in range(1, len(statements) + 1):
        code, _, err = run(db, n)
        assert code == -signal.SIGKILL, (statements[n - 1], err)
        _check_consistent(db)
        with Index(db) as idx:
            gone = str(private) in idx.forgotten()
            if gone:  # all of it: no root, no file, no text row
                assert idx.roots() == [str(docs)]
                assert not [f for f in idx.all_files() if is_under(f.path, str(private))]
                assert idx.conn.execute("SELECT count(*) FROM sentences WHERE text LIKE ?",
                                        (f"%{SECRET}%",)).fetchone()[0] == 0
                assert idx.conn.execute("SELECT count(*) FROM paragraphs WHERE text LIKE ?",
                                        (f"%{SECRET}%",)).fetchone()[0] == 0
            else:  # none of it
                assert idx.roots() == roots and idx.forgotten() == []
        if not gone:
            assert _content(db) == before, statements[n - 1]
        with Index(db) as idx:  # the user's next command
            run_index(idx, idx.roots(), info, encoder)
            if not gone:
                forget(idx, str(private))
            assert idx.roots() == [str(docs)] and str(private) in idx.forgotten()
            assert not [f for f in idx.all_files() if is_under(f.path, str(private))]
        _check_consistent(db)
        assert SECRET.encode() not in _db_bytes(db), f"text left after a kill before {statements[n - 1]!r}"
        outcomes.append(gone)
    assert not all(outcomes) and any(outcomes)  # kills landed before and after the commit
    print(f"\n{len(statements)} kills, one before each statement of forget: {statements}")


MERGE_SCRIPT = """
import sys, time
from pathlib import Path
from sparc_local.index.store import Index
with Index(Path(sys.argv[1])) as idx:
    print("start", flush=True)
    t0 = time.perf_counter()
    idx.merge_all()
    print(time.perf_counter() - t0, flush=True)
"""
MERGE_SEGMENTS = 60
MERGE_SENTENCES = 20  # per segment: 1,200 sentences, ~58k postings (a ~0.3 s merge, 50k posting rows)


def _synthetic_index(db: Path) -> None:
    """Many small segments written through the store API with random sparse vectors (no model),
    then a tenth of the files rewritten, so the merge also has tombstones to drop."""
    import numpy as np

    from sparc_local.index.store import FileUpdate, SentenceRow
    from sparc_local.model.sparse import SparseVectors

    rng = np.random.default_rng(5)

    def update(path: str, n: int, tag: str) -> FileUpdate:
        rows = [SentenceRow(f"{tag} sentence {k} of {path}.", f"paragraph of {path}", 0, line=k + 1)
                for k in range(n)]
        toks = [np.sort(rng.choice(30000, 48, replace=False)).astype(np.int32) for _ in range(n)]
        weights = [rng.uniform(0.05, 3.0, 48).astype(np.float32) for _ in range(n)]
        return FileUpdate(path, n, 1.0, tag, rows, SparseVectors.from_rows(list(zip(toks, weights))))

    with Index(db) as idx:
        for seg in range(MERGE_SEGMENTS):
            idx.write_files([update(f"/f{seg}-{j}.txt", MERGE_SENTENCES // 4, "v1") for j in range(4)], merge=False)
        idx.write_files([update(f"/f{seg}-0.txt", 10, "v2") for seg in range(0, MERGE_SEGMENTS, 10)], merge=False)
        idx.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


_SENTENCES_SQL = "SELECT s.id, f.path, s.text FROM sentences s JOIN files f ON f.id = s.file_id ORDER BY s.id"


def _decoded(idx: Index):
    """Live postings as sorted (token, sentence id, quantized weight) arrays, and live sentences
    as (id, path, text) rows: ids never change in a merge, so they can be compared directly."""
    import numpy as np

    dead = idx.tombstones()
    tokens = [r[0] for r in idx.conn.execute("SELECT DISTINCT token_id FROM postings")]
    lists = idx.postings(tokens)
    t = np.repeat(np.array([tok for tok, _, _ in lists], np.int64), [len(ids) for _, ids, _ in lists])
    i = np.concatenate([ids for _, ids, _ in lists])
    q = np.concatenate([q for _, _, q in lists])
    sentences = idx.conn.execute(_SENTENCES_SQL).fetchall()
    keep = ~np.isin(i, dead)
    t, i, q = t[keep], i[keep], q[keep]
    order = np.lexsort((i, t))
    return t[order], i[order], q[order], sentences


class _LiveArrays:
    """``_decoded`` of an index, decoded once per distinct content: the rows it is computed from
    (every posting blob by token and segment, the tombstones, the sentences it lists) are hashed,
    and an index whose rows are byte for byte those of one decoded before has its result. A killed
    merge leaves either the rows it started from or the merged ones, so most trials decode nothing;
    any other rows are decoded and compared in full."""

    def __init__(self) -> None:
        self._seen: dict[bytes, tuple] = {}

    def __call__(self, db: Path):
        with Index(db) as idx:
            digest = hashlib.sha256()
            for sql in ("SELECT token_id, segment_id, blob FROM postings ORDER BY token_id, segment_id",
                        "SELECT sentence_id FROM tombstones ORDER BY sentence_id", _SENTENCES_SQL):
                digest.update(pickle.dumps(idx.conn.execute(sql).fetchall()))
            key = digest.digest()
            if key not in self._seen:
                self._seen[key] = _decoded(idx)
        return self._seen[key]


def _same(a, b) -> bool:
    import numpy as np

    return all(np.array_equal(x, y) for x, y in zip(a[:3], b[:3])) and a[3] == b[3]


def _check_files_whole(db: Path) -> None:
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    bad = conn.execute(
        "SELECT f.path FROM files f LEFT JOIN sentences s ON s.file_id = f.id GROUP BY f.id"
        " HAVING count(s.id) != f.n_sentences").fetchall()
    orphans = conn.execute("SELECT count(*) FROM sentences WHERE file_id IS NULL"
                           " AND id NOT IN (SELECT sentence_id FROM tombstones)").fetchone()[0]
    stray = conn.execute("SELECT count(*) FROM sentences WHERE segment_id NOT IN (SELECT id FROM segments)"
                         ).fetchone()[0]
    conn.close()
    assert bad == [] and orphans == 0 and stray == 0


@pytest.mark.slow  # ~15 s: 20 trials of a ~0.3 s merge
def test_kill_during_segment_merge(tmp_path: Path, forks: ForkServer):
    """A synthetic index of 60 segments (~58k postings, built through the store API without a
    model) is merged by a process killed at random points of the merge; each time the index stays
    consistent with the same live content, and a rerun of the merge yields exactly the
    uninterrupted result. Kills are timed from the merge's own start and counted as mid-merge only
    if the process died before it printed the merge's end."""
    import shutil

    _live_arrays = _LiveArrays()
    base = tmp_path / "base.db"
    _synthetic_index(base)
    with Index(base) as idx:
        n_segments = len(idx.segments())
    reference = _live_arrays(base)
    assert len(reference[0]) > 50_000

    def merge(db: Path):
        return forks.run(MERGE_SCRIPT, str(db), stderr=tmp_path / "stderr")

    probe = tmp_path / "probe.db"
    shutil.copyfile(base, probe)
    proc = merge(probe)
    out = proc.read(timeout=300).split()
    assert proc.wait() == 0, proc.stderr()
    duration = float(out[-1])  # the merge itself, without interpreter start-up
    merged = _live_arrays(probe)
    assert _same(merged, reference)

    rng = random.Random(1)
    mid = 0
    for trial in range(TRIALS):
        db = tmp_path / "m.db"
        shutil.copyfile(base, db)
        proc = merge(db)
        assert proc.readline().strip() == "start"  # the merge transaction begins now
        time.sleep(rng.uniform(0, 0.8 * duration))
        proc.kill()
        rest = proc.read()
        mid += proc.returncode == -signal.SIGKILL and rest == ""  # died before the merge ended
        _check_files_whole(db)
        assert _same(_live_arrays(db), reference)  # killed or not, the live content never changes
        with Index(db) as idx:  # the next process to open the index merges again
            idx.merge_all()
            assert len(idx.segments()) == 1 and len(idx.tombstones()) == 0
        _check_files_whole(db)
        assert _same(_live_arrays(db), merged)
    print(f"\n{TRIALS} kills during a {duration:.2f}s merge of {n_segments} segments; {mid} mid-merge")
    assert mid >= TRIALS // 2
