"""The rows the index writes and returns: a sentence to index, a file's new state, a file's record,
a stored sentence."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sparc_local.model.sparse import SparseVectors


@dataclass(frozen=True, slots=True)
class SentenceRow:
    """One sentence to index. ``context`` is its paragraph; the sentence is
    ``context[offset_in_context : offset_in_context + len(text)]`` (for highlighting).
    page/line are 1-based locations for display; char_start/char_end are offsets in the
    extracted document text."""

    text: str
    context: str
    offset_in_context: int
    page: int | None = None
    line: int | None = None
    char_start: int | None = None
    char_end: int | None = None


@dataclass(slots=True)
class FileUpdate:
    """New state of one file. ``vectors`` has one row per sentence (None when there are no
    sentences). ``error`` set = the file could not be read: recorded, old sentences dropped."""

    path: str
    size: int
    mtime: float
    hash: str
    sentences: list[SentenceRow] = field(default_factory=list)
    vectors: SparseVectors | None = None
    error: str | None = None
    # BM25 impacts per sentence (``model/lexical.py``), stored beside the vectors' postings
    lexical: SparseVectors | None = None


class FileStatus(StrEnum):
    """A file record's status (``files.status`` in SQL, which spells the same values)."""

    OK = "ok"
    ERROR = "error"  # could not be read: ``FileRecord.error`` says why


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: int
    path: str
    size: int
    mtime: float
    hash: str
    status: FileStatus
    error: str | None
    n_sentences: int
    indexed_at: float


FILE_COLS = "id, path, size, mtime, hash, status, error, n_sentences, indexed_at"


@dataclass(frozen=True, slots=True)
class StoredSentence:
    """One sentence as ``Index.sentences`` reads it back: a ``SentenceRow``'s fields, its id, and
    its file (``path`` and ``file_id`` None once it is tombstoned)."""

    id: int
    text: str
    context: str
    offset_in_context: int
    path: str | None
    page: int | None
    line: int | None
    char_start: int | None
    char_end: int | None
    file_id: int | None

    def row(self) -> SentenceRow:
        """The ``SentenceRow`` that wrote it (to encode it again)."""
        return SentenceRow(self.text, self.context, self.offset_in_context, self.page, self.line,
                           self.char_start, self.char_end)


STORED_SENTENCE_SQL = (  # StoredSentence's columns, in its field order
    "SELECT s.id, s.text, p.text, s.offset_in_context, f.path, s.page, s.line, s.char_start, s.char_end, s.file_id"
    " FROM sentences s LEFT JOIN files f ON f.id = s.file_id JOIN paragraphs p ON p.id = s.paragraph_id")
