"""The hybrid score (query/fusion.py) and the lexical postings it reads (model/lexical.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sparc_local.index import bitmap
from sparc_local.index import postings as P
from sparc_local.index.store import FileUpdate, Index, SentenceRow
from sparc_local.model import lexical as L
from sparc_local.model.sparse import SparseVectors
from sparc_local.query import fusion, modes
from sparc_local.query import scoring as S
from sparc_local.query.searcher import Searcher


class _Enc:
    def __init__(self, ids):
        self.ids = ids


class _Tok:
    """Whitespace words -> ids of a fixed vocabulary (the lexical side needs only encode_batch)."""

    vocab = {w: i for i, w in enumerate("[PAD] ? the a tea green steep minutes water hot cup".split())}

    def encode_batch(self, texts, add_special_tokens=False):
        return [_Enc([self.vocab[w] for w in t.split()]) for t in texts]

    def token_to_id(self, w):
        return self.vocab.get(w)


def test_impacts_are_bm25_term_frequency_parts_with_fixed_lengths():
    lex = L.Lexical(_Tok(), np.array([0, 1], np.int32))  # [PAD] and "?" skipped, "the"/"a" are stop words
    v = lex.vectors(["tea tea green ?", "the hot water"], ["tea tea green ? the hot water"] * 2)
    keys, w = v.row(0)
    got = dict(zip(keys.tolist(), w.tolist()))
    tea, green, hot, water = 4, 5, 9, 8

    def part(tf, dl, field):
        return tf * (L.K1 + 1) / (tf + L.K1 * (1 - L.B + L.B * dl / L.AVGDL[field])) * L.UNIT

    s, p = L.SENTENCE_FIELD * L.FIELD_BASE, L.PARAGRAPH_FIELD * L.FIELD_BASE
    assert got == pytest.approx({s + tea: part(2, 3, 1), s + green: part(1, 3, 1),
                                 p + tea: part(2, 5, 2), p + green: part(1, 5, 2), p + hot: part(1, 5, 2),
                                 p + water: part(1, 5, 2)})
    assert sorted(v.row(1)[0].tolist()) == sorted([s + hot, s + water, p + tea, p + green, p + hot, p + water])


def test_multipliers_normalize_each_part_by_its_attainable_maximum():
    toks = [7, 9]
    keys = fusion.keys(toks, fusion.HYBRID)
    assert keys == [7, 9] + [f * L.FIELD_BASE + t for f in (1, 2, 3, 4) for t in (7, 9)]
    keys = keys[:6]  # no sentence waits for the encoder
    df = np.array([5, 50, 3, 30, 10, 0])
    max_q = np.array([200, 100, 255, 120, 90, 0])
    m, scale = fusion.multipliers(keys, df, max_q, 1000, P.QMAX)
    # the largest attainable score of each part, in fused units, is the part's weight
    top = m * max_q * scale
    rounding = 0.5 * max_q * scale  # a multiplier is the real weight rounded to an integer step
    assert abs(top[:2].sum() - 1.0) <= rounding[:2].sum() < 1e-3
    assert abs(top[2:4].sum() - fusion.WEIGHTS[L.SENTENCE_FIELD]) <= rounding[2:4].sum() < 1e-3
    assert abs(top[4:].sum() - fusion.WEIGHTS[L.PARAGRAPH_FIELD]) <= rounding[4:].sum() < 1e-3
    idf = [math.log1p((1000 - d + 0.5) / (d + 0.5)) for d in (3, 30)]
    assert m[2] / m[3] == pytest.approx(idf[0] / idf[1], rel=1e-3)  # a rarer token weighs more
    assert m[5] == 0  # no postings, no weight
    assert m.sum() * P.QMAX < 1 << 31  # every sum fits the accumulator
    assert fusion.keys(toks, fusion.SPARC) == toks and fusion.keys(toks, fusion.BM25) == fusion.keys(toks, fusion.HYBRID)[2:]


def _reference(ix: Index, keys: list[int], k: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Exhaustive fused scores: every posting of every key, times the key's multiplier, each
    field divided by its keys' largest weights as decoded (not as any header says)."""
    with ix.read_transaction():
        rows = ix.token_blobs(keys)
        dead = ix.tombstones()
        n = ix.sentences_written()
    by: dict[int, list[bytes]] = {}
    for key, blob in rows:
        by.setdefault(key, []).append(blob)
    present = list(by)
    df = np.array([sum(P.header(b)[1] for b in by[t]) for t in present])
    mq = np.array([max(int(q.max()) for _, q in P.decode_lists(by[t])) for t in present])  # true maxima
    m, scale = fusion.multipliers(present, df, mq, n, P.QMAX, mode)
    plist = [(ids, q.astype(np.int64) * mult) for t, mult in zip(present, m.tolist())
             for ids, q in P.decode_lists(by[t])]
    return S.score(plist, k, dead, scale=scale)


@pytest.mark.parametrize("mode", [fusion.HYBRID, fusion.BM25])
def test_fused_search_equals_exhaustive_fused_scoring(tmp_path, monkeypatch, mode):
    """Several segments, tombstones, bitmap blobs read at candidates only, tied scores."""
    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 8)
    rng = np.random.default_rng(3)
    with Index(tmp_path / "index.db") as ix:
        for f in range(10):
            rows, vecs, lex = [], [], []
            for _ in range(50):
                toks = np.unique(np.concatenate([[1, 2], rng.choice(40, 10, replace=False) + 3]))
                vecs.append((toks, rng.choice([2.5, 2.6, 3.1], len(toks)).astype(np.float32)))
                words = np.unique(rng.choice(40, 6, replace=False) + 1)
                ctx = np.unique(np.concatenate([words, [1, 2], rng.choice(40, 8) + 1]))
                lex.append((np.concatenate([L.field_keys(words, 1), L.field_keys(ctx, 2)]),
                            rng.choice([3.0, 5.5, 9.0], len(words) + len(ctx)).astype(np.float32)))
                rows.append(SentenceRow("s", "s", 0))
            vectors = None if f in (1, 6) else SparseVectors.from_rows(vecs)  # two files wait for the encoder
            ix.write_files([FileUpdate(f"/f{f}.txt", 1, 1.0, "h", rows, vectors,
                                       lexical=SparseVectors.from_rows(lex))], merge=False)
        ix.write_files([FileUpdate(f"/f{f}.txt", 1, 2.0, "h2") for f in (2, 5)], merge=False)
        assert any(b[0] == bitmap.FORMAT_BITMAP for (b,) in ix.conn.execute("SELECT blob FROM postings"))
        assert ix.verify() == []
        assert ix.encoded_counts() == (300, 400) and [f.path for f in ix.pending_files()] == ["/f1.txt", "/f6.txt"]
        searcher = Searcher(ix)
        for _ in range(25):
            q = np.concatenate([[1, 2], rng.choice(40, int(rng.integers(1, 5)), replace=False) + 3])
            for k in (1, 10):
                ids, sc = searcher.search(q, k, mode=mode)
                ref = _reference(ix, fusion.keys(sorted(set(q.tolist())), mode), k, mode)
                np.testing.assert_array_equal(ids, ref[0])
                np.testing.assert_allclose(sc, ref[1], rtol=1e-6)
                assert (sc <= 1 + sum(fusion.WEIGHTS.values()) + 1e-6).all()
        # explain splits the same fused score by key
        ids, sc = searcher.search(q, 3, mode=mode)
        for parts, score in zip(searcher.explain(q, ids, mode=mode), sc.tolist()):
            assert sum(parts.values()) == pytest.approx(score, rel=1e-5)


def test_coverage_is_the_share_of_the_questions_idf_in_the_passage(tmp_path, monkeypatch):
    """Against a reference from each sentence's own context words: encoded and pending files,
    bitmap blobs, and a question word no sentence holds (it weighs as the rarest)."""
    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 8)
    rng = np.random.default_rng(5)
    contexts = []
    with Index(tmp_path / "index.db") as ix:
        for f in range(4):
            rows, vecs, lex = [], [], []
            for _ in range(30):
                ctx = np.unique(np.concatenate([[1], rng.choice(20, 5, replace=False) + 2]))
                contexts.append(set(ctx.tolist()))
                vecs.append((ctx, np.full(len(ctx), 2.5, np.float32)))
                lex.append((L.field_keys(ctx, L.PARAGRAPH_FIELD), np.full(len(ctx), 4.0, np.float32)))
                rows.append(SentenceRow("s", "s", 0))
            vectors = None if f == 2 else SparseVectors.from_rows(vecs)  # one file waits for the encoder
            ix.write_files([FileUpdate(f"/f{f}.txt", 1, 1.0, "h", rows, vectors,
                                       lexical=SparseVectors.from_rows(lex))], merge=False)
        sid = [i for f in range(4) for i in sorted(ix.file_sentence_ids(f + 1))]
        n = len(contexts)
        assert len(sid) == n
        df = {t: sum(t in c for c in contexts) for t in range(30)}
        q = [1, 3, 7, 12, 25]  # 25: in no sentence
        idf = {t: math.log1p((n - df[t] + 0.5) / (df[t] + 0.5)) for t in q}
        rows = list(range(0, n, 7))
        ids = [sid[i] for i in rows]
        want = [sum(idf[t] for t in q if t in contexts[i]) / sum(idf.values()) for i in rows]
        np.testing.assert_allclose(Searcher(ix).coverage(np.array(q + [3]), ids), want, rtol=1e-12)
    assert fusion.coverage(np.array([1.0, 3.0]), np.array([[True, False], [False, True], [False, False]])).tolist() \
        == [0.25, 0.75, 0.0]


def _tea_set(tmp_path):
    import gzip

    ds = tmp_path / "set"
    ds.mkdir()
    texts = [["Green tea steeps for three minutes.", "Black tea takes five."],
             ["The cup holds hot water.", "Water boils at one hundred degrees."]]
    corpus = [{"id": f"p{i}-{j}", "text": s, "passage": f"p{i}", "position": j}
              for i, p in enumerate(texts) for j, s in enumerate(p)]
    queries = [{"id": "q0", "question": "how long does green tea steep", "answers": ["p0-0"]},
               {"id": "q1", "question": "when does water boil", "answers": ["p1-1"]}]
    for name, rows in (("corpus", corpus), ("queries", queries)):
        with gzip.open(ds / f"{name}.jsonl.gz", "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return ds


def test_eval_reports_the_three_modes(tmp_path, tiny_model_dir):
    from typer.testing import CliRunner

    from sparc_local.cli.app import app

    out = CliRunner().invoke(app, ["eval", str(_tea_set(tmp_path)), "--model", str(tiny_model_dir), "--json"])
    assert out.exit_code == 0, out.output
    r = json.loads(out.stdout)
    assert {"hybrid", "sparc", "bm25", "bm25_words"} <= set(r)
    for mode in modes.MODES:
        assert set(r[mode]) >= {"mrr@10", "r@1", "r@10", "latency_ms_p50"}
        assert "hits" not in r[mode]  # per question only when a benchmark asks


def test_eval_hits_per_question_agree_with_the_means(tmp_path, tiny_model_dir):
    from sparc_local.evaluation.evaluate import evaluate
    from sparc_local.model.info import ModelInfo

    r = evaluate(_tea_set(tmp_path), ModelInfo.load(tiny_model_dir), with_hits=True)
    for mode in modes.MODES:
        hits = r[mode]["hits"]
        assert len(hits) == 2 and all(0 <= h <= 10 for h in hits)
        assert r[mode]["mrr@10"] == pytest.approx(np.mean([1 / h if h else 0.0 for h in hits]))
        assert r[mode]["r@1"] == pytest.approx(np.mean([h == 1 for h in hits]))
