"""Scoring (search.py) and the posting-blob codec (postings.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sparc_local.index import bitmap
from sparc_local.index import postings as P
from sparc_local.query import maxscore as MS
from sparc_local.query import scoring as S


def _csr_from_dense(M: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """token -> (sentence ids ascending, weights) from a dense (n_sent, vocab) matrix."""
    out = {}
    for t in range(M.shape[1]):
        ids = np.flatnonzero(M[:, t])
        if len(ids):
            out[t] = (ids.astype(np.int64), M[ids, t])
    return out


def _brute(M: np.ndarray, q: np.ndarray, k: int | None, exclude=(), allow=None) -> tuple[np.ndarray, np.ndarray]:
    scores = M[:, np.unique(q)].sum(axis=1)
    scores[list(exclude)] = 0
    if allow is not None:
        scores[~allow[: len(scores)]] = 0
    ids = np.flatnonzero(scores > 0)
    order = np.lexsort((ids, -scores[ids]))  # score desc, id asc
    ids = ids[order][:k]
    return ids, scores[ids]


@pytest.mark.parametrize("seed", range(6))
def test_top_k_equals_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    n, vocab = 400, 60
    # small integer weights -> exact float sums and many ties
    M = (rng.random((n, vocab)) < 0.15) * rng.integers(1, 4, (n, vocab))
    M = M.astype(np.float32)
    lists = _csr_from_dense(M)
    for _ in range(10):
        q = rng.choice(vocab, rng.integers(1, 8), replace=False)
        plist = [(int(t), *lists[t]) for t in q if t in lists]
        for k in (1, 5, 17, None, 10_000):
            ids, sc = S.score(plist, k)
            eids, esc = _brute(M, q, k)
            np.testing.assert_array_equal(ids, eids)
            np.testing.assert_array_equal(sc, esc)
        exclude = rng.choice(n, 40, replace=False)
        ids, sc = S.score(plist, 12, exclude)
        eids, esc = _brute(M, q, 12, exclude)
        np.testing.assert_array_equal(ids, eids)
        np.testing.assert_array_equal(sc, esc)


@pytest.mark.parametrize("seed", range(3))
def test_top_k_large_accumulator_with_ties(seed):
    """Big enough for the block-max prefilter; integer scores give many ties."""
    rng = np.random.default_rng(100 + seed)
    n = 20_000
    lists = []
    for t in range(6):
        ids = np.flatnonzero(rng.random(n) < rng.choice([0.001, 0.05, 0.6]))
        lists.append((t, ids.astype(np.int64), rng.integers(1, 4, len(ids)).astype(np.uint8)))
    dense = np.zeros(n, np.float64)
    for _, i, w in lists:
        dense[i] += w
    exclude = rng.choice(n, 500, replace=False)
    for k in (1, 3, 10, 37, 150, None):
        for ex in (None, exclude):
            ids, sc = S.score(lists, k, ex)
            d = dense.copy()
            if ex is not None:
                d[ex] = 0
            eids = np.flatnonzero(d > 0)
            eids = eids[np.lexsort((eids, -d[eids]))][:k]
            np.testing.assert_array_equal(ids, eids)
            np.testing.assert_array_equal(sc, d[eids].astype(np.float32))


def test_float_weights_and_scale():
    rng = np.random.default_rng(7)
    n, vocab = 300, 40
    M = ((rng.random((n, vocab)) < 0.2) * rng.random((n, vocab)) * 8).astype(np.float32)
    lists = _csr_from_dense(M)
    q = np.array([1, 5, 9, 33])
    plist = [lists[t] for t in q]  # 2-tuples are accepted too
    ids, sc = S.score(plist, 20)
    eids, esc = _brute(M, q, 20)
    np.testing.assert_array_equal(ids, eids)
    np.testing.assert_allclose(sc, esc, rtol=1e-6)
    ids2, sc2 = S.score(plist, 20, scale=0.5)
    np.testing.assert_array_equal(ids2, ids)
    np.testing.assert_allclose(sc2, sc * 0.5, rtol=1e-6)


def test_sparse_id_space_path_matches_dense():
    rng = np.random.default_rng(3)
    big = 50_000_000  # forces the sort-based path (id space >> postings)
    lists = []
    for _ in range(5):
        ids = np.sort(rng.choice(big, 300, replace=False)).astype(np.int64)
        lists.append((ids, rng.integers(1, 5, 300).astype(np.uint8)))
    lists.append((np.array([7, big - 1], np.int64), np.array([9, 9], np.uint8)))
    ids, sc = S.score(lists, 25, exclude=np.array([7]))
    # reference via dict sums
    tot: dict[int, float] = {}
    for i, w in lists:
        for a, b in zip(i.tolist(), w.tolist()):
            tot[a] = tot.get(a, 0) + b
    tot.pop(7)
    ref = sorted(tot.items(), key=lambda kv: (-kv[1], kv[0]))[:25]
    assert ids.tolist() == [k for k, _ in ref]
    assert sc.tolist() == [v for _, v in ref]


def test_empty_inputs():
    ids, sc = S.score([], 10)
    assert ids.shape == (0,) and sc.shape == (0,)
    ids, sc = S.score([(3, np.zeros(0, np.int64), np.zeros(0, np.uint8))], 10)
    assert len(ids) == 0
    ids, sc = S.top_k(np.zeros(5, np.float32), 3)
    assert len(ids) == 0
    ids, sc = S.score([(np.array([2]), np.array([1.0]))], 0)
    assert len(ids) == 0


def test_top_k_direct():
    acc = np.array([0, 3, 1, 3, 0, 2, 3], np.float32)
    ids, sc = S.top_k(acc.copy(), 2)
    assert ids.tolist() == [1, 3] and sc.tolist() == [3, 3]
    ids, sc = S.top_k(acc.copy(), 4)
    assert ids.tolist() == [1, 3, 6, 5]
    ids, sc = S.top_k(acc.copy(), None, exclude=np.array([3, 100]))
    assert ids.tolist() == [1, 6, 5, 2]


def test_explain_sums_to_score():
    rng = np.random.default_rng(1)
    M = ((rng.random((200, 30)) < 0.3) * rng.integers(1, 50, (200, 30))).astype(np.uint8)
    lists = _csr_from_dense(M)
    q = [2, 4, 8, 16]
    # split each token's list into two "segments" to check multi-tuple tokens
    plist = []
    for t in q:
        ids, w = lists[t]
        h = len(ids) // 2
        plist += [(t, ids[:h], w[:h]), (t, ids[h:], w[h:])]
    ids, sc = S.score(plist, 10, scale=0.25)
    ex = S.explain(plist, ids, scale=0.25)
    for i, s, d in zip(ids, sc, ex):
        assert set(d) <= set(q)
        assert sum(d.values()) == pytest.approx(float(s))
        for t, v in d.items():
            assert v == pytest.approx(M[i, t] * 0.25)
    assert S.explain(plist, np.array([], np.int64)) == []
    assert S.explain(plist, np.array([10**9])) == [{}]


# --------------------------------------------------------------------------- codec


@pytest.mark.parametrize(
    "ids",
    [
        [],
        [0],
        [5],
        [0, 1, 2, 3],
        [127, 128, 129, 255, 256, 16383, 16384, 16385],
        [1, 2**31, 2**31 + 1, 2**40, 2**62],
        list(range(1000, 3000)),
    ],
)
def test_codec_round_trip_edges(ids):
    ids = np.array(ids, np.int64)
    q = (np.arange(len(ids)) % 255 + 1).astype(np.uint8)
    blob = P.encode(ids, q)
    i2, q2 = P.decode(blob)
    assert i2.dtype == np.int64 and q2.dtype == np.uint8
    np.testing.assert_array_equal(i2, ids)
    np.testing.assert_array_equal(q2, q)


def test_codec_round_trip_random():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 3000))
        space = int(rng.choice([n + 5, 10 * n, 10**6, 10**10]))
        ids = np.sort(rng.choice(space, n, replace=False)).astype(np.int64)
        q = rng.integers(0, 256, n).astype(np.uint8)
        i2, q2 = P.decode(P.encode(ids, q))
        np.testing.assert_array_equal(i2, ids)
        np.testing.assert_array_equal(q2, q)


def test_encode_groups_matches_encode():
    rng = np.random.default_rng(5)
    keys, ids, qs, expect = [], [], [], []
    for k in sorted(rng.choice(10**5, 40, replace=False).tolist()):
        n = int(rng.integers(1, 200))
        i = np.sort(rng.choice(int(rng.choice([300, 10**7])), n, replace=False)).astype(np.int64)
        q = rng.integers(1, 256, n).astype(np.uint8)
        keys.append(np.full(n, k)), ids.append(i), qs.append(q)
        expect.append((k, P.encode(i, q)))
    got = P.encode_groups(np.concatenate(keys), np.concatenate(ids), np.concatenate(qs))
    assert got == expect
    assert P.encode_groups(np.zeros(0), np.zeros(0), np.zeros(0, np.uint8)) == []


def test_decode_many_and_decode_lists_mixed_sizes():
    rng = np.random.default_rng(9)
    blobs, ref = [], []
    for _ in range(400):
        n = int(rng.choice([0, 1, 3, 50, 200, 2000]))
        space = int(rng.choice([n + 1, 10**4, 10**9]))
        ids = np.sort(rng.choice(space, n, replace=False)).astype(np.int64)
        q = rng.integers(0, 256, n).astype(np.uint8)
        blobs.append(P.encode(ids, q))
        ref.append((ids, q))
    for sub in (blobs, [b for b in blobs if len(b) <= 512], [b for b in blobs if len(b) > 512], blobs[:1], []):
        exp = [P.decode(b) for b in sub]
        counts, ids, q = P.decode_many(sub)
        assert counts.tolist() == [len(e[0]) for e in exp]
        np.testing.assert_array_equal(ids, np.concatenate([e[0] for e in exp]) if exp else [])
        np.testing.assert_array_equal(q, np.concatenate([e[1] for e in exp]) if exp else [])
        got = P.decode_lists(sub)
        assert len(got) == len(exp)
        for (gi, gq), (ei, eq) in zip(got, exp):
            np.testing.assert_array_equal(gi, ei)
            np.testing.assert_array_equal(gq, eq)
    for (i, q), b in zip(ref, blobs):
        np.testing.assert_array_equal(P.decode(b)[0], i)


def test_codec_rejects_bad_input():
    with pytest.raises(ValueError):
        P.encode(np.array([3, 3]), np.array([1, 1], np.uint8))
    with pytest.raises(ValueError):
        P.encode(np.array([5, 2]), np.array([1, 1], np.uint8))
    with pytest.raises(TypeError):
        P.encode(np.array([1]), np.array([1.5]))
    with pytest.raises(ValueError):
        P.decode(b"\x09\x00")
    blob = P.encode(np.array([1, 100000]), np.array([1, 2], np.uint8))
    with pytest.raises(ValueError):
        P.decode(blob[:-1])


def test_quantize():
    scale = P.scale_for_ceiling(16.0)
    w = np.array([0.0, 0.01, scale, 1.0, 15.99, 16.0, 40.0], np.float32)
    q = P.quantize(w, scale)
    assert q.dtype == np.uint8
    assert q.tolist()[:3] == [0, 0, 1] and q[-1] == 255 and q[-2] == 255
    back = P.dequantize(q, scale)
    assert np.all(np.abs(back[:-1] - w[:-1]) <= scale / 2 + 1e-6)


def test_bytes_per_posting_random():
    """~150 postings per sentence over a 30k vocabulary, 2000 sentences: well under 4 B/posting."""
    rng = np.random.default_rng(0)
    n, vocab, k = 2000, 30522, 150
    toks = np.concatenate([rng.choice(vocab, k, replace=False) for _ in range(n)])
    sids = np.repeat(np.arange(n), k)
    q = rng.integers(1, 256, n * k).astype(np.uint8)
    order = np.lexsort((sids, toks))
    groups = P.encode_groups(toks[order], sids[order], q[order])
    per = sum(len(b) for _, b in groups) / (n * k)
    assert per < 4.0


@pytest.fixture
def short_bitmaps(monkeypatch):
    """Bitmaps from 16 ids on, so that small test lists exercise the bitmap and pruning paths
    (the writer's default, ``BITMAP_MIN_N``, is 32768)."""
    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 16)


# --------------------------------------------------------------------------- FORMAT_U16 and old V1 blobs


def _v1_blob(ids: np.ndarray, q: np.ndarray) -> bytes:
    """A FORMAT_V1 blob of any list (the writer keeps V1 for lists FORMAT_U16 cannot hold)."""
    return P.encode_v1(ids, q)


@pytest.mark.parametrize("start,spread", [(0, 60), (70_000, 40), (123_456_789, 900), (65_000, 50)])
def test_u16_round_trip_across_windows(start, spread):
    rng = np.random.default_rng(spread)
    ids = start + np.cumsum(rng.integers(1, spread + 1, 3000)).astype(np.int64)
    q = rng.integers(1, 256, len(ids)).astype(np.uint8)
    blob = P.encode(ids, q)
    windows = (ids[-1] >> 16) - (ids[0] >> 16) + 1
    assert blob[0] == P.FORMAT_U16 and len(blob) == 9 + (2 * windows if windows > 1 else 0) + 3 * len(ids)
    got = P.decode(blob)
    np.testing.assert_array_equal(got[0], ids)
    np.testing.assert_array_equal(got[1], q)
    assert P.header(blob) == (P.FORMAT_U16, len(ids)) and P.bound(blob) == q.max()
    keys = np.zeros(len(ids), np.int64)
    assert P.encode_groups(keys, ids, q) == [(0, blob)]


def test_lists_u16_cannot_hold_are_v1_and_every_format_decodes_together(short_bitmaps):
    q = np.array([7, 8, 9], np.uint8)
    far = np.array([5, 1 << 24, 1 << 25], np.int64)  # 513 windows
    huge = np.array([1, 2, 1 << 33], np.int64)  # an id >= 2^32
    assert P.encode(far, q)[0] == P.FORMAT_V1 and P.encode(huge, q)[0] == P.FORMAT_V1
    for ids in (far, huge):
        np.testing.assert_array_equal(P.decode(P.encode(ids, q))[0], ids)
    old = _v1_blob(np.array([3, 4, 100], np.int64), q)
    dense = np.arange(10, 20_000, 2, dtype=np.int64)
    dq = np.full(len(dense), 3, np.uint8)
    blobs = [P.encode(np.array([2, 70_000], np.int64), q[:2]), old, P.encode(dense, dq), P.encode(far, q)]
    assert [b[0] for b in blobs] == [P.FORMAT_U16, P.FORMAT_V1, P.FORMAT_BITMAP, P.FORMAT_V1]
    counts, ids, qq = P.decode_many(blobs)
    assert counts.tolist() == [2, 3, len(dense), 3]
    np.testing.assert_array_equal(ids, np.concatenate([[2, 70_000], [3, 4, 100], dense, far]))
    np.testing.assert_array_equal(qq, np.concatenate([q[:2], q, dq, q]))
    assert [len(i) for i, _ in P.decode_lists(blobs)] == [2, 3, len(dense), 3]


@pytest.mark.parametrize("cut", [1, 5, 9])
def test_corrupt_u16_blob_raises(cut):
    blob = P.encode(np.array([1, 2, 70_000, 140_000], np.int64), np.array([1, 2, 3, 4], np.uint8))
    with pytest.raises(ValueError, match="corrupt posting blob"):
        P.decode(blob[:-cut])
    bad_table = blob[:9] + bytes([9, 0]) + blob[11:]  # window counts no longer sum to n
    with pytest.raises(ValueError, match="corrupt posting blob"):
        P.decode(bad_table)


# --------------------------------------------------------------------------- bitmap blobs, pruning


@pytest.mark.parametrize("density", [0.01, 0.03, 0.07, 0.2, 0.6, 1.0])
def test_bitmap_format_round_trip_and_lookup(density, short_bitmaps):
    rng = np.random.default_rng(int(density * 100))
    ids = np.flatnonzero(rng.random(5000) < density).astype(np.int64) + 77
    q = rng.integers(1, 256, len(ids)).astype(np.uint8)
    blob = P.encode(ids, q)
    assert blob[0] == (P.FORMAT_BITMAP if density >= bitmap.BITMAP_DENSITY else P.FORMAT_U16)
    got_ids, got_q = P.decode(blob)
    np.testing.assert_array_equal(got_ids, ids)
    np.testing.assert_array_equal(got_q, q)
    assert P.header(blob) == (blob[0], len(ids))
    if blob[0] == P.FORMAT_BITMAP:  # read at candidates by pruned search: BitmapSet
        probe = np.arange(0, 5200, dtype=np.int64)
        expect = np.zeros(len(probe), np.uint8)
        expect[ids] = q
        np.testing.assert_array_equal(P.BitmapSet([blob]).get(probe), expect)
        assert P.BitmapSet([blob]).ub == q.max()
    assert P.bound(blob) == q.max()  # every format's header holds its largest weight
    # encode_groups picks the same format as encode; decode_many handles mixed formats
    small = (np.array([3, 9], np.int64), np.array([5, 6], np.uint8))
    keys = np.concatenate([np.zeros(2, np.int64), np.ones(len(ids), np.int64)])
    groups = P.encode_groups(keys, np.concatenate([small[0], ids]), np.concatenate([small[1], q]))
    assert groups[1][1] == blob
    counts, all_ids, all_q = P.decode_many([groups[0][1], blob, groups[0][1]])
    assert counts.tolist() == [2, len(ids), 2]
    np.testing.assert_array_equal(all_ids, np.concatenate([small[0], ids, small[0]]))


@pytest.mark.parametrize("density", [0.03, 0.055, 0.5])
def test_only_long_dense_lists_are_bitmaps(density):
    """>= BITMAP_DENSITY of the range and >= BITMAP_MIN_N ids: a bitmap, so that search can read
    it at candidates only.  Shorter lists stay FORMAT_U16 even where a bitmap would be smaller
    (they are faster summed than pruned)."""
    rng = np.random.default_rng(7)
    ids = np.flatnonzero(rng.random(int(1.2 * bitmap.BITMAP_MIN_N / density)) < density).astype(np.int64) + 5
    q = rng.integers(1, 256, len(ids)).astype(np.uint8)
    dense = density >= bitmap.BITMAP_DENSITY
    assert P.encode(ids, q)[0] == (P.FORMAT_BITMAP if dense else P.FORMAT_U16)
    keys = np.zeros(len(ids), np.int64)
    assert P.encode_groups(keys, ids, q)[0][1] == P.encode(ids, q)
    short = ids[: bitmap.BITMAP_MIN_N - 1]
    assert P.encode(short, q[: len(short)])[0] == P.FORMAT_U16
    got = P.decode_many([P.encode(ids, q), P.encode(short, q[: len(short)])])
    np.testing.assert_array_equal(got[1], np.concatenate([ids, short]))
    np.testing.assert_array_equal(got[2], np.concatenate([q, q[: len(short)]]))


def _random_segments(rng, n_seg: int, seg_size: int, vocab: int):
    """Posting blobs per token per segment, the dense (sentence, token) matrix, and a weight
    range so narrow that sums tie often. Some tokens are near-stop (in most sentences)."""
    n = n_seg * seg_size
    df = rng.choice([0.002, 0.01, 0.05, 0.3, 0.8], vocab, p=[0.35, 0.3, 0.2, 0.1, 0.05])
    M = (rng.random((n, vocab)) < df) * rng.integers(40, 46, (n, vocab))
    M = M.astype(np.uint8)
    blobs: dict[int, list[bytes]] = {}
    for s in range(n_seg):
        rows = M[s * seg_size:(s + 1) * seg_size]
        for t in range(vocab):
            ids = np.flatnonzero(rows[:, t])
            if len(ids):
                blobs.setdefault(t, []).append(P.encode(ids + s * seg_size, rows[ids, t]))
    return M, blobs


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("zero_ratio,old_format", [(0, None), (1 << 30, "v1")])
def test_pruned_top_k_equals_brute_force(seed, zero_ratio, old_format, monkeypatch, short_bitmaps):
    """Exact: same ids, scores and tie order as summing everything (tombstones, segments, ties),
    with the accumulator zeroed again by a fill or by a scatter, and with the sparse lists in the
    current FORMAT_U16 or in the V1 varints (no bounds) of lists FORMAT_U16 cannot hold."""
    monkeypatch.setattr(MS, "_ZERO_RATIO", zero_ratio)
    rng = np.random.default_rng(1000 + seed)
    M, blobs = _random_segments(rng, n_seg=int(rng.integers(1, 5)), seg_size=1500, vocab=40)
    if old_format:
        blobs = {t: [b if b[0] == P.FORMAT_BITMAP else _v1_blob(*P.decode(b)) for b in bl] for t, bl in blobs.items()}
        assert any(b[0] == P.FORMAT_V1 for bl in blobs.values() for b in bl)
    n = len(M)
    pruned = unpruned = 0
    work = None
    for trial in range(25):
        q = rng.choice(40, int(rng.integers(1, 12)), replace=False)
        dead = rng.choice(n, int(rng.integers(0, 300)), replace=False) if trial % 2 else None
        k = int(rng.choice([1, 3, 10, 50]))
        token_blobs = [blobs[t] for t in q if t in blobs]
        stats: dict = {}
        ex = None if dead is None else np.sort(dead)
        if trial % 3 and work is not None:
            work = MS.work_buffer(n + 10, len(token_blobs), work)
        else:  # a fresh buffer, or none
            work = MS.work_buffer(n + 10, len(token_blobs)) if trial % 3 else None
        ids, sc = MS.top_k_blobs(token_blobs, k, ex, n + 10, scale=0.5, stats=stats, work=work)
        assert work is None or not work.any()  # zero again for the next question
        eids, esc = _brute(M.astype(np.float64), q, k, () if dead is None else dead)
        np.testing.assert_array_equal(ids, eids)
        np.testing.assert_array_equal(sc, (esc * 0.5).astype(np.float32))
        plist = [(int(t), *P.decode(b)) for t in q if t in blobs for b in blobs[t]]
        rids, rsc = S.score(plist, k, dead, scale=0.5)
        np.testing.assert_array_equal(ids, rids)
        np.testing.assert_array_equal(sc, rsc)
        pruned += stats["pruned_tokens"] > 0
        unpruned += stats.get("unpruned", 0) > 0
        if trial % 5 == 0:  # every positive score
            aids, asc = MS.top_k_blobs(token_blobs, None, ex, n + 10, scale=0.5)
            rids, rsc = S.score(plist, None, dead, scale=0.5)
            np.testing.assert_array_equal(aids, rids)
            np.testing.assert_array_equal(asc, rsc)
    assert pruned  # the near-stop tokens were skipped at least once
    assert unpruned  # and summed after all when they would be read at too many candidates


@pytest.mark.parametrize("seed", range(6))
def test_candidates_at_the_rarer_tokens_only_equal_brute_force(seed, monkeypatch):
    """Common tokens with small weights, rare ones with large weights (as in the real model):
    the k-th best score exceeds the common tokens' bounds, so candidates are read at the rarer
    tokens' ids only.  Exact, with tombstones, and with some lists in FORMAT_V1 (no bound)."""
    rng = np.random.default_rng(2000 + seed)
    n, vocab = 6000, 30
    df = np.where(np.arange(vocab) < 10, 0.3, rng.choice([0.002, 0.01, 0.03], vocab))
    hi = np.where(np.arange(vocab) < 10, 6, 60)
    M = ((rng.random((n, vocab)) < df) * rng.integers(1, hi + 1, (n, vocab))).astype(np.uint8)
    seg = np.sort(rng.choice(np.arange(1, n), 2, replace=False))
    blobs: dict[int, list[bytes]] = {}
    for a, b in zip([0, *seg], [*seg, n]):
        for t in range(vocab):
            ids = np.flatnonzero(M[a:b, t]) + a
            if len(ids):
                blob = P.encode(ids, M[ids, t])
                blobs.setdefault(t, []).append(_v1_blob(*P.decode(blob)) if t % 7 == 6 else blob)
    monkeypatch.setattr(MS, "_GATHER_RATIO", 1)
    gathered = 0
    for trial in range(30):
        q = np.concatenate([rng.choice(10, int(rng.integers(1, 6)), replace=False),
                            rng.choice(np.arange(10, vocab), int(rng.integers(1, 6)), replace=False)])
        dead = np.sort(rng.choice(n, int(rng.integers(0, 200)), replace=False))
        k = int(rng.choice([1, 5, 10]))
        stats: dict = {}
        ids, sc = MS.top_k_blobs([blobs[t] for t in q if t in blobs], k, dead, n, stats=stats)
        eids, esc = _brute(M.astype(np.float64), q, k, dead)
        np.testing.assert_array_equal(ids, eids)
        np.testing.assert_array_equal(sc, esc.astype(np.float32))
        gathered += stats["scanned"] < n
    assert gathered >= 10


def test_bitmap_set_overlapping_ranges(short_bitmaps):
    """Blobs of one token whose id ranges interleave (segments merged out of order) still
    answer every id from the right blob."""
    rng = np.random.default_rng(3)
    a = np.arange(100, 900, 2, dtype=np.int64)  # even ids
    b = np.arange(301, 1501, 3, dtype=np.int64)  # inside and past a's range
    qa = rng.integers(1, 256, len(a)).astype(np.uint8)
    qb = rng.integers(1, 256, len(b)).astype(np.uint8)
    blobs = [P.encode(a, qa), P.encode(b, qb)]
    assert all(x[0] == P.FORMAT_BITMAP for x in blobs)
    bs = P.BitmapSet(blobs)
    assert len(bs.layers) == 2 and bs.ub == max(qa.max(), qb.max()) and bs.n == len(a) + len(b)
    probe = rng.permutation(np.arange(0, 1600, dtype=np.int64))
    expect = np.zeros(1600, np.uint8)
    expect[a] = qa
    expect[b] = qb
    np.testing.assert_array_equal(bs.get(probe), expect[probe])


def test_top_k_blobs_weights_at_the_accumulator_limits(monkeypatch, short_bitmaps):
    """uint16 sums up to 257 tokens of weight 255, int32 beyond; exact either way, and the
    reused buffer is zero again even when a blob turns out corrupt mid-way."""
    rng = np.random.default_rng(11)
    n = 3000
    for n_tok in (40, 257, 300):
        M = ((rng.random((n, n_tok)) < rng.choice([0.01, 0.3, 0.9], n_tok)[None, :])
             * rng.choice([254, 255], (n, n_tok))).astype(np.uint8)
        blobs = [[P.encode(np.flatnonzero(M[:, t]), M[np.flatnonzero(M[:, t]), t])] for t in range(n_tok)
                 if M[:, t].any()]
        work = MS.work_buffer(n, len(blobs))
        assert work.dtype == (np.uint16 if len(blobs) <= 257 else np.int32)
        for k in (1, 10):
            ids, sc = MS.top_k_blobs(blobs, k, None, n, work=work)
            eids, esc = _brute(M.astype(np.float64), np.arange(n_tok), k)
            np.testing.assert_array_equal(ids, eids)
            np.testing.assert_array_equal(sc, esc.astype(np.float32))
            assert not work.any()
    bad = P.encode(np.arange(0, n, 2, dtype=np.int64), np.full(n // 2, 9, np.uint8))
    assert bad[0] == P.FORMAT_BITMAP
    bad = bad[:-1] + bytes([bad[-1] ^ 1])  # one bit flipped: the bitmap no longer holds n ids
    ok = [P.encode(np.arange(0, n, 3, dtype=np.int64), np.full(len(range(0, n, 3)), 7, np.uint8))]
    work = MS.work_buffer(n, 2)
    with pytest.raises(ValueError):
        MS.top_k_blobs([ok, [bad]], 10, None, n, work=work)
    assert not work.any()


# --------------------------------------------------------------------------- filters: a mask inside scoring


def _random_mask(rng, n: int, size: int, kind: str) -> np.ndarray:
    """A bool per id below ``size``: dense or sparse at random, in runs like a file's
    consecutive sentences, or allowing nothing."""
    if kind == "none":
        return np.zeros(size, bool)
    if kind == "runs":  # files of 1-40 sentences, each kept with probability 1/5
        ends = np.cumsum(rng.integers(1, 41, size))
        ends = ends[ends < size]
        keep = rng.random(len(ends) + 1) < 0.2
        return np.repeat(keep, np.diff(np.concatenate([[0], ends, [size]])))
    density = {"dense": 0.8, "half": 0.3, "sparse": 0.01, "single": 0.0}[kind]
    allow = rng.random(size) < density
    if kind == "single":
        allow[rng.integers(0, n)] = True
    return allow


_MASKS = ("dense", "half", "runs", "sparse", "single", "none")


@pytest.mark.parametrize("seed", range(8))
def test_masked_top_k_equals_brute_force(seed, monkeypatch, short_bitmaps):
    """A filter's mask inside pruned scoring is exact: the top k of the allowed sentences, as
    brute force restricted to them ranks them (tombstones too, ties by id), for dense, sparse,
    file-like and empty masks; and the exhaustive ``score`` agrees."""
    rng = np.random.default_rng(3000 + seed)
    M, blobs = _random_segments(rng, n_seg=int(rng.integers(1, 5)), seg_size=1500, vocab=40)
    n, size = len(M), len(M) + 10
    pruned = 0
    work = None
    for trial in range(36):
        allow = _random_mask(rng, n, size, _MASKS[trial % len(_MASKS)])
        q = rng.choice(40, int(rng.integers(1, 12)), replace=False)
        dead = np.sort(rng.choice(n, int(rng.integers(0, 300)), replace=False)) if trial % 4 < 2 else None
        k = int(rng.choice([1, 3, 10, 50]))
        token_blobs = [blobs[t] for t in q if t in blobs]
        work = MS.work_buffer(size, len(token_blobs), work)
        stats: dict = {}
        ids, sc = MS.top_k_blobs(token_blobs, k, dead, size, scale=0.5, stats=stats, work=work, allow=allow)
        assert not work.any()  # zero again for the next question
        eids, esc = _brute(M.astype(np.float64), q, k, () if dead is None else dead, allow)
        np.testing.assert_array_equal(ids, eids)
        np.testing.assert_array_equal(sc, (esc * 0.5).astype(np.float32))
        plist = [(int(t), *P.decode(b)) for t in q if t in blobs for b in blobs[t]]
        rids, rsc = S.score(plist, k, dead, scale=0.5, allow=allow)
        np.testing.assert_array_equal(rids, eids)
        np.testing.assert_array_equal(rsc, sc)
        pruned += stats["pruned_tokens"] > 0
        if trial % 6 == 0:  # every positive allowed score
            aids, asc = MS.top_k_blobs(token_blobs, None, dead, size, scale=0.5, allow=allow)
            eids, esc = _brute(M.astype(np.float64), q, None, () if dead is None else dead, allow)
            np.testing.assert_array_equal(aids, eids)
            np.testing.assert_array_equal(asc, (esc * 0.5).astype(np.float32))
    assert pruned  # masks did not turn the pruning off


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bitmaps", [True, False])
def test_mask_that_drops_the_best_sentences_keeps_pruning_exact(seed, bitmaps, monkeypatch):
    """The best sentences overall are the ones the filter drops: a theta taken over every
    sentence would exceed the allowed sentences' k-th best and prune their answers away.  The
    rare tokens carry large weights (as in the real model).  With ``bitmaps`` the common tokens
    are pruned (read at candidates only); without, candidates come from the rarer lists only."""
    monkeypatch.setattr(bitmap, "BITMAP_MIN_N", 16 if bitmaps else 1 << 30)
    monkeypatch.setattr(MS, "_GATHER_RATIO", 1)
    rng = np.random.default_rng(4000 + seed)
    n, vocab = 6000, 30
    df = np.where(np.arange(vocab) < 10, 0.3, rng.choice([0.002, 0.01, 0.03], vocab))
    hi = np.where(np.arange(vocab) < 10, 6, 60)
    M = ((rng.random((n, vocab)) < df) * rng.integers(1, hi + 1, (n, vocab))).astype(np.uint8)
    blobs = {t: [P.encode(np.flatnonzero(M[:, t]), M[np.flatnonzero(M[:, t]), t])] for t in range(vocab)
             if M[:, t].any()}
    fast = 0
    for trial in range(30):
        q = np.concatenate([rng.choice(10, int(rng.integers(1, 6)), replace=False),
                            rng.choice(np.arange(10, vocab), int(rng.integers(1, 6)), replace=False)])
        k = int(rng.choice([1, 5, 10]))
        full, _ = _brute(M.astype(np.float64), q, None)
        allow = np.ones(n, bool)
        allow[full[: int(rng.integers(k, 4 * k + 1))]] = False  # the best ones are filtered out
        allow &= rng.random(n) < rng.choice([1.0, 0.3, 0.05])
        dead = np.sort(rng.choice(n, int(rng.integers(0, 200)), replace=False))
        stats: dict = {}
        ids, sc = MS.top_k_blobs([blobs[t] for t in q if t in blobs], k, dead, n, stats=stats, allow=allow)
        eids, esc = _brute(M.astype(np.float64), q, k, dead, allow)
        np.testing.assert_array_equal(ids, eids)
        np.testing.assert_array_equal(sc, esc.astype(np.float32))
        fast += stats["pruned_tokens"] > 0 if bitmaps else stats["scanned"] < n
    assert fast >= 5


def test_masked_sparse_id_space_path():
    """Ids far apart (re-indexed many times) take the sort-based path; the mask holds there too."""
    rng = np.random.default_rng(8)
    size = 3_000_000
    lists = [(np.sort(rng.choice(size, 200, replace=False)).astype(np.int64),
              rng.integers(1, 5, 200).astype(np.uint8)) for _ in range(4)]
    blobs = [[P.encode(i, w)] for i, w in lists]
    allow = rng.random(size) < 0.5
    ids, sc = MS.top_k_blobs(blobs, 25, np.zeros(0, np.int64), size, allow=allow)
    tot: dict[int, int] = {}
    for i, w in lists:
        for a, b in zip(i.tolist(), w.tolist()):
            if allow[a]:
                tot[a] = tot.get(a, 0) + b
    ref = sorted(tot.items(), key=lambda kv: (-kv[1], kv[0]))[:25]
    assert ids.tolist() == [i for i, _ in ref] and sc.tolist() == [v for _, v in ref]
