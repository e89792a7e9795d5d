"""Linux inotify watches over the folders a walk of `index` enters, read by one thread.

Why not watchdog's inotify observer: it subscribes every watched folder to opens and closes, so
any walk of the tree (its own setup, a catch-up, a backup tool) queues two events per folder in
the folder and two in its parent, and a tree of a few thousand folders overflows the kernel's
queue (``fs.inotify.max_queued_events``). On an overflow it then removes and adds again every
watch of the tree, which queues one IN_IGNORED per watch: with more folders than the queue holds,
that overflows again, forever, at a whole core. Here the mask holds only changes, an overflow is
handed to the caller (the watcher rescans, with back-off) and never walks by itself, and a folder
the walk skips (hidden, ignored, the data dir) gets no watch. When the OS limit on watches is
reached, the folders left unwatched are handed to ``on_unwatched`` (the observer polls them).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import struct
import threading
from collections.abc import Callable

from sparc_local.paths import is_under
from sparc_local.watch.config import LOG_NAME

log = logging.getLogger(LOG_NAME)

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED = 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK, IN_ISDIR = 0x01000000, 0x02000000, 0x04000000, 0x40000000
# changes only: no IN_OPEN, IN_ACCESS or IN_CLOSE_NOWRITE, which every read of the tree would queue
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
DIR_CHANGES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO  # a folder's own modify/attrib is noise
HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
READ_BYTES = 1 << 16


def supported() -> bool:
    import sys

    return sys.platform.startswith("linux")


def _libc():
    import ctypes

    lib = ctypes.CDLL(None, use_errno=True)
    lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return lib


def watch_limit() -> int | None:
    """This user's limit on inotify watches: the smaller of the system's and its user namespace's."""
    limits = []
    for path in ("/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"):
        try:
            with open(path) as fh:
                limits.append(int(fh.read().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    return min(limits) if limits else None


class InotifyTree:
    """Watches folders and, for a recursive target, every folder below it that ``enters(folder,
    name)`` keeps. ``on_event(path, is_dir)`` hears every change (from the reader thread);
    ``on_overflow()`` that the kernel dropped events; ``on_unwatched(folders)`` the folders created
    meanwhile (each with what is below it) that got no watch because the OS limit was reached.

    Thread-safe: ``add``/``remove``/``sync`` may run in any thread while the reader thread
    handles events and watches the folders created meanwhile.
    """

    def __init__(self, on_event: Callable[[str, bool], None], on_overflow: Callable[[], None],
                 on_unwatched: Callable[[list[str]], None], enters: Callable[[str, str], bool]) -> None:
        import ctypes

        self.on_event, self.on_overflow, self.on_unwatched, self.enters = on_event, on_overflow, on_unwatched, enters
        self._lib = _libc()
        self._fd = self._lib.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self._fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify: {os.strerror(err)}")
        self._wake_r, self._wake_w = os.pipe()
        self._lock = threading.RLock()
        self._path_of: dict[int, str] = {}  # watch descriptor -> folder
        self._wd_of: dict[str, int] = {}
        self._recursive: dict[str, bool] = {}  # target -> its subfolders are watched too
        self._thread: threading.Thread | None = None
        self._closed = False

    # ------------------------------------------------------------------ watches

    @property
    def watches(self) -> int:
        with self._lock:
            return len(self._wd_of)

    def watching(self, folder: str) -> bool:
        with self._lock:
            return folder in self._wd_of

    def add(self, target: str, recursive: bool = True) -> list[str]:
        """Watch ``target`` (and, if recursive, the folders below it that a walk enters). Returns
        the folders left unwatched by the OS limit, each standing for its subtree. Raises OSError
        if ``target`` itself cannot be watched."""
        with self._lock:
            self._recursive[target] = recursive
        wd = self._add_watch(target)
        if wd < 0:
            raise OSError(-wd, f"{os.strerror(-wd)}: {target}")
        return self._add_below(target) if recursive else []

    def remove(self, target: str) -> None:
        """Stop watching ``target`` and the folders below it."""
        with self._lock:
            self._recursive.pop(target, None)
        self._drop_under(target)

    def sync(self, target: str) -> list[str]:
        """Watch the folders below ``target`` that have no watch (events of their creation may
        have been lost); returns those left unwatched by the OS limit."""
        with self._lock:
            recursive = self._recursive.get(target)
        if recursive is None:
            return []
        if not self.watching(target):
            wd = self._add_watch(target)
            if wd < 0:
                return [target] if wd == -errno.ENOSPC else []
        return self._add_below(target) if recursive else []

    def _add_watch(self, folder: str) -> int:
        """The watch descriptor, or -errno."""
        import ctypes

        wd = self._lib.inotify_add_watch(self._fd, os.fsencode(folder), MASK)
        if wd < 0:
            return -ctypes.get_errno()
        with self._lock:
            old = self._path_of.get(wd)
            if old is not None and old != folder:  # the same folder under a new name (moved)
                self._wd_of.pop(old, None)
            self._path_of[wd] = folder
            self._wd_of[folder] = wd
        return wd

    def _add_below(self, top: str) -> list[str]:
        """Watch the folders below ``top`` (already watched), breadth first: when the limit is
        reached, the folders left unwatched are the deepest ones."""
        queue: list[str] = [top]
        unwatched: list[str] = []
        i = 0
        while i < len(queue):
            folder = queue[i]
            i += 1
            try:
                with os.scandir(folder) as it:
                    subs = [e.name for e in it if e.is_dir(follow_symlinks=False)]
            except OSError:  # unreadable, or gone meanwhile: its events say what became of it
                continue
            for name in sorted(subs):
                if not self.enters(folder, name):
                    continue
                path = os.path.join(folder, name)
                if self.watching(path):
                    queue.append(path)
                    continue
                wd = -errno.ENOSPC if unwatched else self._add_watch(path)  # (at the limit: no more tries)
                if wd >= 0:
                    queue.append(path)
                elif wd == -errno.ENOSPC:
                    unwatched.append(path)  # it stands for its subtree: not walked
        return unwatched

    def _drop_under(self, folder: str) -> None:
        with self._lock:
            gone = [(p, wd) for p, wd in self._wd_of.items() if is_under(p, folder)]
            for path, wd in gone:
                del self._wd_of[path]
                self._path_of.pop(wd, None)
        for _, wd in gone:
            self._lib.inotify_rm_watch(self._fd, wd)  # its IN_IGNORED finds no folder: skipped

    # ------------------------------------------------------------------ reading

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sparc-local-inotify", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout)
        for fd in (self._fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}  # blocks: no timer, no work while nothing changes
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                continue
            except OSError as err:
                log.error("inotify read failed: %s", err)
                return
            try:
                self.handle(data)
            except Exception:  # one bad event must not end the watches
                log.exception("inotify event handling failed")

    def handle(self, data: bytes) -> None:
        """Handle a buffer of inotify events (as read from the inotify descriptor)."""
        i = 0
        while i + HEADER.size <= len(data):
            wd, mask, _cookie, length = HEADER.unpack_from(data, i)
            name = data[i + HEADER.size:i + HEADER.size + length].rstrip(b"\0")
            i += HEADER.size + length
            self._event(wd, mask, os.fsdecode(name))

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.on_overflow()
            return
        with self._lock:
            folder = self._path_of.get(wd)
            if mask & IN_IGNORED:  # the folder was deleted, or its watch removed
                if folder is not None:
                    del self._path_of[wd]
                    if self._wd_of.get(folder) == wd:
                        del self._wd_of[folder]
                return
            is_target = folder in self._recursive
        if folder is None:
            return
        if not name:  # about the watched folder itself: its parent's watch reports it, or a root check
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF) and is_target:
                if mask & IN_MOVE_SELF:
                    self._drop_under(folder)  # the watches follow the folder to where it went
                self.on_event(folder, True)
            return
        path = os.path.join(folder, name)
        is_dir = bool(mask & IN_ISDIR)
        if is_dir:
            if not mask & DIR_CHANGES:
                return
            if mask & IN_MOVED_FROM:
                self._drop_under(path)
            if mask & (IN_CREATE | IN_MOVED_TO) and self.enters(folder, name):
                wd = self._add_watch(path)
                unwatched = self._add_below(path) if wd >= 0 else [path] if wd == -errno.ENOSPC else []
                if unwatched:  # (what was created in it before its watch is found by the batch's walk)
                    self.on_unwatched(unwatched)
        self.on_event(path, is_dir)
