"""Writes handed to the running watcher: `forget` and `index` while `watch` holds the writer lock.

A watcher is the one writer while it runs (``lock.py``). A command that must write does not fail
on it, nor make the user stop it: it hands its request to the watcher. It writes
``requests/<id>.json`` in the data dir (0700: only this user can; the watcher's ``inbox``),
atomically; the watcher notices it (an observer event on that folder, else its periodic root
check), claims it by renaming it to ``<id>.taken``, applies it in its worker thread through
``serve``, which whoever starts the watcher hands it (``run.watch``), with the very call the
command would make (``app.work``), and writes ``<id>.done`` with the outcome (while it indexes,
``<id>.progress`` holds the latest ``pipeline.Progress``). The command
waits for the answer and prints what it prints when it does the work itself. If the watcher
exits without answering, the command takes the lock and does the work itself: `index` and
`forget` are safe to run again (an unchanged file is skipped; a forget that committed leaves the
path forgotten). `forget` stays one transaction whoever runs it.

No socket: sparc-local opens none (see tests/test_privacy.py), and files in the data dir need
no more care than the index beside them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sparc_local.app import wire
from sparc_local.app.jobs import ForgetRequest, IndexRequest
from sparc_local.errors import SparcError
from sparc_local.index.lock import LockHeld, WriterLock, pid_alive
from sparc_local.watch.config import LOG_NAME
from sparc_local.watch.files import COMMAND, POLL, inbox_path, log_path, read_json, running_pid, state_path, write_json
from sparc_local.watch.inbox import DONE, PROGRESS, REQUEST, TAKEN, Inbox, Taken
from sparc_local.watch.state import WatcherStatus

if TYPE_CHECKING:
    from sparc_local.forget import ForgetReport
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo
    from sparc_local.pipeline import IndexReport, Progress

TAKE_TIMEOUT = 60.0  # a live watcher takes a request within one encoder batch (or its 5 s root check)

T = TypeVar("T")
Request = IndexRequest | ForgetRequest  # what a command hands the watcher (``app.requests``)
_VERBS = {kind.__name__: kind.verb for kind in (IndexRequest, ForgetRequest)}  # for the log and errors
log = logging.getLogger(LOG_NAME)


class _WatcherGone(Exception):
    """The watcher exited, or is stopping, before it applied the request."""


class WatcherFailed(SparcError):
    """The watcher could not apply a request for a reason that is not the user's to fix."""


def _watcher_pid(record: dict[str, Any] | None) -> int | None:
    """The pid of the running watcher if it holds the lock and takes requests (its state file
    says so: a watcher of an older version never answers), else None."""
    pid = (record or {}).get("pid")
    if not pid or (record or {}).get("command") != COMMAND or running_pid() != pid:
        return None
    state = read_json(state_path())
    return pid if state.get("pid") == pid and WatcherStatus.from_json(state).requests is True else None


def as_writer(command: str, wait: float, local: Callable[[], T], request: Request, reply: type[T], *,
              on_event: Callable[[str, list[Any]], None] | None = None,
              on_progress: Callable[[dict[str, Any]], None] | None = None, poll: float = POLL) -> T:
    """``local()`` under the writer lock; or, while the running watcher holds the lock, the same
    work done by the watcher, its answer decoded as ``reply`` (``local``'s result type).

    Another writer (an `index` run) is waited for up to ``wait`` seconds, then LockHeld.
    ``on_event(kind, args)`` replays what the watcher reported while working ("error" path
    reason, "capped" path n), in order; ``on_progress`` gets its progress snapshots.
    """
    while True:
        lock = WriterLock(command)
        try:
            lock.acquire(0.0)
        except LockHeld as held:
            pid = _watcher_pid(held.record)
            if pid is None:
                lock.acquire(wait)
            else:
                try:
                    return submit(request, pid, reply, on_event=on_event, on_progress=on_progress, poll=poll)
                except _WatcherGone:
                    continue  # it stopped: the lock is free, or soon is
        try:
            return local()
        finally:
            lock.release()


def submit(request: Request, pid: int, reply: type[T], *, on_event: Callable[[str, list[Any]], None] | None = None,
           on_progress: Callable[[dict[str, Any]], None] | None = None, poll: float = POLL,
           take_timeout: float = TAKE_TIMEOUT) -> T:
    """Send ``request`` to the watcher (pid) and wait for its outcome, a ``reply``; a SparcError
    it met is raised here as a ``SparcError`` with its message and remedy.
    WatcherFailed if it leaves the request untaken for take_timeout seconds."""
    deadline = time.monotonic() + take_timeout
    folder = inbox_path()
    folder.mkdir(mode=0o700, exist_ok=True)
    rid = f"{time.time_ns():020d}-{os.getpid()}"
    paths = {s: folder / f"{rid}{s}" for s in (REQUEST, TAKEN, DONE, PROGRESS)}
    write_json(paths[REQUEST], {**wire.encode(request), "pid": os.getpid()})
    seen = None
    try:
        while True:
            if paths[DONE].exists():
                answer = read_json(paths[DONE])
                paths[DONE].unlink(missing_ok=True)
                break
            if on_progress is not None and paths[PROGRESS].exists():
                snap = read_json(paths[PROGRESS])
                if snap and snap != seen:
                    seen = snap
                    on_progress(snap)
            if not pid_alive(pid):
                if paths[DONE].exists():
                    continue
                raise _WatcherGone
            if time.monotonic() > deadline and paths[REQUEST].exists():
                with contextlib.suppress(FileNotFoundError):  # (taken this instant: wait for it)
                    paths[REQUEST].unlink()
                    raise WatcherFailed(f"the watcher (pid {pid}) did not take the request in {take_timeout:g}s",
                                        "Stop it with `sparc-local watch --stop`, run the command again, "
                                        "then start the watcher again.")
            time.sleep(poll)
    finally:
        for suffix in (REQUEST, PROGRESS):  # withdrawn if still waiting (an exit, Ctrl-C)
            paths[suffix].unlink(missing_ok=True)
    for kind, *args in answer.get("events", []):
        if on_event is not None:
            on_event(kind, args)
    if answer.get("gone"):
        raise _WatcherGone
    if "error" in answer:
        raise SparcError(answer["error"], answer.get("remedy", ""))
    return wire.decode(answer.get("ok"), reply)


def apply(index: Index, request: Request, model: ModelInfo, encoder_factory: Callable[[], object], *,
          events: list[list[Any]], on_progress: Callable[[Progress], None],
          should_stop: Callable[[], bool] | None = None) -> IndexReport | ForgetReport:
    """The watcher's side of a request: the call its command makes (``app.work``). What it reports
    on the way is appended to ``events`` for the command to print; an `index` ended by
    ``should_stop`` returns a report marked ``stopped``."""
    from sparc_local.app.work import forget_from, index_into

    if isinstance(request, ForgetRequest):
        return forget_from(index, request.path)
    return index_into(index, list(request.paths), request.options, model, encoder_factory,
                      on_error=lambda p, r: events.append(["error", p, r]),
                      on_capped=lambda p, n: events.append(["capped", p, n]), on_progress=on_progress,
                      should_stop=should_stop)


def serve(inbox: Inbox, index: Index, model: ModelInfo, encoder_factory: Callable[[], object], *,
          should_stop: Callable[[], bool], on_done: Callable[[Request, IndexReport | ForgetReport], None]) -> None:
    """Apply the waiting requests in order (``apply``), each answered whatever happens: one this
    version cannot read (``wire.WireMismatch``) with what to do.  ``on_done(request, report)``
    follows each that was applied (the watcher updates its roots); one ended by ``should_stop`` is
    answered "gone": its command then does the work itself."""
    for taken in inbox.take():
        events: list[list[Any]] = []
        verb = _VERBS.get(str(taken.data.get("kind")), "apply a request")
        outcome: dict[str, Any]
        try:
            req = _request(taken.data)

            def progress(p: Progress, taken: Taken = taken) -> None:
                inbox.progress(taken, dataclasses.asdict(p))

            done = apply(index, req, model, encoder_factory, events=events, should_stop=should_stop,
                         on_progress=progress)
            if getattr(done, "stopped", False):
                outcome = {"gone": True}
            else:
                on_done(req, done)
                outcome = {"ok": wire.encode(done)}
        except SparcError as err:
            outcome = {"error": str(err), "remedy": err.remedy}
        except Exception as err:
            log.exception("request to %s failed", verb)
            outcome = {"error": f"the watcher could not {verb}: {type(err).__name__}: {err}",
                       "remedy": f"See {log_path()}."}
        outcome["events"] = events
        inbox.answer(taken, outcome)
        log.info("applied a request to %s: %s", verb, "done" if "ok" in outcome else outcome)


def _request(data: dict[str, Any]) -> Request:
    """A request file's typed request (``wire.decode``)."""
    request = wire.decode(data, IndexRequest, ForgetRequest)
    assert isinstance(request, IndexRequest | ForgetRequest)
    return request


def index(request: IndexRequest, local: Callable[[], IndexReport], *,
          on_event: Callable[[str, list[Any]], None] | None = None,
          on_progress: Callable[[Progress], None] | None = None) -> IndexReport:
    """`index` of ``request`` (its paths absolute): ``local()`` or the running watcher."""
    from sparc_local.pipeline import IndexReport, Progress

    def progress(snap: dict[str, Any]) -> None:
        if on_progress is not None:
            on_progress(Progress(**snap))

    return as_writer("sparc-local index", request.wait, local, request, IndexReport, on_event=on_event,
                     on_progress=progress if on_progress else None)


def forget(request: ForgetRequest, local: Callable[[], ForgetReport]) -> ForgetReport:
    """`forget` of ``request`` (its path absolute): ``local()`` or the running watcher."""
    from sparc_local.forget import ForgetReport

    return as_writer("sparc-local forget", request.wait, local, request, ForgetReport)
