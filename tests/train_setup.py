"""Tiny ReQA-format training sets, a tiny student base and a tiny teacher, for the trainer's tests."""

from __future__ import annotations

import random
from pathlib import Path

from sparc_lab import train
from sparc_lab.data import DU_VALIDATION_ARTICLES, TRAIN_SETS, sample_batch
from sparc_local.model.weights import save_canonical
from tests.tiny import make_tiny_model, tiny_vocab, tiny_weights, write_reqa_set, write_tokenizer


def write_setup(root: Path) -> dict[str, Path]:
    """A student base (.npz), its tokenizer, training sets, a teacher model and its data dir."""
    data = root / "reqa"
    for k, name in enumerate(TRAIN_SETS):
        articles = ["a12", "a13", *sorted(DU_VALIDATION_ARTICLES)] if name == "du2017-train" else ["a00", "a01"]
        write_reqa_set(data / name, seed=k, articles=articles)
    cfg, w = tiny_weights("bert", len(tiny_vocab()), seed=3)
    save_canonical(root / "base.npz", cfg, w)
    return {"data": data, "base": root / "base.npz", "tokenizer": write_tokenizer(root / "tokenizer.json"),
            "teacher": make_tiny_model(root / "teacher", top_k=40, seed=0).path, "home": root / "teacher-home"}


def train_args(setup: dict[str, Path], run: Path, *extra: str) -> list[str]:
    return ["--base", str(setup["base"]), "--tokenizer", str(setup["tokenizer"]), "--data", str(setup["data"]),
            "--run", str(run), "--batch", "4", "--max-length", "48", "--threads", "1", "--warmup", "1",
            "--lr", "1e-3", "--valid-every", "0", "--ckpt-every", "2", *extra]


def distill_args(setup: dict[str, Path], weight: float, temp: float = 1.0) -> list[str]:
    return ["--distill-home", str(setup["home"]), "--distill-model", str(setup["teacher"]),
            "--distill-weight", str(weight), "--distill-temp", str(temp)]


def first_batch(trainer: train.Trainer, seed: int = 0):
    return sample_batch(trainer.pool, trainer.pool.train[:4], random.Random(seed))
