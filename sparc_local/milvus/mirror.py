"""The one indexing pipeline writing to Milvus: an ``Index`` whose writes also go to a store.

The local index stays the writer's catalog (files, hashes, roots, forgotten paths, the lock and
the encoding progress), so `index`, `watch` and `forget` run unchanged; every file it commits
with SPARC vectors is written to Milvus under the same sentence ids, every file it drops is
deleted there.  Questions need only the Milvus store (``search.MilvusSearcher``).

Crashes: before a change reaches Milvus, the paths it touches are recorded in a file beside the
index (``UNSYNCED_SUFFIX``, outside SQLite's transactions), and cleared once both sides hold it.
A writer that finds the record removes those paths from both sides first, so the next `index`
run reads them again: re-indexing after a kill converges to the same store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from sparc_local.errors import SparcError
from sparc_local.index.segments import MERGE_FACTOR
from sparc_local.index.store import FileUpdate, Index
from sparc_local.milvus.entities import entities
from sparc_local.milvus.store import MilvusStore, StoreSpec, StoreStatus

UNSYNCED_SUFFIX = ".milvus-unsynced"


class MirroredIndex(Index):
    """``Index`` + the same writes in a Milvus store (see the module doc)."""

    def __init__(self, path: str | os.PathLike, spec: StoreSpec, **kwargs) -> None:
        super().__init__(path, **kwargs)
        self.spec = spec
        self._store: MilvusStore | None = None
        self._marker = Path(str(self.path) + UNSYNCED_SUFFIX)

    @property
    def store(self) -> MilvusStore:
        if self._store is None:
            self._store = MilvusStore(self.spec, create=True)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        super().close()

    # where a run's writes end (`index`'s checkpoint, eval's merge_all, `watch`'s idle compact),
    # Milvus's new rows are sealed too (MilvusStore.seal)
    def _seal(self) -> None:
        if self._store is not None:
            self._store.seal()

    def checkpoint(self) -> None:
        super().checkpoint()
        self._seal()

    def merge_all(self, *, reclaim: bool = True) -> None:
        super().merge_all(reclaim=reclaim)
        self._seal()

    def compact(self, merge_factor: int = MERGE_FACTOR) -> bool:
        folded = super().compact(merge_factor)
        self._seal()
        return folded

    # ------------------------------------------------------------------ the crash record

    def _mark(self, paths: Iterable[str]) -> None:
        self._recover()
        tmp = self._marker.with_name(self._marker.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(sorted(set(paths)), f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self._marker)

    def _unmark(self) -> None:
        self._marker.unlink(missing_ok=True)

    def _recover(self) -> None:
        """A killed writer's paths out of both sides (they are read again by the next run)."""
        if not self._marker.exists():
            return
        for p in json.loads(self._marker.read_text() or "[]"):
            self.store.remove_under(p)
            super().remove_under(p)
        self._unmark()

    # ------------------------------------------------------------------ writes

    def write_files(self, updates: Sequence[FileUpdate], *, merge: bool = True) -> int | None:
        latest = {str(u.path): u for u in updates}
        self._mark(latest)
        before = [p for p in latest if self.file(p) is not None]  # a new file has nothing to delete
        segment = super().write_files(updates, merge=merge)
        scale = self.weight_scale
        new = []
        for path, u in latest.items():
            rec = self.file(path)
            ids = [] if rec is None else self.file_sentence_ids(rec.id)
            if u.vectors is None or u.error is not None or rec is None or len(ids) != len(u.sentences):
                continue  # unreadable, forgotten, or stored but not encoded yet: not in Milvus
            lexical = u.lexical if u.lexical is not None else None
            if lexical is None:
                raise ValueError(f"{path}: a file for Milvus needs its lexical impacts")
            new.extend(entities(path, u.mtime, u.sentences, sorted(ids), u.vectors, lexical, scale))
        self.store.replace(before, new)
        self._unmark()
        return segment

    def remove_files(self, paths: Iterable[str | os.PathLike]) -> int:
        named = [str(p) for p in paths]
        self._mark(named)
        removed = super().remove_files(named)
        self.store.replace(named, [])
        self._unmark()
        return removed

    def remove_under(self, prefix: str | os.PathLike) -> int:
        self._mark([str(prefix)])
        removed = super().remove_under(prefix)
        self.store.remove_under(str(prefix))
        self._unmark()
        return removed

    def add_roots(self, paths: Iterable[str | os.PathLike]) -> None:
        super().add_roots(paths)
        self.store.set_roots(self.stored_roots())

    def remove_roots_under(self, prefix: str | os.PathLike) -> int:
        n = super().remove_roots_under(prefix)
        self.store.set_roots(self.stored_roots())
        return n

    def finish_scrub(self) -> bool:
        """The local scrub, and Milvus's compaction of the deleted entities (``forget``)."""
        done = super().finish_scrub()
        self.store.compact()
        return done


def store_status(named: str, db: Path, encoded: int) -> StoreStatus:
    """The store ``named``: its entities, and whether they are the ``encoded`` sentences of the
    local index at ``db`` with no write left unfinished (``status``)."""
    try:
        with MilvusStore(StoreSpec.parse(named)) as store:
            n = store.entity_count()
    except SparcError as err:
        return StoreStatus(named, None, False, str(err))
    return StoreStatus(named, n, n == encoded and not Path(str(db) + UNSYNCED_SUFFIX).exists())
