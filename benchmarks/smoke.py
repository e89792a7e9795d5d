"""What a benchmark's `--smoke` runs on: the tiny test model (tests/tiny.py, fp32 and int8) and a
tiny ReQA set, written into a fresh scratch folder that is also the data dir (SPARC_LOCAL_HOME).

A smoke run takes each script's own code path in seconds, so a refactor that breaks a script
fails CI (tests/test_benchmarks.py runs every script that has one); its figures mean nothing.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = Path.home() / ".cache" / "sparc-local-bench"


@dataclass(frozen=True)
class Smoke:
    folder: Path
    model: Path  # the tiny model, fp32
    model_int8: Path  # the same weights, int8 (export.QUANT_WEIGHTS)
    data: Path  # a tiny ReQA set: 24 sentences in 6 passages, a question per sentence


def setup() -> Smoke:
    """The tiny models and set in a new folder under SCRATCH, removed when the script exits."""
    sys.path.insert(0, str(ROOT))  # the clone's top: tests/ is not installed
    from tests.tiny import make_tiny_model, write_reqa_set

    SCRATCH.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="smoke-", dir=SCRATCH))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    home = folder / "home"
    home.mkdir(mode=0o700)
    os.environ["SPARC_LOCAL_HOME"] = str(home)
    write_reqa_set(folder / "tiny-set", seed=0, articles=["a00", "a01"])
    return Smoke(folder, make_tiny_model(folder / "tiny").path, make_tiny_model(folder / "tiny-int8", int8=True).path,
                 folder / "tiny-set")


def lab_data(s: Smoke) -> Path:
    """The lab's training sets (sparc_lab.data.TRAIN_SETS), tiny, in a folder of s: du2017-train holds the
    held-out articles (DU_VALIDATION_ARTICLES) that the trainer validates on and input_rule.py reads."""
    from sparc_lab.data import DU_VALIDATION_ARTICLES, TRAIN_SETS
    from tests.tiny import write_reqa_set

    data = s.folder / "reqa"
    for k, name in enumerate(TRAIN_SETS):
        held_out = sorted(DU_VALIDATION_ARTICLES) if name == "du2017-train" else []
        write_reqa_set(data / name, seed=k, articles=["a12", *held_out])
    return data


@dataclass(frozen=True)
class AdaptSmoke:
    model: Path  # the tiny model with its MLM head (tests/tiny.make_tiny_adapt_model)
    data: Path  # a tiny ReQA set of 108 sentences: above adapt's minimum corpus (AdaptOptions.min_sentences)
    home: Path  # setup()'s SPARC_LOCAL_HOME; with indexed=True its index holds data's sentences


def adapt_setup(s: Smoke, indexed: bool = False) -> AdaptSmoke:
    """What `adapt` needs beside setup()'s: a model with an MLM head and a corpus it accepts, in s.folder;
    ``indexed``: that corpus indexed by the model in the home, as adapt_e2e.py indexes a ReQA set."""
    from adapt_e2e import build_index

    from tests.tiny import make_tiny_adapt_model, write_reqa_set

    write_reqa_set(s.folder / "adapt-set", seed=1, articles=[f"a{i:02d}" for i in range(9)])
    a = AdaptSmoke(make_tiny_adapt_model(s.folder / "tiny-adapt").path, s.folder / "adapt-set",
                   Path(os.environ["SPARC_LOCAL_HOME"]))
    if indexed:
        build_index(a.data, a.model, threads=1)
    return a


def adapted_model(a: AdaptSmoke) -> Path:
    """A model `adapt` trained (3 steps) on the index of adapt_setup(s, indexed=True)."""
    from sparc_local.adapt.run import AdaptOptions, train_adapted_model
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo
    from sparc_local.paths import db_path

    with Index(db_path()) as idx:
        r = train_adapted_model(idx, AdaptOptions(steps=3, batch_size=4, max_length=16, lr=1e-3),
                                model=ModelInfo.load(a.model))
    return r.model.path
