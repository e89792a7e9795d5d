"""Polling the folders the OS does not watch: all of them (`watch --poll`), or the part of a tree
left over once inotify's limit on watches is reached.

A pass stats every folder and file below its folders (as far as a walk of `index` enters) and
reports what differs from the previous pass. Its cost grows with the tree, so the wait between
two passes grows with it: at least ``interval``, and long enough that polling takes at most
``cpu_share`` of one core (the poller thread's own CPU time). A big tree is then noticed later,
not at a higher cost.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from sparc_local.paths import is_under
from sparc_local.watch.config import LOG_NAME

log = logging.getLogger(LOG_NAME)

CPU_SHARE = 0.01  # of one core, at most, spent polling


class Poller:
    """One thread polling the trees below ``folders``; ``on_event(path, is_dir)`` hears each
    file or folder that appeared, changed or went away since the previous pass."""

    def __init__(self, on_event: Callable[[str, bool], None], enters: Callable[[str, str], bool],
                 interval: float, cpu_share: float = CPU_SHARE) -> None:
        self.on_event, self.enters, self.interval, self.cpu_share = on_event, enters, interval, cpu_share
        self._lock = threading.Lock()
        self._roots: set[str] = set()
        self._snapshot: dict[str, tuple[bool, int, int, int]] = {}  # path -> (is_dir, mtime_ns, size, inode)
        self._added: set[str] = set()  # roots added while a pass walked: their baseline is not in its walk
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wait = interval  # seconds between two passes now
        self.dirs = 0  # folders seen by the last pass

    @property
    def folders(self) -> list[str]:
        with self._lock:
            return sorted(self._roots)

    def add(self, folders: Iterable[str]) -> None:
        """Poll these trees too; what they hold now is their baseline (a change from now on is reported)."""
        with self._lock:
            new = {f for f in folders if not any(is_under(f, r) for r in self._roots)}
        self._include(new, lambda roots: {r for r in roots if not any(is_under(r, f) for f in new)} | new)

    def replace(self, folders: Iterable[str]) -> None:
        """Poll exactly these trees from now on."""
        wanted = set(folders)
        with self._lock:
            new = wanted - self._roots
        self._include(new, lambda roots: wanted)

    def _include(self, new: set[str], roots_after: Callable[[set[str]], set[str]]) -> None:
        base: dict[str, tuple[bool, int, int, int]] = {}
        for root in new:
            self._walk(root, base)
        with self._lock:
            self._snapshot.update(base)
            self._added |= new
            self._roots = roots_after(self._roots)
            self.dirs = sum(1 for e in self._snapshot.values() if e[0])  # (until the next pass drops stale ones)

    def remove_under(self, prefix: str) -> None:
        with self._lock:
            self._roots = {r for r in self._roots if not is_under(r, prefix)}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sparc-local-poll", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.thread_time()
            try:
                self.poll()
            except Exception:  # a pass that failed must not end the polling
                log.exception("polling failed")
            spent = time.thread_time() - t0
            self.wait = max(self.interval, spent / self.cpu_share)
            self._stop.wait(self.wait)

    def poll(self) -> None:
        """One pass: snapshot every tree, report the differences with the previous pass."""
        with self._lock:
            roots = sorted(self._roots)
            self._added = set()
        snap: dict[str, tuple[bool, int, int, int]] = {}
        for root in roots:
            self._walk(root, snap)
        with self._lock:  # a tree added meanwhile keeps its baseline, and is compared at the next pass
            old, added = self._snapshot, self._added
            changes = [(path, entry[0]) for path, entry in snap.items()
                       if path not in old or (not entry[0] and old[path] != entry)]  # a folder: new, or gone
            changes += [(path, entry[0]) for path, entry in old.items()
                        if path not in snap and any(is_under(path, r) for r in roots)]
            changes = [c for c in changes if not any(is_under(c[0], r) for r in added)]
            snap.update((p, e) for p, e in old.items() if any(is_under(p, r) for r in added))
            self._snapshot, self.dirs = snap, sum(1 for e in snap.values() if e[0])
        for path, is_dir in changes:
            self.on_event(path, is_dir)

    def _walk(self, root: str, snap: dict[str, tuple[bool, int, int, int]]) -> None:
        try:
            st = os.stat(root, follow_symlinks=False)
        except OSError:
            return
        snap[root] = (True, 0, 0, st.st_ino)
        stack = [root]
        while stack and not self._stop.is_set():
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                try:
                    is_dir = e.is_dir(follow_symlinks=False)
                    if is_dir:
                        if self.enters(folder, e.name):
                            snap[e.path] = (True, 0, 0, e.inode())
                            stack.append(e.path)
                        continue
                    s = e.stat(follow_symlinks=False)
                except OSError:  # gone meanwhile
                    continue
                snap[e.path] = (False, s.st_mtime_ns, s.st_size, s.st_ino)
