"""What ``Asker`` needs of an engine: the ranking of a question, and the sentences it shows.

The local index's ``searcher.Searcher`` and a Milvus store's ``milvus.search.MilvusSearcher``
are both an ``Engine``; ``backend.open_engine`` chooses one, and mypy holds each to this contract
where it is handed to ``Asker``, so neither needs the other's class.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from sparc_local.query.modes import SPARC

if TYPE_CHECKING:
    from sparc_local.index.records import StoredSentence
    from sparc_local.query.pathfilter import PathFilter


class Engine(Protocol):
    """Ranks sentences for a question's token ids and reads back what ``ask`` shows of them."""

    def search(self, token_ids: np.ndarray | Sequence[int], n: int | None = 10, *,
               file_filter: PathFilter | None = None, mode: str = SPARC) -> tuple[np.ndarray, np.ndarray]:
        """The top ``n`` live sentences of the files ``file_filter`` keeps -> (ids, scores),
        ranked by ``mode`` (``modes.MODES``)."""
        ...

    def coverage(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int]) -> np.ndarray:
        """For each sentence id, the share of the question's idf its passage holds."""
        ...

    def explain(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int],
                mode: str = SPARC) -> list[dict[int, float]]:
        """{posting key: its part of the score} for each sentence id."""
        ...

    def sentences(self, ids: Sequence[int] | np.ndarray) -> list[StoredSentence]:
        """The sentences' records, in order; ids gone since the search are skipped."""
        ...

    def heading_ends(self, ids: Sequence[int]) -> dict[int, int]:
        """{sentence id: where its passage's heading ends in its context}; none known: {}."""
        ...

    def passage_sentences(self, ids: Sequence[int]) -> dict[int, tuple[list[str], int]]:
        """{sentence id: (its passage's sentences, its place among them)}; none known: {}."""
        ...

    def phrase_positions(self, ids: Sequence[int]) -> dict[int, bytes]:
        """{sentence id: its positions blob (``index/positions.py``)}; none stored: {}."""
        ...
