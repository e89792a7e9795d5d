"""The single-writer lock: one process at a time may write the index (`index` or `watch`).

SQLite would serialize the writes anyway, but two indexers racing over the same files waste the
CPU twice and interleave their batches; a watcher and a manual `index` would fight forever. So a
writer takes an exclusive ``flock`` on ``<data dir>/writer.lock`` and writes a JSON record of
itself (pid, command, started_at, hostname) into that file, which lets the loser say who holds it.

The kernel drops a flock when its holder dies, even on SIGKILL, so a crashed writer never blocks
the next one. Only the record can be stale; it is overwritten by the next holder, and
:func:`holder` ignores a record whose pid is no longer alive. Readers (`ask`, `status`) never take
the lock: SQLite WAL lets them read while a writer writes.

POSIX only (fcntl); on a platform without it the lock is a no-op.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

from sparc_local.errors import SparcError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows is not a target
    fcntl = None  # type: ignore[assignment]  # no module there: the lock tests `fcntl is not None`

LOCK_NAME = "writer.lock"


def lock_path() -> Path:
    from sparc_local.paths import user_dir

    return user_dir() / LOCK_NAME


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (Linux; None elsewhere or if
    the process is gone): [0] is the state, [19] the start time. The name is cut at its last
    ")", as it may hold spaces and parentheses itself."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (a zombie counts as dead: it holds no lock)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = proc_stat(pid)
    return not fields or fields[0] != "Z"


def _read_record(path: Path) -> dict | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        rec = json.loads(text)
    except ValueError:  # empty (released) or being written
        return None
    return rec if isinstance(rec, dict) else None


def holder(path: Path | None = None) -> dict | None:
    """The record of the live process holding the lock, or None. Never takes the lock."""
    rec = _read_record(path or lock_path())
    if rec is None or not pid_alive(rec.get("pid")):
        return None
    return rec


class LockHeld(SparcError):
    """Another process writes the index; str() names it, ``remedy`` says what to do."""

    def __init__(self, record: dict | None) -> None:
        self.record = record or {}
        who = []
        if self.record.get("pid"):
            who.append(f"pid {self.record['pid']}")
        if self.record.get("command"):
            who.append(f"`{self.record['command']}`")
        if self.record.get("started_at"):
            who.append("since " + time.strftime("%H:%M", time.localtime(self.record["started_at"])))
        detail = f" ({', '.join(who)})" if who else ""
        if "watch" in str(self.record.get("command", "")):
            remedy = ("The watcher keeps the index up to date by itself. To change what it indexes, "
                      "stop it with `sparc-local watch --stop`, run your command, then start it again.")
        else:
            remedy = "Wait for it to finish (or pass --wait SECONDS), then try again."
        super().__init__(f"another sparc-local process is writing the index{detail}", remedy)


class WriterLock:
    """Exclusive writer lock (a context manager). Re-entrant use is an error."""

    def __init__(self, command: str, path: Path | None = None) -> None:
        self.command = command
        self.path = Path(path) if path else lock_path()
        self._fd: int | None = None
        self.stale: dict | None = None  # the dead holder's record we replaced, if any

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait: float = 0.0, poll: float = 0.1) -> WriterLock:
        """Take the lock, waiting up to `wait` seconds; raises LockHeld if still taken."""
        if self._fd is not None:
            raise RuntimeError("lock already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        deadline = time.monotonic() + max(wait, 0.0)
        try:
            while fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockHeld(holder(self.path)) from None
                    time.sleep(poll)
            old = _read_record(self.path)
            if old is not None and old.get("pid") != os.getpid():
                self.stale = old  # its process died without releasing: the kernel freed the flock
            record = dict(pid=os.getpid(), command=self.command, started_at=time.time(),
                          hostname=socket.gethostname(), argv=sys.argv[1:])
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        """Clear the record and drop the lock (the file stays: deleting it would race a waiter)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> WriterLock:
        if self._fd is None:
            self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
