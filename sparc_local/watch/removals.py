"""Deletions first: a file that is gone leaves the index within seconds, whatever else runs.

A catch-up or a batch can encode for minutes. Between two of its steps (each file read, each
encoder step: run_index's progress) the worker calls ``Removals.apply``: the paths noted since
the last call that no longer exist are removed from the index at once, in a transaction of their
own. The run in progress may still hold one of them, read or encoded before it went: the index it
writes through (``guard``) drops such a file from its writes until the run ends, so a deleted file
is never written back. The backlog keeps every path, so the next batch looks at them again: a
file created anew under that name is indexed then.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from sparc_local.ingest.extract import path_key
from sparc_local.paths import is_under
from sparc_local.watch.backlog import Backlog
from sparc_local.watch.batch import remove_gone


def gone(paths: dict[str, bool]) -> list[str]:
    """The paths that do not exist now (a symlink whose target went away included)."""
    out = []
    for path in paths:
        try:
            os.stat(path)
        except FileNotFoundError:
            out.append(path)
        except OSError:  # e.g. a folder on the way became unreadable: the batch decides
            pass
    return out


def prune(idx, roots: Sequence[str]) -> int:
    """Remove the indexed files under ``roots`` that no longer exist (deleted while nothing
    watched), in one transaction: a catch-up does this before it reads or encodes anything."""
    keys = [path_key(r) for r in roots]
    missing = gone({f.path: False for f in idx.all_files() if any(is_under(f.path, k) for k in keys)})
    if not missing:
        return 0
    with idx.write_transaction():
        return idx.remove_files(missing)


class Removals:
    """The deletions the worker applies between the steps of a run, and the guard of that run's writes."""

    def __init__(self, backlog: Backlog) -> None:
        self._backlog = backlog
        self._removed: list[str] = []  # path keys removed during the current run: never written back by it

    def apply(self, idx) -> int:
        """Remove the paths noted since the last call that are gone; returns the files removed."""
        noted = self._backlog.fresh()
        missing = gone(noted)
        if not missing:
            return 0
        self._removed.extend(path_key(p) for p in missing)
        return remove_gone(idx, missing, noted)

    def guard(self, idx) -> _Guarded:
        """``idx`` for a run: its writes leave out what ``apply`` removed meanwhile."""
        return _Guarded(idx, self._removed)

    def end_run(self) -> None:
        """The run ended: nothing it read is left to write."""
        self._removed.clear()


class _Guarded:
    """An index whose ``write_files`` drops files at or below the removed paths; the rest is the index's."""

    def __init__(self, idx, removed: list[str]) -> None:
        self._idx, self._removed = idx, removed

    def __getattr__(self, name: str):
        return getattr(self._idx, name)

    def write_files(self, updates, *, merge: bool = True):
        if self._removed:
            updates = [u for u in updates if not any(is_under(str(u.path), r) for r in self._removed)]
        return self._idx.write_files(updates, merge=merge)
