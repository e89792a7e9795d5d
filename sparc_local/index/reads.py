"""What the query path reads of stored sentences: their records, their paragraph's heading and
sentences (the context shown, the reranker's passage) and their word positions (the answer phrase).

A mixin of ``store.Index``: SQL over the sentences, paragraphs and positions tables, nothing of scoring.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from .db import chunks, qmarks
from .records import STORED_SENTENCE_SQL, StoredSentence


class SentenceReads:
    _conn: sqlite3.Connection

    def sentences(self, ids: Sequence[int] | np.ndarray) -> list[StoredSentence]:
        """The given sentences, in the same order; ids that no longer exist are skipped."""
        ids = [int(i) for i in ids]
        rows: dict[int, StoredSentence] = {}
        for chunk in chunks(ids):
            for r in self._conn.execute(f"{STORED_SENTENCE_SQL} WHERE s.id IN ({qmarks(len(chunk))})", chunk):
                rows[r[0]] = StoredSentence(*r)
        return [rows[i] for i in ids if i in rows]

    def heading_ends(self, ids: Sequence[int]) -> dict[int, int]:
        """{sentence id: where its paragraph's heading ends in its context}: the offset of the
        paragraph's first sentence, before which the context holds only its heading
        (``sentences.heading``); 0 when the paragraph has none."""
        ids = [int(i) for i in ids]
        out: dict[int, int] = {}
        for chunk in chunks(ids):
            out.update(self._conn.execute(
                "SELECT s.id, (SELECT MIN(o.offset_in_context) FROM sentences o WHERE o.paragraph_id = s.paragraph_id)"
                f" FROM sentences s WHERE s.id IN ({qmarks(len(chunk))})", chunk))
        return out

    def passage_sentences(self, ids: Sequence[int]) -> dict[int, tuple[list[str], int]]:
        """{sentence id: (its paragraph's sentences in order, its own place among them)}: the
        passage the reranker reads (``rerank.inputs.rerank_text``)."""
        ids = [int(i) for i in ids]
        out: dict[int, tuple[list[str], int]] = {}
        for chunk in chunks(ids):
            for sid, oid, text in self._conn.execute(
                    "SELECT s.id, o.id, o.text FROM sentences s JOIN sentences o ON o.paragraph_id = s.paragraph_id"
                    f" WHERE s.id IN ({qmarks(len(chunk))}) ORDER BY s.id, o.offset_in_context", chunk):
                texts, best = out.setdefault(sid, ([], -1))
                if oid == sid:
                    out[sid] = (texts, len(texts))
                texts.append(text)
        return out

    def phrase_positions(self, ids: Sequence[int]) -> dict[int, bytes]:
        """{sentence id: its positions blob (``positions.py``)} of the given sentences that have one."""
        ids = [int(i) for i in ids]
        out: dict[int, bytes] = {}
        for chunk in chunks(ids):
            out.update(self._conn.execute(
                f"SELECT sentence_id, blob FROM positions WHERE sentence_id IN ({qmarks(len(chunk))})", chunk))
        return out
