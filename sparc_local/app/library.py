"""``Library``: sparc-local from Python, over the same operations as the CLI (``run``).

    from sparc_local import Library
    lib = Library()                     # the default data dir, or Library(home=...)
    lib.index("~/Documents", progress=print)
    for answer in lib.ask("when is the rent due?", k=5, path="leases"):
        print(answer.path, answer.line, answer.sentence)

Errors are ``errors.SparcError``s with their remedies, as the CLI prints them.  Safe to call from
several threads: each thread reads through its own SQLite connection, the reranker is loaded once
and scores for one thread at a time, and calls on one data dir run together while a call on
another data dir waits for them to end (``paths.using`` is process-wide).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparc_local.app import run
from sparc_local.app.answers import AskResult
from sparc_local.app.jobs import DEFAULT_WAIT, ForgetRequest, IndexRequest
from sparc_local.app.requests import DEFAULT_K, AskRequest
from sparc_local.errors import UserError
from sparc_local.index_options import IndexOptions
from sparc_local.query.modes import HYBRID

if TYPE_CHECKING:
    from sparc_local.forget import ForgetReport
    from sparc_local.pipeline import IndexReport, Progress
    from sparc_local.query.ask import PassageScorer
    from sparc_local.status import Status

When = float | datetime | date | str  # a time bound: seconds since the epoch, a datetime/date, or ISO text
_UNREAD = object()


class _DataDirs:
    """Which data dir the process's paths resolve in while Library calls run: the calls on one
    run together, a call on another waits until they have ended."""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._home: Path | None = None
        self._calls = 0
        self._using: AbstractContextManager[Path] | None = None

    @contextmanager
    def entered(self, home: Path | None) -> Iterator[None]:
        from sparc_local import paths

        with self._turn:
            while self._calls and self._home != home:
                self._turn.wait()
            if not self._calls:
                self._home, self._using = home, paths.using(home) if home is not None else None
                if self._using is not None:
                    self._using.__enter__()
            self._calls += 1
        try:
            yield
        finally:
            with self._turn:
                self._calls -= 1
                if not self._calls:
                    if self._using is not None:
                        self._using.__exit__(None, None, None)
                    self._using = None
                    self._turn.notify_all()


_DATA_DIRS = _DataDirs()


class Library:
    """The index in ``home`` (None: the default data dir, as the CLI finds it: $SPARC_LOCAL_HOME,
    else the platform's), with the active model of that data dir."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.home = Path(home).expanduser().absolute() if home is not None else None
        self._local = threading.local()
        self._reranker: Any = _UNREAD
        self._reranker_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Library(home={str(self.home) if self.home else None!r})"

    def _here(self) -> AbstractContextManager[None]:
        """This library's data dir for the length of one call."""
        return _DATA_DIRS.entered(self.home)

    def ask(self, question: str, *, k: int = DEFAULT_K, path: str | None = None, type: str | None = None,
            since: When | None = None, before: When | None = None, mode: str = HYBRID, explain: bool = False,
            fast: bool = False, candidates: int | None = None) -> AskResult:
        """The ``k`` best answers, best first (an ``AskResult``: a sequence of ``Answer``).

        ``path``: only files whose path contains this text or matches this glob; ``type``: only
        this extension; ``since``/``before``: modified on or after / before; ``mode``: "hybrid",
        "sparc" or "bm25"; ``fast``: without the reranker; ``candidates``: first-stage passages the
        reranker reads; ``explain``: each answer's ``contributions`` per question token."""
        return self.ask_request(AskRequest(question, k=k, path=path, type=type, since=_seconds(since),
                                           before=_seconds(before), mode=mode, explain=explain, fast=fast,
                                           candidates=candidates))

    def ask_request(self, request: AskRequest) -> AskResult:
        """``ask`` of a request built beforehand."""
        with self._here():
            return run.ask(request, reranker=self._load_reranker, session=self._session())

    def index(self, *paths: str | os.PathLike[str], progress: Callable[[Progress], None] | None = None,
              options: IndexOptions = IndexOptions(), on_skipped: Callable[[str, str], None] | None = None,
              threads: int | None = None, wait: float = DEFAULT_WAIT) -> IndexReport:
        """Index folders or files (none: every folder indexed before): new and changed files are
        read, vanished ones dropped.  ``progress`` gets a ``pipeline.Progress`` as the run goes;
        ``on_skipped(path, reason)`` each file that could not be read.  While a watcher runs on this
        data dir, it does the work."""
        request = IndexRequest(tuple(str(p) for p in paths), options, threads=threads, wait=wait)
        with self._here():
            return run.index(request, on_progress=progress, on_skipped=on_skipped)

    def forget(self, path: str | os.PathLike[str], *, wait: float = DEFAULT_WAIT) -> ForgetReport:
        """Remove a file or folder and its sentences from the index, scrubbed from the database file."""
        with self._here():
            return run.forget(ForgetRequest(str(path), wait))

    def status(self) -> Status:
        """What is indexed, with which model, the watcher, and the files that could not be read."""
        with self._here():
            return run.status()

    def close(self) -> None:
        """Close the calling thread's connection to the index (others close with their thread)."""
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session(self) -> run.AskSession:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = run.AskSession()
        return session

    def _load_reranker(self) -> PassageScorer | None:
        """The installed reranker, read once."""
        with self._reranker_lock:
            if self._reranker is _UNREAD:
                self._reranker = run.load_reranker()  # shared: Reranker.score serves one thread at a time
        scorer: PassageScorer | None = self._reranker
        return scorer


def _seconds(value: When | None) -> float | None:
    """A time bound as seconds since the epoch (a date: its local midnight)."""
    if value is None or isinstance(value, float | int):
        return value
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day).timestamp()
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        raise UserError(f'"{value}" is not a date', "Give YYYY-MM-DD or YYYY-MM-DDTHH:MM, a datetime or "
                        "seconds since the epoch.") from None
