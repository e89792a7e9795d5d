"""Query-time scoring: pure numpy, arrays in, arrays out, no I/O.

SPARC scores a sentence s for a question q as g(q, s) = sum over the *set* of question
tokens v of f(v, s).  f(v, s) is read from v's posting lists, so scoring is: for every
posting list of every (distinct) question token, add its weights into an accumulator
indexed by sentence id, then take the top k.

A "posting" argument is a list of ``(sentence_ids, weights)`` or
``(token_id, sentence_ids, weights)`` tuples (the latter is what ``Index.postings``
returns; ``top_k_blobs`` reads the blobs themselves).  Within one tuple the sentence ids must be unique (they are strictly ascending
when they come from the store); one token may have several tuples (one per index segment),
whose id sets are disjoint.  Weights may be the stored uint8 quantized values -- pass the
index's ``scale`` to get scores in f units -- or floats with ``scale=1``.

Each query token must appear once; ``Index.postings`` dedups, and callers that build
posting lists themselves must pass each token's lists only once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Use a dense accumulator unless the id space is this many times bigger than the number of
# postings (and bigger than DENSE_MIN); then fall back to a sort-based sparse sum.
DENSE_RATIO = 32
DENSE_MIN = 1 << 20
_BLOCK = 128  # block size of the top-k prefilter


def _ids_weights(item) -> tuple[np.ndarray, np.ndarray]:
    return item[-2], item[-1]


def accumulate(postings: Sequence, size: int | None = None) -> np.ndarray:
    """Dense float32 accumulator acc[sentence_id] = sum of weights.

    ``size`` defaults to max id + 1.  Uses ``acc[ids] += w``, which is correct because the ids
    of one posting list are unique (and much faster than np.add.at).
    """
    lists = [_ids_weights(p) for p in postings]
    if size is None:
        size = 1 + max((int(ids.max()) for ids, _ in lists if len(ids)), default=-1)
    acc = np.zeros(size, np.float32)
    for ids, w in lists:
        if len(ids):
            acc[ids] += w
    return acc


def _select(values: np.ndarray, k: int | None) -> np.ndarray:
    """Positions of the k largest values, sorted by value desc, ties by position asc."""
    if values.dtype.kind == "u":
        values = values.astype(np.int64)  # negated below
    m = len(values)
    if k is None or k >= m:
        return np.argsort(-values, kind="stable")
    if k <= 0:
        return np.zeros(0, np.int64)
    part = np.argpartition(-values, k - 1)[:k]
    thr = values[part].min()  # the k-th largest value
    above = np.flatnonzero(values > thr)
    eq = np.flatnonzero(values == thr)[: k - len(above)]
    sel = np.concatenate([above, eq])
    return sel[np.argsort(-values[sel], kind="stable")]


def top_k(acc: np.ndarray, k: int | None, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top k positive entries of a dense accumulator -> (ids int64, scores float32).

    Sorted by score descending, ties broken by id ascending (deterministic).  ``k=None``
    returns every positive entry.  Ids in ``exclude`` are never returned (acc is modified).
    """
    if exclude is not None and len(exclude):
        ex = np.asarray(exclude, dtype=np.int64)
        acc[ex[(ex >= 0) & (ex < len(acc))]] = 0
    nb = len(acc) // _BLOCK
    if k is not None and 0 < k <= nb // 4:
        # Cheap lower bound of the k-th largest value: the k-th largest of per-block maxima
        # (k blocks each hold a value >= it).  Only entries >= it can be in the top k, so the
        # exact selection below runs on a few candidates instead of the whole accumulator.
        bmax = acc[: nb * _BLOCK].reshape(nb, _BLOCK).max(axis=1)
        lb = np.partition(bmax, nb - k)[nb - k]
        cand = np.flatnonzero(acc >= max(lb, np.float32(0)))
        if lb <= 0:
            cand = cand[acc[cand] > 0]
    else:
        cand = np.flatnonzero(acc > 0)
    vals = acc[cand]
    pos = _select(vals, k)
    return cand[pos].astype(np.int64, copy=False), vals[pos]


def score(
    postings: Sequence,
    n: int | None = 10,
    exclude: np.ndarray | None = None,
    *,
    scale: float = 1.0,
    size: int | None = None,
    allow: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Score every sentence touched by ``postings`` and return the top ``n``.

    Returns (sentence_ids int64, scores float32), best first, ties by id ascending.
    ``n=None`` returns all sentences with a positive score.  ``exclude``: sentence ids to drop
    (the index's tombstones).  ``scale`` multiplies the final scores (the quantization step
    when weights are the stored uint8 values).  ``size``: accumulator length (default: max id + 1).
    ``allow``: a bool per sentence id (longer than every id); only allowed sentences are ranked.
    """
    lists = [_ids_weights(p) for p in postings]
    lists = [(np.asarray(i), np.asarray(w)) for i, w in lists if len(i)]
    if allow is not None:
        lists = [(i[m], w[m]) for i, w in lists for m in (allow[i],) if m.any()]
    total = sum(len(i) for i, _ in lists)
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    if size is None:
        size = 1 + max(int(i.max()) for i, _ in lists)
    if size <= DENSE_MIN or size <= DENSE_RATIO * total:
        acc = accumulate(lists, size)
        ids, vals = top_k(acc, n, exclude)
    else:
        # Sparse id space (e.g. ids grew large through re-indexing): sort-based sum.
        all_ids = np.concatenate([i for i, _ in lists]).astype(np.int64, copy=False)
        all_w = np.concatenate([w.astype(np.float32, copy=False) for _, w in lists])
        uniq, inv = np.unique(all_ids, return_inverse=True)
        sums = np.bincount(inv, weights=all_w, minlength=len(uniq)).astype(np.float32)
        if exclude is not None and len(exclude):
            sums[np.isin(uniq, exclude)] = 0
        keep = sums > 0
        uniq, sums = uniq[keep], sums[keep]
        pos = _select(sums, n)
        ids, vals = uniq[pos], sums[pos]
    if scale != 1.0:
        vals = vals * np.float32(scale)
    return ids, vals.astype(np.float32, copy=False)


def explain(postings: Sequence, ids: np.ndarray, *, scale: float = 1.0) -> list[dict[int, float]]:
    """Per-query-token contributions for the given sentence ids (for ``--explain``).

    ``postings`` must be ``(token_id, sentence_ids ascending, weights)`` tuples.  Returns one
    ``{token_id: f(v, s)}`` dict per id, in the order of ``ids``; tokens that do not occur in
    a sentence are absent, so each dict's values sum to that sentence's score.
    """
    ids = np.asarray(ids, dtype=np.int64)
    out: list[dict[int, float]] = [{} for _ in range(len(ids))]
    if len(ids) == 0:
        return out
    for token_id, sids, w in postings:
        if len(sids) == 0:
            continue
        pos = np.searchsorted(sids, ids)
        pos_c = np.minimum(pos, len(sids) - 1)
        hit = np.flatnonzero((pos < len(sids)) & (sids[pos_c] == ids))
        if len(hit):
            vals = w[pos_c[hit]].astype(np.float64) * scale
            for r, v in zip(hit.tolist(), vals.tolist()):
                out[r][int(token_id)] = out[r].get(int(token_id), 0.0) + v
    return out


# --------------------------------------------------------------------------- top k from blobs
