"""Training with the hybrid score's BM25 parts as fixed features (sparc_lab/hybrid.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from sparc_lab import train
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, SENTENCE_FIELD
from tests.train_setup import distill_args, first_batch, train_args, write_setup


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_setup(tmp_path_factory.mktemp("train"))


def test_lexical_features_are_the_fused_bm25_parts_in_g_units(setup: dict[str, Path], tmp_path: Path) -> None:
    t = train.Trainer(train.parse_args(train_args(setup, tmp_path / "run", "--hybrid")))
    questions, cand, _ = first_batch(t)
    qmask, union = t._question_tokens(questions)
    f = torch.rand(len(cand), len(union)) * 3
    got = t.lexical.scores(qmask, union, cand, f.max(0).values)
    # fusion's docstring, from the pool's postings: idf = log(1 + (N − df + 0.5) / (df + 0.5))
    v = t.lexical.vectors
    rows = [dict(zip(v.row(s)[0].tolist(), v.row(s)[1].tolist())) for s in range(len(v))]
    df: dict[int, int] = {}
    top: dict[int, float] = {}
    for r in rows:
        for k, x in r.items():
            df[k] = df.get(k, 0) + 1
            top[k] = max(top.get(k, 0.0), x)
    n = len(rows)
    idf = {k: math.log(1 + (n - d + 0.5) / (d + 0.5)) for k, d in df.items()}
    for i in range(len(questions)):
        cols = (qmask[i] > 0).nonzero().flatten().tolist()
        g_max = sum(f[:, c].max().item() for c in cols)
        for j, s in enumerate(cand):
            want = 0.0
            for field, weight in ((SENTENCE_FIELD, 0.5), (PARAGRAPH_FIELD, 0.3)):
                ks = [int(union[c]) + field * FIELD_BASE for c in cols]
                m = sum(idf.get(k, 0.0) * top.get(k, 0.0) for k in ks)
                b = sum(idf.get(k, 0.0) * rows[s].get(k, 0.0) for k in ks)
                want += weight * b / m if m > 0 else 0.0
            assert got[i, j].item() == pytest.approx(g_max * want, rel=1e-4, abs=1e-5)
    assert (got > 0).any()


def test_hybrid_distillation_trains(setup: dict[str, Path], tmp_path: Path) -> None:
    for hybrid in (False, True):
        run = tmp_path / f"run-{hybrid}"
        train.main(train_args(setup, run, "--steps", "2", *(["--hybrid"] if hybrid else []))
                   + distill_args(setup, 1.0))
    logs = [[json.loads(x) for x in (tmp_path / f"run-{h}" / "train.log.jsonl").read_text().splitlines()]
            for h in (False, True)]
    assert all(math.isfinite(r["loss"]) and r["kl"] >= 0 for r in logs[1])
    # the same first batch and weights: only the BM25 features differ
    assert logs[1][0]["ce"] != logs[0][0]["ce"]


def test_validation_reports_the_hybrid_score_beside_sparc_alone(setup: dict[str, Path], tmp_path: Path) -> None:
    t = train.Trainer(train.parse_args(train_args(setup, tmp_path / "run", "--hybrid")))
    res = t.validate()
    assert res["questions"] == 24 and res["sentences"] == 24  # the held-out articles' 2 × 3 × 4 sentences
    # each question is three of its answer's words: BM25's fields rank every answer first, the
    # random tiny encoder alone does not
    assert res["hybrid_mrr@10"] == 1.0 > res["mrr@10"]
