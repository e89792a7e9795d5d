"""The requests other than a question: `index`, `forget` (what the watcher's handoff carries,
``wire``) and `eval`, as frozen values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sparc_local.index_options import IndexOptions

DEFAULT_WAIT = 10.0  # seconds a write waits for another writer before LockHeld


@dataclass(frozen=True)
class IndexRequest:
    """Index ``paths`` (none: every folder indexed before) with ``options``.

    ``threads``: encoder threads (None: all cores); ``low_priority``: nice and idle I/O;
    ``wait``: seconds to wait for another writer."""

    verb: ClassVar[str] = "index"  # what the command is called, in messages and logs
    paths: tuple[str, ...] = ()
    options: IndexOptions = field(default_factory=IndexOptions)
    threads: int | None = None
    low_priority: bool = True
    wait: float = DEFAULT_WAIT

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))


@dataclass(frozen=True)
class ForgetRequest:
    """Remove ``path`` (a file or folder) and its sentences from the index."""

    verb: ClassVar[str] = "forget"
    path: str
    wait: float = DEFAULT_WAIT


@dataclass(frozen=True)
class EvalRequest:
    """`eval`: retrieval quality on a ReQA folder; ``model`` None is the active model."""

    dataset: str
    k: int = 10
    top_k: int | None = None
    model: str | None = None
    threads: int | None = None
    fast: bool = False  # the first stage alone: no reranker rows
    sample: int | None = None  # the reranker rows over a seeded sample of this many questions
    hits: bool = False  # each mode's first-hit rank of every question too, under "hits" (paired comparisons)
