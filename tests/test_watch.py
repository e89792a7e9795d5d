"""`watch` on the real filesystem: a real watchdog observer, a real index, the tiny model.

Every wait is bounded: the index is polled until a deadline. The in-process Watcher runs in a
background thread with a short quiet period; one test runs the real `--daemon` / `--stop` path.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.index.lock import WriterLock
from sparc_local.index.store import Index
from sparc_local.model.info import ModelInfo
from sparc_local.query.ask import Asker
from sparc_local.watch.config import WatchConfig
from sparc_local.watch.watcher import Watcher
from tests.helpers import cli as run_cli

DEADLINE = 15.0
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("active_tiny")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tea.md").write_text("Green tea should steep for three minutes.\n")
    return folder


@pytest.fixture
def start(tiny_model_dir: Path):
    """start(roots, **options) -> a running Watcher (catch-up done); all stopped at teardown."""
    started: list[Watcher] = []
    info = ModelInfo.load(tiny_model_dir)

    def _start(roots: list[Path], **kw) -> Watcher:
        from sparc_local.model.encoder import Encoder

        opts = dict(quiet_period=0.2, max_delay=2.0, root_poll=0.3, retry_delays=(0.2, 0.2, 0.2), busy_delay=0.2)
        w = Watcher([str(r) for r in roots], info, lambda: Encoder(info, threads=1), WatchConfig(**{**opts, **kw}))
        started.append(w)
        w.start(timeout=DEADLINE)
        assert w.ready.is_set()
        return w

    yield _start
    for w in started:
        w.stop(timeout=DEADLINE)


def until(pred: Callable[[Index], object], what: str, timeout: float = DEADLINE):
    """Poll the index (a reader, as `ask` is) until pred holds."""
    end = time.monotonic() + timeout
    with Index() as idx:
        while True:
            value = pred(idx)
            if value:
                return value
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for: {what}")
            time.sleep(0.05)


def indexed(idx: Index) -> set[str]:
    return {f.path for f in idx.all_files()}


def top(idx: Index, question: str) -> str | None:
    answers = Asker(idx, ModelInfo.load(Path(os.environ["SPARC_LOCAL_HOME"], "active-model").read_text())).ask(
        question, k=1)
    return answers[0].sentence if answers else None


def test_catch_up_create_edit_delete(root: Path, start):
    w = start([root])
    with Index() as idx:  # catch-up indexed what was already there before start() returned
        assert indexed(idx) == {str(root / "tea.md")}
    (root / "city.txt").write_text("Paris is the capital of France.\n")
    until(lambda i: top(i, "capital of france") == "Paris is the capital of France.", "create")
    (root / "city.txt").write_text("London is the capital of England.\n")
    until(lambda i: top(i, "capital london") == "London is the capital of England.", "edit")
    (root / "city.txt").unlink()
    until(lambda i: indexed(i) == {str(root / "tea.md")}, "delete")
    until(lambda i: w.status().queue == 0, "queue drained")  # (a deletion is applied ahead of its batch)
    assert w.status().last_error is None


def test_forgotten_file_stays_forgotten_when_edited(root: Path, start):
    """forget, then watch, then edit the file: neither the catch-up nor the live event brings it
    back; only `sparc-local index PATH` does (and it stays no root of its own)."""
    private = root / "private.txt"
    private.write_text("The bank PIN is in the green book.\n")
    assert runner.invoke(app, ["index", str(root), "-q"]).exit_code == 0
    assert runner.invoke(app, ["forget", str(private)]).exit_code == 0
    w = start([root])
    with Index() as idx:
        assert indexed(idx) == {str(root / "tea.md")}
    private.write_text("The bank PIN is four nine two one, in the green book.\n")
    (root / "city.txt").write_text("Paris is the capital of France.\n")  # its batch applies the edit too
    until(lambda i: str(root / "city.txt") in indexed(i), "the batch holding the edit")
    with Index() as idx:
        assert indexed(idx) == {str(root / "tea.md"), str(root / "city.txt")}
        assert idx.conn.execute("SELECT count(*) FROM sentences WHERE text LIKE '%bank PIN%'").fetchone()[0] == 0
    assert w.status().last_error is None
    w.stop(timeout=DEADLINE)
    assert runner.invoke(app, ["index", str(private), "-q"]).exit_code == 0
    with Index() as idx:
        assert str(private) in indexed(idx) and idx.roots() == [str(root)]


def test_watched_files_never_become_roots(root: Path, start):
    """A file the watcher indexes is no root: once deleted, `status` does not list it and a
    plain `index` does not stop on it."""
    w = start([root])
    (root / "b.txt").write_text("Bees make honey in the hive.\n")
    until(lambda i: str(root / "b.txt") in indexed(i), "create")
    (root / "b.txt").unlink()
    until(lambda i: str(root / "b.txt") not in indexed(i), "delete")
    w.stop(timeout=DEADLINE)
    with Index() as idx:
        assert idx.conn.execute("SELECT path FROM roots").fetchall() == [(str(root),)]
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["roots"] == [str(root)]
    result = runner.invoke(app, ["index", "-q"])
    assert (result.exit_code, result.output) == (0, "")


def test_model_is_unloaded_when_idle(root: Path, start):
    w = start([root], encoder_idle=0.5)
    (root / "city.txt").write_text("Paris is the capital of France.\n")
    until(lambda i: str(root / "city.txt") in indexed(i), "create")
    deadline = time.monotonic() + DEADLINE
    while w.status().model_loaded:
        assert time.monotonic() < deadline, "model still loaded"
        time.sleep(0.05)
    (root / "city.txt").write_text("London is the capital of England.\n")  # loads it again
    until(lambda i: top(i, "capital london") == "London is the capital of England.", "edit")


def test_small_segments_are_compacted_when_idle(root: Path, start):
    """Each event batch adds a small segment; once the watcher is idle they become one."""
    (root / "big.txt").write_text(" ".join(f"Sentence {i} is about topic number {i}." for i in range(300)))
    start([root], encoder_idle=0.3)
    for i in range(3):
        (root / f"n{i}.txt").write_text(f"Note {i} mentions the colour blue.\n")
        until(lambda idx, i=i: str(root / f"n{i}.txt") in indexed(idx), f"note {i}")
    until(lambda idx: len(idx.segments()) == 2, "the notes' segments compacted into one")
    with Index() as idx:
        assert idx.verify() == [] and str(root / "n2.txt") in indexed(idx)


def test_atomic_save_rename_and_ignored_paths(root: Path, start, tmp_path: Path):
    data = root / "appdata"
    start([root], data_dir=data, exclude=["*.log.md", "build"])
    target = root / "tea.md"
    # an editor's atomic save: write a temp file (hidden, or of another type), rename it over
    (root / ".tea.md.swp").write_text("Black tea needs boiling water.\n")
    os.replace(root / ".tea.md.swp", target)
    until(lambda i: top(i, "black tea boiling water") == "Black tea needs boiling water.", "atomic save")
    (root / "tea.md.tmp~").write_text("Green tea is a river.\n")
    os.replace(root / "tea.md.tmp~", target)
    until(lambda i: top(i, "green tea river") == "Green tea is a river.", "second atomic save")
    os.rename(target, root / "drinks.md")
    until(lambda i: indexed(i) == {str(root / "drinks.md")}, "rename")
    # none of these may reach the index: hidden, excluded (name and folder), unsupported, data dir
    (root / ".secret.md").write_text("The hidden piano is here.\n")
    (root / "run.log.md").write_text("The excluded piano is here.\n")
    (root / "build").mkdir()
    (root / "build" / "out.md").write_text("The built piano is here.\n")
    (root / "image.png").write_bytes(b"\x89PNG piano")
    data.mkdir()
    (data / "notes.md").write_text("The data dir piano is here.\n")
    (root / "ok.md").write_text("The real piano is here.\n")
    until(lambda i: str(root / "ok.md") in indexed(i), "ok.md")
    time.sleep(0.4)  # let any straggling event of the ignored files be processed
    with Index() as idx:
        assert indexed(idx) == {str(root / "drinks.md"), str(root / "ok.md")}


def test_folders_moved_in_renamed_and_out(root: Path, start, tmp_path: Path):
    start([root])
    outside = tmp_path / "outside"
    (outside / "trip" / "inner").mkdir(parents=True)
    (outside / "trip" / "museum.md").write_text("The museum ticket costs ten euros.\n")
    (outside / "trip" / "inner" / "train.txt").write_text("The train station is near the river.\n")
    shutil.move(str(outside / "trip"), str(root / "trip"))
    want = {str(root / "tea.md"), str(root / "trip" / "museum.md"), str(root / "trip" / "inner" / "train.txt")}
    until(lambda i: indexed(i) == want, "folder moved in")
    os.rename(root / "trip", root / "journey")
    want = {p.replace(str(root / "trip"), str(root / "journey")) for p in want}
    until(lambda i: indexed(i) == want, "folder renamed")
    assert until(lambda i: top(i, "museum ticket"), "answerable after rename") == "The museum ticket costs ten euros."
    shutil.move(str(root / "journey"), str(outside / "journey"))
    until(lambda i: indexed(i) == {str(root / "tea.md")}, "folder moved out")


def test_burst_of_500_files_while_asking(root: Path, start):
    start([root], max_delay=1.0)
    t0 = time.monotonic()
    answered = []
    for i in range(500):
        sub = root / f"d{i % 10}"
        sub.mkdir(exist_ok=True)
        (sub / f"note{i}.txt").write_text(f"Note {i} says the piano school opens at nine.\n")
        if i % 50 == 49:  # `ask` keeps answering while the watcher writes (SQLite WAL, no lock taken)
            result = runner.invoke(app, ["ask", "piano school", "--json", "-k", "1"])
            assert result.exit_code == 0, result.output
            answered.append(len(json.loads(result.output)))
    while True:  # keep asking while the watcher indexes the burst
        result = runner.invoke(app, ["ask", "piano school", "--json", "-k", "1"])
        assert result.exit_code == 0, result.output
        answered.append(len(json.loads(result.output)))
        with Index() as idx:
            if len(idx.all_files()) == 501:
                break
        assert time.monotonic() - t0 < 30, "burst not indexed in time"
    assert answered[-1] == 1
    with Index() as idx:
        assert idx.stats()["sentences"] == 501 and not idx.stats()["errors"]


def test_restart_catches_up(root: Path, start):
    w = start([root])
    (root / "a.txt").write_text("The battery needs two hours to charge.\n")
    until(lambda i: str(root / "a.txt") in indexed(i), "a.txt")
    w.stop(timeout=DEADLINE)
    assert not w.running
    # changes made while nothing watches
    (root / "a.txt").write_text("The phone battery lasts ten hours.\n")
    (root / "tea.md").unlink()
    (root / "b.txt").write_text("The warranty covers the screen.\n")
    start([root])  # start() returns after the catch-up
    with Index() as idx:
        assert indexed(idx) == {str(root / "a.txt"), str(root / "b.txt")}
        assert top(idx, "phone battery hours") == "The phone battery lasts ten hours."


def test_unreadable_file_waits_for_its_next_event(root: Path, start, caplog):
    """Read once and recorded, not retried in a loop: it is no pending work (queue 0), and reading
    it again unchanged would only fail again."""
    caplog.set_level(logging.INFO, logger="sparc_local.watch.watcher")
    w = start([root])
    bad = root / "notes.txt"
    bad.write_bytes(bytes(range(256)) * 2)  # half-written garbage: not text
    until(lambda i: (r := i.file(str(bad))) is not None and r.status == "error", "error recorded")
    until(lambda i: w.status().queue == 0, "queue drained")
    time.sleep(1.0)  # the quiet period and every retry delay (0.2 s) over several times
    assert w.status().queue == 0
    assert caplog.text.count(f"skipped {bad}") == 1
    assert caplog.text.count("batch of 1 paths: 0 indexed, 0 removed, 1 failed") == 1
    # finished later with the very same size and mtime: still read again, on its next event
    st = bad.stat()
    bad.write_text("The river bridge was built in 1890.".ljust(st.st_size - 1) + "\n")
    os.utime(bad, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert bad.stat().st_size == st.st_size
    until(lambda i: top(i, "river bridge built") == "The river bridge was built in 1890.", "fixed file")
    until(lambda i: w.status().queue == 0, "queue drained")  # the utime event may still be pending
    assert w.running


def test_busy_database_is_retried(root: Path, start, sparc_home: Path):
    w = start([root], busy_timeout_ms=100)
    blocker = sqlite3.connect(sparc_home / "index.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds SQLite's write lock
    try:
        (root / "city.txt").write_text("Paris is the capital of France.\n")
        deadline = time.monotonic() + DEADLINE
        while "locked" not in (w.status().last_error or ""):
            assert time.monotonic() < deadline, "no busy error recorded"
            time.sleep(0.05)
    finally:
        blocker.execute("COMMIT")
        blocker.close()
    until(lambda i: str(root / "city.txt") in indexed(i), "indexed after the database is free")
    assert w.running


def test_root_disappears_and_comes_back(root: Path, start, tmp_path: Path):
    w = start([root])
    away = tmp_path / "unmounted"
    os.rename(root, away)
    deadline = time.monotonic() + DEADLINE
    while w.status().missing_roots != [str(root)]:
        assert time.monotonic() < deadline, "missing root not noticed"
        time.sleep(0.05)
    (away / "later.txt").write_text("The king built the tower.\n")  # changed while away
    os.rename(away, root)
    until(lambda i: str(root / "later.txt") in indexed(i), "re-indexed on return")
    (root / "new.txt").write_text("The queen played the piano.\n")
    until(lambda i: str(root / "new.txt") in indexed(i), "watched again")
    assert w.status().missing_roots == []


def test_polling_observer(root: Path, start):
    w = start([root], polling=True, poll_interval=0.2)
    assert w.status().observer == "polling"
    (root / "poll.txt").write_text("The flour goes into the oven.\n")
    until(lambda i: str(root / "poll.txt") in indexed(i), "polled change")


ENOSPC_SCRIPT = """
import json, sys, time
from pathlib import Path
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.index.store import Index
from sparc_local.watch.config import WatchConfig
from sparc_local.watch.watcher import Watcher
info, root = ModelInfo.load(Path(sys.argv[1])), Path(sys.argv[2])
w = Watcher([str(root)], info, lambda: Encoder(info, threads=1), WatchConfig(quiet_period=0.2, poll_interval=0.2))
w.start(timeout=15)
(root / "d9" / "deep.txt").write_text("Green tea is deep in the folder tree.")
end = time.monotonic() + 15
while time.monotonic() < end:
    with Index() as idx:
        files = [f.path for f in idx.all_files()]
    if len(files) == 2:
        break
    time.sleep(0.05)
st = w.status()
w.stop()
print(json.dumps(dict(observer=st.observer, watched=st.watched, polled=st.polled, degraded=st.degraded(),
                      files=files)))
"""


def test_inotify_watch_limit_polls_the_folders_left_unwatched(root: Path, tiny_model_dir: Path):
    """A real kernel limit: 5 inotify watches, in a user namespace of its own (so nothing else on
    the machine is affected), for a root with 10 subfolders: the root and 4 of them are watched,
    the other 6 polled, and a file written in one of those is indexed."""
    if not shutil.which("unshare") or subprocess.run(["unshare", "-U", "-r", "true"]).returncode != 0:
        pytest.skip("needs unprivileged user namespaces (unshare -U -r)")
    for i in range(10):
        (root / f"d{i}").mkdir()
    limited = 'echo 5 > /proc/sys/user/max_inotify_watches && exec "$@"'
    out = subprocess.run(["unshare", "-U", "-r", "sh", "-c", limited, "sh", sys.executable, "-c", ENOSPC_SCRIPT,
                          str(tiny_model_dir), str(root)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["observer"], result["watched"], result["polled"]) == ("inotify", 5, 6)
    assert sorted(result["files"]) == [str(root / "d9" / "deep.txt"), str(root / "tea.md")]
    assert "the OS limit on watched folders (5 inotify watches) is reached: 6 folders" in out.stderr
    assert result["degraded"] == ("6 of 11 folders polled every 0.2s: the OS limit of 5 watches is reached "
                                  "(raise fs.inotify.max_user_watches)")


def test_second_writer_is_refused_while_watching(root: Path, start):
    lock = WriterLock("sparc-local watch").acquire()
    try:
        start([root])
        result = runner.invoke(app, ["index", str(root), "--wait", "0.2"])
        assert result.exit_code == 1
        assert result.output.startswith("Error: another sparc-local process is writing the index "
                                        f"(pid {os.getpid()}, `sparc-local watch`, since ")
        result = runner.invoke(app, ["watch", str(root)])
        assert result.exit_code == 1 and "`sparc-local watch`" in result.output
    finally:
        lock.release()


def test_daemon_start_status_stop(root: Path, sparc_home: Path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return run_cli(sparc_home, *args, timeout=60)

    started = cli("watch", "--daemon", "--quiet-period", "0.2", str(root))
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    try:
        assert (sparc_home / "watch.pid").read_text().strip() == str(pid)
        until(lambda i: str(root / "tea.md") in indexed(i), "daemon catch-up")
        (root / "daemon.txt").write_text("The bread needs flour and an oven.\n")
        until(lambda i: str(root / "daemon.txt") in indexed(i), "daemon indexes a change")

        def watch_status(_: Index) -> dict | None:  # the queue drains once the batch is encoded too
            st = json.loads(runner.invoke(app, ["status", "--json"]).output)["watch"]
            return st if st["queue"] == 0 else None

        st = until(watch_status, "the daemon's queue drains")
        assert st["running"] and st["pid"] == pid and st["since"] <= time.time() and st["queue"] == 0
        assert st["last_error"] is None
        assert "Watcher:      running (pid" in runner.invoke(app, ["status"]).output
        again = cli("index", "--wait", "0")  # handed to the watcher, which answers as `index` would
        assert (again.returncode, again.stderr) == (0, "")
        assert re.fullmatch(r"Indexed 0 files \(0 sentences\), 2 unchanged, 0 removed, 0 unreadable in \d+\.\ds\.\n",
                            again.stdout)
        assert "already running" in cli("watch", "--daemon").stderr
    finally:
        stopped = cli("watch", "--stop")
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"Stopped the watcher (pid {pid})."
    assert not (sparc_home / "watch.pid").exists()
    st = json.loads(runner.invoke(app, ["status", "--json"]).output)["watch"]
    assert st == {"running": False, "pid": None, "since": None, "queue": 0, "paused": None, "last_error": None,
                  "degraded": None}
    assert "watcher started" in (sparc_home / "watch.log").read_text()
    WriterLock("sparc-local index").acquire().release()  # the lock was released
    assert cli("watch", "--stop").stdout.strip() == "No watcher is running."


def test_service_install_uninstall(tmp_path: Path, monkeypatch):
    from sparc_local.watch import service

    monkeypatch.setenv(service.ENV_DIR, str(tmp_path / "units"))
    result = runner.invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    unit = tmp_path / "units" / "sparc-local-watch.service"
    text = unit.read_text()
    assert f"ExecStart={sys.executable} -m sparc_local watch\n" in text
    assert f"Environment=SPARC_LOCAL_HOME={os.environ['SPARC_LOCAL_HOME']}\n" in text
    assert "WantedBy=default.target" in text
    assert "systemctl --user enable --now sparc-local-watch" in result.output
    wants = tmp_path / "units" / "default.target.wants"
    wants.mkdir()
    (wants / unit.name).symlink_to(unit)
    refused = runner.invoke(app, ["service", "uninstall"])
    assert refused.exit_code == 1 and "systemctl --user disable --now sparc-local-watch" in refused.output
    (wants / unit.name).unlink()
    assert runner.invoke(app, ["service", "uninstall"]).exit_code == 0 and not unit.exists()
    assert "No service was installed." in runner.invoke(app, ["service", "uninstall"]).output

    import plistlib

    agent = service.install(platform="darwin", directory=tmp_path / "agents")
    plist = plistlib.loads(agent.path.read_bytes())
    assert plist["ProgramArguments"] == [sys.executable, "-m", "sparc_local", "watch"]
    assert plist["RunAtLoad"] and agent.enable.startswith("launchctl bootstrap")


def test_ask_and_status_stay_light(root: Path, sparc_home: Path):
    """`ask` imports neither watchdog nor the writer-side modules; `status` never takes the lock."""
    assert runner.invoke(app, ["index", str(root), "-q"]).exit_code == 0
    code = ("import sys; from typer.testing import CliRunner; from sparc_local.cli.app import app; "
            "r = CliRunner().invoke(app, ['ask', 'green tea']); assert r.exit_code == 0, r.output; "
            "print([m for m in sys.modules if m.startswith('watchdog') or m in "
            "('sparc_local.watch.watcher', 'sparc_local.watch.daemon', 'sparc_local.index.lock', 'sparc_local.watch.service')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    with WriterLock("sparc-local watch"):
        result = runner.invoke(app, ["status"])
        assert result.exit_code == 0 and "Watcher:      not running" in result.output


def test_name_that_is_not_utf8(root: Path, start):
    """Such a name is stored as its \\xNN key (extract.path_key); the watcher must use that key
    too, or a folder rescan would take the file for deleted and a delete would reach SQLite raw."""
    raw = os.path.join(os.fsencode(root), b"caf\xe9.txt")
    with open(raw, "w") as fh:
        fh.write("Espresso is brewed under pressure.\n")
    key = str(root / "caf\\xe9.txt")
    w = start([root])
    until(lambda i: key in indexed(i), "indexed at catch-up")
    (root / "sub").mkdir()  # a folder event: rescans must keep the file
    (root / "sub" / "tea2.md").write_text("Oolong is partly oxidised.\n")
    until(lambda i: str(root / "sub" / "tea2.md") in indexed(i), "folder event")
    assert key in indexed(Index())
    os.unlink(raw)
    until(lambda i: key not in indexed(i), "delete")
    assert w.status().last_error is None


def test_run_index_stops_when_asked(root: Path, tiny_model_dir: Path):
    """should_stop is asked before each file: the batches committed before it said so stay, the
    report says the run stopped, and the next run does the rest."""
    from sparc_local.index_options import IndexOptions
    from sparc_local.model.encoder import Encoder
    from sparc_local.pipeline import run_index

    for i in range(5):
        (root / f"n{i}.txt").write_text(f"Note {i} is about the harbour.\n")
    info = ModelInfo.load(tiny_model_dir)
    asked = []
    with Index() as idx:
        rep = run_index(idx, [str(root)], info, lambda: Encoder(info, threads=1), IndexOptions(batch_sentences=1),
                        should_stop=lambda: asked.append(1) or len(asked) > 3)
        assert (rep.stopped, rep.indexed, len(asked)) == (True, 3, 4)  # one file per batch
        assert len(indexed(idx)) == 3 and idx.verify() == []
        rep = run_index(idx, [str(root)], info, lambda: Encoder(info, threads=1))
        assert (rep.stopped, rep.indexed, rep.unchanged) == (False, 3, 3)
        assert len(indexed(idx)) == 6


def test_backlog_debounces_and_retries_only_failed_batches(caplog):
    from sparc_local.watch.backlog import Backlog

    caplog.set_level(logging.WARNING, logger="sparc_local.watch.watcher")
    backlog = Backlog(quiet_period=5.0, max_delay=60.0, retry_delays=(5.0,))
    backlog.add("/r/a.txt", False)
    backlog.add("/r/sub", True)
    backlog.add("/r/a.txt", False)
    now = time.monotonic()
    assert backlog.take(now) is None and backlog.size() == 2  # not quiet yet
    batch = backlog.take(now + 5.0)
    assert batch == {"/r/a.txt": False, "/r/sub": True} and backlog.size() == 2  # in flight
    backlog.left(1)
    assert backlog.size() == 1
    backlog.done(batch)  # a.txt could not be read: it waits for its next event, no retry is due
    assert backlog.size() == 0 and backlog.take(time.monotonic() + 3600.0) is None
    backlog.add("/r/a.txt", False)  # it changed: read again
    batch = backlog.take(time.monotonic() + 5.0)
    assert batch == {"/r/a.txt": False}
    backlog.failed(batch, "OSError: boom")  # the batch failed whole: taken again later
    assert backlog.size() == 1
    now = time.monotonic()
    assert backlog.take(now) is None
    retry = backlog.take(now + 5.0)
    assert retry == {"/r/a.txt": False}
    backlog.requeue(retry)  # put back whole (e.g. on battery): pending again, no attempt spent
    assert backlog.size() == 1 and backlog.take(time.monotonic()) is None
    retry = backlog.take(time.monotonic() + 5.0)
    backlog.failed(retry, "OSError: boom")
    assert backlog.size() == 0 and "giving up on /r/a.txt after 2 attempts: OSError: boom" in caplog.text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_proc_start_of_a_process_with_parentheses_in_its_name():
    """/proc/<pid>/stat holds the command name in parentheses, and a name may hold ") (" itself."""
    from sparc_local.index.lock import pid_alive, proc_stat
    from sparc_local.watch.files import proc_start

    code = "import ctypes, sys, time; ctypes.CDLL(None).prctl(15, b'a) b (c', 0, 0, 0); print(1, flush=True); " \
           "time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "1\n"
        assert Path(f"/proc/{child.pid}/comm").read_text() == "a) b (c\n"
        assert proc_stat(child.pid)[0] in ("S", "R") and pid_alive(child.pid)  # sleeping, or not yet
        mine, theirs = proc_start(os.getpid()), proc_start(child.pid)
        assert mine.isdigit() and theirs.isdigit() and int(theirs) >= int(mine)  # started after this test
    finally:
        child.kill()
        child.wait()
    assert proc_start(child.pid) is None and proc_stat(child.pid) is None and not pid_alive(child.pid)


def test_watcher_status_and_index_options_round_trip_through_json():
    """watch.json and the `index` handoff carry these records; a key they do not know (the
    daemon's pid, an older or newer version's field) is ignored, a missing one takes its default."""
    from sparc_local.index_options import IndexOptions
    from sparc_local.watch.state import Phase, WatcherStatus

    st = WatcherStatus(phase=Phase.PAUSED, queue=3, paused="on battery power", roots=["/r"], requests=True)
    assert WatcherStatus.from_json(json.loads(json.dumps({**st.to_json(), "pid": 7}))) == st
    assert WatcherStatus.from_json({"phase": "dreaming", "queue": 2}) == WatcherStatus(queue=2)
    opts = IndexOptions(exclude=["*.log"], include_hidden=True, max_sentences=7, prune=False)
    assert IndexOptions.from_json(json.loads(json.dumps({**opts.to_json(), "paths": ["/r"]}))) == opts
    assert IndexOptions.from_json({}) == IndexOptions()
