"""The index run that tests/test_crash.py kills: a module of its own, so the killed process and
the rerun in the test's own process run the same code without the killed one importing pytest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

BATCH_SENTENCES = 4  # tiny batches: a run writes dozens of segments and triggers tiered merges


def index_and_merge(corpus: str, model_dir: str, db: str, on_progress: Callable | None = None) -> None:
    """Index ``corpus`` into ``db`` with the model at ``model_dir``, then merge every segment."""
    from sparc_local.index.store import Index
    from sparc_local.index_options import IndexOptions
    from sparc_local.model.encoder import Encoder
    from sparc_local.model.info import ModelInfo
    from sparc_local.pipeline import run_index

    info = ModelInfo.load(Path(model_dir))
    with Index(Path(db)) as idx:
        run_index(idx, [corpus], info, lambda: Encoder(info, threads=1), IndexOptions(batch_sentences=BATCH_SENTENCES),
                  on_progress=on_progress)
        idx.merge_all()
