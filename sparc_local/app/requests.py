"""What a front end asks of sparc-local, as frozen values checked once, here.

No heavy imports: the cold `ask` path builds an ``AskRequest`` before it loads numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sparc_local.errors import UserError
from sparc_local.index_options import IndexOptions
from sparc_local.query.modes import HYBRID, MODES

DEFAULT_K = 10
DEFAULT_WAIT = 10.0  # seconds a write waits for another writer before LockHeld


@dataclass(frozen=True)
class AskRequest:
    """One question and how to answer it: the options `ask` takes.

    ``since``/``before`` bound the files' modification time (seconds since the epoch);
    ``fast`` leaves the reranker out, unread; ``candidates`` is how many first-stage passages the
    reranker reads (None: its own); ``phrases`` how many answers get their phrase (None: all),
    since finding one may load the tokenizers library."""

    question: str
    k: int = DEFAULT_K
    path: str | None = None
    type: str | None = None
    since: float | None = None
    before: float | None = None
    mode: str = HYBRID
    explain: bool = False
    fast: bool = False
    candidates: int | None = None
    phrases: int | None = None

    def __post_init__(self) -> None:
        if not self.question.strip():
            raise UserError("the question is empty", "Ask a question in words.")
        if self.k < 1:
            raise UserError(f"k must be 1 or more, not {self.k}", "Ask for at least one answer.")
        if self.mode not in MODES:
            raise UserError(f"unknown mode {self.mode!r}", f"Use one of: {', '.join(MODES)}.")
        if self.candidates is not None and self.candidates < 1:
            raise UserError(f"candidates must be 1 or more, not {self.candidates}",
                            "Leave it out for the reranker's own number.")

    @property
    def wants_reranker(self) -> bool:
        """Whether a reranker runs, when one is installed: hybrid mode, not ``fast``."""
        return self.mode == HYBRID and not self.fast


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
