"""When to rescan after the OS event queue overflowed.

Events were lost, so the roots are indexed again, incrementally (a file whose size and mtime the
index holds is not read), and the folders created meanwhile get their watches. An overflow can
come from a burst that goes on (a build writing thousands of files): a rescan at each overflow
would be a loop. So at most one rescan waits or runs at a time; each starts at least ``wait``
seconds after the one before, and that wait doubles with each rescan, up to ``cap``; an overflow
after ``cap`` seconds without one starts again from ``first``.
"""

from __future__ import annotations

import threading
import time


class Rescans:
    """Thread-safe: ``overflowed`` comes from the observer's thread, ``due`` from the worker."""

    def __init__(self, first: float, cap: float) -> None:
        self.first, self.cap = first, cap
        self._lock = threading.Lock()
        self._pending = False
        self._wait = first
        self._not_before = 0.0  # monotonic time: no rescan starts before it
        self._last_overflow = -float("inf")
        self.overflows = 0
        self.rescans = 0

    def overflowed(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            if now - self._last_overflow >= self.cap:
                self._wait = self.first
            self._last_overflow = now
            self.overflows += 1
            self._pending = True

    def due(self, now: float) -> bool:
        """Whether a rescan starts now; if so, it is counted and the next one waits longer."""
        with self._lock:
            if not self._pending or now < self._not_before:
                return False
            self._pending = False
            self.rescans += 1
            self._not_before = now + self._wait
            self._wait = min(self._wait * 2, self.cap)
            return True

    def next_due(self) -> float | None:
        """When the waiting rescan may start (monotonic), None if none waits."""
        with self._lock:
            return self._not_before if self._pending else None
