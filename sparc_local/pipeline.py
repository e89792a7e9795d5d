"""`sparc-local index`: keep the index in step with the files under the indexed roots.

Incremental: a file whose size and mtime are unchanged is skipped without reading it; one whose
content hash is unchanged only has its stat refreshed; anything else is re-extracted and
re-encoded. Files that vanished under a root are dropped. Changed files go through the
``BatchWriter``, the one batch -> encode -> write loop (also adapt's re-encode and eval's): they
are encoded together in batches, and each batch is written in one transaction (one immutable
segment), so a crash leaves every file either fully old or fully new.

Two passes, so progress has a total: the walk with a stat of each file (cheap: no file is
opened) finds the files to (re)index first; then each is read and its sentences counted before
they are encoded, which is where the time goes. ``Progress`` is what the caller sees.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from sparc_local.batch_writer import BatchWriter, stored_update
from sparc_local.errors import SparcError
from sparc_local.index.db import LAST_UPDATE, MODEL_PATH, is_full
from sparc_local.index.store import FileRecord, FileStatus, FileUpdate, Index, SentenceRow
from sparc_local.index_options import IndexOptions
from sparc_local.ingest import machine
from sparc_local.ingest.extract import MAX_CHARS, VANISHED, ExtractError, extract, iter_files, path_key
from sparc_local.ingest.sentences import MAX_SENTENCE_CHARS, Paragraph, paragraphs, segment
from sparc_local.model.encoder import LazyEncoder
from sparc_local.model.info import ModelInfo, index_is_stale, record_model
from sparc_local.model.lexical import Lexical
from sparc_local.model.sparse import SparseVectors
from sparc_local.paths import is_under

SCAN_REPORT = 256  # files walked between two progress reports while scanning


class DiskFull(SparcError):
    """The disk holding the index filled up; every batch committed before it is intact."""


def _is_disk_full(err: BaseException) -> bool:
    if isinstance(err, sqlite3.OperationalError):
        return is_full(err)  # SQLITE_FULL
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class IndexPhase(StrEnum):
    """Where a run is (``Progress.phase``)."""

    SCANNING = "scanning"  # the walk, with a stat of each file
    INDEXING = "indexing"  # reading: text and BM25 postings stored, answerable at once
    ENCODING = "encoding"  # the model over what is stored and not encoded
    FINISHING = "finishing"  # pruning, merging, compacting


@dataclass
class IndexReport:
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    sentences: int = 0  # sentences of the files this run read
    seconds: float = 0.0
    threads: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): recorded as unreadable by this run
    # files recorded as unreadable, unchanged since they failed: not read again (`status` lists them)
    still_unreadable: int = 0
    stopped: bool = False  # should_stop ended the run early: the rest is left to the next run
    encoded: int = 0  # sentences this run encoded: its own, and those an earlier run read and left
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): the walk's, never recorded
    machine_written: int = 0  # files left out as machine-written text (this run's and unchanged ones)

    @property
    def unreadable(self) -> int:
        """Files under the roots that the index holds no text of, as `status` counts its errors."""
        return len(self.errors) + self.still_unreadable


@dataclass
class Progress:
    """A run's progress, handed to on_progress (the same object, updated in place).

    Only files that are new or whose size/mtime changed count in files_total; one whose content
    turns out unchanged (same hash) leaves the total, so nothing unchanged is ever counted as
    indexed. A file's sentences are known once it is read; the ones not read yet are estimated
    from their size (``sentences_estimate``).
    """

    phase: IndexPhase = IndexPhase.SCANNING
    scanned: int = 0  # files the walk found
    files_total: int = 0  # files to (re)index
    files_done: int = 0  # of those, written (indexed, or recorded as unreadable)
    bytes_total: int = 0  # their size
    bytes_read: int = 0  # size of the files read so far
    sentences_read: int = 0  # sentences of the files read so far
    sentences_done: int = 0  # sentences encoded
    sentences_pending: int = 0  # sentences stored but not encoded when the encoding pass began
    batches: int = 0  # batches committed
    current: str | None = None  # the file being read or encoded

    def sentences_estimate(self) -> int:
        """Sentences of all files to index: those read, plus the unread bytes at the rate so far."""
        unread = max(self.bytes_total - self.bytes_read, 0)
        if not unread or not self.bytes_read:
            return self.sentences_read
        return self.sentences_read + round(unread * self.sentences_read / self.bytes_read)


@dataclass
class _Read:
    """One file read for indexing: its new state (vectors still to encode) and its sentence texts."""

    update: FileUpdate
    paragraphs: list[Paragraph]  # the sentence texts, grouped by paragraph, with their headings
    capped: bool = False


def file_hash(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read(path: Path, size: int, mtime: float, digest: str, opts: IndexOptions, lexical: _LexicalOnce) -> _Read:
    """Extract and segment one file; a failure becomes the file's recorded error, not an exception,
    and so does machine-written text (a log, a data dump), unless ``opts.logs``."""
    key = path_key(path)
    max_sentences = opts.max_sentences
    skip = None if opts.logs else machine.sniff(path)
    if skip:
        return _Read(FileUpdate(key, size, mtime, digest, error=skip), [])
    try:
        # a sentence is at most MAX_SENTENCE_CHARS long: a small cap needs only a little text read
        blocks = extract(path, max_chars=min(MAX_CHARS, max(1, max_sentences) * MAX_SENTENCE_CHARS))
    except ExtractError as err:
        return _Read(FileUpdate(key, size, mtime, digest, error=err.reason), [])
    sents = segment(blocks, max_sentences=max_sentences + 1)
    capped = len(sents) > max_sentences or bool(blocks and blocks[-1].truncated)
    del sents[max_sentences:]
    rows = [
        SentenceRow(text=s.text, context=blocks[s.block].text, offset_in_context=s.start - blocks[s.block].start,
                    page=s.page, line=s.line, char_start=s.start, char_end=s.end)
        for s in sents
    ]
    return _Read(FileUpdate(key, size, mtime, digest, rows, lexical=lexical.rows(rows)), paragraphs(sents, blocks), capped)


def run_index(index: Index, roots: list[str], model: ModelInfo, encoder_factory: Callable[[], object],
              options: IndexOptions = IndexOptions(), *, on_error: Callable[[str, str], None] | None = None,
              on_progress: Callable[[Progress], None] | None = None,
              on_capped: Callable[[str, int], None] | None = None,
              should_stop: Callable[[], bool] | None = None) -> IndexReport:
    """Index (or refresh) the given roots. Reports per-file problems through on_error and goes on.

    `encoder_factory` is called only if something needs encoding, so a no-op refresh never loads
    the model. ``options`` says how to walk and write (``IndexOptions``). With remember_roots the
    roots are paths the user named: they are remembered (``Index.add_roots``) and a forgotten one
    is indexed again; files at or below any other forgotten path are skipped (``Index.write_files``
    refuses them too). The watcher passes a subset of files inside known roots with
    remember_roots=False (they are not new roots, and an event names no path for the user) and
    prune=False (it removes deleted files itself, and the vanished scan costs O(indexed files x given paths)) and compact=False (``Index.compact`` is for the end
    of a full run; the watcher compacts when idle, not after every burst of events). A file
    with more than max_sentences sentences is indexed up to there and reported to
    on_capped(path, max_sentences). on_progress gets a ``Progress`` while walking, before each
    file is read, after each encoder batch and after each committed batch; an exception it
    raises stops the run, with every committed batch kept. ``should_stop()`` is asked while
    walking and before each file is read; once true, the run returns at once with ``stopped``
    set: the committed batches are kept, the files read but not encoded yet are left to the next
    run (so a caller that must stop, e.g. on battery, waits for the batch being encoded at most).
    Raises DiskFull when the disk fills up: every batch committed before stays intact.
    """
    try:
        run = _Run(on_error, on_progress, should_stop or (lambda: False))
        return _run_index(run, index, roots, model, encoder_factory, options, on_capped)
    except (sqlite3.OperationalError, OSError) as err:
        if _is_disk_full(err):
            raise DiskFull(f"the disk holding the index is full ({index.path.parent})",
                           "Free some disk space and run `sparc-local index` again: "
                           "the files indexed so far are kept.") from err
        raise


class _Run:
    """One run_index call's bookkeeping: its report, its progress and the paths the walk saw."""

    def __init__(self, on_error: Callable[[str, str], None] | None,
                 on_progress: Callable[[Progress], None] | None, should_stop: Callable[[], bool]) -> None:
        self.report, self.progress = IndexReport(), Progress()
        self.seen: set[str] = set()  # files under the roots that still exist
        self._on_error, self._on_progress, self._should_stop = on_error, on_progress, should_stop

    def stop(self) -> bool:
        """Whether the caller asked the run to end now (remembered in the report)."""
        if not self.report.stopped and self._should_stop():
            self.report.stopped = True
        return self.report.stopped

    def tell(self) -> None:
        if self._on_progress:
            self._on_progress(self.progress)

    def error(self, path: str, reason: str) -> None:
        """A problem of the walk (a symlink loop, a FIFO, a file gone): said, never recorded."""
        path = path_key(path)
        self.report.skipped.append((path, reason))
        if self._on_error:
            self._on_error(path, reason)

    def recorded(self, key: str, reason: str) -> None:
        """A file recorded in the index with no text: unreadable, or machine-written."""
        if machine.is_skipped(reason):
            self.report.machine_written += 1
        else:
            self.report.errors.append((key, reason))
        if self._on_error:
            self._on_error(key, reason)

    def vanished(self, key: str) -> None:
        self.error(key, VANISHED)
        self.seen.discard(key)  # its old sentences, if any, go with the vanished-file pruning

    def drop(self, size: int) -> None:
        """A file to index turned out unchanged, or vanished: it leaves the totals."""
        self.progress.files_total -= 1
        self.progress.bytes_total -= size

    def encoded(self, path: str, n: int) -> None:
        self.progress.sentences_done += n
        self.report.encoded += n
        self.progress.current = path
        self.tell()

    def encoded_batch(self, batch: list[FileUpdate]) -> None:
        self.progress.batches += 1
        self.tell()

    def written(self, batch: list[FileUpdate]) -> None:
        self.report.indexed += sum(1 for u in batch if u.error is None)
        self.report.sentences += sum(len(u.sentences) for u in batch)
        self.progress.files_done += len(batch)
        self.progress.batches += 1
        self.tell()


def _scan(run: _Run, index: Index, walk_roots: list[Path], ignored: list[str], force: bool,
          opts: IndexOptions) -> list[tuple[str, int, float, FileRecord | None]]:
    """Pass 1, the walk with a stat of each file: the files to (re)index, as (path, size, mtime,
    record) -- a few words each."""
    progress = run.progress
    todo: list[tuple[str, int, float, FileRecord | None]] = []
    for path in iter_files(walk_roots, opts.exclude, opts.include_hidden,
                           on_error=lambda p, r: run.error(str(p), r), ignore_files=opts.ignore_files):
        key = path_key(path.absolute())
        if ignored and index.is_forgotten(key, ignored):
            continue
        progress.scanned += 1
        if progress.scanned % SCAN_REPORT == 0:
            run.tell()
            if run.stop():
                return todo
        run.seen.add(key)
        try:
            st = path.stat()
        except FileNotFoundError:
            run.vanished(key)
            continue
        except OSError as err:
            run.error(key, f"cannot stat: {err.strerror or err}")
            continue
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device named x.txt would block the read
            run.error(key, "not a regular file")
            continue
        rec = index.file(key)
        if not force and rec is not None and rec.size == st.st_size and rec.mtime == st.st_mtime:
            if rec.status == FileStatus.OK:
                run.report.unchanged += 1
                continue
            if not machine.is_skipped(rec.error):
                run.report.still_unreadable += 1
                continue
            if not opts.logs:
                run.report.machine_written += 1
                continue
        todo.append((os.fspath(path), st.st_size, st.st_mtime, rec))
        progress.files_total += 1
        progress.bytes_total += st.st_size
    return todo


def _read_all(run: _Run, index: Index, todo: list[tuple[str, int, float, FileRecord | None]], writer: BatchWriter,
              force: bool, opts: IndexOptions, on_capped: Callable[[str, int], None] | None,
              lexical: _LexicalOnce) -> None:
    """Pass 2: hash each file, skip it if its content is unchanged, else read it into the writer."""
    progress = run.progress
    for name, size, mtime, rec in todo:
        if run.stop():
            return
        path = Path(name)
        key = path_key(path.absolute())
        progress.current = key
        run.tell()
        try:
            digest = file_hash(path)
        except FileNotFoundError:
            run.vanished(key)  # gone between the walk and the read: nothing to record
            run.drop(size)
            continue
        except OSError as err:
            reason = "permission denied" if isinstance(err, PermissionError) else f"cannot read: {err.strerror or err}"
            run.recorded(key, reason)
            progress.bytes_read += size  # read as far as it goes: no sentences
            writer.add(FileUpdate(key, size, mtime, "", error=reason))
            continue
        if not force and rec is not None and rec.hash == digest and rec.status == FileStatus.OK:
            index.touch_file(key, size, mtime)
            run.report.unchanged += 1
            run.drop(size)
            continue
        item = _read(path, size, mtime, digest, opts, lexical)
        if item.update.error == VANISHED:
            run.vanished(key)
            run.drop(size)
            continue
        if item.update.error:
            run.recorded(key, item.update.error)
        if item.capped and on_capped:
            on_capped(key, opts.max_sentences)
        progress.bytes_read += size
        progress.sentences_read += len(item.update.sentences)
        writer.add(item.update, item.paragraphs)


class _LexicalOnce:
    """The model's ``Lexical``, its tokenizer loaded at the first file that needs it."""

    def __init__(self, model: ModelInfo) -> None:
        self.model = model
        self._lexical: Lexical | None = None

    def rows(self, rows: Sequence[SentenceRow]) -> SparseVectors:
        if self._lexical is None:
            self._lexical = Lexical.of(self.model)
        return self._lexical.rows(rows)


def _encode_pending(run: _Run, index: Index, writer: BatchWriter, lexical: _LexicalOnce) -> None:
    """Pass 3: encode the stored sentences that are not encoded yet, file by file; each batch
    replaces its files' lexical-only rows in one transaction."""
    pending = index.pending_files()
    if not pending:
        return
    done, total = index.encoded_counts()
    run.progress.phase, run.progress.sentences_pending = IndexPhase.ENCODING, total - done
    run.tell()
    for rec in pending:
        if run.stop():
            return
        ids = index.file_sentence_ids(rec.id)
        if not ids:  # removed since the pass began (a delete, a forget): never written back
            continue
        writer.add(*stored_update(rec, index.sentences(ids), lexical))
    writer.flush()


def _run_index(run: _Run, index: Index, roots: list[str], model: ModelInfo, encoder_factory: Callable[[], object],
               opts: IndexOptions, on_capped: Callable[[str, int], None] | None) -> IndexReport:
    t0 = time.perf_counter()
    walk_roots = [Path(r).expanduser().absolute() for r in roots]
    roots = [path_key(r) for r in walk_roots]
    if opts.remember_roots:
        index.finish_scrub()  # a `forget` killed before its scrub ended
    with index.write_transaction():
        if opts.remember_roots:
            index.add_roots(roots)
        ignored = index.forgotten()
        force = index_is_stale(index, model)  # a new model re-encodes everything
        if not force:  # a new index, or one that records no settings yet
            record_model(index, model)
    todo = _scan(run, index, walk_roots, ignored, force, opts)
    run.progress.phase = IndexPhase.INDEXING
    run.tell()
    encoder = LazyEncoder(encoder_factory)  # type: ignore[arg-type]  # LazyEncoder has the encode() the writer calls
    # progressive: first every new or changed file's text and BM25 postings (answerable at once),
    # then the encoder over what is stored and not encoded, this run's files and a killed run's
    reader = BatchWriter(index, None, batch_sentences=opts.batch_sentences, on_written=run.written)
    lexical = _LexicalOnce(model)
    if not run.report.stopped:
        _read_all(run, index, todo, reader, force, opts, on_capped, lexical)
    if not run.report.stopped:
        reader.flush()
        _encode_pending(run, index, BatchWriter(index, encoder, batch_sentences=opts.batch_sentences,
                                                on_encoded=run.encoded, on_written=run.encoded_batch), lexical)
    if run.report.stopped:  # what was read but not written is left to the next run
        run.report.threads = encoder.threads
        return _stopped(run.report, t0)
    report = run.report
    report.threads = encoder.threads
    run.progress.phase, run.progress.current = IndexPhase.FINISHING, None
    run.tell()
    if opts.prune:
        vanished = [f.path for f in index.all_files()
                    if f.path not in run.seen and any(is_under(f.path, r) for r in roots)]
        if vanished:
            report.removed = index.remove_files(vanished)
    if force:
        record_model(index, model)
    index.set_meta(MODEL_PATH, str(model.path))
    index.set_meta(LAST_UPDATE, str(time.time()))
    index.maybe_merge()
    if opts.compact:
        index.compact()
    # fold the WAL into the database now: it would otherwise hold a copy of every page written
    index.checkpoint()
    report.seconds = time.perf_counter() - t0
    return report


def _stopped(report: IndexReport, t0: float) -> IndexReport:
    report.stopped = True
    report.seconds = time.perf_counter() - t0
    return report
