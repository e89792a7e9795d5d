"""The MLM companion trainer (sparc_lab/companion.py) on a tiny random model and tiny corpora."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sparc_lab import companion
from sparc_lab.mlm_head import load_sentences
from tests.test_adapt_cli import _fake_reqa, _sentences
from tests.tiny import make_tiny_adapt_model


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(model folder with its MLM head, data folder with the training sets' corpora)."""
    root = tmp_path_factory.mktemp("companion")
    model = make_tiny_adapt_model(root / "model").path
    data = _fake_reqa(root / "data")
    _, held_out = load_sentences(data)
    assert held_out  # the held-out split must not be empty
    return model, data


def _texts() -> dict[str, list[str]]:
    return {"test-text": _sentences(300, seed=1)}


def _train(setup, run: Path, steps: int, **kw) -> dict:
    model, data = setup
    opts = dict(batch=8, max_length=32, lr=5e-3, warmup=1, log_every=3, save_every=3, eval_every=30, n_valid=64,
                log=lambda s: None)
    opts.update(kw)
    return companion.train_companion(model, run, data_dir=data, texts=_texts(), steps=steps, **opts)


def _log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / companion.LOG_FILE).read_text().splitlines()]


def test_training_lowers_the_held_out_loss(setup, tmp_path: Path) -> None:
    torch.manual_seed(0)
    final = _train(setup, tmp_path / "run", steps=30)
    records = _log(tmp_path / "run")
    valid = [r for r in records if r["kind"] == "valid"]
    assert [r["step"] for r in valid] == [0, 30]
    for name in (companion.CORPORA, companion.TEXTS):
        assert valid[1][name]["loss"] < valid[0][name]["loss"] - 0.1
        assert valid[1][name] == final[name]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(3, 31, 3))
    assert all(r["s_per_step"] > 0 and r["loss"] > 0 for r in train)


class Killed(Exception):
    pass


def test_resume_continues_with_identical_state(setup, tmp_path: Path) -> None:
    torch.manual_seed(0)
    _train(setup, tmp_path / "straight", steps=6, log_every=1)

    def kill_at_step_5(line: str) -> None:
        if line.startswith("step 5/"):
            raise Killed  # as a kill between checkpoints: steps 4-5 are lost and redone

    torch.manual_seed(0)
    with pytest.raises(Killed):
        _train(setup, tmp_path / "resumed", steps=6, log_every=1, log=kill_at_step_5)
    torch.manual_seed(123)  # the checkpoint restores torch's RNG too
    _train(setup, tmp_path / "resumed", steps=6, log_every=1)
    a = torch.load(tmp_path / "straight" / companion.CKPT_FILE, weights_only=False)
    b = torch.load(tmp_path / "resumed" / companion.CKPT_FILE, weights_only=False)
    assert a["step"] == b["step"] == 6
    assert a["model"].keys() == b["model"].keys() and "enc.word" not in a["model"]
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    for k, sa in a["opt"]["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(sa[name], b["opt"]["state"][k][name])
    assert a["sched"] == b["sched"]
    assert a["rng"] == b["rng"]
    assert torch.equal(a["torch_rng"], b["torch_rng"])
    train_a = [(r["step"], r["loss"]) for r in _log(tmp_path / "straight") if r["kind"] == "train"]
    train_b = [(r["step"], r["loss"]) for r in _log(tmp_path / "resumed") if r["kind"] == "train"]
    assert [s for s, _ in train_b] == [1, 2, 3, 4, 5, 4, 5, 6]
    assert train_b[:3] + train_b[5:] == train_a  # the redone steps see the same batches
    # after resuming, the first held-out evaluation is not repeated
    assert [r["step"] for r in _log(tmp_path / "resumed") if r["kind"] == "valid"] == [0, 6]


def test_resume_refuses_another_recipe(setup, tmp_path: Path) -> None:
    _train(setup, tmp_path / "run", steps=3)
    with pytest.raises(SystemExit, match="was trained with"):
        _train(setup, tmp_path / "run", steps=6, batch=4)


def test_cli_trains_and_resumes(setup, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model, data = setup
    args = ["--run", str(tmp_path / "run"), "--model", str(model), "--data", str(data), "--no-texts",
            "--batch", "4", "--max-length", "32", "--valid", "16", "--log-every", "1", "--save-every", "1"]
    companion.main([*args, "--steps", "2"])
    first = capsys.readouterr().out
    assert "step 0: held-out corpora loss" in first and "step 2/2" in first
    companion.main([*args, "--steps", "3"])
    out = capsys.readouterr().out
    assert "resumed at step 2" in out and "step 3/3" in out and "step 0:" not in out
    assert set(json.loads(out.splitlines()[-1])) == {companion.CORPORA}
    assert torch.load(tmp_path / "run" / companion.CKPT_FILE, weights_only=False)["step"] == 3


def test_held_out_split_is_fixed() -> None:
    texts = [f"sentence number {i} of the test." for i in range(2000)]
    train, valid = companion.split_held_out(texts)
    train2, valid2 = companion.split_held_out(list(reversed(texts)) + texts[:50])
    assert sorted(valid) == sorted(valid2) and sorted(train) == sorted(train2)
    assert not set(train) & set(valid)
    assert 0.01 < len(valid) / len(texts) < 0.03


def test_devil_sentences_skip_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dz = tmp_path / "devil.dict.dz"
    with gzip.open(dz, "wt", encoding="utf-8") as fh:
        fh.write("00-database-short\n     The Devil's Dictionary\n\n  PREFACE\n\n"
                 "ABASEMENT, n.  A decent and customary mental\nattitude in the presence of _wealth_.  "
                 "Peculiarly appropriate in an employee.\n")
    monkeypatch.setattr(companion, "DEVIL_FILE", dz)
    assert companion.devil_sentences() == [
        "PREFACE", "ABASEMENT, n.", "A decent and customary mental attitude in the presence of wealth.",
        "Peculiarly appropriate in an employee."]
    monkeypatch.setattr(companion, "DEVIL_FILE", tmp_path / "absent.dz")
    assert companion.devil_sentences() == []


def test_export_writes_a_model_adapt_runs_through_the_companion(setup, tmp_path: Path) -> None:
    from sparc_local.adapt.model_folder import load_adapt_weights
    from sparc_local.model.folder import ENCODER_FILE
    from sparc_local.model.info import ModelInfo

    torch.manual_seed(0)
    _train(setup, tmp_path / "run", steps=6)
    model, data = setup
    out = companion.export_companion(model, tmp_path / "run", tmp_path / "exported", data_dir=data, batch=8,
                                     max_length=32, n_valid=64, log=lambda s: None)
    assert abs(next(iter(out["numpy"].values())) - out["torch"]["loss"]) < 0.01  # adapt's numpy MLM agrees
    info = ModelInfo.load(tmp_path / "exported")
    _, w, meta = load_adapt_weights(info)
    assert meta["encoder"] == "companion:run@6" and (info.path / ENCODER_FILE).is_file()
    state = torch.load(tmp_path / "run" / companion.CKPT_FILE, weights_only=False)["model"]
    assert np.allclose(w["l0.q.w"], state["enc.layers.0.q.weight"].numpy(), atol=1e-3)
    assert np.allclose(w["mlm.dense.w"], state["head.dense.weight"].numpy(), atol=1e-3)
    assert not np.allclose(w["l0.q.w"], load_adapt_weights(ModelInfo.load(model))[1]["l0.q.w"], atol=1e-3)
    with pytest.raises(SystemExit, match="exists"):
        companion.export_companion(model, tmp_path / "run", tmp_path / "exported", data_dir=data, batch=8,
                                   max_length=32, n_valid=64, log=lambda s: None)
