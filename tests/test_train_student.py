"""The student trainer (sparc_lab/student.py) on the tiny teacher: where f is compared, and the hybrid terms."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sparc_lab import student
from sparc_local.model.inputs import pad_batch
from tests.train_setup import first_batch, write_setup


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    return write_setup(tmp_path_factory.mktemp("student"))


def student_args(setup: dict[str, Path], run: Path, *extra: str) -> list[str]:
    return ["--teacher", str(setup["teacher"]), "--keep", "0", "--data", str(setup["data"]), "--run", str(run),
            "--batch", "4", "--max-length", "48", "--threads", "1", "--warmup", "1", "--lr", "1e-3",
            "--valid-every", "0", "--ckpt-every", "2", "--column-sample", "8", *extra]


def log(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "train.log.jsonl").read_text().splitlines()]


def test_f_is_compared_at_each_candidates_top_tokens_under_the_teacher(setup: dict[str, Path], tmp_path: Path) -> None:
    trainer = student.StudentTrainer(student.parse_args(student_args(setup, tmp_path / "run", "--f-teacher-top", "5")))
    _, cand, _ = first_batch(trainer)
    ids, types, mask = (torch.from_numpy(x) for x in pad_batch([trainer.inputs[c] for c in cand]))
    with torch.no_grad():
        hidden = trainer.teacher_model(ids, types, mask)
        every = trainer.teacher_model.token_scores(hidden, mask, torch.from_numpy(trainer.kept_vocab))
    want = np.unique(trainer.kept_vocab[every.topk(5, dim=1).indices.numpy()])
    got = trainer._teacher_top(hidden, mask, 5)
    assert np.array_equal(got, want)
    assert len(want) > 5  # the candidates' top tokens differ: their union is more than one sentence's
    union = np.array([0])
    columns = trainer._columns(union, ids, hidden, mask)
    assert set(want) <= set(columns.tolist()) and np.all(np.diff(columns) > 0)


def test_the_hybrid_student_trains_and_sparc_alone_can_keep_the_teachers_kl(setup: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    runs = {name: tmp_path / name for name in ("plain", "hybrid", "both")}
    student.main(student_args(setup, runs["plain"], "--steps", "1"))
    student.main(student_args(setup, runs["hybrid"], "--steps", "1", "--hybrid"))
    student.main(student_args(setup, runs["both"], "--steps", "1", "--hybrid", "--sparc-kl", "1"))
    plain, hybrid, both = (log(runs[n])[0] for n in ("plain", "hybrid", "both"))
    assert all(math.isfinite(r["loss"]) for r in (plain, hybrid, both))
    assert hybrid["ce"] != plain["ce"]  # the same batch and weights: only the BM25 parts differ
    assert both["ce"] == hybrid["ce"] and both["kl"] > hybrid["kl"]  # SPARC's own KL is added, ≥ 0
