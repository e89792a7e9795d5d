"""The watcher's eyes: which folders are watched, which are polled, and root checks.

On Linux the folders a walk of `index` enters are watched with inotify (``inotify.py``); where
the OS limit on watches leaves some unwatched, those subtrees are polled (``poller.py``), at a
pace that keeps polling cheap, and watching them is tried again every ``WATCH_RETRY`` seconds.
Elsewhere a watchdog observer (FSEvents, kqueue, ReadDirectoryChangesW) watches the roots.
`watch --poll`, or an OS that gives no watch at all, polls everything.

Paths go to ``on_change``; a request file in the inbox (inbox.py) calls ``on_request``; an
event queue that overflowed calls ``on_overflow`` (the watcher rescans, with back-off). Roots
that vanish (an unmounted disk) lose their watch and are checked for every ``root_poll``
seconds; one that comes back, or whose watch died, is watched afresh and handed back to the
caller to re-index.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_local.ingest.extract import identity
from sparc_local.paths import is_under
from sparc_local.watch import inotify
from sparc_local.watch.config import LOG_NAME, WatchConfig
from sparc_local.watch.inbox import is_request
from sparc_local.watch.poller import Poller
from sparc_local.watch.scope import Scope

if TYPE_CHECKING:
    from watchdog.observers.api import ObservedWatch

log = logging.getLogger(LOG_NAME)

SKIP_EVENTS = frozenset({"opened", "closed_no_write"})  # a file read, not changed
DIR_NOISE = frozenset({"modified", "attrib", "closed"})  # on a folder: its entries' own events follow
STOP_JOIN = 5.0  # seconds to wait for the observer threads on stop
WATCH_RETRY = 60.0  # seconds between two tries to watch the polled folders (the limit may have been raised)
RAISE_LIMIT = "sudo sysctl fs.inotify.max_user_watches=524288"


@dataclass
class RootCheck:
    """What a check of the roots found."""

    missing: list[str]  # roots that do not exist now
    rescan: set[str] = field(default_factory=set)  # roots to index again: events may have been missed
    error: str | None = None  # why it polls from now on


@dataclass(frozen=True)
class Coverage:
    """How the folders are observed now (the watcher's status shows it)."""

    kind: str  # "inotify", "polling", or the class of the watchdog observer
    watched: int = 0  # folders with an OS watch (inotify)
    polled: int = 0  # folders polled because the OS limit left them unwatched (and what is below them)
    poll_every: float = 0.0  # seconds between two polls, when anything is polled
    limit: int | None = None  # the OS limit on watches (inotify), when known


class _WatchdogEvents:
    """A watchdog observer's events as (path, is_dir), without reads and folder noise."""

    def __init__(self, on_change: Callable[[str, bool], None]) -> None:
        self.on_change = on_change

    def dispatch(self, event) -> None:
        kind = event.event_type
        if kind in SKIP_EVENTS or (event.is_directory and kind in DIR_NOISE):
            return
        self.on_change(os.fsdecode(event.src_path), event.is_directory)
        if kind == "moved":
            self.on_change(os.fsdecode(event.dest_path), event.is_directory)


class _Watchdog:
    """watchdog's native observer (not Linux), behind the calls the observation makes of ``InotifyTree``."""

    def __init__(self, on_event: Callable[[str, bool], None]) -> None:
        from watchdog.events import (
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
            FileClosedEvent,
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        class Events(_WatchdogEvents, FileSystemEventHandler):
            """The handler as watchdog types it (its module is imported here only, never on Linux)."""

        # changes only: a read of a watched file or folder is no event
        self._filter = [FileCreatedEvent, DirCreatedEvent, FileDeletedEvent, DirDeletedEvent, FileModifiedEvent,
                        FileMovedEvent, DirMovedEvent, FileClosedEvent]
        self._handler = Events(on_event)
        self._observer = Observer()
        self._watches: dict[str, ObservedWatch] = {}
        self.watches = 0

    def start(self) -> None:
        self._observer.start()

    def stop(self, timeout: float = STOP_JOIN) -> None:
        self._observer.stop()
        self._observer.join(timeout)

    def add(self, target: str, recursive: bool = True) -> list[str]:
        self._watches[target] = self._observer.schedule(self._handler, target, recursive=recursive,
                                                        event_filter=self._filter)
        return []

    def remove(self, target: str) -> None:
        watch = self._watches.pop(target, None)
        if watch is not None:
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError):
                pass

    def watching(self, target: str) -> bool:
        alive = {e.watch: e.is_alive() for e in self._observer.emitters}
        watch = self._watches.get(target)
        return watch is not None and alive.get(watch, False)

    def sync(self, target: str) -> list[str]:
        return []


class Observation:
    """Watches (or polls) the folders of ``scope.roots``, and the inbox folder if any."""

    def __init__(self, scope: Scope, on_change: Callable[[str, bool], None], on_request: Callable[[], None],
                 config: WatchConfig, inbox: Path | None = None,
                 on_overflow: Callable[[], None] | None = None) -> None:
        self.scope, self.on_change, self.on_request = scope, on_change, on_request
        self.inbox = str(inbox) if inbox is not None else None
        self.on_overflow = on_overflow or (lambda: None)
        self.polling = config.polling  # everything polled: asked for, or no OS watch to be had
        self.poll_interval, self.root_poll = config.poll_interval, config.root_poll
        self._native: inotify.InotifyTree | _Watchdog | None = None
        self._poller: Poller | None = None
        self._watches: dict[str, tuple[int, int] | None] = {}  # target -> identity when it was watched
        self._missing: list[str] = []
        self._retry_at = 0.0
        self.limit = inotify.watch_limit() if inotify.supported() else None

    @property
    def kind(self) -> str:
        """"polling", "inotify", or the class of the watchdog observer."""
        if self.polling or self._native is None:
            return "polling"
        return "inotify" if isinstance(self._native, inotify.InotifyTree) else type(self._native._observer).__name__

    def coverage(self) -> Coverage:
        native, poller = self._native, self._poller
        polled = poller.dirs if poller is not None and poller.folders else 0
        return Coverage(self.kind, watched=native.watches if native is not None else 0, polled=polled,
                        poll_every=poller.wait if poller is not None and polled else 0.0, limit=self.limit)

    def start(self) -> RootCheck:
        self._poller = Poller(self._dispatch, self.scope.enters, self.poll_interval)
        self._poller.start()
        if not self.polling:
            try:
                self._native = (inotify.InotifyTree(self._dispatch, self.on_overflow, self._unwatched, self.scope.enters)
                                if inotify.supported() else _Watchdog(self._dispatch))
                self._native.start()
            except OSError as err:  # e.g. EMFILE: this user has no inotify instance left
                return self._fall_back_to_polling(err)
            if self.inbox is not None:
                try:
                    self._native.add(self.inbox, recursive=False)
                except OSError as err:  # the periodic root check still finds requests
                    log.warning("cannot watch %s: %s", self.inbox, err)
        return self.check_roots(initial=True)

    def stop(self) -> None:
        if self._native is not None:
            self._native.stop(STOP_JOIN)
            self._native = None
        if self._poller is not None:
            self._poller.stop(STOP_JOIN)
            self._poller = None
        self._watches.clear()

    def _dispatch(self, path: str, is_dir: bool) -> None:
        """An event from the OS or the poller: a request of another command, or a change."""
        if self.inbox is not None and is_under(path, self.inbox):
            if is_request(os.path.basename(path)):  # not the watcher's own answers
                self.on_request()
            return
        self.on_change(path, is_dir)

    def _unwatched(self, folders: list[str]) -> None:
        """Folders the OS limit left unwatched (created while at the limit): polled instead."""
        if self._poller is not None:
            self._poller.add(folders)

    def _targets(self) -> tuple[dict[str, bool], list[str]]:
        """(folder to watch -> recursive, missing roots). A file root is watched through its
        folder, so an atomic save that replaces the file keeps being seen; a root inside another
        root needs no watch of its own."""
        roots = self.scope.roots
        present = [r for r in roots if os.path.exists(r)]
        dirs = [r for r in present if os.path.isdir(r)]
        out: dict[str, bool] = {}
        for r in present:
            if any(d != r and is_under(r, d) for d in dirs):
                continue
            if r in dirs:
                out[r] = True
            else:
                out.setdefault(os.path.dirname(r), False)
        return out, [r for r in roots if r not in present]

    def check_roots(self, initial: bool = False) -> RootCheck:
        """Watch the present roots; drop the watches of vanished ones and poll for their return."""
        targets, missing = self._targets()
        for root in missing:
            if root not in self._missing:
                log.warning("%s is missing; checking every %gs for it to come back", root, self.root_poll)
        self._missing = missing
        check = RootCheck(missing)
        for target in [t for t in self._watches if t not in targets]:
            self._unwatch(target)
        for target, recursive in targets.items():
            ident = identity(Path(target))
            if ident is None:
                continue
            if target in self._watches:
                if self._watches[target] == ident and (self._native is None or self._native.watching(target)):
                    continue
                # replaced by another folder, or its watch died (e.g. deleted and re-created between
                # two checks): watch it afresh and re-index it, events may have been missed
                self._unwatch(target)
            if not self._watch(target, recursive, check):
                continue
            self._watches[target] = ident
            if not initial:
                log.info("watching %s again; re-indexing it", target)
                check.rescan.update(r for r in self.scope.roots if is_under(r, target))
        if self._poller is not None and self._poller.folders and not self.polling \
                and time.monotonic() >= self._retry_at:
            self.resync()
        if initial and self._native is not None:
            log.info("%s: %d folders watched, %d polled (the OS limit on watches: %s)", self.kind,
                     self._native.watches, self._poller.dirs if self._poller else 0, self.limit or "none known")
        return check

    def _watch(self, target: str, recursive: bool, check: RootCheck) -> bool:
        """Watch (or poll) one target; False: not now (tried again at the next check)."""
        assert self._poller is not None
        if self._native is None:
            self._poller.add([target])
            return True
        try:
            unwatched = self._native.add(target, recursive)
        except OSError as err:
            if err.errno == errno.ENOSPC:
                unwatched = [target]
            else:
                log.warning("cannot watch %s: %s; trying again in %gs", target, err, self.root_poll)
                return False
        if unwatched:
            self._limit_reached(unwatched)
            check.rescan.update(r for r in self.scope.roots if is_under(r, target))  # missed while polled
        return True

    def _unwatch(self, target: str) -> None:
        self._watches.pop(target, None)
        if self._native is not None:
            self._native.remove(target)
        if self._poller is not None:
            self._poller.remove_under(target)

    def _limit_reached(self, unwatched: list[str]) -> None:
        assert self._poller is not None
        self._poller.add(unwatched)
        self._retry_at = time.monotonic() + WATCH_RETRY
        log.warning("the OS limit on watched folders (%s inotify watches) is reached: %d folders and what is "
                    "below them are polled instead (raise it with `%s`)", self.limit or "?", len(unwatched),
                    RAISE_LIMIT)

    def resync(self) -> None:
        """Watch the folders that have no watch: created while events were lost (an overflow), or
        polled until the OS limit allows more watches. What stays unwatched is polled."""
        if self.polling or self._native is None or self._poller is None:
            return
        unwatched: list[str] = []
        for target in list(self._watches):
            unwatched += self._native.sync(target)
        if set(unwatched) != set(self._poller.folders):
            log.info("%d folders polled (the OS limit on watches), %d watched", len(unwatched), self._native.watches)
        self._poller.replace(unwatched)
        self._retry_at = time.monotonic() + WATCH_RETRY

    def _fall_back_to_polling(self, err: OSError) -> RootCheck:
        log.warning("%s: polling every %gs or more instead of OS events", err.strerror or err, self.poll_interval)
        self.stop()
        self.polling = True
        check = self.start()
        check.rescan.update(self.scope.roots)  # events may have been missed meanwhile
        check.error = f"{err.strerror or err}; polling instead"
        return check
