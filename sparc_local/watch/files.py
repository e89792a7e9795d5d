"""The background watcher's files in the data dir, and reading its state: shared by the daemon,
the watcher, `status` and the commands that hand their writes to it (handoff)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sparc_local.index.lock import pid_alive, proc_stat
from sparc_local.watch.state import WatcherStatus, WatchState

COMMAND = "sparc-local watch"
INBOX = "requests"  # folder of the data dir: requests handed to the watcher
POLL = 0.05  # seconds between two looks for what the other process (watcher or command) wrote


def _file(name: str) -> Path:
    from sparc_local.paths import user_dir

    return user_dir() / name


def pid_path() -> Path:
    return _file("watch.pid")


def state_path() -> Path:
    return _file("watch.json")


def log_path() -> Path:
    return _file("watch.log")


def out_path() -> Path:
    return _file("watch.out")


def proc_start(pid: int) -> str | None:
    """The process's start time (Linux), to tell our watcher from a later process that reused its pid."""
    fields = proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: dict) -> None:
    """Atomic replace, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def running_pid() -> int | None:
    """The pid of the live watcher, or None (no pidfile, dead process, or pid reused since)."""
    try:
        pid = int(pid_path().read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if not pid_alive(pid):
        return None
    state = read_json(state_path())
    start = proc_start(pid)
    if state.get("pid") == pid and state.get("proc_start") and start and state["proc_start"] != start:
        return None
    return pid


def read_status() -> WatchState:
    """What `status` shows of the watcher, from its state file. Never takes the lock."""
    pid = running_pid()
    state = read_json(state_path())
    st = WatcherStatus.from_json(state)
    if pid is None or state.get("pid") != pid:  # its last error stays to be seen
        return WatchState(running=pid is not None, pid=pid, last_error=st.last_error)
    return WatchState(running=True, pid=pid, since=st.started_at, queue=st.queue, paused=st.paused,
                      last_error=st.last_error, degraded=st.degraded())


def inbox_path() -> Path:
    """Where `forget` and `index` leave requests for a running watcher (handoff)."""
    return _file(INBOX)
