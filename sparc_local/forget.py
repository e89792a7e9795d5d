"""`sparc-local forget`: a file or folder out of the index, scrubbed from the database files,
and kept out of every later write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sparc_local.errors import SparcError
from sparc_local.index.store import Index
from sparc_local.ingest.extract import path_key


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
