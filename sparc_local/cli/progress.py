"""Progress of the long-running commands on stderr: rich bars on a terminal; plain lines elsewhere
(a pipe, a log, cron), so a run of minutes is never silent."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from statistics import fmean
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from sparc_local.cli.render import shown_path
from sparc_local.pipeline import IndexPhase

if TYPE_CHECKING:
    from sparc_local.pipeline import Progress as IndexRun

MIN_PATH = 8  # characters of the current file's path worth showing
_RATED = (IndexPhase.INDEXING, IndexPhase.ENCODING)  # phases with a rate and a time left


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Rate:
    """Items per second, smoothed: an exponential moving average over ``tau`` seconds, so the
    time left follows a real change of pace without jumping with every file."""

    def __init__(self, tau: float = 60.0) -> None:
        self.tau = tau
        self.value = 0.0
        self._last: tuple[float, int] | None = None

    def update(self, now: float, done: int) -> float:
        if self._last is None:
            self._last = (now, done)
            return self.value
        then, before = self._last
        dt = now - then
        if dt < 1.0:  # too short to measure; keep the current estimate
            return self.value
        current = max(done - before, 0) / dt
        weight = 1.0 - math.exp(-dt / self.tau)
        self.value = current if self.value == 0.0 else self.value + weight * (current - self.value)
        self._last = (now, done)
        return self.value


def describe(p: IndexRun, rate: float, width: int = 80) -> str:
    """One line of `index` progress. Reading (text and BM25 postings stored, answerable at once):
    files and sentences read of the total (~: estimated from the size of the files not read yet)
    and the reading rate. Encoding: sentences encoded of those waiting, the rate and the time
    left. Then the current file (its path cut from the left, at a folder if it can, to fit
    ``width``; control characters escaped). ``rate``: the phase's smoothed rate (``Rate``)."""
    if p.phase == IndexPhase.SCANNING:
        return f"scanning: {p.scanned} files"
    if p.phase == IndexPhase.ENCODING:
        done, total = p.sentences_done, p.sentences_pending
        line = f"encoding: {p.files_done}/{p.files_total} files read, encoded {done} of {total} sentences"
    else:
        done, total = p.sentences_read, p.sentences_estimate()
        approx = "~" if p.bytes_read < p.bytes_total else ""
        line = f"{p.files_done}/{p.files_total} files, {done}/{approx}{total} sentences read"
        if p.phase != IndexPhase.INDEXING:
            line = f"{p.phase}: {line}"
    if rate > 0 and p.phase in _RATED:
        line += f", {rate:.0f}/s, {_clock(max(total - done, 0) / rate)} left"
    room = width - len(line) - 4  # ", " and the spinner
    if p.current and room >= MIN_PATH:
        path = shown_path(p.current)
        if len(path) > room:
            tail = path[-(room - 1):]
            cut = tail.find(os.sep)
            path = "…" + (tail[cut:] if 0 <= cut < len(tail) - 1 else tail)  # whole names where it can
        line += ", " + path
    return line


def _done(p: IndexRun) -> int:
    """What the phase's rate counts: sentences read, or encoded."""
    return p.sentences_done if p.phase == IndexPhase.ENCODING else p.sentences_read


class IndexProgress:
    """`index`'s live line on stderr (see ``describe``); ``update`` is run_index's on_progress."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console,
                                 disable=not enabled, transient=True)
        self.phase = IndexPhase.SCANNING
        self.rate = Rate()

    def __enter__(self) -> IndexProgress:
        self.progress.__enter__()
        self.task = self.progress.add_task(IndexPhase.SCANNING)
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, p: IndexRun) -> None:
        now = time.perf_counter()
        if p.phase != self.phase:
            self.phase, self.rate = p.phase, Rate()  # each phase has its own rate
        text = describe(p, self.rate.update(now, _done(p)), self.console.width)
        self.progress.update(self.task, description=text)


class IndexLines:
    """`index`'s progress where stderr is not a terminal (a pipe, a log, cron): once the run has
    taken ``AFTER`` seconds (a short run says enough in its summary), a plain line as each phase
    begins, then at each tenth of it or every ``EVERY`` seconds, whichever comes first."""

    TENTHS = 10
    AFTER = 10.0
    EVERY = 60.0
    clock = staticmethod(time.monotonic)

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console, self.enabled = console, enabled
        self.phase: IndexPhase | None = None
        self.rate = Rate()
        self.shown, self.at = -1, 0.0
        self.began: float | None = None

    def __enter__(self) -> IndexLines:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def update(self, p: IndexRun) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self.began is None:
            self.began = now
        rate = self.rate.update(now, _done(p))
        if now - self.began < self.AFTER:
            return
        total = p.sentences_pending if p.phase == IndexPhase.ENCODING else max(p.sentences_estimate(), p.files_total)
        done = _done(p) if p.phase != IndexPhase.SCANNING else 0
        tenth = done * self.TENTHS // max(total, 1)
        if p.phase == self.phase and tenth <= self.shown and now - self.at < self.EVERY:
            return
        if p.phase != self.phase:
            self.phase, self.rate = p.phase, Rate()
            self.rate.update(now, _done(p))
        self.shown, self.at = tenth, now
        self.console.print(describe(p, rate, 1 << 16), markup=False, highlight=False)


def index_progress(console: Console, quiet: bool) -> IndexProgress | IndexLines:
    """A live line on a terminal, plain lines elsewhere; nothing with --quiet."""
    kind = IndexProgress if console.is_terminal else IndexLines
    return kind(console, enabled=not quiet)


@contextlib.contextmanager
def bar(console: Console, label: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A determinate bar; yields advance(n)."""
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True, disable=not enabled) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)


ADAPT_PHASES = {"train": ("training", "steps"), "export": ("writing the model", None),
                "encode": ("re-encoding", "sentences")}  # adapt's on_progress phases: label, unit


class AdaptProgress:
    """`adapt`'s progress on a terminal: a bar per phase (training with its loss, re-encoding), with ETA.

    `update(phase, done, total, loss)` is the library's on_progress callback.
    """

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[loss]}"), TimeRemainingColumn(), console=console,
                                 disable=not enabled, transient=True)
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> AdaptProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, phase: str, done: int, total: int, loss: float | None) -> None:
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(ADAPT_PHASES.get(phase, (phase,))[0], total=total,
                                                       completed=done, loss="")
        if loss is None:
            self.progress.update(self.tasks[phase], completed=done, total=total)
        else:
            self.progress.update(self.tasks[phase], completed=done, total=total, loss=f"loss {loss:.3f}")


class AdaptLines:
    """`adapt`'s progress where stderr is not a terminal: a plain line as each phase begins, at
    each tenth of it and at its end (at most 12 lines a phase, however long the run), with the
    mean MLM loss since the line before and the time left. Same ``update`` as AdaptProgress."""

    TENTHS = 10
    clock = staticmethod(time.monotonic)

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console, self.enabled = console, enabled
        self.phase: str | None = None

    def __enter__(self) -> AdaptLines:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def update(self, phase: str, done: int, total: int, loss: float | None) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if phase != self.phase:
            self.phase, self.began, self.first, self.shown = phase, now, done, None
            self.losses: list[float] = []
        if loss is not None:
            self.losses.append(loss)
        label, unit = ADAPT_PHASES.get(phase, (phase, "done"))
        tenth = done * self.TENTHS // max(total, 1)
        if self.shown is not None and (unit is None or tenth <= self.shown):
            return
        self.shown = tenth
        line = label
        if unit is not None:
            line += f": {done} of {total} {unit}"
            if self.losses:
                line += f", loss {fmean(self.losses):.3f}"
                self.losses = []
            rate = (done - self.first) / (now - self.began) if now > self.began else 0.0
            if rate > 0 and done < total:
                line += f", {_clock((total - done) / rate)} left"
        self.console.print(line, markup=False, highlight=False)


def adapt_progress(console: Console, quiet: bool) -> AdaptProgress | AdaptLines:
    """Bars on a terminal, plain lines elsewhere; nothing with --quiet."""
    kind = AdaptProgress if console.is_terminal else AdaptLines
    return kind(console, enabled=not quiet)
