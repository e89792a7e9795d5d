"""The watcher's inbox: the folder of the data dir where `index` and `forget` leave the requests
they hand to the running watcher (``app/handoff.py``), and its files: ``<id>.json`` written by
the command, claimed by the watcher as ``<id>.taken``, ``<id>.progress`` while it works,
``<id>.done`` its answer.

What a request means, and how it is applied, is the application layer's (``app/handoff.py``):
whoever starts the watcher hands it that ``Serve``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sparc_local.watch.files import inbox_path, read_json, write_json

if TYPE_CHECKING:
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo

REQUEST, TAKEN, DONE, PROGRESS = ".json", ".taken", ".done", ".progress"
STALE = 3600.0  # seconds after which an answer nobody collected is deleted
PROGRESS_EVERY = 0.2  # seconds between two progress files


@dataclasses.dataclass(frozen=True)
class Taken:
    """A request the watcher claimed: its id and its file's data, decoded when it is applied (so a
    request it cannot read is answered with the reason)."""

    id: str
    data: dict[str, Any]


class Inbox:
    """The watcher's side: claim requests, publish progress, answer."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = Path(folder) if folder else inbox_path()
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self._progress_at = 0.0

    def take(self) -> list[Taken]:
        """Claim every waiting request, oldest first (a request withdrawn meanwhile is skipped)."""
        out = []
        now = time.time()
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return []
        for name in names:
            path = self.folder / name
            if name.endswith(DONE):
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > STALE:  # its command is long gone
                        path.unlink()
            if not is_request(name):
                continue
            rid = name[: -len(REQUEST)]
            try:
                os.rename(path, self.folder / f"{rid}{TAKEN}")
            except FileNotFoundError:
                continue
            out.append(Taken(rid, read_json(self.folder / f"{rid}{TAKEN}")))
        return out

    def progress(self, request: Taken, snapshot: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self._progress_at >= PROGRESS_EVERY:
            self._progress_at = now
            with contextlib.suppress(OSError):
                write_json(self.folder / f"{request.id}{PROGRESS}", snapshot)

    def answer(self, request: Taken, outcome: dict[str, Any]) -> None:
        write_json(self.folder / f"{request.id}{DONE}", outcome)
        for suffix in (TAKEN, PROGRESS):
            (self.folder / f"{request.id}{suffix}").unlink(missing_ok=True)

    def pending(self) -> bool:
        try:
            return any(is_request(n) for n in os.listdir(self.folder))
        except OSError:
            return False


def is_request(name: str) -> bool:
    """Whether a file of the inbox is a request waiting to be taken (not the watcher's own files)."""
    return name.endswith(REQUEST) and not name.startswith(".")


class Serve(Protocol):
    """Apply the requests waiting in ``inbox`` to ``index``, each answered (``app.handoff.serve``);
    ``on_done(request, report)`` follows each one applied, and ``should_stop`` ends an `index` early."""

    def __call__(self, inbox: Inbox, index: Index, model: ModelInfo, encoder_factory: Callable[[], object], *,
                 should_stop: Callable[[], bool], on_done: Callable[[Any, Any], None]) -> None: ...
