"""evaluation/metrics.py: first-hit ranks, MRR@k, R@k, the tie rule and the paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from sparc_local.evaluation import metrics as M


def test_first_hits_rank_from_one_and_zero_past_the_depth():
    assert M.first_hits([["a", "b", "c"], ["c", "a"], ["x"]], [{"b", "c"}, {"a"}, {"y"}], depth=10) == [2, 2, 0]
    assert M.first_hits([["a", "b", "c"]], [{"c"}], depth=2) == [0]


def test_means_of_first_hit_ranks():
    ranks = [1, 2, 0, 4]
    assert M.mrr(ranks) == pytest.approx((1 + 1 / 2 + 0 + 1 / 4) / 4)
    assert M.summary(ranks, 10) == {"mrr@10": M.mrr(ranks), "r@1": 0.25, "r@10": 0.75}
    assert M.recall(ranks, 2) == 0.5


def test_ties_go_to_the_lower_index_and_zero_scores_are_never_ranked():
    scores = np.array([1.0, 2.0, 2.0, 0.0, 3.0])
    assert M.ranked_by_score(scores, 10).tolist() == [4, 1, 2, 0]  # 3 scores 0: not retrieved
    assert M.first_hits_by_score([scores, scores, scores], [{2}, {3}, {1, 2}], 10) == [3, 0, 2]
    assert M.first_hits_by_score([scores], [{0}], 3) == [0]  # rank 4, past the depth


def test_positions_of_the_relevant_candidates():
    assert M.positions([7, 3, 9], [[9, 5], [], [3, 7]]) == [{2}, set(), {0, 1}]


def test_training_validation_uses_the_same_rule():
    """train.py's _mrr: ties and zeros as metrics.py says, not as torch's sort happens to order them."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from sparc_lab.train import _mrr

    g = torch.tensor([[1.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    examples = [SimpleNamespace(answers=[12]), SimpleNamespace(answers=[10])]
    assert _mrr(g, [10, 11, 12, 13], examples) == 0.25  # (1/2 + 0) / 2: a zero row finds nothing


def test_paired_bootstrap_counts_and_interval():
    before, after = [1, 2, 0, 4, 1, 0], [1, 1, 3, 0, 1, 0]
    p = M.paired_bootstrap(before, after)
    diff = M.reciprocal(after) - M.reciprocal(before)
    assert (p.questions, p.better, p.worse) == (6, 2, 1)
    assert p.mean == pytest.approx(diff.mean())
    assert p.low <= p.mean <= p.high and p.low < p.high
    assert M.paired_bootstrap(before, after) == p  # seeded: the same interval every run
    same = M.paired_bootstrap(before, before)
    assert (same.better, same.worse, same.mean, same.low, same.high) == (0, 0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="differ in length"):
        M.paired_bootstrap([1, 2], [1])
