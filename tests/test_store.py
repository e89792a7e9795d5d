"""The SQLite index (store.py), against real database files in tmp_path."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sparc_local.errors import SchemaTooNew
from sparc_local.index import bitmap, segments
from sparc_local.index import db as db_errors
from sparc_local.index import postings as P
from sparc_local.index.store import MIGRATIONS, SCHEMA_VERSION, FileStatus, FileUpdate, Index, SentenceRow
from sparc_local.model.sparse import SparseVectors
from sparc_local.query import scoring as S
from sparc_local.query.searcher import Searcher

VOCAB = 500


def _vectors(rng, n: int, k: int = 20) -> SparseVectors:
    rows = []
    for _ in range(n):
        toks = rng.choice(VOCAB, k, replace=False).astype(np.int32)
        # multiples of the quantization step (16/255) -> exact after quantization
        w = rng.integers(1, 200, k).astype(np.float32) * np.float32(16.0 / 255)
        rows.append((toks, w))
    return SparseVectors.from_rows(rows)


def _update(rng, path: str, n: int, tag: str = "v1", k: int = 20) -> FileUpdate:
    sents = []
    for i in range(n):
        text = f"{tag} sentence {i} of {path}."
        ctx = f"Intro. {text} Outro."
        sents.append(SentenceRow(text, ctx, 7, page=1 + i // 10, line=i + 1, char_start=10 * i, char_end=10 * i + len(text)))
    return FileUpdate(path, size=100 * n, mtime=1000.0 + n, hash=f"h-{path}-{tag}", sentences=sents, vectors=_vectors(rng, n, k))


def _all_tokens():
    return np.arange(VOCAB)


@pytest.fixture
def db(tmp_path):
    return tmp_path / "sub" / "index.db"


def test_migrations_once_and_idempotent(db):
    ix = Index(db)
    assert ix.schema_version() == SCHEMA_VERSION == MIGRATIONS[-1][0]
    ix.set_meta("model", "sparc-mini-1")
    ix.close()
    ix = Index(db)  # reopen: nothing re-applied, data kept
    assert ix.schema_version() == SCHEMA_VERSION
    assert ix.get_meta("model") == "sparc-mini-1"
    c = ix.conn
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert c.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"meta", "roots", "files", "sentences", "segments", "postings", "tombstones"} <= tables
    ix.close()


def test_files_status_check_takes_every_file_status_and_nothing_else(db):
    """The schema formats FileStatus into its CHECK: a status the enum gains needs a migration."""
    Index(db).close()
    con = sqlite3.connect(db)
    insert = "INSERT INTO files (path, size, mtime, hash, status, indexed_at) VALUES (?, 0, 0, '', ?, 0)"
    for status in FileStatus:
        con.execute(insert, (f"/{status}", status.value))
    with pytest.raises(sqlite3.IntegrityError):
        con.execute(insert, ("/other", "pending"))
    con.close()


def test_newer_schema_refused(db):
    Index(db).close()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(SchemaTooNew, match="newer"):
        Index(db)


def test_file_mode_0600(db):
    rng = np.random.default_rng(0)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.txt", 3)])
        for suffix in ("", "-wal", "-shm"):
            p = str(db) + suffix
            if os.path.exists(p):
                assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, suffix
    # an existing world-readable db is tightened on open
    os.chmod(db, 0o644)
    Index(db).close()
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600


def test_write_read_round_trip(db):
    rng = np.random.default_rng(1)
    u1, u2 = _update(rng, "/d/a.txt", 5), _update(rng, "/d/b.pdf", 3)
    with Index(db) as ix:
        seg = ix.write_files([u1, u2])
        assert seg is not None
        rec = ix.file("/d/a.txt")
        assert (rec.size, rec.mtime, rec.hash, rec.status, rec.error, rec.n_sentences) == (
            500, 1005.0, "h-/d/a.txt-v1", "ok", None, 5,
        )
        assert [f.path for f in ix.all_files()] == ["/d/a.txt", "/d/b.pdf"]
        assert ix.file("/nope") is None

        # exact sparse scores from the index == brute force from the input vectors
        q = np.array([3, 17, 42, 99, 250, 3])  # duplicate token counted once
        ids, sc = Searcher(ix).search(q, None)
        scale = ix.weight_scale
        expected = {}
        sid = 0
        for u in (u1, u2):
            for r in range(len(u.vectors)):
                t, w = u.vectors.row(r)
                qw = P.quantize(w, scale)
                s = sum(int(x) for tt, x in zip(t, qw) if tt in set(q.tolist()))
                sid += 1
                if s:
                    expected[sid] = s * scale
        assert dict(zip(ids.tolist(), sc.tolist())) == pytest.approx(expected)
        assert ids.tolist() == sorted(expected, key=lambda i: (-expected[i], i))

        rows = ix.sentences(ids[:3].tolist()[::-1] + [10**6])
        assert [r.id for r in rows] == ids[:3].tolist()[::-1]
        r = next(x for x in ix.sentences(list(range(1, 9))) if x.path == "/d/b.pdf")
        assert r.context[r.offset_in_context : r.offset_in_context + len(r.text)] == r.text
        assert r.page == 1 and r.line == 1 and r.char_start == 0

        ex = Searcher(ix).explain(q, ids[:2])
        for d, s in zip(ex, sc[:2]):
            assert sum(d.values()) == pytest.approx(float(s))

        st = ix.stats()
        assert st["files"] == 2 and st["sentences"] == 8 and st["segments"] == 1
        assert st["postings"] == 8 * 20 and st["tombstones"] == 0
        assert st["db_bytes"] > 0 and st["last_update"] is not None and st["errors"] == []
        assert ix.verify() == []


def test_postings_reads_only_query_tokens(db):
    rng = np.random.default_rng(2)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.txt", 30)], merge=False)
        ix.write_files([_update(rng, "/d/b.txt", 30)], merge=False)
        q = [5, 77, 123]
        plist = ix.postings(q)
        assert plist and {t for t, _, _ in plist} <= set(q)
        assert all(w.dtype == np.uint8 and np.all(np.diff(ids) > 0) for _, ids, w in plist)
        # the query is a primary-key search, not a table scan (with or without the snapshot's version)
        for sql in (Index._TOKEN_BLOBS_SQL, Index._BLOBS_VERSION_SQL):
            plan = ix.conn.execute("EXPLAIN QUERY PLAN " + sql.format("?,?,?"), q).fetchall()
            detail = " ".join(r[-1] for r in plan)
            assert "SEARCH postings USING INDEX postings_token (token_id=?)" in detail and "SCAN" not in detail.replace("SCAN pragma_data_version", "")
        # one tuple per stored (token, segment) row of the query tokens, nothing else
        n_rows = ix.conn.execute(
            "SELECT count(*) FROM postings WHERE token_id IN (5, 77, 123)"
        ).fetchone()[0]
        assert len(plist) == n_rows
        fl = ix.postings(q, dequantize=True)
        assert fl[0][2].dtype == np.float32


def test_update_replaces_sentences(db):
    rng = np.random.default_rng(3)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.txt", 10, "old"), _update(rng, "/d/b.txt", 4)])
        old_ids = {r.id for r in ix.sentences(range(1, 11))}
        assert len(old_ids) == 10
        ix.write_files([_update(rng, "/d/a.txt", 6, "new")], merge=False)
        ids, _ = Searcher(ix).search(_all_tokens(), None)
        assert not set(ids.tolist()) & old_ids  # old ones no longer score
        assert len(ids) == 6 + 4
        rows = ix.sentences(ids)
        assert all(("new" in r.text) for r in rows if r.path == "/d/a.txt")
        assert ix.file("/d/a.txt").n_sentences == 6
        assert ix.stats()["sentences"] == 10 and ix.stats()["tombstones"] == 10
        assert all(r.path is None for r in ix.sentences(sorted(old_ids)))
        assert ix.verify() == []
        # the first segment is now mostly tombstones: maybe_merge rewrites it, same results
        assert ix.maybe_merge() == 1
        assert ix.stats()["tombstones"] == 0 and ix.sentences(sorted(old_ids)) == []
        np.testing.assert_array_equal(Searcher(ix).search(_all_tokens(), None)[0], ids)
        assert ix.verify() == []


def test_error_file_records_reason_and_drops_old_sentences(db):
    rng = np.random.default_rng(4)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.pdf", 5)])
        ix.write_files([FileUpdate("/d/a.pdf", 10, 2.0, "h2", error="encrypted PDF")])
        rec = ix.file("/d/a.pdf")
        assert rec.status == "error" and rec.error == "encrypted PDF" and rec.n_sentences == 0
        assert rec.hash == "h2"
        assert len(Searcher(ix).search(_all_tokens())[0]) == 0
        assert ix.stats()["errors"] == [{"path": "/d/a.pdf", "reason": "encrypted PDF"}]
        # and it recovers once readable again
        ix.write_files([_update(rng, "/d/a.pdf", 2)])
        assert ix.file("/d/a.pdf").status == "ok" and ix.stats()["errors"] == []
        assert len(Searcher(ix).search(_all_tokens(), None)[0]) == 2
        assert ix.verify() == []


def test_remove_files_and_remove_under(db):
    rng = np.random.default_rng(5)
    paths = ["/r/a.txt", "/r/sub/b.txt", "/r/sub/c.txt", "/r/subway.txt", "/other/d.txt"]
    with Index(db) as ix:
        ix.write_files([_update(rng, p, 3) for p in paths])
        assert ix.remove_files(["/r/a.txt", "/missing"]) == 1
        assert ix.file("/r/a.txt") is None
        assert ix.remove_under("/r/sub") == 2  # not /r/subway.txt
        assert [f.path for f in ix.all_files()] == ["/other/d.txt", "/r/subway.txt"]
        ids, _ = Searcher(ix).search(_all_tokens(), None)
        assert {r.path for r in ix.sentences(ids)} == {"/other/d.txt", "/r/subway.txt"}
        assert ix.remove_under("/r/") == 1
        assert ix.stats()["files"] == 1 and ix.stats()["sentences"] == 3
        assert ix.verify() == []
        ix.merge_all()
        assert ix.stats()["tombstones"] == 0
        assert ix.conn.execute("SELECT count(*) FROM sentences").fetchone()[0] == 3
        assert ix.verify() == []


@pytest.mark.parametrize("chunk_bytes", [None, 64])
def test_merge_all_preserves_results_exactly(db, chunk_bytes, monkeypatch):
    if chunk_bytes:  # force the streamed merge to flush many small token chunks
        monkeypatch.setattr(segments, "MERGE_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(6)
    with Index(db) as ix:
        for i in range(8):
            ix.write_files([_update(rng, f"/d/{i}.txt", 15), _update(rng, f"/e/{i}.txt", 5)], merge=False)
        ix.write_files([_update(rng, "/d/3.txt", 9, "v2")], merge=False)
        ix.remove_files(["/e/5.txt"])
        assert len(ix.segments()) == 9
        queries = [rng.choice(VOCAB, 6, replace=False) for _ in range(20)]
        before = [Searcher(ix).search(q, 10) for q in queries]
        full_before = Searcher(ix).search(_all_tokens(), None)
        sent_before = ix.sentences(full_before[0])
        ix.merge_all()
        assert len(ix.segments()) == 1 and ix.stats()["tombstones"] == 0
        for q, (ids, sc) in zip(queries, before):
            ids2, sc2 = Searcher(ix).search(q, 10)
            np.testing.assert_array_equal(ids, ids2)
            np.testing.assert_array_equal(sc, sc2)
        full_after = Searcher(ix).search(_all_tokens(), None)
        np.testing.assert_array_equal(full_before[0], full_after[0])
        assert ix.sentences(full_after[0]) == sent_before  # ids stable
        assert ix.verify() == []
        # new writes after a merge never reuse ids
        max_id = int(ix.conn.execute("SELECT max(id) FROM sentences").fetchone()[0])
        ix.write_files([_update(rng, "/d/new.txt", 2)])
        assert min(r.id for r in ix.sentences(range(max_id + 1, max_id + 10))) > max_id


def test_maybe_merge_tiered(db):
    rng = np.random.default_rng(7)
    with Index(db) as ix:
        for i in range(9):
            ix.write_files([_update(rng, f"/d/{i}.txt", 2)])
        assert len(ix.segments()) == 9  # below the merge factor
        ix.write_files([_update(rng, "/d/9.txt", 2)])
        assert len(ix.segments()) == 1  # 10 small segments -> 1
        ids_before = Searcher(ix).search(_all_tokens(), None)
        # a segment that is mostly tombstones gets rewritten
        ix.write_files([_update(rng, f"/x/{i}.txt", 2) for i in range(5)])
        assert len(ix.segments()) == 2
        ix.remove_files([f"/x/{i}.txt" for i in range(4)])
        assert ix.maybe_merge() == 1
        segs = ix.segments()
        assert len(segs) == 2 and all(s["deleted_sentences"] == 0 for s in segs)
        ix.remove_files(["/x/4.txt"])
        ix.maybe_merge()
        assert len(ix.segments()) == 1 and ix.stats()["tombstones"] == 0
        ids_after = Searcher(ix).search(_all_tokens(), None)
        np.testing.assert_array_equal(ids_before[0], ids_after[0])
        np.testing.assert_array_equal(ids_before[1], ids_after[1])
        assert ix.verify() == []


def test_compact_merges_only_the_small_segments(db):
    """Every segment below a tenth of the live postings goes into one; bigger ones are kept;
    answers are unchanged and a second call has nothing to do."""
    rng = np.random.default_rng(8)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/big/a.txt", 900)], merge=False)
        ix.write_files([_update(rng, "/big/b.txt", 150)], merge=False)
        for i in range(4):
            ix.write_files([_update(rng, f"/small/{i}.txt", 10)], merge=False)
        ix.remove_files(["/small/2.txt"])
        big = {s["id"] for s in ix.segments() if s["n_sentences"] >= 150}
        queries = [rng.choice(VOCAB, 6, replace=False) for _ in range(20)]
        before = [Searcher(ix).search(q, 10) for q in queries]
        assert ix.compact() is True
        segs = ix.segments()
        assert len(segs) == 3 and big <= {s["id"] for s in segs}
        assert sorted(s["live_sentences"] for s in segs) == [30, 150, 900]
        for q, (ids, sc) in zip(queries, before):
            ids2, sc2 = Searcher(ix).search(q, 10)
            np.testing.assert_array_equal(ids, ids2)
            np.testing.assert_array_equal(sc, sc2)
        assert ix.compact() is False  # one small segment left: nothing to merge
        assert ix.verify() == []


def test_compact_merges_everything_once_the_index_grew_by_a_third(db):
    """When the segments beside the biggest hold 1/FULL_MERGE_SHARE of the live sentences
    (a first full `index` run, or a third more since the biggest was written), every segment
    becomes one, tombstones purged; answers are unchanged."""
    rng = np.random.default_rng(9)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/docs/a.txt", 900)], merge=False)
        ix.write_files([_update(rng, "/docs/b.txt", 150)], merge=False)
        assert ix.compact() is False  # b: 14% of the sentences, above a tenth of the postings
        ix.write_files([_update(rng, "/docs/c.txt", 200)], merge=False)
        ix.write_files([_update(rng, "/docs/d.txt", 10)], merge=False)
        ix.remove_files(["/docs/d.txt"])
        queries = [rng.choice(VOCAB, 6, replace=False) for _ in range(20)]
        before = [Searcher(ix).search(q, 10) for q in queries]
        assert ix.compact() is True  # 350 of 1250 live sentences beside the biggest segment
        assert [(s["n_sentences"], s["live_sentences"]) for s in ix.segments()] == [(1250, 1250)]
        for q, (ids, sc) in zip(queries, before):
            ids2, sc2 = Searcher(ix).search(q, 10)
            np.testing.assert_array_equal(ids, ids2)
            np.testing.assert_array_equal(sc, sc2)
        assert ix.compact() is False
        assert ix.verify() == []


class Boom(Exception):
    pass


def test_exception_mid_write_rolls_back(db, monkeypatch):
    rng = np.random.default_rng(8)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.txt", 4, "old")])
        snapshot = ix.conn.execute("SELECT * FROM sentences ORDER BY id").fetchall()
        files_before = ix.all_files()
        res_before = Searcher(ix).search(_all_tokens(), None)
        good = _update(rng, "/d/a.txt", 3, "new")
        bad = _update(rng, "/d/b.txt", 3, "bad")
        # a SentenceRow sqlite cannot bind: fails after /d/a.txt was already tombstoned+rewritten
        bad.sentences[1] = SentenceRow(object(), "ctx", 0)  # type: ignore[arg-type]  # a bad row on purpose
        with pytest.raises(sqlite3.Error):
            ix.write_files([good, bad])
        assert not ix.conn.in_transaction
        assert ix.all_files() == files_before
        assert ix.conn.execute("SELECT * FROM sentences ORDER BY id").fetchall() == snapshot
        assert ix.stats()["tombstones"] == 0 and ix.stats()["segments"] == 1
        res = Searcher(ix).search(_all_tokens(), None)
        np.testing.assert_array_equal(res[0], res_before[0])
        # an exception while writing postings rolls back too
        monkeypatch.setattr(P, "encode_groups", lambda *a: (_ for _ in ()).throw(Boom()))
        with pytest.raises(Boom):
            ix.write_files([good])
        assert ix.all_files() == files_before and ix.verify() == []
        # mismatched vectors are rejected before anything is written
        monkeypatch.undo()
        broken = _update(rng, "/d/c.txt", 3)
        broken.sentences.pop()
        with pytest.raises(ValueError):
            ix.write_files([broken])
        assert ix.file("/d/c.txt") is None


def test_kill_9_mid_write_leaves_old_state(db):
    rng = np.random.default_rng(9)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.txt", 4)])
        before = Searcher(ix).search(_all_tokens(), None)
    script = textwrap.dedent(
        f"""
        import os, signal, numpy as np
        from sparc_local.index import postings as P
        from sparc_local.index.store import Index, FileUpdate, SentenceRow
        from sparc_local.model.sparse import SparseVectors
        real = P.encode_groups
        def die(*a):
            real(*a)
            os.kill(os.getpid(), signal.SIGKILL)
        P.encode_groups = die
        ix = Index({str(db)!r})
        rows = [(np.arange(5, dtype=np.int32), np.ones(5, np.float32))] * 2
        ix.write_files([FileUpdate("/d/a.txt", 1, 1.0, "x",
                                   [SentenceRow("s1", "s1", 0), SentenceRow("s2", "s2", 0)],
                                   SparseVectors.from_rows(rows)),
                        FileUpdate("/d/b.txt", 1, 1.0, "y", [], None)])
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()
    with Index(db) as ix:
        assert ix.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert [f.path for f in ix.all_files()] == ["/d/a.txt"]
        after = Searcher(ix).search(_all_tokens(), None)
        np.testing.assert_array_equal(before[0], after[0])
        np.testing.assert_array_equal(before[1], after[1])
        assert ix.verify() == []


def test_reader_during_write_transaction(db):
    rng = np.random.default_rng(10)
    writer = Index(db)
    writer.write_files([_update(rng, "/d/a.txt", 5)])
    reader = Index(db, busy_timeout_ms=200)
    rs = Searcher(reader)
    expect = rs.search(_all_tokens(), None)
    with writer.write_transaction() as c:  # holds the write lock
        c.execute("DELETE FROM postings")
        c.execute("INSERT INTO roots(path) VALUES ('/x')")
        # the reader is not blocked and sees the last committed state
        got = rs.search(_all_tokens(), None)
        np.testing.assert_array_equal(got[0], expect[0])
        assert reader.roots() == [] and reader.stats()["files"] == 1
        # a second writer cannot get in (times out instead of corrupting anything)
        with pytest.raises(sqlite3.OperationalError, match="locked") as busy:
            reader.add_roots(["/y"])
        assert db_errors.is_busy(busy.value) and not db_errors.is_full(busy.value)
        c.execute("ROLLBACK")
        c.execute("BEGIN IMMEDIATE")
    got = rs.search(_all_tokens(), None)
    np.testing.assert_array_equal(got[0], expect[0])
    writer.close()
    reader.close()


def test_sqlite_errors_are_classified_by_code_not_text(tmp_path):
    """is_full, is_busy and is_corrupt read SQLite's result code: a full database, another
    connection's lock and a file that is not a database, each raised by SQLite itself."""
    c = sqlite3.connect(tmp_path / "small.db", isolation_level=None)
    c.execute("PRAGMA max_page_count = 8")
    c.execute("CREATE TABLE t(x BLOB)")
    with pytest.raises(sqlite3.OperationalError) as full:
        c.execute("INSERT INTO t VALUES (zeroblob(1 << 20))")
    other = sqlite3.connect(tmp_path / "small.db", isolation_level=None, timeout=0)
    c.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError) as busy:
        other.execute("BEGIN IMMEDIATE")
    c.execute("ROLLBACK")
    (tmp_path / "junk.db").write_bytes(b"not a database, " * 512)
    with pytest.raises(sqlite3.DatabaseError) as corrupt:
        sqlite3.connect(tmp_path / "junk.db").execute("SELECT * FROM sqlite_master")
    kinds = (db_errors.is_full, db_errors.is_busy, db_errors.is_corrupt)
    for err, want in ((full.value, 0), (busy.value, 1), (corrupt.value, 2)):
        assert [kind(err) for kind in kinds] == [i == want for i in range(3)], err
    # the same words from elsewhere are not SQLite's: no code, no class
    assert not any(kind(sqlite3.OperationalError("database is locked, disk is full")) for kind in kinds)
    assert not any(kind(OSError(28, "No space left on device")) for kind in kinds)
    c.close()
    other.close()


def test_search_sees_other_connections_commits(db):
    """A reader's cached tombstones and id bound are dropped as soon as another connection
    commits: after a re-index and a new file elsewhere, it answers like a fresh connection."""
    rng = np.random.default_rng(12)
    writer = Index(db)
    writer.write_files([_update(rng, "/d/a.txt", 30), _update(rng, "/d/b.txt", 30)])
    reader = Index(db)
    rs = Searcher(reader)
    queries = [rng.choice(VOCAB, 8, replace=False) for _ in range(10)]
    for q in queries:
        rs.search(q, 5)
    writer.write_files([_update(rng, "/d/a.txt", 40, "v2"), _update(rng, "/d/c.txt", 30)], merge=False)
    writer.remove_files(["/d/b.txt"])
    with Index(db) as fresh:
        for q in queries:
            got, want = rs.search(q, 5), Searcher(fresh).search(q, 5)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            assert all(r.path in ("/d/a.txt", "/d/c.txt") for r in reader.sentences(got[0]))
    writer.close()
    reader.close()


def test_roots_meta_and_weight_scale(db):
    rng = np.random.default_rng(11)
    with Index(db) as ix:
        ix.add_roots(["/home/u/docs", "/home/u/notes", "/home/u/docs"])
        assert ix.roots() == ["/home/u/docs", "/home/u/notes"]
        ix.remove_roots_under("/home/u/notes")
        assert ix.roots() == ["/home/u/docs"]
        ix.set_meta("model", "m1")
        assert ix.meta()["model"] == "m1" and ix.stats()["model"] == "m1"
        ix.set_weight_scale(P.scale_for_ceiling(8.0))
        assert ix.weight_scale == pytest.approx(8.0 / 255)
        ix.write_files([_update(rng, "/d/a.txt", 2)])
        with pytest.raises(ValueError):
            ix.set_weight_scale(0.5)
        ix.set_weight_scale(P.scale_for_ceiling(8.0))  # same value is fine
        with pytest.raises(ValueError):
            ix.set_meta("weight_scale", "1")
    with Index(db) as ix:
        assert ix.weight_scale == pytest.approx(8.0 / 255)


def test_write_transactions_nest_as_savepoints(db):
    """An inner write_transaction is a SAVEPOINT: its failure undoes only itself, and nothing
    of the outer one is visible to another connection before the outer COMMIT."""
    rng = np.random.default_rng(12)
    with Index(db) as ix, Index(db, busy_timeout_ms=200) as reader:
        with ix.write_transaction():
            ix.add_roots(["/a"])  # nested: a savepoint
            with pytest.raises(Boom):
                with ix.write_transaction() as c:
                    c.execute("INSERT INTO roots(path) VALUES ('/b')")
                    raise Boom
            ix.write_files([_update(rng, "/a/x.txt", 3)])  # nested, and its merge check too
            assert ix.roots() == ["/a"] and ix.conn.in_transaction
            assert reader.roots() == [] and reader.all_files() == []  # not committed yet
        assert not ix.conn.in_transaction
        assert reader.roots() == ["/a"] and [f.path for f in reader.all_files()] == ["/a/x.txt"]
        # an exception that leaves the outer block undoes every savepoint released into it
        with pytest.raises(Boom):
            with ix.write_transaction():
                ix.remove_under("/a")
                ix.remove_roots_under("/a")
                raise Boom
        assert not ix.conn.in_transaction
        assert reader.roots() == ["/a"] and [f.path for f in reader.all_files()] == ["/a/x.txt"]
        assert ix.verify() == []
        # a merge inside a caller's transaction does not commit it (its reclaim step would)
        with ix.write_transaction():
            ix.write_files([_update(rng, "/a/y.txt", 3)], merge=False)
            ix.merge_all()
            assert ix.conn.in_transaction and reader.stats()["segments"] == 1
        assert reader.stats()["segments"] == 1 and reader.stats()["files"] == 2


def test_roots_are_the_paths_the_user_named(db):
    """A path a root's walk reaches is never a root of its own; a hidden one is (a walk skips it)."""
    with Index(db) as ix:
        ix.add_roots(["/d/sub", "/e"])
        ix.add_roots(["/d", "/d/a.txt", "/d/.notes/b.txt", "/e/f/g.md"])
        assert ix.roots() == ["/d", "/d/.notes/b.txt", "/e"]  # /d/sub went: /d covers it now
        assert [r[0] for r in ix.conn.execute("SELECT path FROM roots ORDER BY path")] == ix.roots()
        # a database where a file under a root was stored as a root: not listed
        ix.conn.execute("INSERT INTO roots(path) VALUES ('/e/old.txt')")
        assert ix.roots() == ["/d", "/d/.notes/b.txt", "/e"]
        assert ix.remove_roots_under("/e") == 2 and ix.roots() == ["/d", "/d/.notes/b.txt"]


def test_forgotten_paths_are_never_written(db):
    """The rule for every writer lives in write_files: nothing at or under a forgotten path is
    written, until the path is named again (add_roots)."""
    rng = np.random.default_rng(13)
    with Index(db) as ix:
        ix.add_forgotten("/d/private")
        ix.add_forgotten("/d/pin.txt")
        assert ix.forgotten() == ["/d/pin.txt", "/d/private"]
        assert ix.write_files([_update(rng, "/d/private/a.txt", 2), _update(rng, "/d/pin.txt", 2)]) is None
        ix.write_files([_update(rng, "/d/private/b.txt", 2), _update(rng, "/d/private.txt", 2)])
        assert [f.path for f in ix.all_files()] == ["/d/private.txt"]
        ix.add_roots(["/d", "/d/private/b.txt"])  # names a file inside a forgotten folder: not enough
        assert ix.forgotten() == ["/d/pin.txt", "/d/private"]
        ix.add_roots(["/d/pin.txt"])
        assert ix.forgotten() == ["/d/private"] and ix.roots() == ["/d"]
        ix.write_files([_update(rng, "/d/pin.txt", 2)])
        assert [f.path for f in ix.all_files()] == ["/d/pin.txt", "/d/private.txt"]


def test_scrub_waits_for_readers_and_stays_pending(db):
    """finish_scrub clears its mark only once the WAL is emptied; a reader holding old frames
    leaves it pending, and a later call completes it."""
    rng = np.random.default_rng(14)
    with Index(db, busy_timeout_ms=100) as ix, Index(db) as reader:
        ix.write_files([_update(rng, "/d/a.txt", 3, "secret"), _update(rng, "/d/b.txt", 3)])
        assert ix.finish_scrub() is True  # nothing pending
        with ix.write_transaction():
            ix.remove_under("/d/a.txt")
            ix.purge_deleted()
        assert ix.get_meta(segments.SCRUB_PENDING) == "1" and ix.stats()["tombstones"] == 0
        with reader.read_transaction():
            reader.roots()
            assert ix.finish_scrub() is False
        assert ix.get_meta(segments.SCRUB_PENDING) == "1"
        assert ix.finish_scrub() is True and ix.get_meta(segments.SCRUB_PENDING) is None
    for suffix in ("", "-wal"):
        data = db.with_name(db.name + suffix).read_bytes() if db.with_name(db.name + suffix).exists() else b""
        assert b"secret sentence" not in data


def test_tiny_weights_dropped_and_counts_exact(db):
    with Index(db) as ix:
        v = SparseVectors.from_rows(
            [(np.array([1, 2, 3], np.int32), np.array([0.001, 5.0, 99.0], np.float32)),
             (np.array([4], np.int32), np.array([0.0001], np.float32))]
        )
        ix.write_files([FileUpdate("/a", 1, 1.0, "h", [SentenceRow("x", "x", 0), SentenceRow("y", "y", 0)], v)])
        assert ix.stats()["postings"] == 2
        assert ix.verify() == []
        ids, sc = Searcher(ix).search([3])
        assert sc[0] == pytest.approx(16.0)  # clipped at the ceiling
        assert len(Searcher(ix).search([4])[0]) == 0
        # duplicate tokens within one sentence vector are rejected
        bad = SparseVectors.from_rows([(np.array([1, 1], np.int32), np.array([1.0, 1.0], np.float32))])
        with pytest.raises(ValueError):
            ix.write_files([FileUpdate("/b", 1, 1.0, "h", [SentenceRow("z", "z", 0)], bad)])
        assert ix.file("/b") is None


def test_score_via_search_module_with_exclude(db):
    rng = np.random.default_rng(12)
    with Index(db) as ix:
        ix.write_files([_update(rng, "/d/a.txt", 8, "old")])
        ix.write_files([_update(rng, "/d/a.txt", 8, "new")], merge=False)
        q = rng.choice(VOCAB, 10, replace=False)
        with ix.read_transaction():
            plist, dead = ix.postings(q), ix.tombstones()
        ids, sc = S.score(plist, 5, dead, scale=ix.weight_scale)
        ids2, sc2 = Searcher(ix).search(q, 5)
        np.testing.assert_array_equal(ids, ids2)
        assert not set(ids.tolist()) & set(dead.tolist())


def test_migration_2_moves_contexts_into_paragraphs(tmp_path):
    """A version-1 database (context stored per sentence) opens as version 2 with nothing lost."""
    import sqlite3

    from sparc_local.index.store import MIGRATIONS, Index

    db = tmp_path / "v1.db"
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0][1] + "\nPRAGMA user_version = 1;")
    conn.execute("INSERT INTO files(id, path, size, mtime, hash, status, n_sentences, indexed_at)"
                 " VALUES (1, '/a.txt', 1, 1, 'h', 'ok', 2, 0), (2, '/b.txt', 1, 1, 'h', 'ok', 1, 0)")
    conn.execute("INSERT INTO segments(id, n_sentences, n_postings, n_bytes, level, created_at) VALUES (1, 3, 0, 0, 0, 0)")
    para = "One. Two."
    conn.executemany("INSERT INTO sentences(id, file_id, segment_id, text, context, offset_in_context)"
                     " VALUES (?, ?, 1, ?, ?, ?)",
                     [(1, 1, "One.", para, 0), (2, 1, "Two.", para, 5), (3, 2, "One.", para, 0)])
    conn.commit()
    conn.close()
    with Index(db) as idx:
        assert idx.schema_version() == SCHEMA_VERSION
        rows = idx.sentences([1, 2, 3])
        assert [(r.text, r.context, r.offset_in_context) for r in rows] == [
            ("One.", para, 0), ("Two.", para, 5), ("One.", para, 0)]
        # one paragraph row per (file, paragraph)
        assert idx.conn.execute("SELECT count(*) FROM paragraphs").fetchone()[0] == 2


def _old_format(blob: bytes, which: int) -> bytes:
    """``blob`` in a format earlier writers chose: 0 tag 3 (FORMAT_U16 without its largest
    weight), 1 tag 1 (V1 without it) for a list FORMAT_U16 holds, 2 tag 2 (a bitmap without
    it), here of a short list.  Tags 1 and 2 are today's V1 and bitmap bytes without the max byte."""
    if which == 0:
        assert blob[0] == P.FORMAT_U16
        return bytes([3]) + blob[1:8] + blob[9:]
    ids, q = P.decode(blob)
    if which == 1:
        return bytes([1]) + P.encode_v1(ids, q)[2:]
    return bytes([2]) + bitmap.encode_bitmap(ids, q)[2:]


def test_migration_3_rewrites_every_blob_in_a_format_the_writer_writes(db):
    """Blobs of earlier layouts (tag 3, V1 lists FORMAT_U16 holds, short bitmaps) are rewritten
    once on open, as ``postings.encode`` writes them today; answers and checks are unchanged."""
    rng = np.random.default_rng(31)
    queries = [rng.choice(VOCAB, 10, replace=False) for _ in range(15)]
    with Index(db) as ix:
        ix.write_files([_update(rng, f"/d/{i}.txt", 40, k=60) for i in range(3)], merge=False)
        ix.write_files([_update(rng, "/d/1.txt", 20, "v2", k=60)], merge=False)  # two segments, tombstones
        want = [Searcher(ix).search(q, 10) for q in queries]
        current = dict(ix.conn.execute("SELECT id, blob FROM postings"))
        with ix.write_transaction() as c:
            c.executemany("UPDATE postings SET blob = ? WHERE id = ?",
                          [(_old_format(b, rid % 3), rid) for rid, b in current.items()])
            c.execute("PRAGMA user_version = 2")
        tags = {r[0][0] for r in ix.conn.execute("SELECT blob FROM postings")}
    assert tags == {1, 2, 3}
    with Index(db) as ix:
        assert ix.schema_version() == SCHEMA_VERSION
        assert dict(ix.conn.execute("SELECT id, blob FROM postings")) == current
        for q, (ids, sc) in zip(queries, want):
            got = Searcher(ix).search(q, 10)
            np.testing.assert_array_equal(got[0], ids)
            np.testing.assert_array_equal(got[1], sc)
        assert ix.verify() == []
        assert ix.stats()["posting_bytes"] == sum(map(len, current.values()))


def test_migration_6_gives_bitmaps_their_largest_weight(db, monkeypatch):
    """An index written before every format held its largest weight (bitmaps and V1 as tags 2
    and 1): on open, each blob is today's, so the hybrid divides by exact field maxima."""
    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 8)  # bitmaps on these small lists
    rng = np.random.default_rng(6)
    with Index(db) as ix:
        ix.write_files([_update(rng, f"/d/{i}.txt", 40, k=60) for i in range(3)], merge=False)
        current = dict(ix.conn.execute("SELECT id, blob FROM postings"))
        dense = [rid for rid, b in current.items() if b[0] == P.FORMAT_BITMAP]
        assert dense and all(P.bound(current[r]) < P.QMAX for r in dense)
        with ix.write_transaction() as c:
            c.executemany("UPDATE postings SET blob = ? WHERE id = ?",
                          [(bytes([2]) + current[r][2:], r) for r in dense]
                          + [(_old_format(b, 1), r) for r, b in current.items() if r % 2 and r not in dense])
            c.execute("PRAGMA user_version = 5")
    with Index(db) as ix:
        assert ix.schema_version() == SCHEMA_VERSION
        assert dict(ix.conn.execute("SELECT id, blob FROM postings")) == current
        assert ix.verify() == []
        r = dense[0]  # a header whose largest weight is wrong is a problem verify names
        blob = current[r]
        with ix.write_transaction() as c:
            c.execute("UPDATE postings SET blob = ? WHERE id = ?", (blob[:1] + bytes([blob[1] + 1]) + blob[2:], r))
        assert [p.split(": ", 1)[1] for p in ix.verify()] == [f"header's largest weight {blob[1] + 1}, the list's {blob[1]}"]


def test_pruned_search_equals_exhaustive_across_segments(db, monkeypatch):
    """Index.search through the pruned path (forced) equals summing every posting, with
    several segments, tombstones, near-stop tokens stored as bitmaps, and tied scores."""
    from sparc_local.index import postings as P
    from sparc_local.query import scoring as S

    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 8)  # bitmaps on these small lists (the default is 32768)
    rng = np.random.default_rng(5)
    with Index(db) as ix:
        for f in range(12):
            rows, vecs = [], []
            for _ in range(60):
                toks = np.unique(np.concatenate([[1, 2], rng.choice(60, 12, replace=False) + 3]))
                toks = toks[rng.random(len(toks)) < 0.9]
                vecs.append((toks, rng.choice([2.5, 2.6, 2.75], len(toks)).astype(np.float32)))
                rows.append(SentenceRow("s", "s", 0))
            ix.write_files([FileUpdate(f"/f{f}.txt", 1, 1.0, "h", rows, SparseVectors.from_rows(vecs))],
                           merge=False)
        ix.write_files([FileUpdate(f"/f{f}.txt", 1, 2.0, "h2") for f in (3, 7)], merge=False)  # tombstones
        assert len(ix.segments()) == 12 and len(ix.tombstones()) == 120
        blobs = [r[0] for r in ix.conn.execute("SELECT blob FROM postings WHERE token_id = 1")]
        assert all(b[0] == P.FORMAT_BITMAP for b in blobs)
        searcher = Searcher(ix)
        for _ in range(30):
            q = np.concatenate([[1, 2], rng.choice(60, int(rng.integers(1, 6)), replace=False) + 3])
            for k in (1, 10, 25):
                stats: dict = {}
                ids, sc = searcher.search(q, k, stats=stats)
                with ix.read_transaction():
                    ref = S.score(ix.postings(q), k, ix.tombstones(), scale=ix.weight_scale)
                np.testing.assert_array_equal(ids, ref[0])
                np.testing.assert_array_equal(sc, ref[1])
                assert "candidates" in stats
                assert not searcher._work.any()  # zero again for the next question


def test_search_sees_other_connections_changes(db):
    """search caches tombstones and the id bound; a commit by another connection (or by this
    one) must invalidate them at once."""
    vec = SparseVectors.from_rows([(np.array([5, 6]), np.array([2.0, 1.0], np.float32))])
    with Index(db) as reader, Index(db) as writer:
        writer.write_files([FileUpdate("/a.txt", 1, 1.0, "h", [SentenceRow("a", "a", 0)], vec)], merge=False)
        rs = Searcher(reader)
        ids, _ = rs.search([5], 10)
        assert len(ids) == 1
        writer.write_files([FileUpdate("/b.txt", 1, 1.0, "h", [SentenceRow("b", "b", 0)], vec)], merge=False)
        assert len(rs.search([5], 10)[0]) == 2  # a new, higher id
        writer.remove_files(["/a.txt"])
        assert rs.search([5], 10)[0].tolist() == [ids[0] + 1]  # tombstoned at once
        reader.remove_files(["/b.txt"])  # this connection's own write
        assert len(rs.search([5], 10)[0]) == 0


def test_filtered_search_equals_exhaustive_over_the_kept_files(db, monkeypatch):
    """``file_filter`` ranks the sentences of the kept files only, exactly as summing every posting
    of theirs would (pruned path forced, several segments, tombstones), including a file whose
    sentence ids are not consecutive, by path (relative to the roots), type and modification time;
    the mask is cached until the database changes, roots included."""
    from sparc_local.query.pathfilter import PathFilter

    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 8)
    rng = np.random.default_rng(21)
    names = [f"/d/{'ab'[f % 2]}/f{f}.{['txt', 'md', 'MD'][f % 3]}" for f in range(12)]
    with Index(db) as ix, Index(db) as writer:
        ix.add_roots(["/d"])
        for f, name in enumerate(names):
            rows, vecs = [], []
            for _ in range(40):
                toks = np.unique(np.concatenate([[1, 2], rng.choice(60, 12, replace=False) + 3]))
                vecs.append((toks, rng.choice([2.5, 2.6, 2.75], len(toks)).astype(np.float32)))
                rows.append(SentenceRow("s", "s", 0))
            ix.write_files([FileUpdate(name, 1, 10.0 + f, "h", rows, SparseVectors.from_rows(vecs))], merge=False)
        ix.write_files([FileUpdate(names[3], 1, 2.0, "h2"), _update(rng, names[7], 30, "v2")], merge=False)
        # two sentences swap files: f0's and f2's ids are no longer consecutive
        (fa, a), (fb, b) = (ix.conn.execute("SELECT file_id, min(id) FROM sentences WHERE file_id ="
                                            " (SELECT id FROM files WHERE path = ?)", (names[f],)).fetchone() for f in (0, 2))
        ix.conn.executemany("UPDATE sentences SET file_id = ? WHERE id = ?", [(fb, a), (fa, b)])
        assert ix.verify() == []
        searcher = Searcher(ix)

        def reference(q, k, flt):
            with ix.read_transaction() as c:
                rows = c.execute("SELECT s.id, f.path, f.mtime FROM sentences s JOIN files f ON f.id = s.file_id"
                                 ).fetchall()
                roots = [r[0] for r in c.execute("SELECT path FROM roots")]
                allow = np.zeros(1 + max(r[0] for r in rows), bool)
                allow[[i for i, p, m in rows if flt.keeps([p], roots=roots, mtimes=[m])[0]]] = True
                return S.score(ix.postings(q), k, ix.tombstones(), scale=ix.weight_scale, allow=allow)

        filters = [PathFilter(ext="md"), PathFilter(glob="*/a/*"), PathFilter(glob="*/b/*", ext=".TXT"),
                   PathFilter(glob=names[0]), PathFilter(glob=names[7]), PathFilter(glob=names[3]),
                   PathFilter(glob="a/"), PathFilter(glob="b/f1*"), PathFilter(glob="f1?.*", ext="markdown"),
                   PathFilter(since=14.0), PathFilter(glob="/d/b", before=17.0), PathFilter(since=12.0, before=1e9)]
        for flt in filters:
            for _ in range(10):
                q = np.concatenate([[1, 2], rng.choice(60, int(rng.integers(1, 6)), replace=False) + 3])
                for k in (1, 10, 100):
                    ids, sc = searcher.search(q, k, file_filter=flt)
                    rids, rsc = reference(q, k, flt)
                    np.testing.assert_array_equal(ids, rids)
                    np.testing.assert_array_equal(sc, rsc)
                    assert (len(ids) > 0) == (flt.glob != names[3])  # re-indexed with no sentences
            assert flt in searcher._snap.masks  # resolved once for this snapshot
        # another connection adds a kept file: the next question sees it
        writer.write_files([_update(rng, "/d/a/new.md", 5, "v1")], merge=False)
        ids, _ = searcher.search(_all_tokens(), None, file_filter=PathFilter(glob="*/new.md"))
        assert [r.path for r in ix.sentences(ids)] == ["/d/a/new.md"] * 5
        assert len(searcher.search(_all_tokens(), None, file_filter=PathFilter(ext="pdf"))[0]) == 0
        # a deeper root changes what lies "in a/" relative to the roots: the next question sees it
        flt = PathFilter(glob="a/f1*")
        ids, _ = searcher.search(_all_tokens(), None, file_filter=flt)
        assert {r.path for r in ix.sentences(ids)} == {"/d/a/f10.md"}
        writer.remove_roots_under("/d")
        writer.add_roots(["/d/a", "/d/b"])
        assert len(searcher.search(_all_tokens(), None, file_filter=flt)[0]) == 0
        ids, _ = searcher.search(_all_tokens(), None, file_filter=PathFilter(glob="f1*"))
        assert {r.path for r in ix.sentences(ids)} == {"/d/b/f1.md", "/d/a/f10.md", "/d/b/f11.MD"}
