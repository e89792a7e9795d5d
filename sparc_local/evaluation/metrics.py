"""Retrieval metrics, defined once for eval, validation, training and the benchmarks.

A question's *first-hit rank* is the position (from 1) of its first relevant candidate in its
ranking cut at depth k; 0 means none in the top k. Its reciprocal rank is 1/rank, and 0 for 0.
MRR@k is the mean reciprocal rank; R@k the share of questions with a hit in the top k.

One tie rule, the product's: a ranking built from scores (`ranked_by_score`) is
`query.scoring.top_k`'s, so it holds only candidates that score more than 0 (`ask` never shows
a sentence that matches nothing), best first, ties broken by the lower candidate index. A ranking
given as a list (what `ask` or a searcher returned) is taken as it is.

The paired bootstrap compares two runs on the same questions: the pairing removes the
questions' own difficulty, so the interval says whether a difference is more than question noise.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sparc_local.query.scoring import top_k

BOOTSTRAP = 10_000  # resamples of the questions for a paired interval


def first_hits(ranked: Iterable[Sequence[Hashable]], relevant: Iterable[Collection[Hashable]],
               depth: int) -> list[int]:
    """Each question's first-hit rank in the top ``depth`` of its ranking (0: none there).
    Kept per question so that two runs can be compared question by question."""
    return [next((r + 1 for r, c in enumerate(got[:depth]) if c in gold), 0) for got, gold in zip(ranked, relevant)]


def positions(candidates: Sequence[Hashable], relevant: Iterable[Iterable[Hashable]]) -> list[set[int]]:
    """Per question, the positions in ``candidates`` of its relevant items (those not among the
    candidates dropped): the relevant sets of `first_hits_by_score`."""
    where = {c: i for i, c in enumerate(candidates)}
    return [{where[a] for a in want if a in where} for want in relevant]


def ranked_by_score(scores, depth: int) -> np.ndarray:
    """Candidate indices of the top ``depth`` of one question's ``scores``, by the tie rule above."""
    return top_k(np.asarray(scores), depth)[0]


def first_hits_by_score(scores: Iterable, relevant: Iterable[Collection[int]], depth: int) -> list[int]:
    """`first_hits` of rankings built from per-question score rows (candidate index = position)."""
    return first_hits([ranked_by_score(s, depth).tolist() for s in scores], relevant, depth)


def reciprocal(ranks: Sequence[int] | np.ndarray) -> np.ndarray:
    """1/rank per question, 0 where the rank is 0 (no hit)."""
    h = np.asarray(ranks)
    return np.where(h > 0, 1.0 / np.maximum(h, 1), 0.0)


def mrr(ranks: Sequence[int] | np.ndarray) -> float:
    return float(reciprocal(ranks).mean())


def recall(ranks: Sequence[int] | np.ndarray, k: int) -> float:
    """Share of questions with a hit at rank k or better."""
    h = np.asarray(ranks)
    return float(np.mean((h > 0) & (h <= k)))


def summary(ranks: Sequence[int] | np.ndarray, depth: int) -> dict[str, float]:
    """MRR@depth, R@1 and R@depth of first-hit ranks cut at ``depth``."""
    return {f"mrr@{depth}": mrr(ranks), "r@1": recall(ranks, 1), f"r@{depth}": recall(ranks, depth)}


@dataclass(frozen=True)
class Paired:
    """AFTER against BEFORE on the same questions: how many rank better and worse, the mean
    reciprocal-rank difference and its 95% bootstrap interval."""

    questions: int
    better: int
    worse: int
    mean: float
    low: float
    high: float


def paired_bootstrap(before: Sequence[int], after: Sequence[int], *, resamples: int = BOOTSTRAP,
                     seed: int = 0, hit_at: int | None = None) -> Paired:
    """Paired comparison of two runs' first-hit ranks, question i in both at position i: of their
    reciprocal ranks, or with ``hit_at`` of hit@hit_at (a rank from 1 to hit_at)."""
    if len(before) != len(after):
        raise ValueError(f"paired runs differ in length: {len(before)} and {len(after)}")

    def value(ranks: Sequence[int]) -> np.ndarray:
        if hit_at is None:
            return reciprocal(ranks)
        r = np.asarray(ranks)
        return ((r >= 1) & (r <= hit_at)).astype(np.float64)

    diff = value(after) - value(before)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), (resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Paired(len(diff), int((diff > 0).sum()), int((diff < 0).sum()), float(diff.mean()), float(low), float(high))
