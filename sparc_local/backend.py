"""Which engine holds the index: the local one alone, or also a Milvus store (``SPARC_LOCAL_STORE``).

The one place that chooses, for every command and the watcher: ``open_index`` gives the writer
its ``Index`` (a ``milvus.mirror.MirroredIndex`` when a store is named), ``open_search`` gives
``ask`` what it searches and reads sentences from.  Keep module-level imports light: this is on
the ``ask`` path, and pymilvus is imported only when a store is named.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from sparc_local.paths import STORE_ENV


def store_named() -> str | None:
    """The store ``SPARC_LOCAL_STORE`` names (None: the local engine alone)."""
    return os.environ.get(STORE_ENV, "").strip() or None


def open_index(path: str | os.PathLike, **kwargs: Any):
    """The local index at ``path``, writing to the named store too."""
    from sparc_local.index.store import Index

    named = store_named()
    if named is None:
        return Index(path, **kwargs)
    from sparc_local.milvus.mirror import MirroredIndex
    from sparc_local.milvus.store import StoreSpec

    return MirroredIndex(Path(path), StoreSpec.parse(named), **kwargs)


def open_search() -> AbstractContextManager | None:
    """The named store as ``Asker`` reads it (search, explain, sentences), in a ``with``; None
    when no store is named."""
    named = store_named()
    if named is None:
        return None
    from sparc_local.milvus.search import MilvusSearcher
    from sparc_local.milvus.store import MilvusStore, StoreSpec

    return _Searching(MilvusSearcher(MilvusStore(StoreSpec.parse(named))))


def store_status(db: Path, encoded: int):
    """The named store as `status` shows it, beside the local index at ``db`` and its number of
    ``encoded`` sentences (a ``milvus.store.StoreStatus``; an unreachable store says why)."""
    from sparc_local.milvus.mirror import store_status as read

    named = store_named()
    assert named is not None
    return read(named, db, encoded)


class _Searching(AbstractContextManager):
    def __init__(self, searcher: Any) -> None:
        self.searcher = searcher

    def __enter__(self) -> Any:
        return self.searcher

    def __exit__(self, *exc: object) -> None:
        self.searcher.store.close()
