"""Which file a failed run stopped on, so that the watcher records it as unreadable and goes on.

A run that raised on one file (a MemoryError on a huge one, a reader's bug) fails again at the
same place each time it is tried: a catch-up would retry in a loop, and nothing after that file
would ever be encoded. So the watcher asks which file is to blame, from where the run was
(``pipeline.Progress``):

* reading: the file being read. It is read again alone, without encoding, and is to blame only
  if that fails too;
* encoding: one of the files of the batch being encoded, which are the first files still not
  encoded, as many as one batch holds (batches are committed in that order). Each is encoded
  alone, and those that fail are to blame; unless all of them fail, which says the encoder fails,
  not a file.

A file to blame is recorded as unreadable with the reason, as `index` records a file it cannot
read (`status` lists it); the watcher reads it again when it changes. Elsewhere (the walk, the
final merge) no one file is to blame.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from sparc_local.index.db import is_busy
from sparc_local.index.records import FileUpdate
from sparc_local.index_options import IndexOptions
from sparc_local.ingest.extract import path_key
from sparc_local.watch.config import LOG_NAME

log = logging.getLogger(LOG_NAME)


def reason(err: BaseException) -> str:
    """The reason recorded for a file whose indexing raised ``err``."""
    text = str(err)
    return f"could not be indexed: {type(err).__name__}" + (f": {text}" if text else "")


class _ReadFine(Exception):
    """The file was read and stored; the run got to its encoding, which blame does not need."""


def blame(idx, progress, model, encoder_factory: Callable[[], Any], options: IndexOptions) -> list[str]:
    """The files a run stopped on (``progress`` as it was when it raised), each now recorded as
    unreadable; [] when no one file is to blame."""
    from sparc_local.pipeline import IndexPhase

    if progress is None:
        return []
    if progress.phase == IndexPhase.INDEXING and progress.current:
        return _blame_read(idx, progress.current, model, options)
    if progress.phase == IndexPhase.ENCODING:
        return _blame_encoded(idx, model, encoder_factory, options)
    return []


def _record(idx, path: str, size: int, mtime: float, digest: str, err: BaseException) -> None:
    log.warning("%s %s; recorded as unreadable, the rest goes on", path, reason(err))
    idx.write_files([FileUpdate(path, size, mtime, digest, error=reason(err))])


def _blame_read(idx, path: str, model, options: IndexOptions) -> list[str]:
    from sparc_local.pipeline import run_index

    def no_encoding():
        raise _ReadFine

    try:
        st = os.stat(path)
    except OSError:
        return []  # gone, or no longer readable: the next run sees it as such
    try:
        run_index(idx, [path], model, no_encoding, options)
    except _ReadFine:
        return []
    except Exception as err:
        if is_busy(err):
            raise
        key = path_key(path)
        _record(idx, key, st.st_size, st.st_mtime, "", err)
        return [key]
    return []


def _blame_encoded(idx, model, encoder_factory: Callable[[], Any], options: IndexOptions) -> list[str]:
    from sparc_local.batch_writer import BatchWriter, stored_update
    from sparc_local.model.lexical import Lexical

    batch, n = [], 0
    for rec in idx.pending_files():
        batch.append(rec)
        n += rec.n_sentences
        if n >= options.batch_sentences:
            break
    if not batch:
        return []
    lexical, failed = Lexical.of(model), []
    for rec in batch:
        try:
            writer = BatchWriter(idx, encoder_factory(), batch_sentences=max(rec.n_sentences, 1))
            writer.add(*stored_update(rec, idx.sentences(idx.file_sentence_ids(rec.id)), lexical))
            writer.flush()
        except Exception as err:
            if is_busy(err):
                raise
            failed.append((rec, err))
    if len(batch) > 1 and len(failed) == len(batch):  # every file alone: the encoder fails, not a file
        return []
    for rec, why in failed:
        _record(idx, rec.path, rec.size, rec.mtime, rec.hash, why)
    return [rec.path for rec, _ in failed]
