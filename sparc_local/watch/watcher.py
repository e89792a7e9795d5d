"""`sparc-local watch`: keep the index in step with the files as they change.

A watchdog observer (inotify, FSEvents, ...; PollingObserver when the OS watch limit is hit)
reports paths under the roots. Events are only *collected*: a path set, filtered with the same
rules as `index` (``ignore.Rules``: hidden, --exclude, ignore files; supported types; never the
data dir). A changed ignore file queues its folder, so what it now keeps out leaves the index. When no event came for
``quiet_period`` seconds (or ``max_delay`` passed under a continuous burst), the batch is applied
by looking at the filesystem *now*, not at the event types: a path that is gone is removed from
the index (with everything below it), a folder is walked, a file is re-indexed through
``run_index`` (which skips it if size/mtime/hash are unchanged). That makes editors' atomic saves,
renames, folders moved in or out and `git checkout` bursts all the same simple case.

One worker thread owns the Index (an Index is single-threaded); the observer thread only touches
the pending set under a lock. Per-file read errors are retried after a backoff a few times; a
busy database retries the whole batch; any other failure is logged, recorded as last_error, and
the watcher goes on. The caller holds the writer lock (see ``lock.py``) while a Watcher runs.
Never prints: it logs to the ``sparc_local.watch.watcher`` logger and reports through ``on_status``.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from sparc_local.ingest.extract import SUPPORTED, ExtractError, iter_files, path_key
from sparc_local.ingest.ignore import IGNORE_FILES, Rules
from sparc_local.model.info import ModelInfo
from sparc_local.query.pathfilter import is_under as _under

log = logging.getLogger("sparc_local.watch.watcher")
_SKIP_EVENTS = frozenset({"opened", "closed_no_write"})


class _Stopped(Exception):
    """Raised from run_index's progress callback to stop between two committed batches."""


class _Paused(Exception):
    """Raised from run_index's progress callback when the machine went on battery: what was not
    committed is applied again once it is back on mains power."""


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@functools.cache
def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def inotify_exhausted(path: str) -> bool:
    """Whether this user has no inotify watch left. watchdog silently skips subfolders it cannot
    watch once the limit is reached, so after scheduling we probe for one spare watch (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = _libc()
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        return ctypes.get_errno() == errno.EMFILE
    try:
        return libc.inotify_add_watch(fd, os.fsencode(path), 0x4) < 0 and ctypes.get_errno() == errno.ENOSPC
    finally:
        os.close(fd)


class _Handler:
    """watchdog event handler (duck-typed: the observer only calls dispatch) feeding Watcher.note."""

    def __init__(self, watcher: "Watcher") -> None:
        self.watcher = watcher

    def dispatch(self, event) -> None:
        kind = event.event_type
        if kind in _SKIP_EVENTS or (event.is_directory and kind in ("modified", "attrib", "closed")):
            return
        self.watcher.note(os.fsdecode(event.src_path), event.is_directory)
        if kind == "moved":
            self.watcher.note(os.fsdecode(event.dest_path), event.is_directory)


class _InboxHandler:
    """Wakes the watcher when a request file appears in the inbox (see handoff.py)."""

    def __init__(self, watcher: "Watcher") -> None:
        self.watcher = watcher

    def dispatch(self, event) -> None:
        from sparc_local.watch.handoff import REQUEST

        path = os.fsdecode(getattr(event, "dest_path", "") or event.src_path)
        name = os.path.basename(path)
        if name.endswith(REQUEST) and not name.startswith("."):  # not the watcher's own answers
            self.watcher.poke()


class Watcher:
    """Watches roots and applies their changes to the index in debounced batches.

    ``start()`` starts the worker thread, which first runs a full incremental ``run_index`` over
    the roots (catch-up for changes made while nothing watched), then applies batches until
    ``stop()``. Thread-safe: ``note``, ``status``, ``stop`` may be called from any thread.
    """

    def __init__(self, roots: Iterable[str], model: ModelInfo, encoder_factory: Callable[[], object], *,
                 db_path: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
                 quiet_period: float = 2.0, max_delay: float = 10.0, exclude: Iterable[str] = (),
                 include_hidden: bool = False, ignore_files: bool = True, polling: bool = False,
                 poll_interval: float = 5.0,
                 root_poll: float = 5.0, retry_delays: tuple[float, ...] = (5.0, 30.0, 120.0),
                 busy_delay: float = 1.0, busy_timeout_ms: int = 5000, chunk_files: int = 256,
                 encoder_idle: float = 300.0, on_status: Callable[[dict], None] | None = None,
                 on_battery: Callable[[], bool] | None = None, power_poll: float = 30.0,
                 inbox: str | os.PathLike | None = None) -> None:
        from sparc_local import paths

        self.roots = sorted({str(Path(r).expanduser().absolute()) for r in roots})
        self.model, self._encoder_factory = model, encoder_factory
        self.db_path = Path(db_path) if db_path else paths.db_path()
        data = Path(data_dir) if data_dir else self.db_path.parent
        self._data_dirs = sorted({str(data.absolute()), str(data.resolve())})
        self.quiet_period, self.max_delay = quiet_period, max_delay
        self.exclude, self.include_hidden = tuple(exclude), include_hidden
        self.rules = Rules(self.exclude, include_hidden, ignore_files)
        self.polling, self.poll_interval, self.root_poll = polling, poll_interval, root_poll
        self.retry_delays, self.busy_delay, self.busy_timeout_ms = tuple(retry_delays), busy_delay, busy_timeout_ms
        self.chunk_files, self.encoder_idle, self.on_status = chunk_files, encoder_idle, on_status
        self.on_battery, self.power_poll = on_battery, power_poll  # None: never pause
        self._power_checked = -float("inf")
        self._paused = False
        self._inbox = None  # requests of other commands (handoff.py), served by the worker thread
        if inbox is not None:
            from sparc_local.watch.handoff import Inbox

            self._inbox = Inbox(Path(inbox))
        self._poked = False  # a request may be waiting
        self._serving = False
        self._idx = None
        self._cond = threading.Condition()
        self._pending: dict[str, bool] = {}  # path -> some event said it is a folder
        self._first = self._last = 0.0
        self._retry_due: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._rescan: set[str] = set(self.roots)  # roots to run a full run_index over (catch-up)
        self._busy_until = 0.0
        self._busy_failures = 0
        self._stopping = threading.Event()
        self.ready = threading.Event()  # set once the first catch-up pass has finished
        self._thread: threading.Thread | None = None
        self._observer = None
        self._watches: dict[str, tuple[object, tuple[int, int] | None]] = {}
        self._encoder = None
        self._encoder_used = 0.0
        self._stats = dict(phase="starting", batch=0, indexed=0, removed=0, errors=0, batches=0,
                           last_error=None, last_batch_at=None, observer=None, paused=None,
                           started_at=time.time(), missing_roots=[])

    # ------------------------------------------------------------------ public

    def start(self, wait: bool = True, timeout: float | None = None) -> None:
        """Start watching; with wait=True return once the catch-up indexing has finished (or was
        put off: on battery)."""
        self._thread = threading.Thread(target=self._run, name="sparc-local-watch", daemon=True)
        self._thread.start()
        if wait:
            self.ready.wait(timeout)

    def stop(self, timeout: float | None = None) -> None:
        """Finish the file chunk being indexed, then stop (unapplied events are caught up at next start)."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> dict:
        """A snapshot: phase, queue (paths waiting), counters, last_error, observer kind, and
        whether it takes requests of other commands (handoff.py)."""
        with self._cond:
            queue = len(self._pending) + len(self._retry_due) + self._stats["batch"]
            return dict(self._stats, queue=queue, roots=list(self.roots), model_loaded=self._encoder is not None,
                        requests=self._inbox is not None)

    def note(self, path: str, is_dir: bool = False) -> None:
        """Record that `path` changed (called by the observer thread)."""
        if not path:
            return
        path = os.path.normpath(path)
        if not is_dir and os.path.basename(path) in IGNORE_FILES:
            folder = os.path.dirname(path)
            self.rules.forget_folder(folder)
            path, is_dir = folder, True  # what its folder keeps out may have changed: walk it again
        if self.ignored(path, is_dir) or (not is_dir and os.path.splitext(path)[1].lower() not in SUPPORTED):
            return
        now = time.monotonic()
        with self._cond:
            first = not self._pending
            if first:
                self._first = now
            self._last = now
            self._pending[path] = self._pending.get(path, False) or is_dir
            self._attempts.pop(path, None)  # it changed again: fresh retries
            self._retry_due.pop(path, None)
            if first:  # later events only move the deadline the worker will find when it wakes
                self._cond.notify_all()

    def ignored(self, path: str, is_dir: bool = False) -> bool:
        """The rules of `index` (``Rules.ignored``), outside the roots, or in the data dir."""
        root = self._root_of(path)
        if root is None or any(_under(path, d) and not _under(root, d) for d in self._data_dirs):
            return True  # (the data dir is skipped inside a root, not when the root lies inside it)
        return self.rules.ignored(root, path, is_dir)

    def _root_of(self, path: str) -> str | None:
        return max((r for r in self.roots if _under(path, r)), key=len, default=None)

    # ------------------------------------------------------------------ worker

    def _run(self) -> None:
        from sparc_local.index.store import Index

        idx = None
        try:
            idx = Index(self.db_path, busy_timeout_ms=self.busy_timeout_ms)
            self._start_observer()
            self._loop(idx)
        except Exception as err:  # never expected: leave a trace instead of a silent dead thread
            log.exception("watcher stopped on an unexpected error")
            self._stats["last_error"] = f"{type(err).__name__}: {err}"
        finally:
            self.ready.set()
            self._stats["phase"] = "stopped"
            self._stop_observer()
            if idx is not None:
                idx.close()
            self._encoder = None
            self._report()

    def _loop(self, idx) -> None:
        self._idx = idx
        next_roots = time.monotonic() + self.root_poll
        while not self._stopping.is_set():
            now = time.monotonic()
            if now >= next_roots:
                self._check_roots()
                next_roots = now + self.root_poll
                self._poked = self._poked or (self._inbox is not None and self._inbox.pending())
            if self._poked:
                self._serve_requests(idx)
            if self._encoder is not None and now - self._encoder_used > self.encoder_idle:
                self._release_encoder()
                self._compact(idx)
            paused = self._power_paused(now)
            if self._rescan and now >= self._busy_until and not paused:
                self._catch_up(idx)
                self.ready.set()
                continue
            batch = None if paused else self._take(now)
            if batch:
                self._apply_batch(idx, batch)
                continue
            self.ready.set()  # (a catch-up put off on battery)
            self._stats["phase"] = "paused" if paused else "watching"
            self._report()
            with self._cond:
                due = [next_roots, *self._retry_due.values()]
                if self._pending:
                    due.append(min(self._last + self.quiet_period, self._first + self.max_delay))
                if paused:  # nothing is taken while paused: wake only to ask the power supply again
                    due = [next_roots, self._power_checked + self.power_poll]
                if self._busy_until > now:
                    due = [max(d, self._busy_until) for d in due]
                wait = min(due) - time.monotonic()
                if wait > 0 and not self._stopping.is_set():
                    self._cond.wait(wait)

    def _take(self, now: float) -> dict[str, bool] | None:
        """The paths to apply now: all pending ones once quiet (or too long), plus due retries."""
        if now < self._busy_until:
            return None
        with self._cond:
            batch: dict[str, bool] = {}
            if self._pending and (now - self._last >= self.quiet_period or now - self._first >= self.max_delay):
                batch, self._pending = self._pending, {}
            retries = {p for p, t in self._retry_due.items() if t <= now and p not in batch}
            for p in retries:
                del self._retry_due[p]
                batch[p] = False
            if not batch:
                return None
            self._stats["batch"] = len(batch)
            return batch

    def _encoder_once(self):
        if self._encoder is None:
            self._encoder = self._encoder_factory()
        self._encoder_used = time.monotonic()
        return self._encoder

    def _release_encoder(self) -> None:
        """Give the model's memory back while idle (measured, shipped model: RSS 300 -> ~75 MB)."""
        self._encoder = None
        if sys.platform.startswith("linux"):
            import gc

            gc.collect()
            try:
                _libc().malloc_trim(0)  # glibc keeps freed arenas otherwise
            except AttributeError:  # not glibc (e.g. musl)
                pass

    def _compact(self, idx) -> None:
        """Idle: fold the small segments that event batches left into one (``Index.compact``).

        Why: event batches skip it (it would rewrite the small segments on every save), yet a
        question pays per segment, and a watcher keeps one index up to date for months.
        """
        try:
            idx.compact()
        except (sqlite3.Error, OSError) as err:
            log.warning("could not compact the index: %s", err)

    def _progress(self, progress) -> None:
        if self._stopping.is_set():
            raise _Stopped
        if self._poked and not self._serving:  # a `forget` must not wait for a long catch-up
            self._serve_requests(self._idx)
        if self._power_paused(time.monotonic()):
            raise _Paused

    def poke(self) -> None:
        """A request came in (called by the observer thread)."""
        with self._cond:
            self._poked = True
            self._cond.notify_all()

    def _serve_requests(self, idx) -> None:
        """Apply the waiting requests of other commands, each answered whatever happens."""
        from sparc_local.errors import SparcError

        self._poked = False
        for req in self._inbox.take():
            events: list[list] = []
            self._serving = True
            try:
                outcome = {"ok": self._request(idx, req, events)}
            except _Stopped:
                outcome = {"gone": True}  # the command does it itself once this watcher has exited
            except SparcError as err:
                outcome = {"error": str(err), "remedy": err.remedy}
            except Exception as err:
                log.exception("request %s failed", req.kind)
                from sparc_local.watch.files import log_path

                outcome = {"error": f"the watcher could not {req.kind}: {type(err).__name__}: {err}",
                           "remedy": f"See {log_path()}."}
            finally:
                self._serving = False
            outcome["events"] = events
            self._inbox.answer(req, outcome)
            log.info("applied a request to %s: %s", req.kind, "done" if "ok" in outcome else outcome)
        self._report()

    def _request(self, idx, req, events: list[list]) -> dict:
        """One request (``handoff.apply``), then what it changes for the watcher: its roots."""
        import dataclasses

        from sparc_local.watch.handoff import apply

        def progress(p) -> None:
            if self._stopping.is_set():
                raise _Stopped
            self._inbox.progress(req, dataclasses.asdict(p))

        done = apply(idx, req, self.model, self._encoder_once, events=events, on_progress=progress)
        if req.kind == "forget":
            self._count(0, done.files, 0)
            kept = [r for r in self.roots if not _under(path_key(r), done.path)]
            if kept != self.roots:  # a watched root forgotten: stop watching it
                self.roots = kept
                self._check_roots()
        else:
            self._count(done.indexed, done.removed, len(done.errors))
            stored = set(idx.roots())
            new = [r for r in req.args["paths"] if path_key(r) in stored and r not in self.roots]
            if new:  # a folder the user added: watched from now on
                self.roots = sorted({*self.roots, *new})
                self._check_roots()
        return dataclasses.asdict(done)

    def _power_paused(self, now: float) -> bool:
        """Whether encoding waits for mains power; asks ``on_battery`` at most every power_poll s."""
        if self.on_battery is None:
            return False
        if now - self._power_checked >= self.power_poll:
            self._power_checked = now
            try:
                battery = bool(self.on_battery())
            except Exception:  # a probe that fails must not stop the watcher
                log.exception("could not read the power supply")
                battery = False
            if battery != self._paused:
                log.info("on battery power: encoding paused" if battery else "on mains power: encoding resumed")
                self._paused = battery
                self._stats["paused"] = "on battery power" if battery else None
                self._report()
        return self._paused

    def _run_index(self, idx, paths: list[str], **kw):
        from sparc_local.pipeline import run_index

        return run_index(idx, paths, self.model, self._encoder_once, on_progress=self._progress,
                         on_error=lambda p, r: log.warning("skipped %s: %s", p, r), **kw)

    def _catch_up(self, idx) -> None:
        """Full incremental run_index over the roots that exist (at start, or a root that came back)."""
        roots = sorted(r for r in self._rescan if os.path.exists(r))
        self._stats["phase"] = "catch-up"
        self._report()
        try:
            if roots:
                rep = self._run_index(idx, roots, exclude=self.exclude, include_hidden=self.include_hidden,
                                      ignore_files=self.rules.ignore_files)
                self._count(rep.indexed, rep.removed, len(rep.errors))
                log.info("catch-up of %s: %d indexed, %d unchanged, %d removed, %d skipped in %.1fs",
                         ", ".join(roots), rep.indexed, rep.unchanged, rep.removed, len(rep.errors), rep.seconds)
            self._rescan.clear()  # roots missing now are rescanned when _check_roots sees them back
            self._busy_failures = 0
        except (_Stopped, _Paused):  # the roots stay to rescan
            return
        except Exception as err:
            self._failed(err, what="catch-up")

    def _apply_batch(self, idx, batch: dict[str, bool]) -> None:
        self._stats["phase"] = "indexing"
        self._report()
        try:
            errors = self._apply(idx, batch)
            with self._cond:
                for p in batch:
                    if p not in errors:
                        self._attempts.pop(p, None)
                for p, reason in errors.items():
                    self._retry_later(p, reason)
            self._busy_failures = 0
            self._stats["last_batch_at"] = time.time()
            self._stats["batches"] += 1
        except _Stopped:
            pass
        except _Paused:
            self._requeue(batch)
        except Exception as err:
            self._failed(err, what="batch", batch=batch)
        finally:
            self._stats["batch"] = 0
            self._report()

    def _apply(self, idx, batch: dict[str, bool]) -> dict[str, str]:
        """Apply one batch by looking at the filesystem now. Returns {path: reason} of files that failed."""
        gone, files, folders = [], set(), []
        errors: dict[str, str] = {}
        for path in sorted(batch):
            try:
                mode = os.stat(path).st_mode
            except FileNotFoundError:
                gone.append(path)  # also a symlink whose target went away
                continue
            except OSError as err:  # e.g. a folder on the way became unreadable: try again later
                errors[path] = f"cannot stat: {err.strerror or err}"
                continue
            if stat.S_ISDIR(mode):
                folders.append(path)
            elif stat.S_ISREG(mode) and os.path.splitext(path)[1].lower() in SUPPORTED:  # never a FIFO
                files.add(path)
                rec = idx.file(path_key(path))
                if rec is not None and rec.status == "error":  # read it again even if its stat is the same
                    idx.touch_file(rec.path, rec.size, -1.0)
        if folders:
            known = [f.path for f in idx.all_files()]
            for folder in folders:
                base = self._root_of(folder)
                walked = {str(f.absolute()) for f in iter_files([Path(folder)], rules=self.rules,
                                                                 base=Path(base) if base else None)}
                walked = {f for f in walked if not self.ignored(f)}
                files |= walked
                keys, folder_key = {path_key(f) for f in walked}, path_key(folder)  # what the index stores
                gone += [k for k in known if _under(k, folder_key) and k not in keys]
        removed = self._remove(idx, gone, batch)
        indexed = 0
        todo = sorted(files)
        for i in range(0, len(todo), self.chunk_files):
            if self._stopping.is_set():
                break
            chunk = todo[i : i + self.chunk_files]
            for _ in range(3):
                present = [p for p in chunk if os.path.isfile(p)]
                try:
                    rep = self._run_index(idx, present, remember_roots=False, prune=False, compact=False,
                                          include_hidden=True)
                    break
                except ExtractError:  # a file vanished since the check: its delete event follows
                    continue
            else:
                continue
            indexed += rep.indexed
            errors.update((p, r) for p, r in rep.errors if p in files)
            with self._cond:
                self._stats["batch"] = max(0, len(todo) - i - len(chunk))
        self._count(indexed, removed, len(errors))
        if indexed or removed or errors:
            log.info("batch of %d paths: %d indexed, %d removed, %d failed", len(batch), indexed, removed, len(errors))
        return errors

    def _remove(self, idx, gone: list[str], batch: dict[str, bool]) -> int:
        """Forget deleted files; a deleted folder loses everything below it."""
        removed, done_dirs, files = 0, [], []
        is_dir = {path_key(p): d for p, d in batch.items()}
        for path in sorted({path_key(p) for p in gone}):
            if any(_under(path, d) for d in done_dirs):
                continue
            if is_dir.get(path, False):
                removed += idx.remove_under(path)
                done_dirs.append(path)
            elif idx.file(path) is not None:
                files.append(path)
        return removed + (idx.remove_files(files) if files else 0)

    def _requeue(self, batch: dict[str, bool]) -> None:
        """Put a batch back to be applied whole later (re-applying what was committed is a no-op)."""
        with self._cond:
            for path, is_dir in batch.items():
                self._pending[path] = self._pending.get(path, False) or is_dir
            self._first = self._last = time.monotonic()

    def _retry_later(self, path: str, reason: str) -> None:
        n = self._attempts.get(path, 0)
        if n >= len(self.retry_delays):
            log.warning("giving up on %s after %d attempts: %s", path, n + 1, reason)
            self._attempts.pop(path, None)
            return
        self._attempts[path] = n + 1
        self._retry_due[path] = time.monotonic() + self.retry_delays[n]

    def _failed(self, err: Exception, what: str, batch: dict[str, bool] | None = None) -> None:
        """One failed batch never stops the watcher: record it and try again later."""
        msg = f"{what} failed: {type(err).__name__}: {err}"
        self._stats["last_error"] = msg
        busy = isinstance(err, sqlite3.OperationalError) and ("locked" in str(err) or "busy" in str(err))
        if busy:
            self._busy_failures += 1
            delay = min(self.busy_delay * 2 ** (self._busy_failures - 1), 60.0)
            self._busy_until = time.monotonic() + delay
            log.warning("%s; retrying in %.1fs", msg, delay)
        else:
            log.error("%s", msg, exc_info=err)
        if batch and busy:  # nothing wrong with the files: all of them again, no attempt spent
            self._requeue(batch)
        elif batch:
            with self._cond:
                for path in batch:
                    self._retry_later(path, msg)
        elif not busy:
            self._busy_until = time.monotonic() + self.retry_delays[0] if self.retry_delays else 0.0

    def _count(self, indexed: int, removed: int, errors: int) -> None:
        self._stats["indexed"] += indexed
        self._stats["removed"] += removed
        self._stats["errors"] += errors

    def _report(self) -> None:
        if self.on_status is not None:
            try:
                self.on_status(self.status())
            except Exception:
                log.exception("status callback failed")

    # ------------------------------------------------------------------ observer

    def _targets(self) -> tuple[dict[str, bool], list[str]]:
        """(folder to watch -> recursive, missing roots). A file root is watched through its
        folder, so an atomic save that replaces the file keeps being seen; a root inside another
        root needs no watch of its own."""
        present = [r for r in self.roots if os.path.exists(r)]
        dirs = [r for r in present if os.path.isdir(r)]
        out: dict[str, bool] = {}
        for r in present:
            if any(d != r and _under(r, d) for d in dirs):
                continue
            if r in dirs:
                out[r] = True
            else:
                out.setdefault(os.path.dirname(r), False)
        return out, [r for r in self.roots if r not in present]

    def _new_observer(self):
        if self.polling:
            from watchdog.observers.polling import PollingObserver

            return PollingObserver(timeout=self.poll_interval)
        from watchdog.observers import Observer

        return Observer()

    def _start_observer(self) -> None:
        self._observer = self._new_observer()
        self._observer.start()
        self._stats["observer"] = "polling" if self.polling else type(self._observer).__name__
        self._check_roots(initial=True)
        if self._inbox is not None:
            try:
                self._observer.schedule(_InboxHandler(self), str(self._inbox.folder), recursive=False)
            except OSError as err:  # the periodic root check still finds requests
                log.warning("cannot watch %s: %s", self._inbox.folder, err)

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(5)
            self._observer = None
        self._watches.clear()

    def _fall_back_to_polling(self, err: OSError) -> None:
        log.warning("%s (the OS limit on watched folders; on Linux raise it with "
                    "`sysctl fs.inotify.max_user_watches=524288`): polling every %gs instead",
                    err.strerror or err, self.poll_interval)
        self._stats["last_error"] = f"{err.strerror or err}; polling instead"
        self._stop_observer()
        self.polling = True
        self._start_observer()
        self._rescan.update(self.roots)  # events may have been missed meanwhile

    def _check_roots(self, initial: bool = False) -> None:
        """Schedule watches for present roots; drop watches of vanished ones and poll for their return."""
        targets, missing = self._targets()
        for root in missing:
            if root not in self._stats["missing_roots"]:
                log.warning("%s is missing; checking every %gs for it to come back", root, self.root_poll)
        for target in [t for t in self._watches if t not in targets]:
            self._unschedule(target)
        alive = {e.watch: e.is_alive() for e in self._observer.emitters}
        for target, recursive in targets.items():
            ident = _identity(target)
            current = self._watches.get(target)
            if ident is None:
                continue
            if current is not None:
                watch, known = current
                if known == ident and alive.get(watch, False):
                    continue
                # replaced by another folder, or its emitter died (e.g. deleted and re-created between
                # two checks): watch it afresh and re-index it, events may have been missed
                self._unschedule(target)
            try:
                watch = self._observer.schedule(_Handler(self), target, recursive=recursive)
            except OSError as err:
                if err.errno in (errno.ENOSPC, errno.EMFILE) and not self.polling:
                    return self._fall_back_to_polling(err)
                log.warning("cannot watch %s: %s; trying again in %gs", target, err, self.root_poll)
                continue
            self._watches[target] = (watch, ident)
            if not initial:
                log.info("watching %s again; re-indexing it", target)
                self._rescan.update(r for r in self.roots if _under(r, target))
        self._stats["missing_roots"] = missing
        if not self.polling and self._watches and inotify_exhausted(next(iter(self._watches))):
            self._fall_back_to_polling(OSError(errno.ENOSPC, "inotify watch limit reached"))

    def _unschedule(self, target: str) -> None:
        watch, _ = self._watches.pop(target)
        try:
            self._observer.unschedule(watch)
        except (KeyError, OSError):
            pass

