"""The watcher as a process: writer lock, pidfile, state file, log file, signals, detaching.

Files in the data dir:

* ``watch.pid``  -- the pid of the running watcher (foreground, --daemon or a service alike);
* ``watch.json`` -- its state, atomically replaced when it changes: pid, started_at, queue,
  last_error, last_batch_at, phase, counters. `status` reads it without taking any lock;
* ``watch.log``  -- a rotating log (1 MB x 3);
* ``watch.out``  -- stdout/stderr of a detached watcher (a crash before logging starts lands here).

SIGTERM (``watch --stop``, systemd, launchd) and SIGINT stop it cleanly: the worker finishes the
chunk it is indexing, the lock is released and the pidfile removed. Anything not applied yet is
picked up by the catch-up pass of the next start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from logging.handlers import RotatingFileHandler

from sparc_local.errors import SparcError
from sparc_local.index.lock import WriterLock, pid_alive
from sparc_local.watch.config import LOG_NAME, SETTINGS, WatchConfig, WatchProcess, to_json
from sparc_local.watch.files import (
    COMMAND,
    POLL,
    inbox_path,
    log_path,
    out_path,
    pid_path,
    proc_start,
    running_pid,
    state_path,
    write_json,
)
from sparc_local.watch.inbox import Serve
from sparc_local.watch.state import WatcherStatus

log = logging.getLogger(LOG_NAME)
LOG_BYTES, LOG_BACKUPS = 1_000_000, 3  # watch.log rotates at 1 MB and keeps 3 old files
START_STOP_TIMEOUT = 60.0  # seconds: loading the model, or finishing the chunk being indexed


class DaemonError(SparcError):
    """The background watcher could not be started or stopped; str() says why."""


def setup_logging(level: int = logging.INFO) -> logging.Handler:
    """Log sparc_local.* to the rotating watch.log (0600: it names the user's files)."""
    path = log_path()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    handler = RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("sparc_local")
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


class _StateWriter:
    """Writes watch.json when the watcher's status changed (at most once per tick)."""

    def __init__(self) -> None:
        self.path = state_path()
        self.base = dict(pid=os.getpid(), proc_start=proc_start(os.getpid()))
        self.last: dict | None = None

    def __call__(self, status: WatcherStatus, running: bool = True) -> None:
        data = dict(self.base, running=running, **status.to_json())
        if data != self.last:
            write_json(self.path, data)
            self.last = data


def serve(watcher, lock: WriterLock, on_tick: Callable[[WatcherStatus], None] | None = None, tick: float = 1.0) -> None:
    """Run `watcher` until SIGTERM/SIGINT (main thread only), keeping pidfile and state file; then
    stop it, release `lock` and remove the pidfile."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    state = _StateWriter()
    pidfile = pid_path()
    state(watcher.status())  # phase "starting"; whether it takes requests is known from now on
    pidfile.write_text(f"{os.getpid()}\n")
    log.info("watcher started (pid %d) on %s; lock %s", os.getpid(), ", ".join(watcher.roots),
             f"recovered from dead pid {lock.stale.get('pid')}" if lock.stale else "taken")
    try:
        watcher.start(wait=False)
        while not stop.wait(tick):
            status = watcher.status()
            state(status)
            if on_tick is not None:
                on_tick(status)
            if not watcher.running:  # its worker died: exit 1, so a supervisor restarts it
                raise DaemonError(f"the watcher stopped: {status.last_error}", f"See {log_path()}.")
    finally:
        log.info("stopping the watcher (pid %d)", os.getpid())
        watcher.stop()
        state(watcher.status(), running=False)
        with contextlib.suppress(OSError, ValueError):
            if int(pidfile.read_text().split()[0]) == os.getpid():
                pidfile.unlink()
        lock.release()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("watcher stopped")


def run(roots: list[str], model, config: WatchConfig = WatchConfig(), process: WatchProcess = WatchProcess(), *,
        requests: Serve, on_tick: Callable[[WatcherStatus], None] | None = None) -> None:
    """Take the writer lock (LockHeld if another writer has it), then watch until signalled: at
    low CPU and I/O priority (``power.low_priority``), encoding only on mains power, as ``process``
    says; ``requests`` applies what `forget` and `index` leave in the inbox (``app.handoff.serve``)."""
    from sparc_local import power
    from sparc_local.watch.watcher import Watcher

    lock = WriterLock(COMMAND).acquire(process.wait)
    handler = setup_logging()
    try:
        config = dataclasses.replace(config, on_battery=power.on_battery if process.pause_on_battery else None)

        from sparc_local.model.encoder import EncoderFactory

        # the Encoder's small default token budget (512) suits a background process: measured on
        # the shipped model, 1 thread, peak RSS 295 MB instead of 823 MB at 2048, and no slower
        encoder = EncoderFactory(model, process.threads or None)

        # before any thread of the watcher starts: they inherit it
        with power.low_priority(process.low_priority) as prio:
            if prio:
                log.info("running at nice %d, I/O priority %s", power.NICE, prio.io_set)
            # inbox: `forget` and `index` hand their writes to it
            serve(Watcher(roots, model, encoder, config, inbox=inbox_path(), serve=requests), lock, on_tick=on_tick)
    finally:
        lock.release()
        logging.getLogger("sparc_local").removeHandler(handler)
        handler.close()


def watch_args(roots: list[str], config: WatchConfig, process: WatchProcess) -> list[str]:
    """The `watch` command line that hands these settings to the detached process (``SETTINGS``,
    ``config.to_json``)."""
    return [SETTINGS, to_json(config, process), "--", *roots]


def spawn(args: list[str], timeout: float = START_STOP_TIMEOUT) -> int:
    """Start `python -m sparc_local watch ARGS` detached (new session, cwd /); return its pid once
    it runs, or raise DaemonError with what it printed if it exits first."""
    if running_pid() is not None:
        raise DaemonError(f"a watcher is already running (pid {running_pid()})",
                          "Stop it first with `sparc-local watch --stop`.")
    out = out_path()
    with open(out, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "sparc_local", "watch", *args], stdin=subprocess.DEVNULL,
                                stdout=fh, stderr=fh, start_new_session=True, cwd="/", close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            text = out.read_text(errors="replace").strip().removeprefix("Error: ")
            msg, _, remedy = text.partition("\n")
            raise DaemonError(msg or f"the watcher exited with code {code}", remedy)
        if running_pid() == proc.pid:
            return proc.pid
        time.sleep(POLL)
    raise DaemonError(f"the watcher (pid {proc.pid}) did not start within {timeout:.0f}s", f"See {out}.")


def stop(timeout: float = START_STOP_TIMEOUT) -> int | None:
    """SIGTERM the running watcher and wait until it has exited; None if none was running."""
    pid = running_pid()
    if pid is None:
        with contextlib.suppress(OSError):
            pid_path().unlink()
        return None
    start = proc_start(pid)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and proc_start(pid) == start:
        if time.monotonic() > deadline:
            raise DaemonError(f"the watcher (pid {pid}) did not stop within {timeout:.0f}s",
                              f"Kill it with `kill -9 {pid}`; the next start recovers its lock.")
        time.sleep(POLL)
    return pid


def describe(st: WatcherStatus) -> str:
    """The one-line live status of a watcher (for the foreground status line)."""
    when = time.strftime("%H:%M:%S", time.localtime(st.last_batch_at)) if st.last_batch_at else "never"
    line = (f"{st.phase}: {len(st.roots)} roots, queue {st.queue}, {st.indexed} indexed, "
            f"{st.removed} removed, last batch {when}")
    if st.paused:
        line += f", paused {st.paused}"
    if st.missing_roots:
        line += f", missing: {', '.join(st.missing_roots)}"
    if degraded := st.degraded():
        line += f", degraded: {degraded}"
    if st.last_error:
        line += f" | last error: {st.last_error}"
    return line
