"""Which paths a walk skips: hidden names, `--exclude` globs, and `.gitignore` / `.ignore` files.

One method decides, ``Rules.skips``: the indexer's walk (``extract.iter_files``) prunes with it as
it descends, and the watcher asks ``Rules.ignored`` about any path an event names, which applies
``skips`` to each name from the root down. So `index` and `watch` always agree.

Ignore files follow ripgrep: a `.ignore` or `.gitignore` in a folder applies to everything below
it, in gitignore syntax (negation `!`, `dir/` patterns, anchored `/name`, `**`; pathspec's
``GitIgnoreSpec`` implements git's own matching rules); a deeper file overrides a shallower one,
`.ignore` overrides `.gitignore` in the same folder, and within a file the last matching line wins.
As in git, nothing below an ignored folder can be re-included (the walk never enters it).
Two differences from ripgrep, both for a folder of documents rather than a source tree:

* a `.gitignore` counts outside a git repository too (ripgrep's ``--no-require-git``): few
  document folders are repositories, and a `.gitignore` there was written to keep files out;
* ignore files *above* an indexed folder do not count: a home folder kept in git with `*` in
  `~/.gitignore` would otherwise hide every document of `sparc-local index ~/Documents`.

Folders that tools write and people do not are skipped too, with or without an ignore file
(``junk_folder``): installed packages (`node_modules`, `site-packages`, a virtualenv, a copy of
Python's standard library), caches and build output. A developer's home is full of them, and
their READMEs and changelogs would answer "how do I install it" for every package but the
user's. `--no-ignore` (``ignore_files=False``) indexes them as it does ignored files.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable

IGNORE_FILES = (".ignore", ".gitignore")  # in a folder, the first one that matches a path decides
# Folders written by package managers, interpreters and documentation builders, whatever is above them
JUNK_NAMES = frozenset("""node_modules bower_components jspm_packages __pycache__ site-packages dist-packages
    lib-dynload _build""".split())
JUNK_SUFFIXES = (".dist-info", ".egg-info")
# A folder holding one of these is a virtualenv (pyvenv.cfg) or a copy of Python's standard library
JUNK_MARKERS = ("pyvenv.cfg", "__future__.py")
# Build output, when its parent is a project that a build tool writes it for
BUILD_NAMES = frozenset({"build", "dist", "target", "out"})
PROJECT_MARKERS = ("setup.py", "pyproject.toml", "package.json", "Makefile", "CMakeLists.txt", "Cargo.toml",
                   "pom.xml", "build.gradle", "conf.py", "meson.build", "configure.ac")
MAX_IGNORE_BYTES = 1 << 20  # read of one ignore file: real ones are a few hundred bytes


def _rel(base: str, path: str) -> str:
    """``path`` relative to ``base`` (``path`` lies at or below it), with '/' separators."""
    if path == base:
        return ""
    rel = path[len(base.rstrip(os.sep)) + 1:]
    return rel if os.sep == "/" else rel.replace(os.sep, "/")


def _read_lines(path: str) -> list[str] | None:
    """The lines of an ignore file; None if there is none (the common case) or it cannot be read.
    Opened non-blocking and read only if regular: a FIFO named .gitignore must not hang the walk."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_IGNORE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").splitlines()


def junk_folder(parent: str, name: str) -> bool:
    """Whether the folder ``name`` of ``parent`` holds what a tool wrote, not a person (see the
    module docstring): by its name, by a marker file in it, or as build output of a project."""
    if name in JUNK_NAMES or name.endswith(JUNK_SUFFIXES):
        return True
    path = os.path.join(parent, name)
    if any(os.path.isfile(os.path.join(path, marker)) for marker in JUNK_MARKERS):
        return True
    return name in BUILD_NAMES and any(os.path.isfile(os.path.join(parent, m)) for m in PROJECT_MARKERS)


class Rules:
    """What a walk of a root skips. Safe to share between the watcher's threads: the only state
    is a cache of parsed ignore files (per folder), which ``forget_folder`` drops when one changes."""

    def __init__(self, exclude: Iterable[str] = (), include_hidden: bool = False, ignore_files: bool = True) -> None:
        self.exclude = tuple(exclude)
        self.include_hidden = include_hidden
        self.ignore_files = ignore_files
        self._specs: dict[str, list] = {}

    def excluded(self, name: str, rel: str) -> bool:
        """An `--exclude` glob matches the name or the path relative to the root."""
        return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in self.exclude)

    def skips(self, root: str, folder: str, name: str, is_dir: bool) -> bool:
        """Whether a walk of ``root`` skips the entry ``name`` of ``folder`` (at or below root)."""
        if name.startswith(".") and not self.include_hidden:
            return True
        path = os.path.join(folder, name)
        if self.excluded(name, _rel(root, path)):
            return True
        if not self.ignore_files:
            return False
        return (is_dir and path != root and junk_folder(folder, name)) or self._ignored_by_files(root, folder, path, is_dir)

    def ignored(self, root: str, path: str, is_dir: bool = False) -> bool:
        """Whether a walk of ``root`` never yields ``path``: ``skips`` of any name on the way.
        ``root`` itself (a folder or a file the user named) is never skipped."""
        folder = root
        parts = _rel(root, path).split("/") if path != root else []
        for i, part in enumerate(parts):
            if self.skips(root, folder, part, is_dir if i == len(parts) - 1 else True):
                return True
            folder = os.path.join(folder, part)
        return False

    def forget_folder(self, folder: str) -> None:
        """An ignore file in ``folder`` changed: read it again next time."""
        self._specs.pop(folder, None)

    def _ignored_by_files(self, root: str, folder: str, path: str, is_dir: bool) -> bool:
        here = folder
        while True:
            specs = self._load(here)
            if specs:
                rel = _rel(here, path) + ("/" if is_dir else "")
                for spec in specs:
                    verdict = spec.check_file(rel).include  # True: ignored, False: re-included by `!`
                    if verdict is not None:
                        return verdict
            if here == root or len(here) <= len(root):
                return False
            here = os.path.dirname(here)

    def _load(self, folder: str) -> list:
        specs = self._specs.get(folder)
        if specs is None:
            specs = []
            for name in IGNORE_FILES:
                lines = _read_lines(os.path.join(folder, name))
                if lines is None:
                    continue
                from pathspec import GitIgnoreSpec

                specs.append(GitIgnoreSpec.from_lines(lines))
            self._specs[folder] = specs
        return specs
