"""``ask --path --type --since --before``: which indexed files a question is restricted to.

``--path`` takes TEXT or a GLOB (a pattern with ``*``, ``?`` or ``[``), as rg and fd users expect:

* TEXT keeps the files whose path relative to their root (the indexed folder they lie under)
  contains it; an absolute TEXT keeps the files at or below that path.
* A GLOB keeps the files whose path relative to their root, or absolute path, it matches
  (``notes/*``, ``*/library/*``, ``/home/me/*.md``), or the file name (``draft*`` at any depth,
  as rg's ``-g`` and ``index --exclude`` read it).

``--type EXT`` keeps EXT and the extensions that name the same kind of file (``htm`` and
``html``: ``TYPE_ALIASES``).  ``--since``/``--before`` bound the file's modification time.

``PathFilter`` is typed data, no SQL: ``keeps`` is the exact test, and each store narrows the
files first its own way, keeping a superset (the local index: ``index/filters.py``'s SQL
condition; Milvus: ``milvus/search.py``'s filter expression).
"""

from __future__ import annotations

import fnmatch
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparc_local.paths import is_under

if TYPE_CHECKING:
    from sparc_local.index.store import Index

_GLOB_CHARS = frozenset("*?[")
# Extensions `ask --type` reads as one kind of file: `--type htm` also keeps .html files.  Here
# rather than beside extract.READERS, which imports every reader: ~20 ms on a cold `ask --type`.
TYPE_ALIASES = (
    frozenset({".html", ".htm"}),
    frozenset({".md", ".markdown"}),
    frozenset({".txt", ".text"}),
    frozenset({".rst", ".rest"}),
)


@dataclass(frozen=True)
class PathFilter:
    """Frozen (hashable by value): the index caches the sentence mask it resolves to under it.

    ``since``/``before``: seconds since the epoch; a file is kept when since <= mtime < before.
    """

    glob: str | None = None
    ext: str | None = None
    since: float | None = None
    before: float | None = None

    @classmethod
    def of(cls, glob: str | None = None, ext: str | None = None, since: float | None = None,
           before: float | None = None) -> PathFilter | None:
        """The filter of `ask`'s options; None when they keep every file."""
        if glob or ext or since is not None or before is not None:
            return cls(glob, ext, since, before)
        return None

    @property
    def path_is_glob(self) -> bool:
        """Whether ``glob`` is read as a glob rather than as text (``is_glob``)."""
        return self.glob is not None and is_glob(self.glob)

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The lower-case suffixes ``ext`` keeps (with its aliases); () keeps any."""
        return tuple(sorted(type_suffixes(self.ext))) if self.ext else ()

    def keeps(self, paths: Sequence[str], roots: Sequence[str] = (),
              mtimes: Sequence[float] | None = None) -> list[bool]:
        """Whether each file is kept; ``roots`` are the indexed roots (for paths relative to
        them), ``mtimes`` the files' modification times (needed with ``since`` or ``before``)."""
        keep = _path_keeps(self.glob, paths, roots) if self.glob else [True] * len(paths)
        suffixes = self.suffixes
        if suffixes:
            keep = [k and p.lower().endswith(suffixes) for k, p in zip(keep, paths)]
        if self.since is not None or self.before is not None:
            if mtimes is None:
                raise ValueError("a filter on the modification time needs the files' mtimes")
            lo = float("-inf") if self.since is None else self.since
            hi = float("inf") if self.before is None else self.before
            keep = [k and lo <= m < hi for k, m in zip(keep, mtimes)]
        return keep


@dataclass(frozen=True)
class NoMatch:
    """The indexed files, when a filter keeps none of them: what the user could filter on instead."""

    files: int
    suffixes: tuple[str, ...]  # their extensions, the most common first
    oldest: float  # their modification times
    newest: float


def no_match(index: Index, file_filter: PathFilter) -> NoMatch | None:
    """A ``NoMatch`` when ``file_filter`` keeps none of the files the index holds text of, else
    None (None too when it holds none: then no filter is to blame). Reads every file's row: for
    a question that found no answer only."""
    from sparc_local.index.records import FileStatus

    files = [f for f in index.all_files() if f.status == FileStatus.OK]
    if not files or any(file_filter.keeps([f.path for f in files], index.stored_roots(), [f.mtime for f in files])):
        return None
    counts = Counter(os.path.splitext(f.path)[1].lower() for f in files)
    mtimes = [f.mtime for f in files]
    suffixes = sorted((s for s in counts if s), key=lambda s: (-counts[s], s))
    return NoMatch(len(files), tuple(suffixes), min(mtimes), max(mtimes))


def type_suffixes(ext: str) -> frozenset[str]:
    """The suffixes `ask --type EXT` keeps: EXT (with or without its dot, any case) and its aliases."""
    suffix = "." + ext.lstrip(".").lower()
    return next((group for group in TYPE_ALIASES if suffix in group), frozenset({suffix}))


def is_glob(pattern: str) -> bool:
    """Whether ``--path`` reads ``pattern`` as a glob rather than as text."""
    return not _GLOB_CHARS.isdisjoint(pattern)


def relative(path: str, roots: Sequence[str]) -> str:
    """``path`` relative to the deepest of ``roots`` it lies below; its name when it is a root
    itself (a file indexed on its own) or lies below none."""
    for root in sorted(roots, key=len, reverse=True):
        base = root.rstrip(os.sep) + os.sep
        if len(path) > len(base) and path.startswith(base):
            return path[len(base):]
    return os.path.basename(path)


def _path_keeps(pattern: str, paths: Sequence[str], roots: Sequence[str]) -> list[bool]:
    if not is_glob(pattern):
        if os.path.isabs(pattern):

            return [is_under(p, pattern) for p in paths]
        return [pattern in relative(p, roots) for p in paths]
    whole = set(fnmatch.filter(paths, pattern))  # fnmatch.filter compiles the pattern once
    if os.path.isabs(pattern):
        return [p in whole for p in paths]
    # tried on the name and on the path relative to the root, as `index --exclude` is
    rels = [relative(p, roots) for p in paths]
    names = [os.path.basename(p) for p in paths]
    rel_hits, name_hits = set(fnmatch.filter(rels, pattern)), set(fnmatch.filter(names, pattern))
    return [p in whole or r in rel_hits or n in name_hits for p, r, n in zip(paths, rels, names)]
