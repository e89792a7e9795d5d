"""`sparc-local watch`: keep the index in step with the files as they change.

The observer (``observer.py``) reports paths under the roots; they are only *collected*
(``backlog.py``), filtered with `index`'s rules (``scope.py``), and applied as a batch once no
event came for ``quiet_period`` seconds (or ``max_delay`` passed under a burst) (``batch.py``).
One worker thread owns the Index; the observer thread only touches the backlog, under its lock.
An unreadable file waits for its next event; a busy database retries the batch; any other failure
is logged as last_error and the watcher goes on. The caller holds the writer lock (``lock.py``).
Never prints: it logs (``sparc_local.watch.watcher``) and reports through ``on_status``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from sparc_local.errors import SparcError
from sparc_local.index.db import is_busy
from sparc_local.index_options import IndexOptions
from sparc_local.ingest.extract import path_key
from sparc_local.ingest.ignore import Rules
from sparc_local.model.info import ModelInfo
from sparc_local.paths import is_under
from sparc_local.power import libc
from sparc_local.watch import batch as batches
from sparc_local.watch import culprit
from sparc_local.watch.backlog import Backlog
from sparc_local.watch.config import LOG_NAME, WatchConfig
from sparc_local.watch.inbox import Inbox, Serve
from sparc_local.watch.observer import Observation, RootCheck
from sparc_local.watch.removals import Removals, prune
from sparc_local.watch.rescan import Rescans
from sparc_local.watch.scope import Scope
from sparc_local.watch.state import Phase, WatcherStatus

log = logging.getLogger(LOG_NAME)

BUSY_MAX_DELAY = 60.0  # seconds: the longest wait after "database is locked" before a new try


class Watcher:
    """Watches roots and applies their changes to the index in debounced batches.

    ``start()`` starts the worker thread, which first runs a full incremental ``run_index`` over
    the roots (catch-up for changes made while nothing watched), then applies batches until
    ``stop()``. Thread-safe: ``note``, ``poke``, ``status``, ``stop`` may be called from any thread.
    ``inbox``: the folder where other commands leave their writes; ``serve`` applies them (``app.handoff``).
    """

    def __init__(self, roots: Iterable[str], model: ModelInfo, encoder_factory: Callable[[], object],
                 config: WatchConfig = WatchConfig(), *, db_path: str | os.PathLike | None = None,
                 inbox: str | os.PathLike | None = None, serve: Serve | None = None) -> None:
        from sparc_local import paths

        self.model, self._encoder_factory, self.config = model, encoder_factory, config
        self.db_path = Path(db_path) if db_path else paths.db_path()
        rules = Rules(config.exclude, config.include_hidden, config.ignore_files)
        self.scope = Scope(roots, config.data_dir or self.db_path.parent, rules)
        self._inbox: Inbox | None = None  # requests of other commands (inbox.py), served by the worker thread
        self._serve = serve
        if inbox is not None:
            if serve is None:
                raise ValueError("an inbox needs the serve that applies its requests")
            self._inbox = Inbox(Path(inbox))
        self._backlog = Backlog(config.quiet_period, config.max_delay, config.retry_delays)
        self._removals = Removals(self._backlog)  # deletions first, even in the middle of a run
        self._rescans = Rescans(config.rescan_delay, config.rescan_max_delay)  # after events were lost
        self._observation = Observation(self.scope, self.note, self.poke, config,
                                        self._inbox.folder if self._inbox else None, on_overflow=self._overflowed)
        self._power_checked = -float("inf")
        self._paused = False
        self._poked = False  # a request may be waiting
        self._serving = False
        self._idx = None
        self._rescan: set[str] = set(self.scope.roots)  # roots to run a full run_index over (catch-up)
        # a batch's files: inside known roots, already past the walk's rules (scope.py) and not new
        # roots; deleted files are removed by the batch itself; compaction waits for idle time
        self._batch_options = config.index_options(remember_roots=False, prune=False, compact=False,
                                                   include_hidden=True)
        self._busy_until = 0.0
        self._busy_failures = 0
        self._catch_up_failures = 0  # in a row, with no file to blame: the wait before the next try doubles
        self._last_progress = None  # the Progress of the run in progress (culprit.py reads where it stopped)
        self._stopping = threading.Event()
        self.ready = threading.Event()  # set once the first catch-up pass has finished
        self._thread: threading.Thread | None = None
        self._encoder = None
        self._encoder_used = 0.0
        self._lock = threading.Lock()  # guards _state: the worker replaces it, any thread reads it
        self._state = WatcherStatus(started_at=time.time())

    # ------------------------------------------------------------------ public

    @property
    def roots(self) -> list[str]:
        return self.scope.roots

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
        self._backlog.wake()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> WatcherStatus:
        """A snapshot: phase, queue, counters, last_error, observer kind, and whether it takes
        requests of other commands (inbox.py)."""
        queue = self._backlog.size()
        cov = self._observation.coverage()
        with self._lock:
            return dataclasses.replace(self._state, queue=queue, roots=list(self.roots),
                                       model_loaded=self._encoder is not None, requests=self._inbox is not None,
                                       observer=cov.kind, watched=cov.watched, polled=cov.polled,
                                       poll_every=cov.poll_every, watch_limit=cov.limit,
                                       overflows=self._rescans.overflows, rescans=self._rescans.rescans)

    def note(self, path: str, is_dir: bool = False) -> None:
        """Record that `path` changed (called by the observer thread)."""
        if path and (event := self.scope.event(path, is_dir)) is not None:
            self._backlog.add(*event)

    def ignored(self, path: str, is_dir: bool = False) -> bool:
        """Whether the watcher skips `path` (``Scope.ignored``)."""
        return self.scope.ignored(path, is_dir)

    def poke(self) -> None:
        """A request came in (called by the observer thread)."""
        self._poked = True
        self._backlog.wake()

    def _overflowed(self) -> None:
        """The OS dropped events (called by the observer thread): a rescan follows (``Rescans``)."""
        self._rescans.overflowed()
        self._backlog.wake()

    # ------------------------------------------------------------------ worker

    def _set(self, **values) -> None:
        """Change fields of the status (``WatcherStatus``'s names)."""
        with self._lock:
            self._state = dataclasses.replace(self._state, **values)

    def _count(self, indexed: int, removed: int, errors: int) -> None:
        with self._lock:
            s = self._state
            self._state = dataclasses.replace(s, indexed=s.indexed + indexed, removed=s.removed + removed,
                                              errors=s.errors + errors)

    def _run(self) -> None:
        from sparc_local.backend import open_index

        idx = None
        try:
            idx = open_index(self.db_path, busy_timeout_ms=self.config.busy_timeout_ms)
            self._roots_checked(self._observation.start())
            self._loop(idx)
        except Exception as err:  # never expected: leave a trace instead of a silent dead thread
            log.exception("watcher stopped on an unexpected error")
            self._set(last_error=f"{type(err).__name__}: {err}")
        finally:
            self.ready.set()
            self._set(phase=Phase.STOPPED)
            self._observation.stop()
            if idx is not None:
                idx.close()
            self._encoder = None
            self._report()

    def _loop(self, idx) -> None:
        self._idx = idx
        cfg = self.config
        next_roots = time.monotonic() + cfg.root_poll
        while not self._stopping.is_set():
            now = time.monotonic()
            if now >= next_roots:
                self._check_roots()
                next_roots = now + cfg.root_poll
                self._poked = self._poked or (self._inbox is not None and self._inbox.pending())
            if self._poked:
                self._serve_requests(idx)
            if self._encoder is not None and now - self._encoder_used > cfg.encoder_idle:
                self._release_encoder()
                self._compact(idx)
            paused = self._power_paused(now)
            if not self._rescan and self._rescans.due(now):  # at most one rescan waits or runs
                log.warning("events were lost (the OS event queue overflowed): rescanning %s", ", ".join(self.roots))
                self._observation.resync()
                self._rescan |= set(self.roots)
            if self._rescan and now >= self._busy_until and not paused:
                self._catch_up(idx)
                self.ready.set()
                continue
            batch = None if paused or now < self._busy_until else self._backlog.take(now)
            if batch:
                self._apply_batch(idx, batch)
                continue
            self.ready.set()  # (a catch-up put off on battery)
            self._set(phase=Phase.PAUSED if paused else Phase.WATCHING)
            self._report()

            def deadline(due: list[float]) -> float:
                if self._poked:
                    return now
                due = [next_roots, *due]
                if (rescan := self._rescans.next_due()) is not None:
                    due.append(rescan)
                if paused:  # nothing is taken while paused: wake only to ask the power supply again
                    due = [next_roots, self._power_checked + cfg.power_poll]
                if self._busy_until > now:
                    due = [max(d, self._busy_until) for d in due]
                return min(due)

            self._backlog.sleep(deadline, self._stopping)

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
                libc().malloc_trim(0)  # glibc keeps freed arenas otherwise
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
        """run_index's progress: serve requests (a `forget` must not wait for a long catch-up),
        remove what was deleted meanwhile (``removals.py``), ask the power supply
        (``_should_stop`` acts on the answer)."""
        self._last_progress = progress
        if self._poked and not self._serving:
            self._serve_requests(self._idx)
        self._remove_gone(self._idx)
        self._power_paused(time.monotonic())

    def _remove_gone(self, idx) -> None:
        """Remove the paths deleted since the last look, ahead of any other work."""
        removed = self._removals.apply(idx)
        if removed:
            self._count(0, removed, 0)
            log.info("removed %d deleted files ahead of the work in progress", removed)
            self._report()

    def _blame(self, idx, err: Exception) -> list[str]:
        """The files the failed run stopped on, now recorded as unreadable (``culprit.py``); []:
        none is to blame (the index or the disk failed, not a file)."""
        if is_busy(err) or isinstance(err, (SparcError, sqlite3.Error)):
            return []
        try:
            blamed = culprit.blame(idx, self._last_progress, self.model, self._encoder_once, self._batch_options)
        except Exception:
            log.exception("could not find which file the run failed on")
            return []
        if blamed:
            self._count(0, 0, len(blamed))
            self._set(last_error=f"{', '.join(blamed)} {culprit.reason(err)}; recorded as unreadable")
        return blamed

    def _should_stop(self) -> bool:
        """run_index stops before its next file: the watcher is stopping, or went on battery."""
        return self._stopping.is_set() or self._paused

    def _serve_requests(self, idx) -> None:
        """Apply the waiting requests of other commands (``serve``)."""
        self._poked = False
        assert self._inbox is not None and self._serve is not None  # only a request in the inbox pokes it
        self._serving = True
        try:
            self._serve(self._inbox, idx, self.model, self._encoder_once, should_stop=self._stopping.is_set,
                        on_done=lambda req, done: self._requested(idx, req, done))
        finally:
            self._serving = False
        self._report()

    def _requested(self, idx, req, done) -> None:
        """What a request applied changes for the watcher: its counters and its roots."""
        roots = self.roots
        if req.verb == "forget":
            self._count(0, done.files, 0)
            kept = [r for r in roots if not is_under(path_key(r), done.path)]
            if kept != roots:  # a watched root forgotten: stop watching it
                self.scope.roots = kept
                self._check_roots()
        else:
            self._count(done.indexed, done.removed, len(done.errors))
            stored = set(idx.roots())
            new = [r for r in req.paths if path_key(r) in stored and r not in roots]
            if new:  # a folder the user added: watched from now on
                self.scope.roots = sorted({*roots, *new})
                self._check_roots()

    def _power_paused(self, now: float) -> bool:
        """Whether encoding waits for mains power; asks ``on_battery`` at most every power_poll s."""
        probe = self.config.on_battery
        if probe is None:
            return False
        if now - self._power_checked >= self.config.power_poll:
            self._power_checked = now
            try:
                battery = bool(probe())
            except Exception:  # a probe that fails must not stop the watcher
                log.exception("could not read the power supply")
                battery = False
            if battery != self._paused:
                log.info("on battery power: encoding paused" if battery else "on mains power: encoding resumed")
                self._paused = battery
                self._set(paused="on battery power" if battery else None)
                self._report()
        return self._paused

    def _run_index(self, idx, paths: list[str], options: IndexOptions):
        from sparc_local.pipeline import run_index

        return run_index(idx, paths, self.model, self._encoder_once, options, on_progress=self._progress,
                         on_error=lambda p, r: log.warning("skipped %s: %s", p, r), should_stop=self._should_stop)

    def _catch_up(self, idx) -> None:
        """Full incremental run_index over the roots that exist (at start, after lost events, or a
        root that came back). What was deleted leaves the index first; a file it fails on is
        recorded as unreadable and the catch-up goes on at once (``culprit.py``)."""
        roots = sorted(r for r in self._rescan if os.path.exists(r))
        self._set(phase=Phase.CATCH_UP)
        self._report()
        self._last_progress = None
        try:
            self._remove_gone(idx)
            if roots:
                self._count(0, prune(idx, roots), 0)  # deleted while nothing watched
                rep = self._run_index(self._removals.guard(idx), roots, self.config.index_options())
                self._count(rep.indexed, rep.removed, len(rep.errors))
                if rep.stopped:  # the roots stay to rescan
                    return
                log.info("catch-up of %s: %d indexed, %d unchanged, %d removed, %d unreadable in %.1fs",
                         ", ".join(roots), rep.indexed, rep.unchanged, rep.removed, rep.unreadable, rep.seconds)
            self._rescan.clear()  # roots missing now are rescanned when _check_roots sees them back
            self._busy_failures = self._catch_up_failures = 0
        except Exception as err:
            if not self._blame(idx, err):  # else: the rest goes on at once, without that file
                self._failed(err, what="catch-up")
        finally:
            self._removals.end_run()

    def _apply_batch(self, idx, batch: dict[str, bool]) -> None:
        self._set(phase=Phase.INDEXING)
        self._report()
        self._last_progress = None
        guarded = self._removals.guard(idx)
        try:
            self._remove_gone(idx)
            done = batches.apply(guarded, batch, self.scope,
                                 lambda files: self._run_index(guarded, files, self._batch_options),
                                 chunk_files=self.config.chunk_files, should_stop=self._should_stop,
                                 on_left=self._backlog.left)
            self._count(done.indexed, done.removed, len(done.errors))
            if done.stopped and not self._stopping.is_set():  # on battery: all of it again on mains power
                self._backlog.requeue(batch)
            elif not done.stopped:
                self._backlog.done(batch)
                self._busy_failures = 0
                with self._lock:
                    self._state = dataclasses.replace(self._state, last_batch_at=time.time(),
                                                      batches=self._state.batches + 1)
        except Exception as err:
            blamed = self._blame(idx, err)
            if blamed:  # the rest of the batch again, at once; the blamed files wait for their next event
                keys = set(blamed)
                self._backlog.requeue({p: d for p, d in batch.items() if path_key(p) not in keys})
            else:
                self._failed(err, what="batch", batch=batch)
        finally:
            self._removals.end_run()
            self._backlog.left(0)
            self._report()

    def _failed(self, err: Exception, what: str, batch: dict[str, bool] | None = None) -> None:
        """One failed batch never stops the watcher: record it and try again later."""
        msg = f"{what} failed: {type(err).__name__}" + (f": {err}" if str(err) else "")
        self._set(last_error=msg)
        busy = is_busy(err)
        delays = self.config.retry_delays
        if busy:
            self._busy_failures += 1
            delay = min(self.config.busy_delay * 2 ** (self._busy_failures - 1), BUSY_MAX_DELAY)
            self._busy_until = time.monotonic() + delay
            log.warning("%s; retrying in %.1fs", msg, delay)
        else:
            log.error("%s", msg, exc_info=err)
        if batch and busy:  # nothing wrong with the files: all of them again, no attempt spent
            self._backlog.requeue(batch)
        elif batch:
            self._backlog.failed(batch, msg)
        elif not busy:  # a catch-up: tried again, less and less often
            self._catch_up_failures += 1
            delay = min((delays[0] if delays else 1.0) * 2 ** (self._catch_up_failures - 1),
                        self.config.catch_up_max_delay)
            self._busy_until = time.monotonic() + delay
            log.warning("catch-up tried again in %.0fs", delay)

    def _report(self) -> None:
        if self.config.on_status is not None:
            try:
                self.config.on_status(self.status())
            except Exception:
                log.exception("status callback failed")

    def _check_roots(self) -> None:
        self._roots_checked(self._observation.check_roots())

    def _roots_checked(self, check: RootCheck) -> None:
        """Record what a check of the roots found; the roots to re-index join the catch-up."""
        self._rescan |= check.rescan
        self._set(missing_roots=check.missing, observer=self._observation.kind,
                  **({"last_error": check.error} if check.error else {}))
