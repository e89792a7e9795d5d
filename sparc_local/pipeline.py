"""`sparc-local index`: keep the index in step with the files under the indexed roots.

Incremental: a file whose size and mtime are unchanged is skipped without reading it; one whose
content hash is unchanged only has its stat refreshed; anything else is re-extracted and
re-encoded. Files that vanished under a root are dropped. Changed files are encoded together in
batches, and each batch is written in one transaction (one immutable segment), so a crash
leaves every file either fully old or fully new.

Two passes, so progress has a total: the walk with a stat of each file (cheap: no file is
opened) finds the files to (re)index first; then each is read and its sentences counted before
they are encoded, which is where the time goes. ``Progress`` is what the caller sees.
"""

from __future__ import annotations

import bisect
import errno
import hashlib
import itertools
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path


from sparc_local.errors import SparcError
from sparc_local.ingest.extract import MAX_CHARS, VANISHED, ExtractError, extract, iter_files, path_key
from sparc_local.model.info import ModelInfo
from sparc_local.ingest.sentences import MAX_SENTENCE_CHARS, paragraphs, segment
from sparc_local.model.sparse import SparseVectors
from sparc_local.query.pathfilter import is_under
from sparc_local.index.store import FileRecord, FileUpdate, Index, SentenceRow


ENCODE_CHUNK = 4096  # sentences encoded at once
MAX_SENTENCES = 100_000  # per file: a 1 GB log must not take the index over (`index --max-sentences`)
SCAN_REPORT = 256  # files walked between two progress reports while scanning


class DiskFull(SparcError):
    """The disk holding the index filled up; every batch committed before it is intact."""


def _is_disk_full(err: BaseException) -> bool:
    if isinstance(err, sqlite3.OperationalError):
        return "full" in str(err)  # "database or disk is full" (SQLITE_FULL)
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


@dataclass
class IndexReport:
    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    sentences: int = 0
    seconds: float = 0.0
    threads: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    capped: list[str] = field(default_factory=list)  # files cut at max_sentences
    stopped: bool = False  # should_stop ended the run early: the rest is left to the next run


@dataclass
class Progress:
    """A run's progress, handed to on_progress (the same object, updated in place).

    Only files that are new or whose size/mtime changed count in files_total; one whose content
    turns out unchanged (same hash) leaves the total, so nothing unchanged is ever counted as
    indexed. A file's sentences are known once it is read; the ones not read yet are estimated
    from their size (``sentences_estimate``).
    """

    phase: str = "scanning"  # "scanning" (walk + stat), "indexing" (read, encode, write), "finishing"
    scanned: int = 0  # files the walk found
    files_total: int = 0  # files to (re)index
    files_done: int = 0  # of those, written (indexed, or recorded as unreadable)
    bytes_total: int = 0  # their size
    bytes_read: int = 0  # size of the files read so far
    sentences_read: int = 0  # sentences of the files read so far
    sentences_done: int = 0  # sentences encoded
    batches: int = 0  # batches committed
    current: str | None = None  # the file being read or encoded

    def sentences_estimate(self) -> int:
        """Sentences of all files to index: those read, plus the unread bytes at the rate so far."""
        unread = max(self.bytes_total - self.bytes_read, 0)
        if not unread or not self.bytes_read:
            return self.sentences_read
        return self.sentences_read + round(unread * self.sentences_read / self.bytes_read)


@dataclass
class _Pending:
    path: str
    size: int
    mtime: float
    hash: str
    rows: list[SentenceRow]
    paragraphs: list[list[str]]  # the sentence texts, grouped by paragraph
    error: str | None = None
    capped: bool = False


def file_hash(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read(path: Path, size: int, mtime: float, digest: str, max_sentences: int) -> _Pending:
    """Extract and segment one file; a failure becomes the file's recorded error, not an exception."""
    key = path_key(path)
    try:
        # a sentence is at most MAX_SENTENCE_CHARS long: a small cap needs only a little text read
        blocks = extract(path, max_chars=min(MAX_CHARS, max(1, max_sentences) * MAX_SENTENCE_CHARS))
    except ExtractError as err:
        return _Pending(key, size, mtime, digest, [], [], error=err.reason)
    sents = segment(blocks, max_sentences=max_sentences + 1)
    capped = len(sents) > max_sentences or bool(blocks and blocks[-1].truncated)
    del sents[max_sentences:]
    rows = [
        SentenceRow(text=s.text, context=blocks[s.block].text, offset_in_context=s.start - blocks[s.block].start,
                    page=s.page, line=s.line, char_start=s.start, char_end=s.end)
        for s in sents
    ]
    return _Pending(key, size, mtime, digest, rows, paragraphs(sents), capped=capped)


def _chunks(paragraphs: Iterable[list[str]], limit: int) -> Iterable[list[list[str]]]:
    """Consecutive paragraphs, about `limit` sentences at a time (the encoder's memory grows with
    its input); a paragraph is never split, its sentences are each other's context."""
    chunk: list[list[str]] = []
    size = 0
    for para in paragraphs:
        if chunk and size + len(para) > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(para)
        size += len(para)
    if chunk:
        yield chunk


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(is_under(path, r) for r in roots)


class NotIndexed(SparcError):
    """`forget` was given a path the index holds nothing of; nothing was changed."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is not in the index", "`sparc-local status` lists the indexed folders.")


@dataclass(frozen=True)
class ForgetReport:
    path: str  # as the index stores it
    files: int  # indexed files removed
    unreadable: int  # files recorded as unreadable, removed too
    scrubbed: bool  # False: a reader kept the old pages; the next `index` run scrubs them


def forget(index: Index, path: str) -> ForgetReport:
    """Remove a file or folder and all its sentences, scrub them from the database file, and keep
    them out of every later write (until the path is given to `index` again).

    Atomic: removing the files and roots below the path, recording it as forgotten and purging
    the removed text rows (``Index.purge_deleted``) are ONE transaction, so a kill -9 leaves
    either nothing forgotten or all of it, never a forgotten folder that a later run re-adds.
    VACUUM cannot run inside a transaction, so ``Index.finish_scrub`` follows the commit; a kill
    before it ends leaves the removed text only in free pages and old WAL frames, which no query
    reads, and the scrub stays marked pending until the next `forget` or full `index` run (or
    watcher catch-up) finishes it.
    Raises NotIndexed if nothing is indexed at or below the path.
    """
    key = path_key(Path(path).expanduser().absolute())
    with index.write_transaction():
        files, unreadable = index.count_under(key)
        if not index.remove_roots_under(key) and not files and not unreadable:
            raise NotIndexed(key)
        index.remove_under(key)
        index.add_forgotten(key)
        index.purge_deleted()
    return ForgetReport(key, files, unreadable, index.finish_scrub())


def run_index(index: Index, roots: list[str], model: ModelInfo, encoder_factory: Callable[[], object], *,
              exclude: Iterable[str] = (), include_hidden: bool = False, ignore_files: bool = True,
              max_sentences: int = MAX_SENTENCES, batch_sentences: int = 512,
              on_error: Callable[[str, str], None] | None = None,
              on_progress: Callable[[Progress], None] | None = None,
              on_capped: Callable[[str, int], None] | None = None,
              remember_roots: bool = True, prune: bool = True, compact: bool = True,
              should_stop: Callable[[], bool] | None = None) -> IndexReport:
    """Index (or refresh) the given roots. Reports per-file problems through on_error and goes on.

    `encoder_factory` is called only if something needs encoding, so a no-op refresh never loads
    the model. With remember_roots the roots are paths the user named: they are remembered
    (``Index.add_roots``) and a forgotten one is indexed again; files at or below any other
    forgotten path are skipped (``Index.write_files`` refuses them too). The watcher passes a
    subset of files inside known roots with remember_roots=False (they are not new roots, and
    an event names no path for the user) and prune=False (it removes deleted files itself, and the vanished
    scan costs O(indexed files x given paths)) and compact=False (``Index.compact`` is for the end
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
        return _run_index(index, roots, model, encoder_factory, exclude=exclude, include_hidden=include_hidden,
                          ignore_files=ignore_files, max_sentences=max_sentences, batch_sentences=batch_sentences,
                          on_error=on_error, on_progress=on_progress, on_capped=on_capped,
                          remember_roots=remember_roots, prune=prune, compact=compact,
                          should_stop=should_stop or (lambda: False))
    except (sqlite3.OperationalError, OSError) as err:
        if _is_disk_full(err):
            raise DiskFull(f"the disk holding the index is full ({index.path.parent})",
                           "Free some disk space and run `sparc-local index` again: "
                           "the files indexed so far are kept.") from err
        raise


def _run_index(index: Index, roots: list[str], model: ModelInfo, encoder_factory: Callable[[], object], *,
               exclude: Iterable[str], include_hidden: bool, ignore_files: bool, max_sentences: int,
               batch_sentences: int, on_error: Callable[[str, str], None] | None,
               on_progress: Callable[[Progress], None] | None, on_capped: Callable[[str, int], None] | None,
               remember_roots: bool, prune: bool, compact: bool, should_stop: Callable[[], bool]) -> IndexReport:
    t0 = time.perf_counter()
    report = IndexReport()
    walk_roots = [Path(r).expanduser().absolute() for r in roots]
    roots = [path_key(r) for r in walk_roots]
    if remember_roots:
        index.finish_scrub()  # a `forget` killed before its scrub ended
    with index.write_transaction():
        if remember_roots:
            index.add_roots(roots)
        ignored = index.forgotten()
        force = index.get_meta("model") not in (None, model.id)  # a new model re-encodes everything
        if index.get_meta("model") is None:
            index.set_meta("model", model.id)
    encoder = None
    pending: list[_Pending] = []
    progress = Progress()
    tell = on_progress or (lambda p: None)

    def error(path: str, reason: str) -> None:
        path = path_key(path)
        report.errors.append((path, reason))
        if on_error:
            on_error(path, reason)

    def flush() -> None:
        nonlocal encoder
        if not pending:
            return
        ends = list(itertools.accumulate(len(p.rows) for p in pending))  # each file's last sentence + 1
        encoded = 0

        def advance(n: int) -> None:  # per encoder batch: the bar moves within a large file too
            nonlocal encoded
            encoded += n
            progress.sentences_done += n
            progress.current = pending[min(bisect.bisect_right(ends, encoded), len(pending) - 1)].path
            tell(progress)

        parts = []
        for chunk in _chunks((para for p in pending for para in p.paragraphs), ENCODE_CHUNK):
            if encoder is None:
                encoder = encoder_factory()
                report.threads = getattr(encoder, "threads", 0)
            parts.append(encoder.encode(chunk, progress=advance))
        vectors = SparseVectors.concat(parts)
        updates, offset = [], 0
        for p in pending:
            n = len(p.rows)
            sub = vectors.slice(offset, offset + n) if n else None
            offset += n
            updates.append(FileUpdate(p.path, p.size, p.mtime, p.hash, p.rows, sub, p.error))
        index.write_files(updates)
        report.indexed += sum(1 for p in pending if p.error is None)
        report.sentences += offset
        progress.files_done += len(pending)
        progress.batches += 1
        tell(progress)
        pending.clear()

    def drop(size: int) -> None:
        """A file to index turned out unchanged, or vanished: it leaves the totals."""
        progress.files_total -= 1
        progress.bytes_total -= size

    seen: set[str] = set()
    todo: list[tuple[str, int, float, FileRecord | None]] = []  # (path, size, mtime, record): a few words each
    for path in iter_files(walk_roots, exclude, include_hidden, on_error=lambda p, r: error(str(p), r),
                           ignore_files=ignore_files):
        key = path_key(path.absolute())
        if ignored and index.is_forgotten(key, ignored):
            continue
        report.scanned += 1
        progress.scanned += 1
        if progress.scanned % SCAN_REPORT == 0:
            tell(progress)
            if should_stop():
                return _stopped(report, t0)
        seen.add(key)
        try:
            st = path.stat()
        except FileNotFoundError:
            error(key, VANISHED)
            seen.discard(key)
            continue
        except OSError as err:
            error(key, f"cannot stat: {err.strerror or err}")
            continue
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device named x.txt would block the read
            error(key, "not a regular file")
            continue
        rec = index.file(key)
        if not force and rec is not None and rec.size == st.st_size and rec.mtime == st.st_mtime:
            report.unchanged += 1
            continue
        todo.append((os.fspath(path), st.st_size, st.st_mtime, rec))
        progress.files_total += 1
        progress.bytes_total += st.st_size

    progress.phase = "indexing"
    tell(progress)
    for name, size, mtime, rec in todo:
        if should_stop():
            return _stopped(report, t0)
        path = Path(name)
        key = path_key(path.absolute())
        progress.current = key
        tell(progress)
        try:
            digest = file_hash(path)
        except FileNotFoundError:
            error(key, VANISHED)  # gone between the walk and the read: nothing to record
            seen.discard(key)
            drop(size)
            continue
        except OSError as err:
            reason = "permission denied" if isinstance(err, PermissionError) else f"cannot read: {err.strerror or err}"
            pending.append(_Pending(key, size, mtime, "", [], [], error=reason))
            error(key, reason)
            progress.bytes_read += size  # read as far as it goes: no sentences
            continue
        if not force and rec is not None and rec.hash == digest and rec.status == "ok":
            index.touch_file(key, size, mtime)
            report.unchanged += 1
            drop(size)
            continue
        item = _read(path, size, mtime, digest, max_sentences)
        if item.error == VANISHED:
            error(key, VANISHED)
            seen.discard(key)  # its old sentences, if any, go with the vanished-file pruning
            drop(size)
            continue
        if item.error:
            error(key, item.error)
        if item.capped:
            report.capped.append(key)
            if on_capped:
                on_capped(key, max_sentences)
        progress.bytes_read += size
        progress.sentences_read += len(item.rows)
        pending.append(item)
        if sum(len(p.rows) for p in pending) >= batch_sentences:
            flush()
    flush()
    progress.phase, progress.current = "finishing", None
    tell(progress)
    vanished = [f.path for f in index.all_files() if _under(f.path, roots) and f.path not in seen] if prune else []
    if vanished:
        report.removed = index.remove_files(vanished)
    if force:
        index.set_meta("model", model.id)
    index.set_meta("model_path", str(model.path))
    index.set_meta("last_update", str(time.time()))
    index.maybe_merge()
    if compact:
        index.compact()
    # fold the WAL into the database now: it would otherwise hold a copy of every page written
    index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    report.seconds = time.perf_counter() - t0
    return report


def _stopped(report: IndexReport, t0: float) -> IndexReport:
    report.stopped = True
    report.seconds = time.perf_counter() - t0
    return report
