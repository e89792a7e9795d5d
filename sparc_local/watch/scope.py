"""What the watcher looks at: paths under its roots, outside the data dir, kept by `index`'s rules.

The observer thread asks it about every event and the worker thread about every walked file, so
it decides exactly as the walk of `index` does (``ignore.Rules``): a file the watcher indexes is
one `index` would index, and a file it skips, `index` skips too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from sparc_local.ingest.extract import supported
from sparc_local.ingest.ignore import IGNORE_FILES, Rules
from sparc_local.paths import is_under


class Scope:
    """The watched roots (absolute, sorted), the data dir and the walk's rules.

    ``roots`` is replaced whole (never changed in place) when a request adds or forgets one, so
    the observer thread always reads a consistent list.
    """

    def __init__(self, roots: Iterable[str], data_dir: str | os.PathLike, rules: Rules) -> None:
        self.roots = sorted({str(Path(r).expanduser().absolute()) for r in roots})
        data = Path(data_dir)
        self.data_dirs = sorted({str(data.absolute()), str(data.resolve())})
        self.rules = rules

    def root_of(self, path: str) -> str | None:
        """The innermost root holding `path`."""
        return max((r for r in self.roots if is_under(path, r)), key=len, default=None)

    def ignored(self, path: str, is_dir: bool = False) -> bool:
        """The rules of `index` (``Rules.ignored``), outside the roots, or in the data dir."""
        root = self.root_of(path)
        if root is None or any(is_under(path, d) and not is_under(root, d) for d in self.data_dirs):
            return True  # (the data dir is skipped inside a root, not when the root lies inside it)
        return self.rules.ignored(root, path, is_dir)

    def enters(self, folder: str, name: str) -> bool:
        """Whether a walk of the roots enters the subfolder ``name`` of ``folder`` (the observer
        watches, or polls, only those)."""
        path = os.path.join(folder, name)
        root = self.root_of(path)
        if root is None or root == path:
            return root is not None
        if any(is_under(path, d) and not is_under(root, d) for d in self.data_dirs):
            return False
        return not self.rules.skips(root, folder, name, True)

    def event(self, path: str, is_dir: bool) -> tuple[str, bool] | None:
        """The path to apply for an event on `path`, and whether it is a folder; None: ignore it.

        A changed ignore file stands for its folder: what the folder keeps out may have changed,
        so it is walked again (and what it now keeps out leaves the index)."""
        path = os.path.normpath(path)
        if not is_dir and os.path.basename(path) in IGNORE_FILES:
            folder = os.path.dirname(path)
            self.rules.forget_folder(folder)
            path, is_dir = folder, True
        if self.ignored(path, is_dir) or (not is_dir and not supported(path)):
            return None
        return path, is_dir
