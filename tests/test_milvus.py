"""The Milvus backend against Milvus Lite, started by the tests: the same rankings as the local
engine in every mode and filter, `index`/`ask`/`status`/`watch`/`forget` through SPARC_LOCAL_STORE,
recovery after a killed writer, engine errors as SparcError, and a cold `ask` that never imports
pymilvus.  Real files, the tiny model.

One Milvus Lite server and one indexed store serve the whole module (starting a server and
creating a collection cost seconds each): the tests run in file order, each leaves the store as
it found it, and `forget`, which does not, comes last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.errors import SparcError
from sparc_local.milvus.store import MilvusError, StoreSpec
from sparc_local.paths import STORE_ENV

REPO = Path(__file__).resolve().parent.parent
DEADLINE = 30.0  # a watched change reaching Milvus, on a loaded machine
QUESTIONS = ["the tea tower train river museum", "museum ticket history music"]
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
runner = CliRunner()


def _when(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass(frozen=True)
class Lite:
    home: Path  # SPARC_LOCAL_HOME: the local index (the writer's catalog) and the active model
    root: Path  # FILES, indexed
    named: str  # SPARC_LOCAL_STORE

    def store(self):
        from sparc_local.milvus.store import MilvusStore

        return MilvusStore(StoreSpec.parse(self.named))


def _cli(*args: str):
    from sparc_local.cli.app import app

    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[Lite]:
    """FILES indexed into a Milvus Lite file (its server started here) and a local index."""
    try:
        import milvus_lite  # noqa: F401  (only whether it imports)
        import pymilvus  # noqa: F401  (only whether it imports)
    except ImportError as err:  # the wheel is not built for every platform (e.g. Windows)
        pytest.skip(f"Milvus Lite is not installed for this platform ({err}): pip install 'sparc-local[milvus]'")
    tmp = tmp_path_factory.mktemp("milvus")
    home, root = tmp / "home", tmp / "docs"
    home.mkdir()
    (home / "active-model").write_text(str(tiny_model_dir))
    for rel, (text, when) in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (_when(when), _when(when)))
    lite = Lite(home, root, f"{tmp / 'milvus.db'}#docs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARC_LOCAL_HOME", str(home))
        mp.setenv(STORE_ENV, lite.named)
        result = _cli("index", str(root), "-q")
        assert (result.exit_code, result.output) == (0, "")
        yield lite


@pytest.fixture
def store(lite: Lite, sparc_home: Path, monkeypatch: pytest.MonkeyPatch) -> Lite:
    """The module's store named, its home the data dir (after conftest's fresh one)."""
    monkeypatch.setenv("SPARC_LOCAL_HOME", str(lite.home))
    monkeypatch.setenv(STORE_ENV, lite.named)
    return lite


def _until(pred: Callable[[], object], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.1)


def test_same_rankings_as_the_local_engine(store: Lite) -> None:
    """Every mode and filter: Milvus's top 10 (ids, order, scores) is the local engine's, certified
    exact; --explain's parts too."""
    from sparc_local import paths
    from sparc_local.index.store import Index
    from sparc_local.milvus.search import MilvusSearcher
    from sparc_local.model.info import active_model
    from sparc_local.query.modes import HYBRID, MODES
    from sparc_local.query.pathfilter import PathFilter
    from sparc_local.query.searcher import Searcher
    from sparc_local.query.tokens import QueryTokenizer, query_token_ids

    info = active_model()
    tok, skip = QueryTokenizer(info.tokenizer_path), info.skip_array()
    filters = [None, PathFilter.of(ext="htm"), PathFilter.of("library"),
               PathFilter.of("*.md", since=_when("2026-01-01T00:00"))]
    with Index(paths.db_path()) as idx, store.store() as ms:
        local, remote = Searcher(idx), MilvusSearcher(ms, candidates=2)
        compared = widened = 0
        for q in QUESTIONS:
            toks = query_token_ids(tok, q, skip)
            for mode in MODES:
                # 10 sees the whole store; 2 starts with 2 candidates a field, which the bound widens
                for f, n in [(f, 10) for f in filters] + [(None, 2)]:
                    stats: dict = {}
                    a_ids, a_scores = local.search(toks, n=n, mode=mode, file_filter=f)
                    b_ids, b_scores = remote.search(toks, n=n, mode=mode, file_filter=f, stats=stats)
                    assert b_ids.tolist() == a_ids.tolist(), (q, mode, f, n)
                    assert b_scores.tolist() == pytest.approx(a_scores.tolist(), rel=1e-6)
                    assert stats["exact"]
                    compared += len(a_ids) > 0
                    widened += stats["rounds"] > 1
            ids = local.search(toks, n=3, mode=HYBRID)[0].tolist()
            assert remote.explain(toks, ids, mode=HYBRID) == [
                pytest.approx(d) for d in local.explain(toks, ids, mode=HYBRID)]
        asked = [query_token_ids(tok, q, skip) for q in QUESTIONS + ["", "tea"]]
        for mode in MODES:  # many questions in one call per field: each one's own ranking
            for n in (10, 2):
                many = remote.search_many(asked, n=n, mode=mode)
                assert [a.tolist() for a, _ in many] == [remote.search(t, n=n, mode=mode)[0].tolist() for t in asked]
                assert [a.tolist() for a, _ in many] == [local.search(t, n=n, mode=mode)[0].tolist() for t in asked]
        assert compared > 20  # the filters keep some files: the comparison saw real rankings
        assert widened  # and the certificate sent some searches further


def test_ask_and_status_through_the_store(store: Lite) -> None:
    """`ask` answers from Milvus alone (the local index moved away); `status` shows the store,
    in step with the index."""
    from sparc_local import paths

    db = paths.db_path()
    db.rename(db.with_name("elsewhere.db"))  # ask must not need it
    try:
        result = _cli("ask", "how long should green tea steep", "-k", "1", "--type", "md")
    finally:
        db.with_name("elsewhere.db").rename(db)
    assert result.exit_code == 0, result.output
    assert "Green tea should steep for three minutes." in result.output
    assert str(store.root / "tea.md") in result.output
    st = json.loads(_cli("status", "--json").output)
    assert st["store"] == {"store": store.named, "sentences": st["encoded"], "in_step": True, "error": None}
    assert st["encoded"] == st["sentences"] > 0
    lines = _cli("status").output.splitlines()
    assert lines[1] == f"Store:        {store.named}: {st['sentences']} sentences, in step with the index"


def test_the_reranker_orders_the_stores_candidates_as_the_local_ones(store: Lite, tiny_reranker_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The reranker reads what the store's first stage proposes (rerank/, engine-agnostic): the
    same answers, in the same order, as over the local index."""
    from sparc_local.model.info import RERANKER_VAR

    monkeypatch.setenv(RERANKER_VAR, str(tiny_reranker_dir))
    args = ("ask", QUESTIONS[0], "--json", "-k", "4")
    remote = _cli(*args)
    monkeypatch.delenv(STORE_ENV)
    local = _cli(*args)
    assert (remote.exit_code, local.exit_code) == (0, 0)
    answers = json.loads(remote.stdout)

    def placed(shown: list[dict]) -> list[tuple]:  # (the phrase is the store's own: no stored positions)
        return [(a["rank"], a["path"], a["sentence"], a["score"], a["first_stage_rank"], a["likely"]) for a in shown]

    assert placed(answers) == placed(json.loads(local.stdout))
    assert all(a["reranked"] for a in answers) and [a["first_stage_rank"] for a in answers] != [1, 2, 3, 4]


def test_a_killed_writer_is_recovered(store: Lite) -> None:
    """A record left by a killed writer: `status` says the store is not in step; its paths leave
    both sides on the next write, and the next run writes them again, to the same store."""
    from sparc_local import paths
    from sparc_local.backend import open_index
    from sparc_local.milvus.mirror import UNSYNCED_SUFFIX

    with store.store() as ms:
        before = ms.count()
        stats = ms.key_stats(list(range(200)))
    tea = str(store.root / "tea.md")
    Path(str(paths.db_path()) + UNSYNCED_SUFFIX).write_text(f'["{tea}"]')
    assert json.loads(_cli("status", "--json").output)["store"]["in_step"] is False
    with open_index(paths.db_path()) as idx:
        idx.remove_files([])  # any write recovers first
        assert idx.file(tea) is None
    with store.store() as ms:
        assert ms.count()[0] == before[0] - 1
    result = _cli("index", str(store.root), "-q")
    assert (result.exit_code, result.output) == (0, "")
    with store.store() as ms:
        assert ms.count() == before
        assert ms.key_stats(list(range(200))) == stats
    assert json.loads(_cli("status", "--json").output)["store"]["in_step"] is True


def test_an_index_run_ends_with_its_writes_sealed(store: Lite, monkeypatch: pytest.MonkeyPatch) -> None:
    """Milvus Lite rebuilds the index of unsealed rows on every search (seconds a search at 10k
    sentences): the last thing a run does to the store is seal what it wrote."""
    from sparc_local.milvus.store import MilvusStore

    events: list[str] = []
    seal, replace = MilvusStore.seal, MilvusStore.replace
    monkeypatch.setattr(MilvusStore, "seal", lambda self: (events.append("seal"), seal(self))[1])
    monkeypatch.setattr(MilvusStore, "replace", lambda self, *a: (events.append("write"), replace(self, *a))[1])
    tea = store.root / "tea.md"
    text, st = tea.read_text(), tea.stat()
    tea.write_text(text + "Oolong tea sits in between.\n")
    try:
        result = _cli("index", str(store.root), "-q")
        assert (result.exit_code, result.output) == (0, "")
        assert "write" in events and events[-1] == "seal"
    finally:
        tea.write_text(text)
        os.utime(tea, (st.st_atime, st.st_mtime))
        assert _cli("index", str(store.root), "-q").exit_code == 0


def test_watch_keeps_the_store_current(store: Lite, tiny_model_dir: Path) -> None:
    """The watcher's writes reach Milvus: a new file's sentences appear there, and leave with it."""
    from sparc_local.model.encoder import Encoder
    from sparc_local.model.info import ModelInfo
    from sparc_local.watch.config import WatchConfig
    from sparc_local.watch.watcher import Watcher

    info = ModelInfo.load(tiny_model_dir)
    config = WatchConfig(quiet_period=0.2, max_delay=2.0, root_poll=0.3, retry_delays=(0.2,), busy_delay=0.2)
    new = store.root / "notes" / "city.txt"
    where = f'path == "{new}"'
    with store.store() as ms:
        def held() -> list:
            return ms.client.query(ms.name, filter=where, output_fields=["text"])

        w = Watcher([str(store.root)], info, lambda: Encoder(info, threads=1), config)
        w.start(timeout=DEADLINE)
        try:
            new.write_text("Paris is the capital of France.\n")
            _until(lambda: [r["text"] for r in held()] == ["Paris is the capital of France."], "the new file")
            new.unlink()
            _until(lambda: held() == [], "the file removed")
            _until(lambda: w.status().queue == 0, "the queue emptied")
        finally:
            w.stop(timeout=DEADLINE)
        assert w.status().last_error is None
    assert json.loads(_cli("status", "--json").output)["store"]["in_step"] is True


def test_forget_leaves_no_entity(store: Lite) -> None:
    """`forget` leaves no entity or key statistic of the files in Milvus (last: it changes the store)."""
    with store.store() as ms:
        files, sentences = ms.count()
        assert files == len(FILES)
    result = _cli("forget", str(store.root / "library"))
    assert result.exit_code == 0, result.output
    with store.store() as ms:
        assert ms.count() == (len(FILES) - 2, sentences - 4)  # history.txt and trip.htm: 2 sentences each
        assert ms.client.query(ms.name, filter='path like "%library%"', output_fields=["id"]) == []
        ms.recount()  # the statistics forget left are those of the entities left
        assert ms.count()[1] == sentences - 4
    result = _cli("ask", "who built the tower", "--path", "library")
    assert (result.exit_code, result.output) == (0, "No answer found.\n")


def test_engine_errors_are_sparc_errors(store: Lite, monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed name, a missing collection and the engine refusing a request: each an error
    with what to do."""
    from sparc_local.milvus.store import engine

    for bad in ("milvus://nohost/docs", "notes.txt", f"{store.home / 'x.db'}#9bad"):
        with pytest.raises(SparcError):
            StoreSpec.parse(bad)
    assert StoreSpec.parse("milvus://db.example:19530/team") == StoreSpec("http://db.example:19530", "team")
    assert StoreSpec.parse("milvus://db.example:19530/team").text == "milvus://db.example:19530/team"
    monkeypatch.setenv(STORE_ENV, store.named.replace("#docs", "#nothere"))
    result = _cli("ask", "tea")
    assert result.exit_code == 1
    assert result.output == ("Error: the Milvus collection nothere does not exist\n"
                             "Index into it first: SPARC_LOCAL_STORE=... sparc-local index FOLDER.\n")
    with store.store() as ms, pytest.raises(MilvusError) as err:
        with engine(ms.spec, "search"):
            ms.client.query(ms.name, filter="path ==", output_fields=["id"])  # the engine refuses it
    assert str(err.value).startswith("Milvus could not search (MilvusException: ")
    assert err.value.remedy.endswith(f"unset {STORE_ENV} to use the local index.")


def test_cold_ask_path_does_not_import_pymilvus() -> None:
    """The default install's `ask` path (entry point, common, Asker, Searcher, backend) loads no Milvus client."""
    code = ("import sys, sparc_local.cli.entry, sparc_local.cli.common, sparc_local.query.ask, sparc_local.backend, "
            "sparc_local.status; "
            "print([m for m in sys.modules if m.split('.')[0] in ('pymilvus', 'milvus_lite', 'grpc')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
