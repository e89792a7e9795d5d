"""Which engine holds the index: the local one alone, or also a Milvus store (``SPARC_LOCAL_STORE``).

The one place that chooses, for every command and the watcher: ``open_index`` gives the writer
its ``Index`` (a ``milvus.mirror.MirroredIndex`` when a store is named), ``open_engine`` gives
``ask`` the ``query.engine.Engine`` it searches and reads sentences from.  Keep module-level
imports light: this is on the ``ask`` path, and pymilvus is imported only when a store is named.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparc_local.paths import STORE_ENV

if TYPE_CHECKING:
    from sparc_local.index.store import Index
    from sparc_local.milvus.store import StoreStatus
    from sparc_local.query.engine import Engine


def store_named() -> str | None:
    """The store ``SPARC_LOCAL_STORE`` names (None: the local engine alone)."""
    return os.environ.get(STORE_ENV, "").strip() or None


def open_index(path: str | os.PathLike, **kwargs: Any) -> Index:
    """The local index at ``path``, writing to the named store too."""
    from sparc_local.index.store import Index

    named = store_named()
    if named is None:
        return Index(path, **kwargs)
    from sparc_local.milvus.mirror import MirroredIndex
    from sparc_local.milvus.store import StoreSpec

    return MirroredIndex(Path(path), StoreSpec.parse(named), **kwargs)


@dataclass(frozen=True)
class Searching:
    """What ``ask`` searches: the engine, and the local index when the engine is its ``Searcher``
    (a Milvus store keeps no catalog of files to tell a stale index or a filter that keeps none)."""

    engine: Engine
    index: Index | None


@contextlib.contextmanager
def open_engine(open_local: Callable[[], Index]) -> Iterator[Searching]:
    """The named store's engine, else a ``Searcher`` of the index ``open_local`` opens (not
    called when a store is named); closed when the ``with`` ends."""
    named = store_named()
    if named is None:
        from sparc_local.query.searcher import Searcher

        with open_local() as index:
            yield Searching(Searcher(index), index)
        return
    from sparc_local.milvus.search import MilvusSearcher
    from sparc_local.milvus.store import MilvusStore, StoreSpec

    with MilvusStore(StoreSpec.parse(named)) as store:
        yield Searching(MilvusSearcher(store), None)


def store_status(db: Path, encoded: int) -> StoreStatus:
    """The named store as `status` shows it, beside the local index at ``db`` and its number of
    ``encoded`` sentences (an unreachable store says why)."""
    from sparc_local.milvus.mirror import store_status as read

    named = store_named()
    assert named is not None
    return read(named, db, encoded)
