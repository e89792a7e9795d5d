"""The operations every front end calls: ``ask``, ``index``, ``forget``, ``status``, ``evaluate``,
``watch`` and the login service.  Each takes a typed request and returns a typed result; none prints.

``ask`` loads the reranker only when its request needs one (hybrid mode, not ``fast``); `status`
and the watcher never do.  Keep module-level imports light: this is on the cold `ask` path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparc_local.app.answers import Answer, AskResult
from sparc_local.app.requests import AskRequest
from sparc_local.errors import UserError

if TYPE_CHECKING:
    from sparc_local.app.jobs import EvalRequest, ForgetRequest, IndexRequest
    from sparc_local.forget import ForgetReport
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo
    from sparc_local.pipeline import IndexReport, Progress
    from sparc_local.query.ask import Asker, PassageScorer
    from sparc_local.status import Status
    from sparc_local.watch.config import WatchConfig, WatchProcess
    from sparc_local.watch.service import ServiceFile
    from sparc_local.watch.state import WatcherStatus

RerankerSource = Callable[[], "PassageScorer | None"]


def open_index(must_exist: bool = True) -> Index:
    """The index (to use in a `with`; with a Milvus store named, writing to it too: ``backend``);
    UserError when it must exist and does not."""
    from sparc_local import backend, paths

    db = paths.db_path()
    if must_exist and not db.exists():
        demo = paths.demo_dir()
        if (demo / db.name).exists():
            raise UserError("there is no index of your files yet",
                            f"`sparc-local demo` keeps its own index (in {demo}), apart from yours. "
                            "Run `sparc-local index FOLDER` on a folder of your files, then ask again.")
        raise UserError("there is no index yet", "Run `sparc-local index FOLDER` first.")
    index: Index = backend.open_index(db)
    return index


def load_reranker() -> PassageScorer | None:
    """The installed reranker (its rerank.json read, its model loading in a thread while the first
    stage runs), or None when the installation has none."""
    from sparc_local.model.info import reranker_dir

    folder = reranker_dir()
    if folder is None:
        return None
    from sparc_local.rerank.model import Reranker

    return Reranker.load(folder).preload()


class AskSession:
    """The local index and its ``Asker`` kept open between questions of one thread (an SQLite
    connection is not to be shared), opened again when the data dir or the active model change."""

    def __init__(self) -> None:
        self._key: tuple[str, str] | None = None
        self._index: Index | None = None
        self._asker: Asker | None = None

    def asker(self, info: ModelInfo) -> tuple[Asker, Index]:
        from sparc_local import paths
        from sparc_local.query.ask import Asker

        key = (str(paths.db_path()), info.id)
        if self._asker is None or self._index is None or key != self._key:
            self.close()
            self._index = open_index()
            self._asker, self._key = Asker(self._index, info), key
        return self._asker, self._index

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
        self._index = self._asker = self._key = None


def ask(request: AskRequest, *, reranker: RerankerSource = load_reranker,
        session: AskSession | None = None) -> AskResult:
    """The answers to ``request``'s question, best first; with a Milvus store named
    (``backend``), it ranks, filters and holds the sentences shown.  ``session`` keeps the local
    index open for the next question."""
    from sparc_local.backend import open_engine, store_named
    from sparc_local.model.info import active_model, index_is_stale
    from sparc_local.query.ask import Asker
    from sparc_local.query.modes import HYBRID
    from sparc_local.query.pathfilter import PathFilter, no_match

    info = active_model()
    scorer = reranker() if request.wants_reranker else None
    if request.candidates is not None and scorer is None:
        why = ("with --fast" if request.fast else f"in --mode {request.mode}" if request.mode != HYBRID
               else "without a reranker installed")
        raise UserError(f"--candidates sets the passages the reranker reads, and no reranker runs {why}",
                        "Leave out --candidates.")
    options: dict[str, Any] = {"k": request.k, "path_glob": request.path, "ext": request.type,
                               "explain": request.explain, "since": request.since, "before": request.before,
                               "mode": request.mode, "phrases": request.phrases, "reranker": scorer,
                               "candidates": request.candidates}
    if store_named() is not None:  # a Milvus store: the engine holds the sentences shown
        with open_engine(open_index) as searching:
            found = Asker(searching.engine, info).ask(request.question, **options)
        return AskResult(tuple(Answer.of(a) for a in found))

    def answer(asker: Asker, idx: Index) -> AskResult:
        found = asker.ask(request.question, **options)
        stale = index_is_stale(idx, info)
        file_filter = None if found else PathFilter.of(request.path, request.type, request.since, request.before)
        unmatched = no_match(idx, file_filter) if file_filter else None
        return AskResult(tuple(Answer.of(a) for a in found), stale, unmatched)

    if session is not None:
        return answer(*session.asker(info))
    with open_index() as idx:
        return answer(Asker(idx, info), idx)


def index(request: IndexRequest, *, on_progress: Callable[[Progress], None] | None = None,
          on_skipped: Callable[[str, str], None] | None = None,
          on_capped: Callable[[str, int], None] | None = None,
          should_stop: Callable[[], bool] | None = None) -> IndexReport:
    """Index ``request.paths`` (none: the folders indexed before), or hand the work to the running
    watcher.  ``on_skipped(path, reason)`` and ``on_capped(path, n)`` tell each file left out or cut;
    ``should_stop()`` true ends a run of this process before its next file, its report ``stopped``
    (what it stored is kept, and the next run goes on from there)."""
    resolved, info = resolve_index(request)
    return index_roots(resolved, info, on_progress=on_progress, on_skipped=on_skipped, on_capped=on_capped,
                       should_stop=should_stop)


def resolve_index(request: IndexRequest) -> tuple[IndexRequest, ModelInfo]:
    """The active model, then ``request`` with its paths as absolute roots (the folders indexed
    before when it names none): what an `index` checks before it starts."""
    from sparc_local import roots as roots_
    from sparc_local.app.jobs import IndexRequest
    from sparc_local.model.info import active_model

    info = active_model()

    def remembered() -> list[str]:
        with open_index(must_exist=False) as idx:
            return idx.roots()

    roots = roots_.resolve(request.paths, remembered, "index")
    return IndexRequest(tuple(roots), request.options, request.threads, request.low_priority, request.wait), info


def index_roots(request: IndexRequest, info: ModelInfo, *, on_progress: Callable[[Progress], None] | None = None,
                on_skipped: Callable[[str, str], None] | None = None,
                on_capped: Callable[[str, int], None] | None = None,
                should_stop: Callable[[], bool] | None = None) -> IndexReport:
    """``index`` of a request whose paths are absolute roots, with the model ``info``."""
    from sparc_local import power
    from sparc_local.app import handoff
    from sparc_local.app.work import index_into
    from sparc_local.model.encoder import EncoderFactory

    encoder = EncoderFactory(info, request.threads)

    def local() -> IndexReport:
        with open_index(must_exist=False) as idx:
            return index_into(idx, list(request.paths), request.options, info, encoder, on_error=on_skipped,
                              on_capped=on_capped, on_progress=on_progress, should_stop=should_stop)

    def replay(kind: str, args: list[Any]) -> None:
        tell = on_skipped if kind == "error" else on_capped
        if tell is not None:
            tell(*args)

    with power.low_priority(request.low_priority):
        return handoff.index(request, local, on_event=replay, on_progress=on_progress)


def forget(request: ForgetRequest) -> ForgetReport:
    """Remove a file or folder from the index (or have the running watcher do it)."""
    from pathlib import Path

    from sparc_local.app import handoff
    from sparc_local.app.jobs import ForgetRequest
    from sparc_local.app.work import forget_from

    target = str(Path(request.path).expanduser().absolute())

    def local() -> ForgetReport:
        with open_index() as idx:
            return forget_from(idx, target)

    return handoff.forget(ForgetRequest(target, request.wait), local)


def status() -> Status:
    """What is indexed, with which model, the watcher, and the files that could not be read."""
    from sparc_local.status import gather

    return gather()


def eval_model(request: EvalRequest) -> ModelInfo:
    """The model `eval` measures: ``request.model``, else the active one."""
    from pathlib import Path

    from sparc_local.model.info import ModelInfo, active_model

    return ModelInfo.load(Path(request.model)) if request.model else active_model()


def eval_size(request: EvalRequest) -> int:
    """How many passages `eval` encodes (a progress bar's total)."""
    from pathlib import Path

    from sparc_local.evaluation import reqa

    return len(reqa.load(Path(request.dataset)).ids)


def evaluate(request: EvalRequest, info: ModelInfo, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """MRR and recall of each `ask --mode` and of BM25 on a ReQA set (``evaluation.evaluate``); with
    the reranker installed and not ``fast``, what `ask` shows by each stage, paired."""
    from pathlib import Path

    from sparc_local.evaluation.evaluate import evaluate as run

    return run(Path(request.dataset), info, depth=request.k, top_k=request.top_k, threads=request.threads,
               progress=progress, with_hits=request.hits, reranker=None if request.fast else load_reranker(),
               sample=request.sample)


def watch(roots: list[str], info: ModelInfo, config: WatchConfig, process: WatchProcess, *,
          on_tick: Callable[[WatcherStatus], None] | None = None) -> None:
    """`watch` in this process until signalled (``watch.daemon.run``): the index kept current, and
    what `index` and `forget` hand it applied through ``handoff.serve``."""
    from sparc_local.app import handoff
    from sparc_local.watch import daemon

    daemon.run(roots, info, config, process, requests=handoff.serve, on_tick=on_tick)


def install_service() -> ServiceFile:
    """`watch` at login: the systemd user unit or launchd agent written."""
    from sparc_local.watch import service

    return service.install()


def uninstall_service() -> ServiceFile | None:
    """The login service removed (None: none was installed)."""
    from sparc_local.watch import service

    return service.uninstall()
