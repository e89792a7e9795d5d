"""Query-time scoring: pure numpy, arrays in, arrays out, no I/O.

SPARC scores a sentence s for a question q as g(q, s) = sum over the *set* of question
tokens v of f(v, s).  f(v, s) is read from v's posting lists, so scoring is: for every
posting list of every (distinct) question token, add its weights into an accumulator
indexed by sentence id, then take the top k.

A "posting" argument is a list of ``(sentence_ids, weights)`` or
``(token_id, sentence_ids, weights)`` tuples (the latter is what ``Index.postings``
returns).  Within one tuple the sentence ids must be unique (they are strictly ascending
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
# postings (and bigger than _DENSE_MIN); then fall back to a sort-based sparse sum.
_DENSE_RATIO = 32
_DENSE_MIN = 1 << 20
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
) -> tuple[np.ndarray, np.ndarray]:
    """Score every sentence touched by ``postings`` and return the top ``n``.

    Returns (sentence_ids int64, scores float32), best first, ties by id ascending.
    ``n=None`` returns all sentences with a positive score.  ``exclude``: sentence ids to drop
    (the index's tombstones).  ``scale`` multiplies the final scores (the quantization step
    when weights are the stored uint8 values).  ``size``: accumulator length (default: max id + 1).
    """
    lists = [_ids_weights(p) for p in postings]
    lists = [(np.asarray(i), np.asarray(w)) for i, w in lists if len(i)]
    total = sum(len(i) for i, _ in lists)
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    if size is None:
        size = 1 + max(int(i.max()) for i, _ in lists)
    if size <= _DENSE_MIN or size <= _DENSE_RATIO * total:
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


# --------------------------------------------------------------------------- pruned top k

_PREFIX_MIN = 4096  # tokens with at most this many postings are always summed, never pruned
_LB_CHUNK = 64  # chunk size of the lower-bound estimate (chunk maxima are distinct documents)


def _distinct_top(ids: np.ndarray, vals: np.ndarray, k: int, reps: int) -> np.ndarray:
    """At least k distinct ids among the best partial scores (fewer if fewer exist), ascending.

    ``ids`` repeat at most ``reps`` times.  Chunk maxima are cheap; the best k * reps of them
    hold at least k distinct ids.
    """
    m = len(vals)
    nb = m // _LB_CHUNK
    if nb >= k * reps:
        ch = vals[: nb * _LB_CHUNK].reshape(nb, _LB_CHUNK)
        arg = ch.argmax(axis=1)
        top = np.argpartition(-ch[np.arange(nb), arg], k * reps - 1)[: k * reps]
        ids = ids[top * _LB_CHUNK + arg[top]]
    return _sorted_unique(ids)


def _sorted_unique(ids: np.ndarray) -> np.ndarray:
    ids = np.sort(ids)
    return ids[np.concatenate(([True], ids[1:] != ids[:-1]))] if len(ids) else ids


def top_k_pruned(
    token_blobs: Sequence[Sequence[bytes]],
    k: int,
    exclude: np.ndarray | None,
    acc: np.ndarray,
    *,
    scale: float = 1.0,
    stats: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top k of g(q, s) = sum_{v in q} f(v, s) (SPARC Eq. 2) with MaxScore-style pruning.

    ``token_blobs``: for each distinct question token, its posting blobs (one per segment, disjoint
    ids).  ``acc``: a float32 scratch accumulator of all zeros, longer than every sentence id;
    it is all zeros again on return.  Returns the same (ids, scores) as ``score(..., k,
    exclude, scale=scale)``: score descending, ties by id ascending.

    Tokens are summed shortest first into ``acc``.  Once the tokens left (the long, near-stop
    ones) can add at most U = sum of their largest weights, and k distinct live sentences are
    known to score at least theta (their exact scores, looked up) with U < theta, no sentence
    untouched so far can enter the top k, and a touched one only if partial + U >= theta.
    Those candidates get exact scores by looking the remaining tokens up (``postings.Lookup``);
    the top k is selected among them.  Ties are safe: every sentence whose exact score can reach
    the k-th best score is a candidate.
    """
    from . import postings as codec

    counts = [sum(codec.header(b)[1] for b in blobs) for blobs in token_blobs]
    order = sorted(range(len(token_blobs)), key=lambda i: counts[i])
    # the cheap prefix: tokens that at most double the postings summed so far
    j, total = 0, 0
    while j < len(order) and (j == 0 or counts[order[j]] <= max(total, _PREFIX_MIN)):
        total += counts[order[j]]
        j += 1
    _, ids, q = codec.decode_many([b for i in order[:j] for b in token_blobs[i]])
    parts_ids = [ids]
    dead = np.zeros(0, np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
    dead = dead[(dead >= 0) & (dead < len(acc))]
    rest = order[j:]
    ub = {i: float(max(codec.max_weight(b) for b in token_blobs[i])) for i in rest}
    tables: dict[int, list] = {}

    def exact(i: int, cand: np.ndarray) -> np.ndarray:
        if i not in tables:
            tables[i] = [codec.Lookup(b) for b in token_blobs[i]]
        out = np.zeros(len(cand), np.float32)
        for t in tables[i]:
            out += t.get(cand)
        return out

    try:
        np.add.at(acc, ids, q.astype(np.float32))
        acc[dead] = -np.inf
        theta = 0.0
        while rest:
            touched = np.concatenate(parts_ids)
            top = _distinct_top(touched, acc[touched], k, j)
            sc = acc[top]
            for i in rest:
                sc = sc + exact(i, top)
            sc = sc[np.isfinite(sc)]
            theta = float(np.partition(sc, len(sc) - k)[len(sc) - k]) if len(sc) >= k else 0.0
            if sum(ub[i] for i in rest) < theta:
                break
            i = rest.pop(0)
            _, ids_i, q_i = codec.decode_many(token_blobs[i])
            np.add.at(acc, ids_i, q_i.astype(np.float32))
            acc[dead] = -np.inf
            parts_ids.append(ids_i)
            j += 1
        touched = np.concatenate(parts_ids)
        u = np.float32(sum(ub[i] for i in rest))
        vals = acc[touched]
        keep = vals + u >= np.float32(theta) if theta > 0 else vals > 0
        cand = _sorted_unique(touched[keep])
        sc = acc[cand]
        for i in rest:
            sc = sc + exact(i, cand)
        sc[~np.isfinite(sc)] = 0  # excluded sentences
        if stats is not None:
            stats["postings_scored"] = len(touched) + len(cand) * len(rest)
            stats["candidates"] = len(cand)
            stats["pruned_tokens"] = len(rest)
    finally:
        acc[np.concatenate(parts_ids)] = 0
        acc[dead] = 0
    pos = np.flatnonzero(sc > 0)
    pos = pos[_select(sc[pos], k)]
    return cand[pos], (sc[pos] * np.float32(scale)).astype(np.float32)
