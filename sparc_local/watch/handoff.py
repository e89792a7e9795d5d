"""Writes handed to the running watcher: `forget` and `index` while `watch` holds the writer lock.

A watcher is the one writer while it runs (``lock.py``). A command that must write does not fail
on it, nor make the user stop it: it hands its request to the watcher. It writes
``requests/<id>.json`` in the data dir (0700: only this user can), atomically; the watcher
notices it (an observer event on that folder, else its periodic root check), claims it by
renaming it to ``<id>.taken``, applies it in its worker thread with the very library call the
command would make (``forget.forget``, ``pipeline.run_index``), and writes ``<id>.done`` with the
outcome (while it indexes, ``<id>.progress`` holds the latest ``pipeline.Progress``). The command
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
from pathlib import Path
from typing import TypeVar

from sparc_local.errors import SparcError
from sparc_local.index.lock import LockHeld, WriterLock, pid_alive
from sparc_local.index_options import IndexOptions
from sparc_local.watch.config import LOG_NAME
from sparc_local.watch.files import COMMAND, POLL, inbox_path, log_path, read_json, running_pid, state_path, write_json
from sparc_local.watch.state import WatcherStatus

REQUEST, TAKEN, DONE, PROGRESS = ".json", ".taken", ".done", ".progress"
STALE = 3600.0  # seconds after which an answer nobody collected is deleted
PROGRESS_EVERY = 0.2  # seconds between two progress files
TAKE_TIMEOUT = 60.0  # a live watcher takes a request within one encoder batch (or its 5 s root check)

T = TypeVar("T")
log = logging.getLogger(LOG_NAME)


class _WatcherGone(Exception):
    """The watcher exited, or is stopping, before it applied the request."""


class WatcherFailed(SparcError):
    """The watcher could not apply a request for a reason that is not the user's to fix."""


@dataclasses.dataclass
class Request:
    kind: str  # "forget" | "index"
    args: dict
    id: str = ""


def _watcher_pid(record: dict | None) -> int | None:
    """The pid of the running watcher if it holds the lock and takes requests (its state file
    says so: a watcher of an older version never answers), else None."""
    pid = (record or {}).get("pid")
    if not pid or (record or {}).get("command") != COMMAND or running_pid() != pid:
        return None
    state = read_json(state_path())
    return pid if state.get("pid") == pid and WatcherStatus.from_json(state).requests is True else None


def as_writer(command: str, wait: float, local: Callable[[], T], request: Request,
              decode: Callable[[dict], T], *, on_event: Callable[[str, list], None] | None = None,
              on_progress: Callable[[dict], None] | None = None, poll: float = POLL) -> T:
    """``local()`` under the writer lock; or, while the running watcher holds the lock, the same
    work done by the watcher, its answer turned into ``local``'s result by ``decode``.

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
                    return decode(submit(request, pid, on_event=on_event, on_progress=on_progress, poll=poll))
                except _WatcherGone:
                    continue  # it stopped: the lock is free, or soon is
        try:
            return local()
        finally:
            lock.release()


def submit(request: Request, pid: int, *, on_event: Callable[[str, list], None] | None = None,
           on_progress: Callable[[dict], None] | None = None, poll: float = POLL,
           take_timeout: float = TAKE_TIMEOUT) -> dict:
    """Send ``request`` to the watcher (pid) and wait for the outcome ({"ok": ...}); a
    SparcError it met is raised here as a ``SparcError`` with its message and remedy.
    WatcherFailed if it leaves the request untaken for take_timeout seconds."""
    deadline = time.monotonic() + take_timeout
    folder = inbox_path()
    folder.mkdir(mode=0o700, exist_ok=True)
    rid = f"{time.time_ns():020d}-{os.getpid()}"
    paths = {s: folder / f"{rid}{s}" for s in (REQUEST, TAKEN, DONE, PROGRESS)}
    write_json(paths[REQUEST], dict(kind=request.kind, args=request.args, pid=os.getpid()))
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
    return answer.get("ok", {})


def apply(index, request: Request, model, encoder_factory: Callable[[], object], *, events: list[list],
          on_progress: Callable[[object], None], should_stop: Callable[[], bool] | None = None):
    """The watcher's side of a request: the library call its command makes, with its arguments.
    What it reports on the way is appended to ``events`` for the command to print; an `index`
    ended by ``should_stop`` returns a report marked ``stopped``."""
    from sparc_local import pipeline
    from sparc_local.forget import forget as forget_path

    a = request.args
    if request.kind == "forget":
        return forget_path(index, a["path"])
    if request.kind == "index":
        return pipeline.run_index(
            index, list(a["paths"]), model, encoder_factory, IndexOptions.from_json(a),
            on_error=lambda p, r: events.append(["error", p, r]),
            on_capped=lambda p, n: events.append(["capped", p, n]), on_progress=on_progress,
            should_stop=should_stop)
    raise WatcherFailed(f"unknown request {request.kind!r}", "Use the same version of sparc-local for both.")


def serve(inbox: Inbox, index, model, encoder_factory: Callable[[], object], *,
          should_stop: Callable[[], bool], on_done: Callable[[Request, object], None]) -> None:
    """Apply the waiting requests in order (``apply``), each answered whatever happens.
    ``on_done(request, report)`` follows each that was applied (the watcher updates its roots);
    one ended by ``should_stop`` is answered "gone": its command then does the work itself."""
    for req in inbox.take():
        events: list[list] = []
        try:
            done = apply(index, req, model, encoder_factory, events=events, should_stop=should_stop,
                         on_progress=lambda p, req=req: inbox.progress(req, dataclasses.asdict(p)))
            if getattr(done, "stopped", False):
                outcome: dict = {"gone": True}
            else:
                on_done(req, done)
                outcome = {"ok": dataclasses.asdict(done)}
        except SparcError as err:
            outcome = {"error": str(err), "remedy": err.remedy}
        except Exception as err:
            log.exception("request %s failed", req.kind)
            outcome = {"error": f"the watcher could not {req.kind}: {type(err).__name__}: {err}",
                       "remedy": f"See {log_path()}."}
        outcome["events"] = events
        inbox.answer(req, outcome)
        log.info("applied a request to %s: %s", req.kind, "done" if "ok" in outcome else outcome)


class Inbox:
    """The watcher's side: claim requests, publish progress, answer."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = Path(folder) if folder else inbox_path()
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self._progress_at = 0.0

    def take(self) -> list[Request]:
        """Claim every waiting request, oldest first (a request withdrawn meanwhile is skipped)."""
        out = []
        now = time.time()
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return []
        for name in names:
            path = self.folder / name
            if name.endswith(DONE):
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > STALE:  # its command is long gone
                        path.unlink()
            if not name.endswith(REQUEST) or name.startswith("."):
                continue
            rid = name[: -len(REQUEST)]
            try:
                os.rename(path, self.folder / f"{rid}{TAKEN}")
            except FileNotFoundError:
                continue
            data = read_json(self.folder / f"{rid}{TAKEN}")
            out.append(Request(str(data.get("kind")), data.get("args") or {}, rid))
        return out

    def progress(self, request: Request, snapshot: dict) -> None:
        now = time.monotonic()
        if now - self._progress_at >= PROGRESS_EVERY:
            self._progress_at = now
            with contextlib.suppress(OSError):
                write_json(self.folder / f"{request.id}{PROGRESS}", snapshot)

    def answer(self, request: Request, outcome: dict) -> None:
        write_json(self.folder / f"{request.id}{DONE}", outcome)
        for suffix in (TAKEN, PROGRESS):
            (self.folder / f"{request.id}{suffix}").unlink(missing_ok=True)

    def pending(self) -> bool:
        try:
            return any(n.endswith(REQUEST) and not n.startswith(".") for n in os.listdir(self.folder))
        except OSError:
            return False


def index(roots: list[str], options: IndexOptions, local: Callable[[], T], *, wait: float,
          on_event: Callable[[str, list], None] | None = None,
          on_progress: Callable[[object], None] | None = None) -> T:
    """`index` of absolute ``roots`` with run_index's ``options``: ``local()`` or the running
    watcher (the request carries ``options.to_json()``). Returns an IndexReport."""
    from sparc_local.pipeline import IndexReport, Progress

    def decode(ok: dict) -> IndexReport:
        return IndexReport(**{**ok, "errors": [tuple(e) for e in ok.get("errors", [])]})

    return as_writer("sparc-local index", wait, local, Request("index", dict(paths=roots, **options.to_json())), decode,
                     on_event=on_event,
                     on_progress=(lambda snap: on_progress(Progress(**snap))) if on_progress else None)


def forget(path: str, local: Callable[[], T], *, wait: float) -> T:
    """`forget` of an absolute ``path``: ``local()`` or the running watcher. Returns a ForgetReport."""
    from sparc_local.forget import ForgetReport

    return as_writer("sparc-local forget", wait, local, Request("forget", dict(path=path)),
                     lambda ok: ForgetReport(**ok))
