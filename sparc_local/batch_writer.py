"""The one batch -> encode -> write loop: `index` (and the watcher through it), adapt's re-encode
and eval write their files through ``BatchWriter``.

A batch is whole files, about BATCH_SENTENCES sentences, written by ONE ``Index.write_files``
(one transaction, one immutable segment), so a crash leaves every file fully old or fully new.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from sparc_local.index.store import FileRecord, FileUpdate, Index, StoredSentence
from sparc_local.index_options import BATCH_SENTENCES
from sparc_local.ingest.sentences import Paragraph, heading
from sparc_local.model.sparse import SparseVectors

ENCODE_CHUNK = 4096  # sentences per encoder call: its memory grows with its input


class SentenceEncoder(Protocol):
    def encode(self, paragraphs: Sequence[Sequence[str]], *,
               progress: Callable[[int], None] | None = None) -> SparseVectors: ...


class LexicalRows(Protocol):
    """The lexical postings of sentence rows: ``model.lexical.Lexical``, or one that loads it when
    first asked."""

    def rows(self, rows: Sequence) -> SparseVectors: ...


class BatchWriter:
    """Files are queued until they hold `batch_sentences` sentences; then their paragraphs are
    encoded and the batch is written. An update that already has its vectors (eval's cached ones)
    is written as it is. With no `encoder`, sentences without vectors are stored with their
    lexical postings only, to be encoded later (progressive indexing).

    on_encoded(path, n) follows each encoder batch (path: the file it reached, so a progress bar
    moves within a large file too); on_written(updates) follows each committed batch.
    """

    def __init__(self, index: Index, encoder: SentenceEncoder | None, *, batch_sentences: int = BATCH_SENTENCES,
                 merge: bool = True, on_encoded: Callable[[str, int], None] | None = None,
                 on_written: Callable[[list[FileUpdate]], None] | None = None) -> None:
        self.index, self.encoder = index, encoder
        self.batch_sentences, self.merge = batch_sentences, merge
        self.on_encoded, self.on_written = on_encoded, on_written
        self._queue: list[tuple[FileUpdate, Sequence[Sequence[str]]]] = []
        self._sentences = 0

    def add(self, update: FileUpdate, paragraphs: Sequence[Sequence[str]] = ()) -> None:
        """Queue one file; `paragraphs` are its sentences' texts grouped by paragraph, in the order
        of update.sentences. Writes the queue once it holds batch_sentences sentences."""
        self._queue.append((update, paragraphs))
        self._sentences += len(update.sentences)
        if self._sentences >= self.batch_sentences:
            self.flush()

    def flush(self) -> None:
        """Encode and write the queued files, if any."""
        if not self._queue:
            return
        todo = [(u, paras) for u, paras in self._queue if u.vectors is None and u.sentences]
        if todo and self.encoder is not None:  # without an encoder: stored with their lexical postings only
            vectors, offset = self._encode(todo), 0
            for u, _ in todo:
                u.vectors = vectors.slice(offset, offset + len(u.sentences))
                offset += len(u.sentences)
        batch = [u for u, _ in self._queue]
        self.index.write_files(batch, merge=self.merge)
        self._queue, self._sentences = [], 0
        if self.on_written:
            self.on_written(batch)

    def _encode(self, todo: list[tuple[FileUpdate, Sequence[Sequence[str]]]]) -> SparseVectors:
        assert self.encoder is not None
        ends = list(itertools.accumulate(len(u.sentences) for u, _ in todo))  # each file's last sentence + 1
        encoded = 0

        def advance(n: int) -> None:
            nonlocal encoded
            encoded += n
            if self.on_encoded:
                self.on_encoded(todo[min(bisect.bisect_right(ends, encoded), len(todo) - 1)][0].path, n)

        return SparseVectors.concat([self.encoder.encode(chunk, progress=advance) for chunk in
                                     _chunks((para for _, paras in todo for para in paras), ENCODE_CHUNK)])


def _chunks(paragraphs: Iterable[Sequence[str]], limit: int) -> Iterable[list[Sequence[str]]]:
    """Consecutive paragraphs, about `limit` sentences at a time (the encoder's memory grows with
    its input); a paragraph is never split, its sentences are each other's context."""
    chunk: list[Sequence[str]] = []
    size = 0
    for para in paragraphs:
        if chunk and size + len(para) > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(para)
        size += len(para)
    if chunk:
        yield chunk


def stored_paragraphs(rows: list[StoredSentence]) -> list[Paragraph]:
    """A file's sentence texts grouped by paragraph, as `index` handed them to the encoder.

    A file's sentences are stored in document order; a new paragraph starts where the stored
    paragraph text changes or the offset inside it does not grow. Its heading is the stored
    text before its first sentence (sentences.heading).
    """
    out: list[Paragraph] = []
    prev_ctx, prev_off = None, -1
    for r in rows:
        if not out or r.context != prev_ctx or r.offset_in_context <= prev_off:
            out.append(Paragraph([], heading(r.context, r.offset_in_context)))
        out[-1].append(r.text)
        prev_ctx, prev_off = r.context, r.offset_in_context
    return out


def stored_update(rec: FileRecord, rows: list[StoredSentence],
                  lexical: LexicalRows) -> tuple[FileUpdate, list[Paragraph]]:
    """A file's stored sentences (``Index.sentences`` rows, in order) as an update to encode again:
    adapt's re-encode with a new model, and the encoding pass of progressive indexing."""
    sentences = [r.row() for r in rows]
    return (FileUpdate(rec.path, rec.size, rec.mtime, rec.hash, sentences, lexical=lexical.rows(sentences)),
            stored_paragraphs(rows))
