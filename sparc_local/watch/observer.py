"""The watchdog side of the watcher: which folders are watched, and how.

A watchdog observer (inotify, FSEvents, ...) reports paths under the roots to ``on_change``; a
request file in the inbox (handoff.py) calls ``on_request``. The observer thread does nothing
else. Roots that vanish (an unmounted disk) lose their watch and are checked for every
``root_poll`` seconds; one that comes back, or whose emitter died, is watched afresh and handed
back to the caller to re-index. When the OS limit on watches is hit, it polls instead
(``PollingObserver``): slower to notice, but it misses nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sparc_local.ingest.extract import identity
from sparc_local.paths import is_under
from sparc_local.power import libc
from sparc_local.watch.config import LOG_NAME, WatchConfig
from sparc_local.watch.scope import Scope

log = logging.getLogger(LOG_NAME)

IN_ATTRIB = 0x4  # inotify: "metadata changed", the mask of the spare watch probed for (any mask would do)
SKIP_EVENTS = frozenset({"opened", "closed_no_write"})  # a file read, not changed
DIR_NOISE = frozenset({"modified", "attrib", "closed"})  # on a folder: its entries' own events follow
STOP_JOIN = 5.0  # seconds to wait for the observer thread on stop


def inotify_exhausted(path: str) -> bool:
    """Whether this user has no inotify watch left. watchdog silently skips subfolders it cannot
    watch once the limit is reached, so after scheduling we probe for one spare watch (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    fd = libc().inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        return ctypes.get_errno() == errno.EMFILE
    try:
        return libc().inotify_add_watch(fd, os.fsencode(path), IN_ATTRIB) < 0 and ctypes.get_errno() == errno.ENOSPC
    finally:
        os.close(fd)


class _Handler:
    """watchdog event handler (duck-typed: the observer only calls dispatch): on_change(path, is_dir)."""

    def __init__(self, on_change: Callable[[str, bool], None]) -> None:
        self.on_change = on_change

    def dispatch(self, event) -> None:
        kind = event.event_type
        if kind in SKIP_EVENTS or (event.is_directory and kind in DIR_NOISE):
            return
        self.on_change(os.fsdecode(event.src_path), event.is_directory)
        if kind == "moved":
            self.on_change(os.fsdecode(event.dest_path), event.is_directory)


class _InboxHandler:
    """Calls on_request when a request file appears in the inbox (see handoff.py)."""

    def __init__(self, on_request: Callable[[], None]) -> None:
        self.on_request = on_request

    def dispatch(self, event) -> None:
        from sparc_local.watch.handoff import REQUEST

        path = os.fsdecode(getattr(event, "dest_path", "") or event.src_path)
        name = os.path.basename(path)
        if name.endswith(REQUEST) and not name.startswith("."):  # not the watcher's own answers
            self.on_request()


@dataclass
class RootCheck:
    """What a check of the roots found."""

    missing: list[str]  # roots that do not exist now
    rescan: set[str] = field(default_factory=set)  # roots to index again: events may have been missed
    error: str | None = None  # why it polls from now on


class Observation:
    """The watchdog observer over ``scope.roots`` (and the inbox folder, if any)."""

    def __init__(self, scope: Scope, on_change: Callable[[str, bool], None], on_request: Callable[[], None],
                 config: WatchConfig, inbox: Path | None = None) -> None:
        self.scope, self.on_change, self.on_request, self.inbox = scope, on_change, on_request, inbox
        self.polling = config.polling  # set once the OS limit on watches is hit
        self.poll_interval, self.root_poll = config.poll_interval, config.root_poll
        self._observer = None
        self._watches: dict[str, tuple[object, tuple[int, int] | None]] = {}  # target -> (watch, identity)
        self._missing: list[str] = []

    @property
    def kind(self) -> str:
        """"polling", or the class of the OS observer (e.g. "InotifyObserver")."""
        return "polling" if self.polling else type(self._observer).__name__

    def start(self) -> RootCheck:
        if self.polling:
            from watchdog.observers.polling import PollingObserver

            self._observer = PollingObserver(timeout=self.poll_interval)
        else:
            from watchdog.observers import Observer

            self._observer = Observer()
        self._observer.start()
        if self.inbox is not None:
            try:
                self._observer.schedule(_InboxHandler(self.on_request), str(self.inbox), recursive=False)
            except OSError as err:  # the periodic root check still finds requests
                log.warning("cannot watch %s: %s", self.inbox, err)
        return self.check_roots(initial=True)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(STOP_JOIN)
            self._observer = None
        self._watches.clear()

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
        """Schedule watches for present roots; drop watches of vanished ones and poll for their return."""
        targets, missing = self._targets()
        for root in missing:
            if root not in self._missing:
                log.warning("%s is missing; checking every %gs for it to come back", root, self.root_poll)
        self._missing = missing
        check = RootCheck(missing)
        for target in [t for t in self._watches if t not in targets]:
            self._unschedule(target)
        alive = {e.watch: e.is_alive() for e in self._observer.emitters}
        for target, recursive in targets.items():
            ident = identity(Path(target))
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
                watch = self._observer.schedule(_Handler(self.on_change), target, recursive=recursive)
            except OSError as err:
                if err.errno in (errno.ENOSPC, errno.EMFILE) and not self.polling:
                    return self._fall_back_to_polling(err)
                log.warning("cannot watch %s: %s; trying again in %gs", target, err, self.root_poll)
                continue
            self._watches[target] = (watch, ident)
            if not initial:
                log.info("watching %s again; re-indexing it", target)
                check.rescan.update(r for r in self.scope.roots if is_under(r, target))
        if not self.polling and self._watches and inotify_exhausted(next(iter(self._watches))):
            return self._fall_back_to_polling(OSError(errno.ENOSPC, "inotify watch limit reached"))
        return check

    def _fall_back_to_polling(self, err: OSError) -> RootCheck:
        log.warning("%s (the OS limit on watched folders; on Linux raise it with "
                    "`sysctl fs.inotify.max_user_watches=524288`): polling every %gs instead",
                    err.strerror or err, self.poll_interval)
        self.stop()
        self.polling = True
        check = self.start()
        check.rescan.update(self.scope.roots)  # events may have been missed meanwhile
        check.error = f"{err.strerror or err}; polling instead"
        return check

    def _unschedule(self, target: str) -> None:
        watch, _ = self._watches.pop(target)
        try:
            self._observer.unschedule(watch)
        except (KeyError, OSError):
            pass
