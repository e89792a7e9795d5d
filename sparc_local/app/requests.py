"""A question as a front end asks it: ``AskRequest``, a frozen value checked once, here.

Alone in its module, without heavy imports: the cold `ask` path builds one before it loads numpy
(the other requests are ``jobs``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparc_local.errors import UserError
from sparc_local.query.modes import HYBRID, MODES

DEFAULT_K = 10


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
