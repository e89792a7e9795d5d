"""Progress bars for the long-running commands (rich, on stderr)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeRemainingColumn


class IndexProgress:
    """Files and sentences indexed so far, with their rates; the total is unknown while walking."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console,
                                 disable=not enabled, transient=True)
        self.files = self.sentences = 0
        self.start = time.perf_counter()

    def __enter__(self) -> "IndexProgress":
        self.progress.__enter__()
        self.task = self.progress.add_task(self._text())
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def _text(self) -> str:
        dt = max(time.perf_counter() - self.start, 1e-9)
        return (f"indexing: {self.files} files ({self.files / dt:.1f} files/s), "
                f"{self.sentences} sentences ({self.sentences / dt:.0f} sentences/s)")

    def advance(self, files: int, sentences: int) -> None:
        self.files += files
        self.sentences += sentences
        self.progress.update(self.task, description=self._text())


@contextlib.contextmanager
def bar(console: Console, label: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A determinate bar; yields advance(n)."""
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True, disable=not enabled) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)
