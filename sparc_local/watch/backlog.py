"""The paths waiting to be applied: noted by the observer thread, taken in batches by the worker.

Debounced: the pending paths are taken together once no event came for ``quiet_period`` seconds,
or ``max_delay`` after the first under a burst that never pauses. A file that could not be read
waits for its next event: reading it again unchanged would fail again, and it is not pending work
(the index records it as unreadable, `status` lists it). A batch that failed as a whole (an
unexpected error, not the files) is taken again after each of ``retry_delays`` in turn, then given
up on until its paths' next events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sparc_local.watch.config import LOG_NAME

log = logging.getLogger(LOG_NAME)


class Backlog:
    """Thread-safe: every method takes the lock. ``wait`` is where the worker sleeps; ``add``
    and ``wake`` end that sleep."""

    def __init__(self, quiet_period: float, max_delay: float, retry_delays: tuple[float, ...]) -> None:
        self.quiet_period, self.max_delay, self.retry_delays = quiet_period, max_delay, retry_delays
        self._cond = threading.Condition()
        self._pending: dict[str, bool] = {}  # path -> some event said it is a folder
        self._first = self._last = 0.0  # monotonic times of the first and the last pending event
        self._retry_due: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._in_flight = 0  # paths of the batch being applied that are not applied yet
        self._fresh: dict[str, bool] = {}  # noted since the last ``fresh()``: where deletions are looked for

    def add(self, path: str, is_dir: bool) -> None:
        now = time.monotonic()
        with self._cond:
            first = not self._pending
            if first:
                self._first = now
            self._last = now
            self._pending[path] = self._pending.get(path, False) or is_dir
            self._fresh[path] = self._fresh.get(path, False) or is_dir
            self._attempts.pop(path, None)  # it changed again: fresh retries
            self._retry_due.pop(path, None)
            if first:  # later events only move the deadline the worker will find when it wakes
                self._cond.notify_all()

    def fresh(self) -> dict[str, bool]:
        """The paths noted since the last call (they stay pending too): the worker removes those
        that are gone at once, ahead of the work in progress (``removals.py``)."""
        with self._cond:
            out, self._fresh = self._fresh, {}
            return out

    def take(self, now: float) -> dict[str, bool] | None:
        """The paths to apply now: all pending ones once quiet (or too long), plus due retries."""
        with self._cond:
            batch: dict[str, bool] = {}
            if self._pending and (now - self._last >= self.quiet_period or now - self._first >= self.max_delay):
                batch, self._pending = self._pending, {}
            for p in [p for p, t in self._retry_due.items() if t <= now and p not in batch]:
                del self._retry_due[p]
                batch[p] = False
            if not batch:
                return None
            self._in_flight = len(batch)
            return batch

    def left(self, n: int) -> None:
        """`n` paths of the batch being applied are still to do."""
        with self._cond:
            self._in_flight = n

    def done(self, batch: dict[str, bool]) -> None:
        """The batch was applied: its paths are done, those that could not be read too (until
        their next event, see the module docstring)."""
        with self._cond:
            for p in batch:
                self._attempts.pop(p, None)
            self._in_flight = 0

    def failed(self, batch: dict[str, bool], reason: str) -> None:
        """The whole batch failed: each of its paths spends one attempt."""
        with self._cond:
            for p in batch:
                self._retry_later(p, reason)
            self._in_flight = 0

    def requeue(self, batch: dict[str, bool]) -> None:
        """Put a batch back to be applied whole later (re-applying what was committed is a no-op)."""
        with self._cond:
            for path, is_dir in batch.items():
                self._pending[path] = self._pending.get(path, False) or is_dir
            self._first = self._last = time.monotonic()
            self._in_flight = 0

    def _retry_later(self, path: str, reason: str) -> None:
        n = self._attempts.get(path, 0)
        if n >= len(self.retry_delays):
            log.warning("giving up on %s after %d attempts: %s", path, n + 1, reason)
            self._attempts.pop(path, None)
            return
        self._attempts[path] = n + 1
        self._retry_due[path] = time.monotonic() + self.retry_delays[n]

    def size(self) -> int:
        """Paths waiting, due again after a failed batch, or in the batch being applied."""
        with self._cond:
            return len(self._pending) + len(self._retry_due) + self._in_flight

    def sleep(self, deadline: Callable[[list[float]], float], stopping: threading.Event) -> None:
        """Sleep until ``deadline(due)`` (a monotonic time), or until ``add`` or ``wake``. `due`:
        when a batch could be taken next (empty: on the next event). Both under the lock, so an
        event noted meanwhile is never slept through."""
        with self._cond:
            due = list(self._retry_due.values())
            if self._pending:
                due.append(min(self._last + self.quiet_period, self._first + self.max_delay))
            timeout = deadline(due) - time.monotonic()
            if timeout > 0 and not stopping.is_set():
                self._cond.wait(timeout)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
