"""Distillation from a teacher's sparse vectors (sparc_lab/distill.py) on a tiny random model and
tiny ReQA-format training sets, with real torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from sparc_lab import train
from sparc_lab.distill import kl_term
from tests.train_setup import distill_args, first_batch, train_args, write_setup


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_setup(tmp_path_factory.mktemp("train"))


def test_kl_gradient_moves_the_student_toward_the_teacher() -> None:
    torch.manual_seed(0)
    student = torch.randn(3, 5, requires_grad=True)
    teacher = torch.randn(3, 5)
    teacher[:, 2] += 10.0  # the teacher is sure of candidate 2
    temp = 2.0
    kl = kl_term(student, teacher, temp)
    kl.backward()
    q, p = torch.softmax(student.detach() / temp, 1), torch.softmax(teacher / temp, 1)
    # d/dg of T²·KL(p‖q), averaged over the 3 questions: T·(q − p)/3
    assert torch.allclose(student.grad, temp * (q - p) / 3, atol=1e-6)
    assert (student.grad[:, 2] < 0).all()  # a descent step raises the teacher's favourite
    assert kl.item() > 0
    assert kl_term(teacher, teacher, temp).item() == pytest.approx(0.0, abs=1e-6)


def test_kl_leaves_out_what_the_student_masks() -> None:
    student = torch.tensor([[1.0, float("-inf"), 0.5]], requires_grad=True)
    teacher = torch.tensor([[0.0, 9.0, 2.0]])
    kl = kl_term(student, teacher, 1.0)
    kl.backward()
    # the teacher's distribution over candidates 0 and 2 only
    p = torch.softmax(torch.tensor([0.0, 2.0]), 0)
    q = torch.softmax(torch.tensor([1.0, 0.5]), 0)
    assert kl.item() == pytest.approx(float((p * (p / q).log()).sum()), rel=1e-5)
    assert torch.isfinite(student.grad).all() and student.grad[0, 1] == 0


def test_teacher_scores_are_sums_of_its_stored_weights(setup: dict[str, Path], tmp_path: Path) -> None:
    trainer = train.Trainer(train.parse_args(train_args(setup, tmp_path / "run") + distill_args(setup, 1.0)))
    questions, cand, _ = first_batch(trainer)
    qmask, union = trainer._question_tokens(questions)
    got = qmask @ trainer.teacher.f(cand, union).T
    assert got.shape == (len(questions), len(cand)) and (got > 0).any()
    for i, q in enumerate(questions):
        tokens = set(union[qmask[i].numpy() > 0].tolist())
        for j, s in enumerate(cand):
            tok, w = trainer.teacher.vectors.row(s)
            want = sum(float(x) for t, x in zip(tok.tolist(), w) if t in tokens)
            assert got[i, j].item() == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_zero_weight_is_the_cross_entropy_exactly(setup: dict[str, Path], tmp_path: Path) -> None:
    plain = train.Trainer(train.parse_args(train_args(setup, tmp_path / "plain")))
    losses = {}
    for weight in (0.0, 0.5):
        t = train.Trainer(train.parse_args(train_args(setup, tmp_path / f"d{weight}")
                                           + distill_args(setup, weight, temp=2.0)))
        losses[weight] = t._loss(*first_batch(t))
    ce, parts = plain._loss(*first_batch(plain))
    assert parts == {}
    assert torch.equal(losses[0.0][0], ce)
    assert losses[0.0][1]["ce"] == round(ce.item(), 4) and losses[0.0][1]["kl"] > 0
    assert losses[0.5][0].item() == pytest.approx(ce.item() + 0.5 * losses[0.5][1]["kl"], abs=1e-4)


def test_distillation_trains_logs_and_resumes(setup: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    train.main(train_args(setup, run, "--steps", "4") + distill_args(setup, 5.0))
    log = [json.loads(x) for x in (run / "train.log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    assert all(r["loss"] == pytest.approx(r["ce"] + 5.0 * r["kl"], abs=1e-3) for r in log)
    train.main(train_args(setup, run, "--steps", "6") + distill_args(setup, 5.0))
    assert "resumed from step 4" in capsys.readouterr().out
    log = [json.loads(x) for x in (run / "train.log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]


def test_steps_on_a_fixed_batch_bring_the_student_to_the_teacher(setup: dict[str, Path], tmp_path: Path) -> None:
    t = train.Trainer(train.parse_args(train_args(setup, tmp_path / "fixed") + distill_args(setup, 50.0)))
    batch = first_batch(t, seed=1)
    kls = []
    for _ in range(12):
        loss, parts = t._loss(*batch)
        kls.append(parts["kl"])
        t.opt.zero_grad()
        loss.backward()
        t.opt.step()
    assert kls[-1] < 0.5 * kls[0], kls


def test_vector_term_is_the_squared_error_to_the_teachers_weights(setup: dict[str, Path], tmp_path: Path) -> None:
    """--distill-vectors β adds β·mean((f − f_t)²) over the candidates at the teacher's top tokens
    and the questions' (the teacher's 0 where it stored none); the rest of the loss is unchanged."""
    import numpy as np

    base = train_args(setup, tmp_path / "base") + distill_args(setup, 0.5)
    t0 = train.Trainer(train.parse_args(base))
    t = train.Trainer(train.parse_args(train_args(setup, tmp_path / "vec") + distill_args(setup, 0.5)
                                       + ["--distill-vectors", "2.0", "--distill-top", "5"]))
    batch = first_batch(t)
    loss, parts = t._loss(*batch)
    loss0, parts0 = t0._loss(*first_batch(t0))
    assert parts["ce"] == parts0["ce"] and parts["kl"] == parts0["kl"]
    assert loss.item() == pytest.approx(loss0.item() + 2.0 * parts["mse"], abs=1e-3)
    questions, cand, _ = batch
    _, union = t._question_tokens(questions)
    cols = np.union1d(union, t.teacher.top_tokens(cand, 5))
    assert len(cols) > len(union)
    with torch.no_grad():
        f, sents = t._sentence_scores(cand, cols)
    rows = sorted({sents.index(c) for c in cand})
    want = ((f[rows] - t.teacher.f([sents[r] for r in rows], cols)) ** 2).mean().item()
    assert parts["mse"] == pytest.approx(want, rel=1e-3, abs=1e-4)


def test_vector_term_needs_a_teacher(setup: dict[str, Path], tmp_path: Path) -> None:
    from sparc_local.errors import UserError

    with pytest.raises(UserError, match="needs a teacher"):
        train.Trainer(train.parse_args(train_args(setup, tmp_path / "r") + ["--distill-vectors", "1"]))


def test_the_rank_estimate_counts_the_exact_top_k_its_candidates_keep():
    import numpy as np

    from sparc_lab.rank_estimate import overlaps

    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, -1.0])
    assert overlaps(scores, scores, k=3, candidates=4) == 1.0
    assert overlaps(scores, -scores, k=3, candidates=4) == pytest.approx(1 / 3)  # rows 0 and 1 are not candidates
    assert overlaps(np.array([2.0, -1.0, -2.0]), np.array([0.0, 1.0, 2.0]), k=2, candidates=2) == 0.0
