"""Exact top k straight from posting blobs, pruned MaxScore-style: the engine behind every query.

Same contract as ``scoring.score`` (which stays the exhaustive reference the tests compare it
with): g(q, s) = sum over the question's tokens of f(v, s) (SPARC Eq. 2), best first, ties by id.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparc_local.index import postings as codec
from sparc_local.index.postings import QMAX
from sparc_local.query.scoring import DENSE_MIN, DENSE_RATIO, score

_ZERO_RATIO = 16  # zero the accumulator by a fill when more than 1/16 of it was touched (measured)
_SELECT_RATIO = 4  # select the allowed postings if they are < 1/4 of them, else zero the others (measured)
_SAMPLE_MIN = 100  # postings per wanted answer in the sample that estimates the k-th best score
_EST_STEP = 64  # every so many accumulator entries are read to estimate a candidate count
_LOOKUP_VS_SUM = 2  # reading a pruned token at a candidate costs about as much as summing this many postings
_GATHER_RATIO = 16  # read acc at the rarer tokens' ids if they are < 1/_GATHER_RATIO of it (measured)
_Summed = tuple[int, int, Sequence[bytes]]  # a token's summed blobs: (their bytes, a bound of their weights, blobs)


def _kth_distinct(ids: np.ndarray, vals: np.ndarray, k: int, reps: int) -> int:
    """The k-th largest value over distinct ids (0 if fewer), where an id repeats at most
    ``reps`` times and always with the same value; ids < 2^32, values >= 0 integers.

    Why not deduplicate all of ``ids``: the best ``k * reps`` entries already hold the k best
    distinct ids.  Packed as value << 32 | id, a repeat is an equal key, so one partition and
    one sort of those few keys do it.
    """
    key = (vals.astype(np.int64) << 32) | ids
    m = k * reps
    if len(key) > m:
        key = np.partition(key, len(key) - m)[len(key) - m :]
    key.sort()
    uniq = _unique_sorted(key)
    return int(uniq[-k] >> 32) if len(uniq) >= k else 0


def _unique_sorted(a: np.ndarray) -> np.ndarray:
    """``a`` (sorted) without repeats; not np.unique, which would sort again."""
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if len(a) else a


def _best(ids: np.ndarray, vals: np.ndarray, k: int | None) -> np.ndarray:
    """Positions of the k best positive ``vals``: value descending, ties by id ascending.

    ``ids`` need not be sorted (the tie order comes from them, not from positions)."""
    pos = np.flatnonzero(vals > 0)
    v = vals[pos]
    if k is not None and k < len(pos):
        thr = np.partition(v, len(v) - k)[len(v) - k]  # the k-th largest value
        keep = v >= thr  # every tie of the k-th value, so the id order decides among them
        pos, v = pos[keep], v[keep]
    order = np.lexsort((ids[pos], -v))
    return pos[order[:k] if k is not None else order]


def _live(ids: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """``ids`` without the ones in ``dead`` (sorted)."""
    if len(dead) == 0 or len(ids) == 0:
        return ids
    pos = np.minimum(np.searchsorted(dead, ids), len(dead) - 1)
    return ids[dead[pos] != ids]



def work_buffer(size: int, n_tokens: int, work: np.ndarray | None = None, *, capacity: int | None = None) -> np.ndarray:
    """A zeroed accumulator for ``top_k_blobs`` that a caller keeps between questions.

    Why: a fresh 1M-entry accumulator per question costs page faults on every touched page,
    and uint16 (sums of at most 257 uint8 weights fit) keeps it 4x smaller in the caches than
    float64.  Returns ``work`` itself when it fits, else a new zeroed buffer (pass it next time).
    """
    dt = _acc_dtype(n_tokens * QMAX if capacity is None else capacity)
    if work is not None and work.dtype == dt and len(work) >= size:
        return work
    return np.zeros(max(size, 0 if work is None else len(work)), dt)


def _acc_dtype(capacity: int) -> type:
    """The smallest accumulator that holds any sum up to ``capacity``."""
    return np.uint16 if capacity <= 0xFFFF else np.int32 if capacity < 1 << 31 else np.int64


def top_k_blobs(
    token_blobs: Sequence[Sequence[bytes]],
    k: int | None,
    exclude: np.ndarray | None,
    size: int,
    *,
    scale: float = 1.0,
    stats: dict | None = None,
    work: np.ndarray | None = None,
    allow: np.ndarray | None = None,
    multipliers: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top k of g(q, s) = sum_{v in q} f(v, s) (SPARC Eq. 2) straight from posting blobs.

    ``token_blobs``: for each distinct question token, its blobs (one per segment, disjoint ids).
    ``exclude``: tombstoned ids, sorted ascending.  ``size``: every sentence id is below it.
    ``work``: an all-zero accumulator from ``work_buffer(size, len(token_blobs))``, reused
    between calls (it is all zero again on return); None allocates one.
    ``allow``: a bool per sentence id (length >= ``size``), e.g. the sentences of the files a
    filter keeps; only allowed sentences are ranked.
    Returns the same (ids, scores) as ``score(..., k, exclude, scale=scale, allow=allow)``: score
    descending, ties by id ascending; ``k=None`` returns every positive score.

    Why this shape: per-list numpy calls dominated, so all lists that are summed are decoded in
    one vectorized pass per blob format and added into the accumulator with one ``np.add.at``
    (integer sums).  Dense tokens (bitmap blobs, most of a question's postings) are pruned
    MaxScore-style: they are read only at candidate sentences (``postings.BitmapSet``).  With U
    the sum of their largest weights and theta the k-th best exact score of distinct live
    sentences (a lower bound of the true k-th score), a sentence can reach the top k only if the
    rest of its score plus U >= theta.  theta is estimated once, on the sentences of the rarest
    summed tokens (``_sample``) with every dense token read there; the longest dense tokens whose
    bounds sum below it stay pruned and the others are summed in one pass (measured: rounds of
    un-pruning one token at a time cost more than they saved).  Candidates are then the
    accumulator entries >= theta - U (``_top_k_acc``: at the rarer lists' ids only when the
    longest lists' bounds allow; a pruned token is summed after all when it would be read at
    too many candidates).  Ties are safe: ">=" keeps every sentence that can tie.

    A filter (``allow``) is a mask inside scoring, so the pruning above stays exact: postings of
    sentences it drops are never added (the accumulator stays 0 there, below every candidate
    threshold, which is >= 1), and theta is the k-th best of allowed sentences only (the best
    scores overall are no lower bound of the k-th best allowed one).
    """
    dead = np.zeros(0, np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
    mults = [1] * len(token_blobs) if multipliers is None else [int(m) for m in multipliers]
    weight = {id(b): m for bl, m in zip(token_blobs, mults) for b in bl} if multipliers is not None else None
    pruned: dict[int, list[bytes]] = {}  # token -> its bitmap blobs, read at candidates only
    summed: list[_Summed] = []  # per token, the blobs summed in full
    for i, (blobs, m) in enumerate(zip(token_blobs, mults)):
        bm = [b for b in blobs if b[0] == codec.FORMAT_BITMAP] if k else []
        if bm:
            pruned[i] = bm
            blobs = [b for b in blobs if b[0] != codec.FORMAT_BITMAP]
        summed.append((sum(map(len, blobs)), m * max(map(codec.bound, blobs), default=0), blobs))
    summed.sort(key=lambda t: t[0])  # rarest first (bytes stand in for lengths): prefixes below
    flat = [b for _, _, bl in summed for b in bl]
    if size > DENSE_MIN and size > DENSE_RATIO * sum(codec.header(b)[1] for bl in token_blobs for b in bl):
        # sparse id space (ids grew large through re-indexing): sort-based exhaustive sum
        blobs = [b for bl in token_blobs for b in bl]
        plist = [(i, w if weight is None else w.astype(np.int64) * weight[id(b)])
                 for b, (i, w) in zip(blobs, codec.decode_lists(blobs))]
        return score(plist, k, dead, scale=scale, allow=allow)
    work = work_buffer(size, len(token_blobs), work, capacity=QMAX * sum(mults))
    acc = work[:size]
    parts: list[np.ndarray] = []  # the ids added into acc, to zero them again
    try:
        decoded = _add_blobs(acc, flat, parts, allow, weight)
        return _top_k_acc(acc, parts, summed, pruned, dead, k, scale, stats, decoded, allow,
                          None if weight is None else {i: mults[i] for i in pruned}, weight)
    finally:
        if sum(len(p) for p in parts) * _ZERO_RATIO >= size:
            acc.fill(0)  # measured: a sequential fill beats a scattered one above 1/16 of the ids
        else:
            for p in parts:
                acc[p] = 0


def _add_blobs(acc: np.ndarray, blobs: list[bytes], parts: list[np.ndarray],
               allow: np.ndarray | None = None, weight: dict[int, int] | None = None) -> dict[int, tuple]:
    """Add every posting of ``blobs`` into ``acc`` (only those of ``allow``ed ids, if given);
    appends the ids added to ``parts``.
    Returns {format tag: (posting counts, ids)} of that format's blobs, in their order (every
    id, allowed or not: the counts index them).

    Each format is decoded in one pass over its blobs (no interleaving copy), and summed with
    one ``np.add.at``: it handles repeated ids (the lists of all tokens at once) and, with
    values already in the accumulator's dtype, measured faster than ``acc[ids] += q`` per token
    (numpy 2.x; mixed dtypes fall back to a path 40x slower).
    """
    by_tag: dict[int, list[bytes]] = {}
    for b in blobs:
        by_tag.setdefault(b[0], []).append(b)
    if not by_tag:
        parts.append(np.zeros(0, np.int64))
    decoded = {}
    for tag, group in by_tag.items():
        counts, ids, q = codec.decoder(tag)(group)
        decoded[tag] = (counts, ids)
        q = q.astype(acc.dtype)
        if weight is not None:  # a fused score: each key's stored weights times its multiplier
            q *= np.repeat(np.array([weight[id(b)] for b in group], acc.dtype), counts)
        if allow is not None:
            keep = allow[ids]
            if np.count_nonzero(keep) * _SELECT_RATIO < len(ids):
                ids, q = _allowed(ids, keep), _allowed(q, keep)
            else:  # most are allowed: add 0 for the others (measured cheaper than selecting)
                q *= keep
        np.add.at(acc, ids, q)
        parts.append(ids)
    return decoded


def _allowed(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``a[keep]`` for a bool ``keep``: numpy's boolean indexing branches per element (measured
    5x slower at 20% True), positions from ``flatnonzero`` do not."""
    return a[np.flatnonzero(keep)]


def _prefix_ids(summed: list[_Summed], n_tok: int, decoded: dict[int, tuple]) -> np.ndarray:
    """The sentence ids of the first ``n_tok`` tokens of ``summed`` (repeats included).

    ``decoded`` is ``_add_blobs``'s result for ``summed``'s blobs in their order, so these
    tokens' blobs are a prefix of every format's blobs there (a view when there is one format).
    """
    per_tag: dict[int, int] = {}
    for _, _, bl in summed[:n_tok]:
        for b in bl:
            per_tag[b[0]] = per_tag.get(b[0], 0) + 1
    ids = [decoded[t][1][: int(decoded[t][0][:n].sum())] for t, n in per_tag.items()]
    return np.zeros(0, np.int64) if not ids else ids[0] if len(ids) == 1 else np.concatenate(ids)


def _sample(summed: list[_Summed], dead: np.ndarray, k: int, decoded: dict[int, tuple],
            allow: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Live allowed sentences to estimate the k-th best score: those of the rarest tokens, taken
    until they hold ``_SAMPLE_MIN * k`` postings -> (ids, the number of tokens; an id repeats at
    most that many times).

    Any set of distinct live allowed sentences gives a lower bound of the k-th best score (their
    k-th best).  The rarest tokens' sentences hold the best answers most often, so the bound is
    tight while the sample stays small.  ``summed`` is sorted rarest first.  When ``allow``
    keeps a fraction of the first tokens' postings, tokens are taken for that many more (once:
    the fraction measured on the first ones).
    """
    want = 3 * _SAMPLE_MIN * k  # bytes: ~3 per posting
    n_tok = _n_rarest(summed, want)
    ids = _prefix_ids(summed, n_tok, decoded)
    if allow is not None:
        kept = _allowed(ids, allow[ids])
        if n_tok < len(summed) and len(kept) < len(ids):
            n_tok = _n_rarest(summed, want * len(ids) / max(len(kept), 1))
            ids = _prefix_ids(summed, n_tok, decoded)
            kept = _allowed(ids, allow[ids])
        ids = kept
    return _live(ids, dead), max(n_tok, 1)


def _n_rarest(summed: list[_Summed], nbytes: float) -> int:
    """How many of the rarest tokens it takes to hold ``nbytes`` of postings (or all of them)."""
    n_tok = got = 0
    for b, _, _ in summed:
        n_tok += 1
        got += b
        if got >= nbytes:
            break
    return n_tok


def _candidates(acc: np.ndarray, need: int, where: np.ndarray | None,
                limit: int | None) -> tuple[np.ndarray | None, int]:
    """Sorted distinct ids with ``acc >= need``, which are all in ``where`` (repeats allowed;
    None: anywhere) -> (ids, or None if there are more than ``limit``; entries of acc read).

    Why the limit: numpy's nonzero costs ~10 ns per hit, so before a scan that would find
    more than ``limit`` ids the count is estimated on every ``_EST_STEP``-th entry."""
    if where is None or len(where) * _GATHER_RATIO >= len(acc):
        if limit is not None and np.count_nonzero(acc[::_EST_STEP] >= need) * _EST_STEP > limit:
            return None, len(acc) // _EST_STEP
        c = np.flatnonzero(acc >= need)
        return (None if limit is not None and len(c) > limit else c), len(acc)
    c = where[np.take(acc, where) >= need]  # (measured faster than acc[where])
    c.sort()
    c = _unique_sorted(c)
    return (None if limit is not None and len(c) > limit else c), len(where)


class _Weighted:
    """A pruned token's ``BitmapSet`` with its weights times the token's multiplier (fused scores)."""

    def __init__(self, bitmaps, multiplier: int) -> None:
        self.bitmaps, self.m = bitmaps, multiplier
        self.n, self.ub = bitmaps.n, bitmaps.ub * multiplier

    def get(self, ids: np.ndarray) -> np.ndarray:
        return self.bitmaps.get(ids).astype(np.int64) * self.m


def _top_k_acc(acc: np.ndarray, parts: list[np.ndarray], summed: list[_Summed], pruned: dict[int, list[bytes]],
               dead: np.ndarray, k: int | None, scale: float, stats: dict | None,
               decoded: dict[int, tuple], allow: np.ndarray | None, pruned_mult: dict[int, int] | None = None,
               weight: dict[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``top_k_blobs`` once the summed lists are in ``acc`` (``parts``: the ids added so far).

    Candidates are the entries ``acc >= theta - u``, found in one of two ways.  If the longest
    summed tokens' bounds plus u sum below theta, a sentence found in none of the other
    (rarer) tokens cannot reach the top k (MaxScore's non-essential lists), so the accumulator
    is read only at the rarer tokens' ids, when they are few.  Otherwise one pass over the whole
    dense accumulator: measured cheaper than reading it at every touched id, and it never sees
    an id twice.
    """
    sets = {i: codec.BitmapSet(bl) if pruned_mult is None else _Weighted(codec.BitmapSet(bl), pruned_mult[i])
            for i, bl in pruned.items()}
    theta = 0
    order: list[int] = []
    rest: list[int] = []
    if k is not None and k > 0:
        sample, reps = _sample(summed, dead, k, decoded, allow)
        sc = acc[sample].astype(np.int64)
        for bs in sets.values():
            sc += bs.get(sample)
        theta = _kth_distinct(sample, sc, k, reps)  # the k-th best exact score of distinct live sentences
    if sets:
        # keep pruned the longest tokens whose bounds sum below theta; sum the others, at once
        u = 0
        for i in sorted(sets, key=lambda i: -sets[i].n):
            if u + sets[i].ub < theta:
                order.append(i)
                u += sets[i].ub
        rest = [i for i in sets if i not in order]
        if rest:
            _add_blobs(acc, [b for i in rest for b in pruned[i]], parts, allow, weight)
    gone = dead[dead < len(acc)]
    u = sum(sets[i].ub for i in order)
    scanned = 0
    while True:
        if len(gone):
            acc[gone] = 0  # never a candidate (acc is zeroed again by the caller)
        # a sentence can reach the top k only if its summed part plus the pruned bounds u >= theta;
        # u < theta, so the threshold is >= 1 and sentences with no summed posting are never needed
        need = max(theta - u, 1)
        n_ess = len(summed)  # the rarest tokens, whose ids hold every candidate
        b = 0
        while n_ess and not rest and b + summed[n_ess - 1][1] < theta - u:  # (``rest`` has no ids in ``decoded``)
            n_ess -= 1
            b += summed[n_ess][1]
        # so many candidates that reading a pruned token at them costs more than summing it
        # (the tail: several near-stop tokens and a low theta): sum the shortest, and again
        cheapest = min(order, key=lambda i: sets[i].n, default=None)
        limit = None if cheapest is None else sets[cheapest].n // _LOOKUP_VS_SUM
        where = _prefix_ids(summed, n_ess, decoded) if n_ess < len(summed) else None
        cand, n_read = _candidates(acc, need, where, limit)
        scanned += n_read
        if cand is not None:
            break
        assert cheapest is not None  # no limit without a pruned token: cand is then never None
        order.remove(cheapest)
        rest.append(cheapest)
        if stats is not None:
            stats["unpruned"] = stats.get("unpruned", 0) + 1
        u -= sets[cheapest].ub
        _add_blobs(acc, pruned[cheapest], parts, allow, weight)
    sc = acc[cand].astype(np.int64)
    n_cand = len(cand)
    # largest bound first: each lookup tightens the bound of the tokens left
    for i in sorted(order, key=lambda i: -sets[i].ub):
        u -= sets[i].ub
        sc += sets[i].get(cand)
        keep = sc >= theta - u
        cand, sc = cand[keep], sc[keep]
    pos = _best(cand, sc, k)
    if stats is not None:
        stats["postings_scored"] = sum(len(p) for p in parts) + n_cand * len(order)
        stats["candidates"] = n_cand
        stats["pruned_tokens"] = len(order)
        stats["scanned"] = scanned  # accumulator entries read to find the candidates
    return cand[pos].astype(np.int64, copy=False), (sc[pos] * np.float64(np.float32(scale))).astype(np.float32)
