"""The Milvus backend against Milvus Lite, started by the tests (a file in tmp_path): the same
rankings as the local engine in every mode and filter, `index`/`ask`/`forget` through
SPARC_LOCAL_STORE, recovery after a killed writer, engine errors as SparcError, and a cold `ask`
that never imports pymilvus.  Real files, the tiny model."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.backend import STORE_ENV
from sparc_local.errors import SparcError
from sparc_local.milvus.store import StoreSpec

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = ["the tea tower train river museum", "how long should green tea steep", "museum ticket history music"]
FILES = {
    "tea.md": ("# Tea\n\nGreen tea should steep for three minutes. Then drink it. Black tea wants boiling water.\n",
               "2026-01-10T00:00"),
    "library/history.txt": ("The king built the tower in one year. The queen paid for the bridge.\n",
                            "2025-06-01T12:00"),
    "library/trip.htm": ("<html><body><p>The train station is by the river. The city is old.</p></body></html>",
                         "2025-12-31T23:59"),
    "notes/museum.html": ("<html><body><p>The museum ticket was for the history of music.</p>"
                          "<p>The piano school is near the museum.</p></body></html>", "2026-02-01T08:30"),
}


def _lite() -> None:
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
    except ImportError as err:  # the wheel is not built for every platform (e.g. Windows)
        pytest.skip(f"Milvus Lite is not installed for this platform ({err}): pip install 'sparc-local[milvus]'")


def _when(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, active_tiny: Path) -> str:
    """SPARC_LOCAL_STORE naming a fresh Milvus Lite file; FILES written (not indexed)."""
    _lite()
    for rel, (text, when) in FILES.items():
        path = tmp_path / "docs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (_when(when), _when(when)))
    named = f"{tmp_path / 'milvus.db'}#docs"
    monkeypatch.setenv(STORE_ENV, named)
    return named


def _index(root: Path) -> None:
    from sparc_local.cli.app import app

    result = CliRunner().invoke(app, ["index", str(root), "-q"])
    assert (result.exit_code, result.output) == (0, "")


def test_same_rankings_as_the_local_engine(store: str, tmp_path: Path) -> None:
    """Every mode and filter: Milvus's top 10 (ids, order) is the local engine's, certified exact."""
    from sparc_local import paths
    from sparc_local.index.store import Index
    from sparc_local.milvus.search import MilvusSearcher
    from sparc_local.milvus.store import MilvusStore
    from sparc_local.model.info import active_model
    from sparc_local.query.modes import MODES
    from sparc_local.query.pathfilter import PathFilter
    from sparc_local.query.searcher import Searcher
    from sparc_local.query.tokens import QueryTokenizer, query_token_ids

    _index(tmp_path / "docs")
    info = active_model()
    tok, skip = QueryTokenizer(info.tokenizer_path), info.skip_array()
    filters = [None, PathFilter.of(ext="htm"), PathFilter.of("library"),
               PathFilter.of("*.md", since=_when("2026-01-01T00:00"))]
    with Index(paths.db_path()) as idx, MilvusStore(StoreSpec.parse(store)) as ms:
        local, remote = Searcher(idx), MilvusSearcher(ms, candidates=2)  # 2: the bound must make it look further
        compared = 0
        for q in QUESTIONS:
            toks = query_token_ids(tok, q, skip)
            for mode in MODES:
                for f in filters:
                    stats: dict = {}
                    a_ids, a_scores = local.search(toks, n=10, mode=mode, file_filter=f)
                    b_ids, b_scores = remote.search(toks, n=10, mode=mode, file_filter=f, stats=stats)
                    assert b_ids.tolist() == a_ids.tolist(), (q, mode, f)
                    assert b_scores.tolist() == pytest.approx(a_scores.tolist(), rel=1e-6)
                    assert stats["exact"]
                    compared += len(a_ids) > 0
            ids = local.search(toks, n=3, mode="hybrid")[0].tolist()
            assert remote.explain(toks, ids, mode="hybrid") == [
                pytest.approx(d) for d in local.explain(toks, ids, mode="hybrid")]
        assert compared > 20  # the filters keep some files: the comparison saw real rankings


def test_ask_and_forget_through_the_store(store: str, tmp_path: Path) -> None:
    """`ask` answers from Milvus alone (the local index moved away); `forget` leaves no entity
    or key statistic of the file there."""
    from sparc_local import paths
    from sparc_local.cli.app import app
    from sparc_local.milvus.store import MilvusStore

    _index(tmp_path / "docs")
    db = paths.db_path()
    db.rename(db.with_name("elsewhere.db"))  # ask must not need it
    result = CliRunner().invoke(app, ["ask", "how long should green tea steep", "-k", "1", "--type", "md"])
    assert result.exit_code == 0, result.output
    assert "Green tea should steep for three minutes." in result.output
    assert str(tmp_path / "docs" / "tea.md") in result.output
    db.with_name("elsewhere.db").rename(db)
    with MilvusStore(StoreSpec.parse(store)) as ms:
        files, sentences = ms.count()
        assert files == len(FILES)
    result = CliRunner().invoke(app, ["forget", str(tmp_path / "docs" / "library")])
    assert result.exit_code == 0, result.output
    with MilvusStore(StoreSpec.parse(store)) as ms:
        assert ms.count() == (len(FILES) - 2, sentences - 4)  # history.txt and trip.htm: 2 sentences each
        left = ms.client.query(ms.name, filter='path like "%library%"', output_fields=["id"])
        assert left == []
        ms.recount()  # the statistics forget left are those of the entities left
        assert ms.count()[1] == sentences - 4
    result = CliRunner().invoke(app, ["ask", "who built the tower", "--path", "library"])
    assert (result.exit_code, result.output) == (0, "No answer found.\n")


def test_a_killed_writer_is_recovered(store: str, tmp_path: Path) -> None:
    """A record left by a killed writer: its paths leave both sides, and the next run writes them again."""
    from sparc_local import paths
    from sparc_local.backend import open_index
    from sparc_local.milvus.mirror import UNSYNCED_SUFFIX
    from sparc_local.milvus.store import MilvusStore

    root = tmp_path / "docs"
    _index(root)
    with MilvusStore(StoreSpec.parse(store)) as ms:
        before = ms.count()
        stats = ms.key_stats(list(range(200)))
    tea = str(root / "tea.md")
    Path(str(paths.db_path()) + UNSYNCED_SUFFIX).write_text(f'["{tea}"]')
    with open_index(paths.db_path()) as idx:
        idx.remove_files([])  # any write recovers first
        assert idx.file(tea) is None
    with MilvusStore(StoreSpec.parse(store)) as ms:
        assert ms.count()[0] == before[0] - 1
    _index(root)
    with MilvusStore(StoreSpec.parse(store)) as ms:
        assert ms.count() == before
        assert ms.key_stats(list(range(200))) == stats


def test_engine_errors_are_sparc_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, active_tiny: Path) -> None:
    from sparc_local.cli.app import app

    for bad in ("milvus://nohost/docs", "notes.txt", f"{tmp_path / 'x.db'}#9bad"):
        with pytest.raises(SparcError):
            StoreSpec.parse(bad)
    assert StoreSpec.parse("milvus://db.example:19530/team") == StoreSpec("http://db.example:19530", "team")
    _lite()
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "none.db"))
    result = CliRunner().invoke(app, ["ask", "tea"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: the Milvus collection sparc_local does not exist\n")
    assert "SPARC_LOCAL_STORE=... sparc-local index FOLDER" in result.output


def test_cold_ask_path_does_not_import_pymilvus() -> None:
    """The default install's `ask` path (entry point, common, Asker, Searcher, backend) loads no Milvus client."""
    code = ("import sys, sparc_local.cli.entry, sparc_local.cli.common, sparc_local.query.ask, sparc_local.backend; "
            "print([m for m in sys.modules if m.split('.')[0] in ('pymilvus', 'milvus_lite', 'grpc')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
