""".gitignore / .ignore files, as ripgrep reads them, in the walk of `index` and in `watch` alike."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.index.store import Index
from sparc_local.ingest.extract import iter_files
from sparc_local.ingest.ignore import Rules
from sparc_local.model.info import ModelInfo
from sparc_local.watch.config import WatchConfig
from sparc_local.watch.watcher import Watcher
from tests.helpers import indexed_paths, wait_until

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("active_tiny")

TREE = {
    ".gitignore": "*.log.md\n!keep.log.md\nbuild/\n/top.txt\n**/cache/**\n",
    "a.log.md": "The oven log.",
    "keep.log.md": "The kept log.",
    "top.txt": "The top file.",
    "build/out.md": "The built file.",
    "notes.md": "The notes.",
    "sub/top.txt": "The other top file.",  # /top.txt is anchored to the root's folder
    "sub/build/deep.md": "A deeper build.",  # build/ matches at any depth
    "sub/cache/x/y.txt": "Cached.",
    "sub/.gitignore": "!*.log.md\ndraft.md\nprivate.md\n",  # deeper overrides shallower
    "sub/.ignore": "!draft.md\n",  # .ignore overrides .gitignore in the same folder
    "sub/b.log.md": "Re-included by the deeper file.",
    "sub/draft.md": "Re-included by .ignore.",
    "sub/private.md": "Kept out by the deeper file.",
}
KEPT = {"keep.log.md", "notes.md", "sub/top.txt", "sub/b.log.md", "sub/draft.md"}
EVERY = {p for p in TREE if not any(part.startswith(".") for part in p.split("/"))}


def make_tree(root: Path) -> Path:
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return root


def walked(root: Path, **kw) -> set[str]:
    return {p.relative_to(root).as_posix() for p in iter_files([root], **kw)}


def test_walk_respects_ignore_files(tmp_path: Path):
    root = make_tree(tmp_path / "docs")
    assert walked(root) == KEPT
    assert walked(root, ignore_files=False) == EVERY
    assert walked(root, exclude=["notes.md", "sub/draft.md"]) == KEPT - {"notes.md", "sub/draft.md"}
    # a file the user names is indexed whatever an ignore file says (as ripgrep searches it)
    assert walked(root / "a.log.md") == {"."}


def test_watcher_and_walk_decide_alike(tmp_path: Path, tiny_model_dir: Path):
    """Every file and folder of the tree: the watcher ignores exactly what the walk skips."""
    root = make_tree(tmp_path / "docs")
    info = ModelInfo.load(tiny_model_dir)
    for ignore_files in (True, False):
        w = Watcher([str(root)], info, lambda: None, WatchConfig(data_dir=tmp_path / "data", ignore_files=ignore_files))
        yielded = walked(root, ignore_files=ignore_files)
        for rel in TREE:
            if rel.endswith("gitignore") or rel.endswith(".ignore"):
                continue
            assert w.ignored(str(root / rel)) == (rel not in yielded), rel
        assert w.ignored(str(root / "build"), is_dir=True) == ignore_files
        assert w.ignored(str(root / "sub" / "build"), is_dir=True) == ignore_files
        assert not w.ignored(str(root / "sub"), is_dir=True)


def test_ignore_file_that_is_a_fifo_or_huge(tmp_path: Path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("Kept.\n")
    os.mkfifo(root / ".gitignore")  # reading it would block forever
    (root / "sub").mkdir()
    (root / "sub" / "b.md").write_text("Ignored.\n")
    (root / "sub" / ".ignore").write_text("b.md\n" + "#" * (2 << 20))  # only the first MB is read
    assert walked(root) == {"a.md"}


def test_index_and_no_ignore(tmp_path: Path):
    root = make_tree(tmp_path / "docs")
    summary = r"Indexed {} files \({} sentences\), {} unchanged, {} removed, 0 unreadable in \d+\.\ds\.\n"
    result = runner.invoke(app, ["index", str(root)])
    assert result.exit_code == 0 and re.fullmatch(summary.format(5, 5, 0, 0), result.output), result.output
    result = runner.invoke(app, ["index", str(root), "--no-ignore"])
    assert re.fullmatch(summary.format(6, 6, 5, 0), result.output), result.output
    # the next run respects the ignore files again: what they list leaves the index
    result = runner.invoke(app, ["index"])
    assert re.fullmatch(summary.format(0, 0, 5, 6), result.output), result.output
    with Index() as idx:
        assert {Path(f.path).relative_to(root).as_posix() for f in idx.all_files()} == KEPT


def test_watcher_follows_an_edited_ignore_file(tmp_path: Path, tiny_model_dir: Path):
    from sparc_local.model.encoder import Encoder

    root = make_tree(tmp_path / "docs")
    info = ModelInfo.load(tiny_model_dir)
    w = Watcher([str(root)], info, lambda: Encoder(info, threads=1), WatchConfig(quiet_period=0.2, max_delay=2.0))
    w.start(timeout=15)

    def files() -> set[str]:
        return {Path(p).relative_to(root).as_posix() for p in indexed_paths()}

    def until(want: set[str]) -> None:
        wait_until(lambda: files() == want, f"{sorted(want)}; have {sorted(files())}")

    try:
        assert files() == KEPT  # the catch-up walk
        (root / "c.log.md").write_text("A new log.\n")  # ignored: never indexed
        (root / "sub" / "c.log.md").write_text("Re-included below.\n")
        until(KEPT | {"sub/c.log.md"})
        (root / "sub" / ".gitignore").write_text("!*.log.md\n")  # no longer keeps private.md out
        until(KEPT | {"sub/c.log.md", "sub/private.md"})
        (root / ".gitignore").write_text("*.log.md\nbuild/\n/top.txt\n**/cache/**\nnotes.md\n")
        until(KEPT - {"notes.md", "keep.log.md"} | {"sub/c.log.md", "sub/private.md"})
        assert w.status().last_error is None
    finally:
        w.stop(timeout=15)


def test_rules_are_one_decision():
    """Rules.ignored is Rules.skips applied to each name from the root down."""
    rules = Rules(exclude=["tmp"], include_hidden=False, ignore_files=False)
    assert rules.ignored("/r", "/r/a/tmp/b.md") and rules.ignored("/r", "/r/.x/b.md")
    assert not rules.ignored("/r", "/r/a/b.md") and not rules.ignored("/r/.x", "/r/.x")
