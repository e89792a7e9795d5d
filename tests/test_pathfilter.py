"""ask --path/--type (pathfilter.py): the SQL prefilter never drops a path the exact test keeps."""

from __future__ import annotations

import fnmatch
import sqlite3

import numpy as np
import pytest

from sparc_local.pathfilter import PathFilter, sql_glob


def _sql_kept(paths: list[str], flt: PathFilter) -> set[str]:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE files (path TEXT)")
    c.executemany("INSERT INTO files VALUES (?)", [(p,) for p in paths])
    cond, args = flt.where("path")
    return {r[0] for r in c.execute(f"SELECT path FROM files WHERE {cond}", args)}


@pytest.mark.parametrize("seed", range(4))
def test_glob_prefilter_keeps_every_fnmatch_match(seed):
    """Random patterns full of bracket sets (plain, negated, reversed ranges, unclosed, ']' first,
    '^' first) against random paths: SQLite's GLOB keeps a superset, and ``keeps`` is fnmatch."""
    rng = np.random.default_rng(seed)
    alphabet = list("ab/.Z") + ["é", "\n"]
    paths = ["".join(rng.choice(alphabet, int(rng.integers(0, 8)))) for _ in range(400)]
    pieces = list("ab/.Z") + ["*", "?", "[", "]", "!", "^", "-", "[ab]", "[!a]", "[a-b]", "[b-a]", "[]a]", "[^a]",
                              "[!]", "[é]", "[a-", "[.]"]
    extra = 0
    for _ in range(300):
        pattern = "".join(rng.choice(pieces, int(rng.integers(1, 7))))
        flt = PathFilter(glob=pattern)
        exact = [fnmatch.fnmatch(p, pattern) for p in paths]
        assert flt.keeps(paths) == exact
        sql = _sql_kept(paths, flt)
        assert {p for p, e in zip(paths, exact) if e} <= sql, (pattern, sql_glob(pattern))
        extra += len(sql) - sum(exact)
    assert extra < 0.05 * 300 * len(paths)  # a prefilter, not everything


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
