"""Apply one batch of changed paths to the index, by looking at the filesystem *now*.

Not at the event types: a path that is gone is removed from the index (with everything below
it), a folder is walked, a file is re-indexed through ``run_index`` (which skips it if
size/mtime/hash are unchanged). That makes editors' atomic saves, renames, folders moved in or
out and `git checkout` bursts all the same simple case.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_local.index.records import FileStatus
from sparc_local.ingest.extract import ExtractError, iter_files, path_key, supported
from sparc_local.paths import is_under
from sparc_local.watch.config import LOG_NAME
from sparc_local.watch.scope import Scope

if TYPE_CHECKING:
    from sparc_local.pipeline import IndexReport

log = logging.getLogger(LOG_NAME)

VANISH_TRIES = 3  # a file gone between the check and the read fails its chunk: try the chunk without it


@dataclass
class BatchResult:
    indexed: int = 0
    removed: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # path -> reason: read again on their next event
    stopped: bool = False  # should_stop ended it early: the batch is to be applied again


def apply(idx, batch: dict[str, bool], scope: Scope, index_files: Callable[[list[str]], IndexReport], *,
          chunk_files: int, should_stop: Callable[[], bool], on_left: Callable[[int], None]) -> BatchResult:
    """Apply `batch` (path -> an event said it is a folder). ``index_files(paths)`` is run_index
    over some files; they go `chunk_files` at a time, ``should_stop()`` is asked between two
    chunks, and ``on_left(n)`` hears how many files are still to do."""
    gone, files, folders = [], set(), []
    out = BatchResult()
    for path in sorted(batch):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            gone.append(path)  # also a symlink whose target went away
            continue
        except OSError as err:  # e.g. a folder on the way became unreadable: try again later
            out.errors[path] = f"cannot stat: {err.strerror or err}"
            continue
        if stat.S_ISDIR(mode):
            folders.append(path)
        elif stat.S_ISREG(mode) and supported(path):  # never a FIFO
            files.add(path)
            rec = idx.file(path_key(path))
            if rec is not None and rec.status == FileStatus.ERROR:  # read it again even if its stat is the same
                idx.touch_file(rec.path, rec.size, -1.0)
    out.removed = remove_gone(idx, gone, batch)  # first: a deleted file leaves before anything is read
    gone = []
    if folders:
        known = [f.path for f in idx.all_files()]
        for folder in folders:
            base = scope.root_of(folder)
            walked = {str(f.absolute()) for f in iter_files([Path(folder)], rules=scope.rules,
                                                             base=Path(base) if base else None)}
            walked = {f for f in walked if not scope.ignored(f)}
            files |= walked
            keys, folder_key = {path_key(f) for f in walked}, path_key(folder)  # what the index stores
            gone += [k for k in known if is_under(k, folder_key) and k not in keys]
    out.removed += remove_gone(idx, gone, batch)
    todo = sorted(files)
    for i in range(0, len(todo), chunk_files):
        if should_stop():
            out.stopped = True
            break
        chunk = todo[i : i + chunk_files]
        for _ in range(VANISH_TRIES):
            present = [p for p in chunk if os.path.isfile(p)]
            try:
                rep = index_files(present)
                break
            except ExtractError:  # a file vanished since the check: its delete event follows
                continue
        else:
            continue
        out.indexed += rep.indexed
        out.errors.update((p, r) for p, r in rep.errors + rep.skipped if p in files)
        if rep.stopped:
            out.stopped = True
            break
        on_left(max(0, len(todo) - i - len(chunk)))
    if out.indexed or out.removed or out.errors:
        log.info("batch of %d paths: %d indexed, %d removed, %d failed", len(batch), out.indexed, out.removed,
                 len(out.errors))
    return out


def remove_gone(idx, gone: list[str], batch: dict[str, bool]) -> int:
    """Forget deleted files, in one transaction; a deleted folder loses everything below it."""
    if not gone:
        return 0
    removed = 0
    done_dirs: list[str] = []
    files: list[str] = []
    is_dir = {path_key(p): d for p, d in batch.items()}
    with idx.write_transaction():
        for path in sorted({path_key(p) for p in gone}):
            if any(is_under(path, d) for d in done_dirs):
                continue
            if is_dir.get(path, False):
                removed += idx.remove_under(path)
                done_dirs.append(path)
            elif idx.file(path) is not None:
                files.append(path)
        return removed + (idx.remove_files(files) if files else 0)
