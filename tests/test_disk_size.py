"""index.db sits near its steady size once `index` ends: no free pages, no WAL, little slack."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from sparc_local.index.store import Index
from sparc_local.index_options import IndexOptions
from sparc_local.model.info import ModelInfo
from sparc_local.pipeline import run_index

pytestmark = pytest.mark.usefixtures("active_tiny")


def _vacuumed_size(db: Path, tmp_path: Path) -> int:
    copy = tmp_path / "vacuumed.db"
    shutil.copyfile(db, copy)
    with sqlite3.connect(copy) as c:
        c.execute("VACUUM")
    return copy.stat().st_size


def test_no_slack_after_tiered_merges(tmp_path: Path, tiny_model_dir: Path):
    """Ten batches: tiered merging folds them into one segment before the run ends, so the end
    of the run has nothing left to merge; the merged-away pages must still go back."""
    from sparc_local.model.encoder import Encoder

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(10):
        (root / f"doc{i}.txt").write_text(" ".join(f"Note {i} line {j} is about the green tea and the river."
                                                   for j in range(40)) + "\n")
    info = ModelInfo.load(tiny_model_dir)
    db = tmp_path / "index.db"
    with Index(db) as idx:
        run_index(idx, [str(root)], info, lambda: Encoder(info, threads=1), IndexOptions(batch_sentences=40))
        # each file is written twice (stored, then encoded): tiered merging leaves two segments
        # that compaction need not merge, so its page return is what this checks
        assert len(idx.segments()) <= 2
        assert idx.conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert db.stat().st_size <= 1.15 * _vacuumed_size(db, tmp_path)
