"""The single-writer lock, with real processes: holders, waiters, and a holder killed by SIGKILL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.index.lock import LockHeld, WriterLock, holder, lock_path, pid_alive

HOLD = """
import sys, time
from sparc_local.index.lock import WriterLock
WriterLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(120)
"""


def hold_in_subprocess(command: str) -> subprocess.Popen:
    """A real other process holding the lock (same SPARC_LOCAL_HOME)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, command], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_record_and_release(sparc_home: Path):
    lock = WriterLock("sparc-local index").acquire()
    rec = json.loads(lock_path().read_text())
    assert rec["pid"] == os.getpid() and rec["command"] == "sparc-local index"
    assert abs(rec["started_at"] - time.time()) < 5 and rec["hostname"]
    assert lock_path().parent == sparc_home and lock_path().stat().st_mode & 0o777 == 0o600
    assert holder() == rec
    lock.release()
    assert lock_path().read_text() == "" and holder() is None
    with WriterLock("again"):  # free again
        pass


def test_second_writer_gets_a_clear_error_after_waiting():
    with WriterLock("sparc-local watch"):
        t0 = time.monotonic()
        with pytest.raises(LockHeld) as err:
            WriterLock("sparc-local index").acquire(wait=0.3)
        assert time.monotonic() - t0 >= 0.3
    since = time.strftime("%H:%M", time.localtime(err.value.record["started_at"]))
    assert str(err.value) == (f"another sparc-local process is writing the index "
                              f"(pid {os.getpid()}, `sparc-local watch`, since {since})")
    assert "sparc-local watch --stop" in err.value.remedy


def test_waiter_gets_the_lock_when_the_holder_finishes():
    first = WriterLock("sparc-local index").acquire()
    threading.Timer(0.3, first.release).start()
    second = WriterLock("sparc-local index").acquire(wait=5)
    assert second.held and second.stale is None
    second.release()


def test_index_command_fails_while_another_process_writes(tmp_path: Path):
    proc = hold_in_subprocess("sparc-local watch")
    try:
        (tmp_path / "a.txt").write_text("Green tea.")
        result = CliRunner().invoke(app, ["index", str(tmp_path), "--wait", "0.2"])
        assert result.exit_code == 1
        first, second = result.output.splitlines()
        assert re.fullmatch(rf"Error: another sparc-local process is writing the index \(pid {proc.pid}, "
                            r"`sparc-local watch`, since \d\d:\d\d\)", first)
        assert second.startswith("The watcher keeps the index up to date by itself.")
    finally:
        proc.kill()
        proc.wait()


def test_lock_of_a_killed_holder_is_recovered():
    proc = hold_in_subprocess("sparc-local index")
    with pytest.raises(LockHeld):
        WriterLock("sparc-local watch").acquire()
    assert holder()["pid"] == proc.pid
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the kernel dropped the flock; the record left behind is stale and ignored
    assert json.loads(lock_path().read_text())["pid"] == proc.pid
    assert not pid_alive(proc.pid) and holder() is None
    lock = WriterLock("sparc-local watch").acquire()
    assert lock.stale["pid"] == proc.pid
    assert holder()["pid"] == os.getpid() and holder()["command"] == "sparc-local watch"
    lock.release()


def test_pid_alive_treats_zombies_as_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while pid_alive(proc.pid) and time.monotonic() < deadline:  # not reaped yet: a zombie
        time.sleep(0.02)
    assert not pid_alive(proc.pid)
    proc.wait()
    assert pid_alive(os.getpid()) and not pid_alive(None) and not pid_alive(0)
