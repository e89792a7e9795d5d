"""The watcher when things go wrong: events lost (an inotify queue overflow), a file deleted while a
long catch-up encodes, a file the catch-up fails on. Real files, a real index, the tiny model; the
encoder is held or made to fail by a thin double around the real one."""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local import pipeline
from sparc_local.cli.app import app
from sparc_local.index.store import Index
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.query.ask import Asker
from sparc_local.watch import inotify
from sparc_local.watch.config import WatchConfig
from sparc_local.watch.files import pid_path
from sparc_local.watch.rescan import Rescans
from sparc_local.watch.watcher import Watcher

DEADLINE = 15.0
FAST = dict(quiet_period=0.2, max_delay=2.0, root_poll=0.3, retry_delays=(0.2, 0.2, 0.2), busy_delay=0.2)
PRIVATE = "The vault code is zebra kiwi mango."

pytestmark = [pytest.mark.usefixtures("active_tiny"),
              pytest.mark.skipif(not inotify.supported(), reason="inotify is Linux's")]


def until(pred: Callable[[], object], what: str, timeout: float = DEADLINE):
    end = time.monotonic() + timeout
    while not (value := pred()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.05)
    return value


def answers(question: str) -> list[tuple[str, str]]:
    """(path, sentence) of `ask`'s answers, read as `ask` reads them (a separate reader)."""
    info = ModelInfo.load(Path(os.environ["SPARC_LOCAL_HOME"], "active-model").read_text())
    with Index() as idx:
        return [(a.path, a.sentence) for a in Asker(idx, info).ask(question, k=10)]


def files() -> dict[str, tuple[str, str | None, int]]:
    """path -> (status, error, sentences) of every file the index holds."""
    with Index() as idx:
        return {f.path: (f.status, f.error, f.n_sentences) for f in idx.all_files()}


def all_encoded() -> bool:
    with Index() as idx:
        done, total = idx.encoded_counts()
    return total > 0 and done == total


class Gated:
    """The tiny model's encoder held at a gate: until the test opens it, each call only reports
    progress now and then, as a slow real encoder does between its batches; ``fail`` makes a
    call whose sentences hold that word raise MemoryError."""

    def __init__(self, info: ModelInfo, fail: str | None = None) -> None:
        self.inner, self.fail = Encoder(info, threads=1), fail
        self.gate, self.waiting = threading.Event(), threading.Event()
        self.failed = 0
        self.gate.set()

    def encode(self, paragraphs, top_k=None, progress=None):
        while not self.gate.wait(0.05):
            self.waiting.set()
            if progress:
                progress(0)
        if self.fail and any(self.fail in s for para in paragraphs for s in para):
            self.failed += 1
            raise MemoryError
        return self.inner.encode(paragraphs, top_k=top_k, progress=progress)


@pytest.fixture
def watchers(tiny_model_dir: Path):
    """watch(roots, encoder=None, wait=True, **config) -> a started Watcher; all stopped at teardown."""
    started: list[Watcher] = []
    info = ModelInfo.load(tiny_model_dir)

    def watch(roots: list[Path], encoder: Gated | None = None, wait: bool = True, **kw) -> Watcher:
        factory = (lambda: encoder) if encoder is not None else (lambda: Encoder(info, threads=1))
        w = Watcher([str(r) for r in roots], info, factory, WatchConfig(**{**FAST, **kw}))
        started.append(w)
        w.start(wait=wait, timeout=DEADLINE)
        return w

    yield watch
    for w in started:
        w.stop(timeout=DEADLINE)


def overflow(w: Watcher) -> None:
    """What the kernel reads out when its inotify queue overflowed: one IN_Q_OVERFLOW, wd -1."""
    w._observation._native.handle(struct.pack("iIII", -1, inotify.IN_Q_OVERFLOW, 0, 0))


def test_rescans_wait_doubling_to_a_cap_and_never_pile_up():
    r = Rescans(first=2.0, cap=8.0)
    assert not r.due(0.0)  # no overflow, no rescan
    r.overflowed(now=0.0)
    assert r.due(0.0) and not r.due(0.0)  # the first at once, and once
    for t in (0.5, 0.6, 0.7):  # overflows while it runs: one more rescan, after the wait
        r.overflowed(now=t)
    assert not r.due(1.9) and r.due(2.0)
    r.overflowed(now=2.1)
    assert not r.due(5.9) and r.due(6.0)  # twice the wait
    r.overflowed(now=6.1)
    assert not r.due(13.9) and r.due(14.0)  # 8: the cap
    r.overflowed(now=14.1)
    assert not r.due(21.9) and r.due(22.0)  # still the cap
    r.overflowed(now=40.0)  # after a quiet spell as long as the cap: the first wait again
    assert r.due(40.0)
    r.overflowed(now=40.1)
    assert not r.due(41.9) and r.due(42.0)
    assert (r.overflows, r.rescans) == (9, 7)


def test_a_walk_of_the_watched_tree_queues_no_event(tmp_path: Path, watchers):
    """5,051 folders: watchdog's mask (opens and closes of folders) queued about four events per
    folder for a walk, past the kernel's default queue of 16,384, and overflowed."""
    root = tmp_path / "tree"
    for i in range(5000):
        (root / f"d{i % 50:02d}" / f"e{i:04d}").mkdir(parents=True)
    w = watchers([root])
    assert (w.status().observer, w.status().watched) == ("inotify", 5051)
    for _ in range(3):
        for folder, _, names in os.walk(root):
            for name in names:
                Path(folder, name).read_bytes()
    (root / "d07" / "e0007" / "new.txt").write_text("The train station has a museum.\n")
    until(lambda: str(root / "d07" / "e0007" / "new.txt") in files(), "the new file indexed")
    assert w.status().overflows == 0 and w.status().degraded() is None


def test_inotify_overflow_rescans_once_with_backoff(tmp_path: Path, watchers, sparc_home: Path, caplog):
    caplog.set_level(logging.INFO, logger="sparc_local.watch.watcher")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "tea.md").write_text("Green tea should steep for three minutes.\n")
    w = watchers([root], rescan_delay=1.0, rescan_max_delay=4.0)
    tree = w._observation._native
    tree._drop_under(str(root / "sub"))  # its events are lost from here on, as in an overflow
    lost = root / "sub" / "lost.txt"
    lost.write_text("The river bridge was built in 1890.\n")
    (root / "sub" / "later").mkdir()
    overflow(w)
    until(lambda: str(lost) in files(), "the rescan indexes what the lost events were about")
    assert tree.watching(str(root / "sub")) and tree.watching(str(root / "sub" / "later"))  # watched again
    for _ in range(3):  # more overflows during the back-off: one more rescan, not three
        overflow(w)
    until(lambda: w.status().rescans == 2 and w.status().phase == "watching", "the second rescan")
    st = w.status()
    assert (st.overflows, st.rescans) == (4, 2)
    assert caplog.text.count("events were lost (the OS event queue overflowed)") == 2
    (root / "sub" / "later" / "new.txt").write_text("The queen played the piano.\n")  # events flow again
    until(lambda: str(root / "sub" / "later" / "new.txt") in files(), "a change after the rescans")
    assert w.status().rescans == 2

    from sparc_local.watch.daemon import _StateWriter

    _StateWriter()(w.status())  # as the daemon writes it each tick
    pid_path().write_text(f"{os.getpid()}\n")
    out = CliRunner().invoke(app, ["status"]).output
    assert "degraded: the OS event queue overflowed 4 times: events were lost, 2 rescans" in out


def test_delete_during_catch_up_is_gone_before_it_ends(tmp_path: Path, watchers, tiny_model_dir: Path):
    """A deleted private file leaves `ask`'s answers while the catch-up is still encoding (the
    encoder is held), and the batch it was part of does not write it back."""
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(30):
        (root / f"note{i:02d}.txt").write_text(f"The city museum opens at {i} hours. The train station is old. "
                                               "The book has a page on music.\n")
    private = root / "private.txt"
    private.write_text(f"{PRIVATE}\n")
    encoder = Gated(ModelInfo.load(tiny_model_dir))
    encoder.gate.clear()
    w = watchers([root], encoder=encoder, wait=False)
    until(lambda: (str(private), PRIVATE) in answers("vault code zebra kiwi mango"), "the private file answerable")
    until(encoder.waiting.is_set, "the catch-up encoding")
    private.unlink()
    until(lambda: (str(private), PRIVATE) not in answers("vault code zebra kiwi mango"), "the deletion applied")
    assert str(private) not in files()
    assert not w.ready.is_set() and w.status().phase == "catch-up"  # the catch-up still runs
    encoder.gate.set()
    assert w.ready.wait(DEADLINE)
    until(all_encoded, "the catch-up encoded the rest")
    assert sorted(files()) == sorted(str(root / f"note{i:02d}.txt") for i in range(30))  # not written back
    assert w.status().removed >= 1


@pytest.mark.parametrize("where", ["reading", "encoding"])
def test_a_file_the_catch_up_fails_on_is_recorded_and_the_rest_goes_on(where: str, tmp_path: Path, watchers,
                                                                       tiny_model_dir: Path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="sparc_local.watch.watcher")
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(12):
        (root / f"note{i:02d}.txt").write_text(f"The city museum opens at {i} hours. The train station is old.\n")
    huge = root / "huge.txt"
    huge.write_text("The piano school has one huge book.\n")
    reads = []
    if where == "reading":
        real_extract = pipeline.extract

        def extract(path, *args, **kwargs):
            if Path(path).name == "huge.txt":
                reads.append(path)
                raise MemoryError
            return real_extract(path, *args, **kwargs)

        monkeypatch.setattr(pipeline, "extract", extract)
    encoder = Gated(ModelInfo.load(tiny_model_dir), fail="huge" if where == "encoding" else None)
    w = watchers([root], encoder=encoder)
    assert w.ready.is_set()
    until(all_encoded, "the others encoded")
    got = files()
    assert got[str(huge)] == ("error", "could not be indexed: MemoryError", 0)
    assert all(got[str(root / f"note{i:02d}.txt")] == ("ok", None, 2) for i in range(12))
    assert w.status().last_error == f"{huge} could not be indexed: MemoryError; recorded as unreadable"
    tries = (len(reads), encoder.failed)
    assert tries == ((2, 0) if where == "reading" else (0, 2))  # in the run, then alone to be sure
    time.sleep(1.0)  # five times the retry delay: a retry loop would have tried again by now
    assert (len(reads), encoder.failed) == tries
    assert "catch-up failed" not in caplog.text and caplog.text.count("catch-up of") == 1
    assert w.status().phase == "watching"


def test_an_encoder_that_fails_on_every_file_blames_none(tmp_path: Path, watchers, tiny_model_dir: Path):
    """Every file of the failed batch fails alone too: the encoder is broken, not the files, so none
    is recorded as unreadable (their stored text stays answerable) and the catch-up is tried again
    later, less and less often."""
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(5):
        (root / f"note{i}.txt").write_text(f"The city museum opens at {i} hours.\n")
    encoder = Gated(ModelInfo.load(tiny_model_dir), fail="museum")
    w = watchers([root], encoder=encoder)
    assert w.ready.is_set()
    assert w.status().last_error == "catch-up failed: MemoryError"
    assert {status for status, _, _ in files().values()} == {"ok"}
    assert answers("city museum opens")
