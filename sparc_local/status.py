"""What `status` reports: the index, its roots, the watcher and the active model.

Read without the writer lock (SQLite WAL lets a reader in while `index` or `watch` writes), and
without creating an index that is not there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparc_local.milvus.store import StoreStatus
    from sparc_local.watch.state import WatchState


@dataclass(frozen=True)
class Status:
    """One reading of the installation; ``to_json`` is `status --json`, keys in this order."""

    files: int  # indexed files; those that could not be read are in ``errors``
    sentences: int
    encoded: int  # of those, encoded; the others are answered by BM25 until they are
    postings: int
    db_bytes: int
    model: str | None  # the model the index was built with
    last_update: float | None  # seconds since the epoch
    errors: list[dict]  # {path, reason} of each file that could not be read
    roots: list[str]
    database: str
    watch: WatchState  # watch.files.read_status()
    active_model: str | None  # None: the active model cannot be loaded
    store: StoreStatus | None = None  # None: no Milvus store named (the local engine alone)
    machine_written: list[dict] = dataclasses.field(default_factory=list)  # {path, reason}: left out (`index --logs`)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class IndexCounts:
    """What `status` reads of the index (``Index.stats``), typed in this one place; zeros
    when there is no index yet."""

    files: int = 0
    sentences: int = 0
    encoded: int = 0
    postings: int = 0
    db_bytes: int = 0
    model: str | None = None
    last_update: float | None = None
    errors: tuple[dict, ...] = ()  # {path, reason}

    @classmethod
    def of(cls, stats: dict) -> IndexCounts:
        return cls(**{f.name: stats[f.name] for f in dataclasses.fields(cls) if f.name != "errors"},
                   errors=tuple(stats["errors"]))


def gather() -> Status:
    """The status now; a missing index reads as an empty one, a broken active model as None."""
    from sparc_local import backend, paths
    from sparc_local.errors import ModelError
    from sparc_local.index.store import Index
    from sparc_local.ingest.machine import is_skipped
    from sparc_local.model.info import active_model
    from sparc_local.watch.files import read_status

    db = paths.db_path()
    counts, roots = IndexCounts(), []
    if db.exists():
        with Index(db) as idx:
            counts, roots = IndexCounts.of(idx.stats()), idx.roots()
    try:
        model = active_model().id
    except ModelError:
        model = None
    return Status(files=counts.files, sentences=counts.sentences, encoded=counts.encoded, postings=counts.postings,
                  db_bytes=counts.db_bytes, model=counts.model, last_update=counts.last_update,
                  errors=[e for e in counts.errors if not is_skipped(e["reason"])], roots=roots,
                  database=str(db), watch=read_status(), active_model=model,
                  store=backend.store_status(db, counts.encoded) if backend.store_named() else None,
                  machine_written=[e for e in counts.errors if is_skipped(e["reason"])])
