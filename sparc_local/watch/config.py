"""The watcher's settings, one frozen value: its timing, what it watches, what it retries.

The defaults are for a background process that should stay out of the way: a batch waits for
two quiet seconds (an editor's save or a `git checkout` is one burst), a file that cannot be read
is tried again after growing delays, and the model is dropped after five idle minutes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sparc_local.index_options import IndexOptions
from sparc_local.watch.state import WatcherStatus

LOG_NAME = "sparc_local.watch.watcher"  # the watcher's logger, shared by its modules and the daemon
SETTINGS = "--settings"  # `watch`'s hidden option: the detached watcher's settings (``to_json``)


@dataclass(frozen=True)
class WatchConfig:
    quiet_period: float = 2.0  # seconds without an event before the pending paths are applied
    max_delay: float = 10.0  # ... or this long after the first, under a burst that never pauses
    exclude: Iterable[str] = ()  # `index --exclude` globs
    include_hidden: bool = False
    ignore_files: bool = True  # honour .gitignore / .ignore, as `index` does
    logs: bool = False  # index machine-written text too, as `index --logs` does
    data_dir: str | os.PathLike | None = None  # never indexed (default: the folder of the index)
    polling: bool = False  # poll instead of OS events (also chosen when the OS watch limit is hit)
    poll_interval: float = 5.0  # seconds between two polls, at least (more on a big tree: poller.py)
    root_poll: float = 5.0  # seconds between two checks for roots that vanished or came back
    retry_delays: tuple[float, ...] = (5.0, 30.0, 120.0)  # before each new try of a batch that failed whole
    rescan_delay: float = 2.0  # after an OS event queue overflow: the least wait between two rescans ...
    rescan_max_delay: float = 300.0  # ... doubled at each rescan up to this (rescan.py)
    catch_up_max_delay: float = 600.0  # a catch-up that failed, no one file to blame: retried, waits doubling to this
    busy_delay: float = 1.0  # first wait after "database is locked", doubled on each failure
    busy_timeout_ms: int = 5000  # SQLite's own wait for the write lock
    chunk_files: int = 256  # files per run_index call of a batch: stop() waits for one chunk
    encoder_idle: float = 300.0  # seconds without encoding before the model's memory is given back
    on_battery: Callable[[], bool] | None = None  # power probe (``power.on_battery``); None: never pause
    power_poll: float = 30.0  # seconds between two questions to the power probe
    on_status: Callable[[WatcherStatus], None] | None = None  # gets ``Watcher.status()`` when it changes

    def __post_init__(self) -> None:
        object.__setattr__(self, "exclude", tuple(self.exclude))  # a list from the CLI: frozen too
        object.__setattr__(self, "retry_delays", tuple(self.retry_delays))

    def index_options(self, **changes) -> IndexOptions:
        """The run_index options of a full catch-up run over the roots; ``changes`` override them."""
        base = dict(exclude=self.exclude, include_hidden=self.include_hidden, ignore_files=self.ignore_files,
                    logs=self.logs)
        return IndexOptions(**{**base, **changes})


@dataclass(frozen=True)
class WatchProcess:
    """How the watcher's process runs, beside its ``WatchConfig`` (`watch`'s other options)."""

    threads: int = 1  # the encoder's threads (0: onnxruntime's default)
    wait: float = 0.0  # seconds to wait for another writer's lock
    low_priority: bool = True  # nice 19, idle I/O class (``power.low_priority``)
    pause_on_battery: bool = True  # encode only on mains power


def to_json(config: WatchConfig, process: WatchProcess) -> str:
    """`watch`'s settings as the detached watcher gets them (``watch --daemon``): every field that
    is a value; the callbacks (``on_battery``, ``on_status``) are the process's own."""
    plain = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
             if not callable(getattr(config, f.name))}
    if plain["data_dir"] is not None:
        plain["data_dir"] = os.fspath(plain["data_dir"])
    return json.dumps(dict(config=plain, process=dataclasses.asdict(process)))


def from_json(text: str) -> tuple[WatchConfig, WatchProcess]:
    """The inverse of ``to_json``."""
    data = json.loads(text)
    return WatchConfig(**data["config"]), WatchProcess(**data["process"])
