"""ask --path/--type (pathfilter.py): the SQL prefilter (index/filters.py) never drops a path the exact test keeps."""

from __future__ import annotations

import fnmatch
import sqlite3

import numpy as np
import pytest

from sparc_local.index.filters import sql_glob, where
from sparc_local.query.pathfilter import PathFilter, is_glob


def _sql_kept(paths: list[str], flt: PathFilter) -> set[str]:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE files (path TEXT)")
    c.executemany("INSERT INTO files VALUES (?)", [(p,) for p in paths])
    cond, args = where(flt, "path")
    return {r[0] for r in c.execute(f"SELECT path FROM files WHERE {cond}", args)}


@pytest.mark.parametrize("seed", range(4))
def test_glob_prefilter_keeps_every_fnmatch_match(seed):
    """Random absolute globs full of bracket sets (plain, negated, reversed ranges, unclosed, ']'
    first, '^' first) against random paths: SQLite's GLOB keeps a superset, and ``keeps`` is fnmatch."""
    rng = np.random.default_rng(seed)
    alphabet = list("ab/.Z") + ["é", "\n"]
    paths = ["/" + "".join(rng.choice(alphabet, int(rng.integers(0, 8)))) for _ in range(400)]
    pieces = list("ab/.Z") + ["*", "?", "[", "]", "!", "^", "-", "[ab]", "[!a]", "[a-b]", "[b-a]", "[]a]", "[^a]",
                              "[!]", "[é]", "[a-", "[.]"]
    extra = tried = 0
    for _ in range(300):
        pattern = "/" + "".join(rng.choice(pieces, int(rng.integers(1, 7))))
        if not is_glob(pattern):
            continue
        tried += 1
        flt = PathFilter(glob=pattern)
        exact = [fnmatch.fnmatch(p, pattern) for p in paths]
        assert flt.keeps(paths, roots=["/a"]) == exact
        sql = _sql_kept(paths, flt)
        assert {p for p, e in zip(paths, exact) if e} <= sql, (pattern, sql_glob(pattern))
        extra += len(sql) - sum(exact)
    assert tried > 200
    assert extra < 0.05 * tried * len(paths)  # a prefilter, not everything


def _rule(pattern: str, path: str, roots: list[str]) -> bool:
    """The module docstring's rule, restated: text is part of the path relative to the deepest root
    it lies below (else of its name), or an absolute text is the path or a folder above it; a glob
    matches that relative path, the name or the whole path, an absolute glob the whole path."""
    name = path.rsplit("/", 1)[-1]
    below = [r.rstrip("/") + "/" for r in roots if len(path) > len(r.rstrip("/") + "/")
             and path.startswith(r.rstrip("/") + "/")]
    rel = path[len(max(below, key=len)):] if below else name
    if not any(c in pattern for c in "*?["):
        if pattern.startswith("/"):
            return path == pattern or path.startswith(pattern.rstrip("/") + "/")
        return pattern in rel
    if pattern.startswith("/"):
        return fnmatch.fnmatchcase(path, pattern)
    return any(fnmatch.fnmatchcase(s, pattern) for s in (rel, name, path))


@pytest.mark.parametrize("seed", range(4))
def test_text_and_relative_globs_follow_the_rule(seed):
    """Random texts and globs (absolute or not) against random paths under random roots: ``keeps``
    follows the rule, and the SQL condition keeps a superset of it."""
    rng = np.random.default_rng(seed)
    alphabet = list("ab/.Z") + ["é", "\n"]
    paths = ["/" + "".join(rng.choice(alphabet, int(rng.integers(0, 9)))) for _ in range(400)]
    pieces = list("ab/.Z") + ["*", "?", "é", "[ab]", "[!a]", "/a/", "b."]
    every_root = ["/", "/a", "/a/", "/a/b", "/b.", "/Z/a"]
    hits = 0
    for _ in range(300):
        pattern = "".join(rng.choice(pieces, int(rng.integers(1, 5))))
        roots = [r for r in every_root if rng.random() < 0.4]
        flt = PathFilter(glob=pattern)
        exact = [_rule(pattern, p, roots) for p in paths]
        assert flt.keeps(paths, roots=roots) == exact, (pattern, roots)
        assert {p for p, e in zip(paths, exact) if e} <= _sql_kept(paths, flt), pattern
        hits += sum(exact)
    assert hits > 0.05 * 300 * len(paths)  # the rule keeps something


def test_path_text_and_globs_relative_to_the_roots():
    roots = ["/home/u/docs", "/home/u/docs/.private/mail", "/home/u/notes.md"]
    paths = ["/home/u/docs/library/a.txt", "/home/u/docs/old-library.md", "/home/u/docs/x/library/b.md",
             "/home/u/docs/.private/mail/library.eml", "/home/u/notes.md", "/srv/library/c.txt"]

    def kept(pattern: str) -> list[str]:
        flt = PathFilter(glob=pattern)
        found = [p for p, k in zip(paths, flt.keeps(paths, roots=roots)) if k]
        assert set(found) <= _sql_kept(paths, flt)
        return found

    assert kept("library") == paths[:4]  # /srv/... lies under no root: only its name is tried
    assert kept("library/") == [paths[0], paths[2]]
    assert kept("docs") == []  # the roots' own names are not part of the relative path
    assert kept("notes") == ["/home/u/notes.md"]  # a file indexed on its own: its name
    assert kept("library/*") == [paths[0]]  # relative to the root
    assert kept("*/library/*") == [paths[0], paths[2], paths[5]]  # or to the whole path
    assert kept("library.*") == [paths[3]]  # or the name, relative to the deepest root
    assert kept("*.md") == [paths[1], paths[2], paths[4]]
    assert kept("/home/u/docs/*.md") == [paths[1], paths[2]]
    assert kept("/home/u/docs/library") == [paths[0]]  # at or below
    assert kept("/home/u/docs/lib") == []
    assert kept("/home/u/docs/library/") == [paths[0]]
    assert kept("/home/u/notes.md") == [paths[4]]


def test_type_keeps_its_aliases():
    paths = ["/a/x.html", "/a/x.HTM", "/a/x.htm.bak", "/a/x.md", "/a/x.markdown", "/a/x.txt", "/a/x.text",
             "/a/x.rst", "/a/x.pdf", "/a/x.ht%"]
    for ext, want in [("htm", [0, 1]), ("html", [0, 1]), (".HTML", [0, 1]), ("md", [3, 4]),
                      ("markdown", [3, 4]), ("text", [5, 6]), ("rst", [7]), ("pdf", [8]), ("ht%", [9])]:
        flt = PathFilter(ext=ext)
        assert [i for i, k in enumerate(flt.keeps(paths)) if k] == want, ext
        assert _sql_kept(paths, flt) == {paths[i] for i in want}, ext


def test_type_aliases_name_one_kind_of_file_each():
    """Each group of aliases holds a type `index` reads, and the types of a group it reads share a
    reader (a new reader with other names joins a group, or starts one)."""
    from sparc_local.ingest.extract import READERS
    from sparc_local.query.pathfilter import TYPE_ALIASES

    for group in TYPE_ALIASES:
        assert group & set(READERS), group
        assert len({READERS[s] for s in group if s in READERS}) == 1, group
    assert all(not a & b for a in TYPE_ALIASES for b in TYPE_ALIASES if a is not b)


def test_modification_time_bounds_are_exact_in_sql():
    """since <= mtime < before, decided alike by ``keeps`` and by SQLite (floats compare exactly)."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE files (path TEXT, mtime REAL)")
    rng = np.random.default_rng(5)
    mtimes = [float(t) for t in rng.uniform(1.7e9, 1.8e9, 300)] + [1.75e9, np.nextafter(1.75e9, 0), 1.76e9]
    paths = [f"/a/f{i}.md" for i in range(len(mtimes))]
    c.executemany("INSERT INTO files VALUES (?, ?)", list(zip(paths, mtimes)))
    for since, before in [(1.75e9, None), (None, 1.75e9), (1.75e9, 1.76e9), (1.76e9, 1.75e9), (None, None)]:
        flt = PathFilter(ext="md", since=since, before=before)
        cond, args = where(flt, "path", "mtime")
        sql = {r[0] for r in c.execute(f"SELECT path FROM files WHERE {cond}", args)}
        exact = {p for p, k in zip(paths, flt.keeps(paths, mtimes=mtimes)) if k}
        assert sql == exact == {p for p, m in zip(paths, mtimes)
                                if (since is None or m >= since) and (before is None or m < before)}
    with pytest.raises(ValueError):
        PathFilter(since=1.0).keeps(paths)


def test_plain_globs_are_exact_in_sql():
    paths = [f"/home/u/{d}/f{i}.{e}" for d in ("docs", "work", "Docs") for i in range(12) for e in ("md", "txt", "MD")]
    for pattern in ("/home/u/docs/*", "*/f1[0-2].*", "*/f[!1]*", "*.md", "*/[a-z]ocs/*", "/home/u/w?rk/f3.txt"):
        flt = PathFilter(glob=pattern)
        assert _sql_kept(paths, flt) == set(fnmatch.filter(paths, pattern))
        assert sql_glob(pattern) == pattern.replace("[!", "[^")


def test_type_prefilter_keeps_every_case_insensitive_match():
    """``--type`` matches the suffix case-insensitively by str.lower(), which also folds letters
    SQLite's LIKE does not (the Kelvin sign is a "k"); LIKE's wildcards in EXT are literal."""
    paths = ["/a/x.txt", "/a/x.TXT", "/a/x.TxT", "/a/xtxt", "/a/x.txt.bak", "/a/x.K", "/a/x.\u212a", "/a/x.k",
             "/a/x.ÉTÉ", "/a/x.été", "/a/x._df", "/a/xa_df", "/a/x.%", "/a/x.a%", "/a/x.a\\b", "/a/x.ab"]
    for ext in ("txt", ".TXT", "k", "été", "_df", "%", "a\\b", "b"):
        flt = PathFilter(ext=ext)
        suffix = "." + ext.lstrip(".").lower()
        exact = [p.lower().endswith(suffix) for p in paths]
        assert flt.keeps(paths) == exact
        sql = _sql_kept(paths, flt)
        assert {p for p, e in zip(paths, exact) if e} <= sql, ext
        assert {p for p in sql if p.isascii()} == {p for p, e in zip(paths, exact) if e and p.isascii()}, ext
    both = PathFilter(glob="/a/x*", ext="k")
    assert [p for p, k in zip(paths, both.keeps(paths)) if k] == ["/a/x.K", "/a/x.\u212a", "/a/x.k"]
