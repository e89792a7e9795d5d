"""The watcher's status as typed records: its phases, the snapshot ``Watcher.status`` returns (and
watch.json holds), and what `status` shows of it.

``WatcherStatus.to_json``/``from_json`` are the one (de)serialiser of watch.json: the daemon writes
it, `status` and the handoff read it, so a key is spelled once, as a field name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum


class Phase(StrEnum):
    """What the watcher's worker does now."""

    STARTING = "starting"
    CATCH_UP = "catch-up"  # a full incremental index of the roots (at start, or a root came back)
    INDEXING = "indexing"  # applying a batch of changes
    WATCHING = "watching"  # idle, waiting for events
    PAUSED = "paused"  # on battery: events are collected, nothing is encoded
    STOPPED = "stopped"


@dataclass(frozen=True)
class WatcherStatus:
    """A snapshot of a watcher (``Watcher.status``); with the daemon's pid, watch.json."""

    phase: Phase = Phase.STARTING
    queue: int = 0  # paths waiting
    indexed: int = 0
    removed: int = 0
    errors: int = 0
    batches: int = 0
    last_error: str | None = None
    last_batch_at: float | None = None  # seconds since the epoch
    observer: str | None = None  # the kind of filesystem observer (OS events, or polling)
    paused: str | None = None  # why it does not encode now ("on battery power"), None: it does
    started_at: float = 0.0
    roots: list[str] = field(default_factory=list)
    missing_roots: list[str] = field(default_factory=list)
    model_loaded: bool = False
    requests: bool = False  # takes other commands' writes (handoff.py)
    watched: int = 0  # folders with an OS watch (inotify)
    polled: int = 0  # folders polled because the OS limit on watches left them unwatched
    poll_every: float = 0.0  # seconds between two polls now (it grows with what is polled)
    watch_limit: int | None = None  # the OS limit on watches (fs.inotify.max_user_watches), when known
    overflows: int = 0  # times the OS event queue overflowed (events were lost)
    rescans: int = 0  # rescans those overflows caused (at most one at a time, with back-off)

    def degraded(self) -> str | None:
        """Why the watcher may notice changes late, in one line; None: it does not."""
        parts = []
        every = f" every {self.poll_every:.1f}".rstrip("0").rstrip(".") + "s" if self.poll_every else ""
        if self.observer == "polling":
            parts.append(f"polling{every} instead of OS events")
        elif self.polled:
            limit = f"{self.watch_limit:,}" if self.watch_limit else "?"
            parts.append(f"{self.polled:,} of {self.watched + self.polled:,} folders polled{every}: the OS limit "
                         f"of {limit} watches is reached (raise fs.inotify.max_user_watches)")
        if self.overflows:
            parts.append(f"the OS event queue overflowed {_times(self.overflows)}: events were lost, "
                         f"{self.rescans:,} rescan{'s' * (self.rescans != 1)}")
        return "; ".join(parts) or None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> WatcherStatus:
        """The inverse of ``to_json``; a field it lacks takes its default, one it does not know is
        ignored (watch.json also holds the daemon's pid)."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        if known.get("phase") not in set(Phase):
            known.pop("phase", None)
        return cls(**known)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n:,} times"


@dataclass(frozen=True)
class WatchState:
    """What `status` shows of the watcher (``files.read_status``); never takes the lock."""

    running: bool = False
    pid: int | None = None
    since: float | None = None  # when it started, seconds since the epoch
    queue: int = 0
    paused: str | None = None  # ``WatcherStatus.paused``
    last_error: str | None = None
    degraded: str | None = None  # ``WatcherStatus.degraded``: polling, or events lost
