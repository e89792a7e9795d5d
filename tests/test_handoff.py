"""`forget` and `index` while the watcher runs: the watcher applies them, the user never stops it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.app import handoff
from sparc_local.app.jobs import ForgetRequest
from sparc_local.cli.app import app
from sparc_local.forget import ForgetReport
from sparc_local.index.store import Index
from sparc_local.model.info import ModelInfo
from sparc_local.watch import files as watchfiles
from sparc_local.watch.inbox import Inbox, is_request
from sparc_local.watch.watcher import Watcher
from tests.helpers import cli, indexed_paths, wait_until

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("active_tiny")
SECRET = "Zanzibar vault passphrase"
SUMMARY = r"Indexed {} files \({} sentences\), {} unchanged, {} removed, {} unreadable in \d+\.\ds\.\n"


def _raw(home: Path) -> bytes:
    return b"".join(f.read_bytes() for f in home.iterdir() if f.name.startswith("index.db"))


def _errors(home: Path) -> int:
    """How many unreadable files `status` lists."""
    return len(json.loads(runner.invoke(app, ["status", "--json"]).output)["errors"])


def test_forget_and_index_through_the_running_watcher(tmp_path: Path, sparc_home: Path):
    docs, more = tmp_path / "docs", tmp_path / "more"
    docs.mkdir()
    more.mkdir()
    (docs / "tea.md").write_text("Green tea should steep for three minutes.\n")
    private = docs / "private.txt"
    private.write_text(f"The {SECRET} is in the green book.\n")
    (more / "city.txt").write_text("Paris is the capital of France.\n")
    (more / "bad.pdf").write_bytes(b"not a pdf")
    started = cli(sparc_home, "watch", "--daemon", "--quiet-period", "0.2", str(docs))
    assert started.returncode == 0, started.stderr
    try:
        wait_until(lambda: str(private) in indexed_paths(), "catch-up")
        t0 = time.monotonic()
        result = runner.invoke(app, ["forget", str(private)])
        assert time.monotonic() - t0 < 10
        assert (result.exit_code, result.output) == (
            0, f"Forgot 1 file under {private}; `sparc-local index {private}` brings it back.\n")
        assert indexed_paths() == {str(docs / "tea.md")} and SECRET.encode() not in _raw(sparc_home)
        private.write_text(f"The {SECRET} moved to the red book.\n")  # an edit does not bring it back
        (docs / "new.md").write_text("Black tea takes boiling water.\n")
        wait_until(lambda: str(docs / "new.md") in indexed_paths(), "the batch holding the edit")
        assert str(private) not in indexed_paths()

        result = runner.invoke(app, ["forget", str(docs / "nothere.txt")])  # the watcher's error, as is
        assert (result.exit_code, result.output) == (
            1, f"Error: {docs / 'nothere.txt'} is not in the index\n`sparc-local status` lists the indexed folders.\n")

        result = runner.invoke(app, ["index", str(more)])  # a new folder: indexed, then watched
        assert result.exit_code == 0
        lines = result.output.splitlines(keepends=True)
        assert lines[0] == f"skipped {more / 'bad.pdf'}: not a valid PDF (no %PDF header)\n"
        assert re.fullmatch(SUMMARY.format(1, 1, 0, 0, 1), lines[1]), lines
        (more / "river.txt").write_text("The river bridge was built in 1890.\n")
        wait_until(lambda: str(more / "river.txt") in indexed_paths(), "the new folder is watched")
        for name in ("bad2.pdf", "bad3.pdf"):  # the watcher meets two more unreadable files itself
            (more / name).write_bytes(b"not a pdf either")
        wait_until(lambda: _errors(sparc_home) == 3, "the watcher recorded them")
        result = runner.invoke(app, ["index"])  # handed to the watcher: unreadable files count as such
        assert result.exit_code == 0
        assert re.fullmatch(SUMMARY.format(0, 0, 4, 0, 3), result.output), result.output
        status = runner.invoke(app, ["status", "--json"]).output
        assert f'"roots": [\n  "{docs}",\n  "{more}"\n ]' in status
        assert "applied a request to forget" in (sparc_home / "watch.log").read_text()
        assert not list((sparc_home / watchfiles.INBOX).iterdir())  # every request answered and collected
    finally:
        stopped = cli(sparc_home, "watch", "--stop")
    assert stopped.returncode == 0, stopped.stderr


def test_forget_is_answered_during_a_long_catch_up(tmp_path: Path, tiny_model_dir: Path, sparc_home: Path):
    """A request waits at most one encoder batch, not for the catch-up to end."""
    from sparc_local.model.encoder import Encoder

    docs = tmp_path / "docs"
    docs.mkdir()
    private = docs / "a_private.txt"  # walked first: in the first batch
    private.write_text(f"The {SECRET} is here.\n")
    for i in range(60):
        (docs / f"n{i:02d}.txt").write_text(" ".join(f"Note {i} part {j} is about the river." for j in range(20)))
    info = ModelInfo.load(tiny_model_dir)

    class Slow(Encoder):
        def encode(self, paragraphs, top_k=None, progress=None):
            def slow(n):
                time.sleep(0.03)
                if progress:
                    progress(n)
            return super().encode(paragraphs, top_k, slow)

    w = Watcher([str(docs)], info, lambda: Slow(info, threads=1), inbox=sparc_home / watchfiles.INBOX,
                serve=handoff.serve)
    w.start(wait=False)
    try:
        wait_until(lambda: (sparc_home / "index.db").exists() and str(private) in indexed_paths(), "first batch")
        done = handoff.submit(ForgetRequest(str(private)), os.getpid(), ForgetReport)
        assert not w.ready.is_set(), "answered only after the catch-up"
        assert (done.files, done.path) == (1, str(private))
        w.ready.wait(60)
        files = indexed_paths()
        assert len(files) == 60 and str(private) not in files
        with Index() as idx:
            assert idx.verify() == [] and idx.forgotten() == [str(private)]
    finally:
        w.stop(timeout=30)


HOLDER = """
import os, sys, time
from sparc_local.watch.files import COMMAND, pid_path, state_path
from sparc_local.watch.files import write_json as _write_json
from sparc_local.index.lock import WriterLock
WriterLock(COMMAND).acquire()
pid_path().write_text("%d\\n" % os.getpid())
_write_json(state_path(), dict(pid=os.getpid(), requests=sys.argv[1] == "takes-requests"))
print("holding", flush=True)
time.sleep(120)
"""


def test_command_does_it_itself_when_the_watcher_dies(tmp_path: Path, sparc_home: Path):
    """A watcher killed (kill -9) before it answers: `forget` takes the lock and forgets, same output."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Green tea.\n")
    (docs / "b.txt").write_text("Black tea.\n")
    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "takes-requests"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)})
    assert holder.stdout.readline().strip() == "holding"  # the lock and pid of a watcher that answers nothing
    out = {}
    t = threading.Thread(target=lambda: out.update(r=runner.invoke(app, ["forget", str(docs / "a.txt")])))
    t.start()
    inbox = sparc_home / watchfiles.INBOX
    wait_until(lambda: inbox.exists() and any(is_request(n) for n in os.listdir(inbox)), "request sent")
    holder.kill()
    holder.wait()
    t.join(30)
    assert (out["r"].exit_code, out["r"].output) == (
        0, f"Forgot 1 file under {docs / 'a.txt'}; `sparc-local index {docs / 'a.txt'}` brings it back.\n")
    assert indexed_paths() == {str(docs / "b.txt")} and os.listdir(inbox) == []  # the request was withdrawn


def test_a_watcher_that_takes_no_requests(tmp_path: Path, sparc_home: Path):
    """A watcher whose state file does not say it takes requests (another version): the command
    waits for the lock and says who holds it, as before; one that says so but never takes the
    request: the command gives up after take_timeout with what to do."""
    (tmp_path / "a.txt").write_text("Green tea.\n")
    assert runner.invoke(app, ["index", str(tmp_path), "-q"]).exit_code == 0
    env = {**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)}
    for mode in ("old", "takes-requests"):
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, mode], stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert holder.stdout.readline().strip() == "holding"
            if mode == "old":
                result = runner.invoke(app, ["index", str(tmp_path), "--wait", "0.2"])
                assert result.exit_code == 1
                assert result.output.startswith(f"Error: another sparc-local process is writing the index "
                                                f"(pid {holder.pid}, `sparc-local watch`, since ")
            else:
                with pytest.raises(handoff.WatcherFailed) as err:
                    handoff.submit(ForgetRequest(str(tmp_path)), holder.pid, ForgetReport, take_timeout=0.3)
                assert str(err.value) == f"the watcher (pid {holder.pid}) did not take the request in 0.3s"
                assert err.value.remedy.startswith("Stop it with `sparc-local watch --stop`")
                assert os.listdir(sparc_home / watchfiles.INBOX) == []
        finally:
            holder.kill()
            holder.wait()


def test_a_request_with_an_unknown_field_fails_loudly(tmp_path: Path, sparc_home: Path, monkeypatch):
    """A command of another version (here: a field this one does not know) gets the watcher's
    refusal, with what to do, instead of a request applied without what it asked."""
    from sparc_local.app import wire
    from sparc_local.errors import SparcError

    encode = wire.encode
    monkeypatch.setattr(wire, "encode", lambda value: {**(e := encode(value)), "fields": {**e["fields"], "colour": 1}})
    inbox = Inbox()
    out: dict = {}

    def command() -> None:
        try:
            handoff.submit(ForgetRequest(str(tmp_path)), os.getpid(), ForgetReport, poll=0.01)
        except SparcError as err:
            out["error"] = err

    t = threading.Thread(target=command)
    t.start()
    wait_until(lambda: inbox.pending(), "request sent")
    handoff.serve(inbox, None, None, lambda: None, should_stop=lambda: False, on_done=lambda req, done: None)
    t.join(10)
    err = out["error"]
    assert str(err) == "a ForgetRequest with fields this sparc-local does not know: colour"
    assert err.remedy == wire.SAME_VERSION and "sparc-local watch --stop" in err.remedy


def test_the_wire_refuses_another_version_and_round_trips_its_own():
    from sparc_local.app import wire
    from sparc_local.app.jobs import IndexRequest
    from sparc_local.index_options import IndexOptions
    from sparc_local.pipeline import IndexReport

    request = IndexRequest(("/r",), IndexOptions(exclude=["*.log"], max_sentences=7), threads=2)
    data = json.loads(json.dumps(wire.encode(request)))
    assert wire.decode(data, IndexRequest, ForgetRequest) == request
    report = IndexReport(indexed=2, errors=[("/r/a.pdf", "damaged")], skipped=[("/r/b", "too big")])
    assert wire.decode(json.loads(json.dumps(wire.encode(report))), IndexReport) == report
    with pytest.raises(wire.WireMismatch, match="format version 0") as err:
        wire.decode({**data, "version": 0}, IndexRequest)
    assert err.value.remedy == wire.SAME_VERSION
    with pytest.raises(wire.WireMismatch, match="unknown kind 'IndexRequest'"):
        wire.decode(data, ForgetRequest)
    with pytest.raises(wire.WireMismatch, match="does not know: colour"):
        wire.decode({**data, "fields": {**data["fields"], "options": {"colour": 1}}}, IndexRequest)
    with pytest.raises(wire.WireMismatch, match="cannot read"):  # a field it lacks
        wire.decode({**wire.encode(ForgetRequest("/r")), "fields": {}}, ForgetRequest)
    legacy = {"kind": "forget", "args": {"path": "/r"}, "pid": 1}  # an older command's request
    with pytest.raises(wire.WireMismatch, match="format version None"):
        wire.decode(legacy, IndexRequest, ForgetRequest)
