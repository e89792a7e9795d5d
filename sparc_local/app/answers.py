"""What `ask` gives back: answers as frozen values, the fields of `ask --json` and what the
terminal shows besides.  No heavy imports (the cold `ask` path)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparc_local.query import ask as query
    from sparc_local.query.pathfilter import NoMatch
    from sparc_local.query.phrase import Phrase


@dataclass(frozen=True)
class Collapsed:
    """Another sentence of an answer's passage that scores as high as the last answer shown."""

    score: float
    page: int | None
    line: int | None
    sentence: str


@dataclass(frozen=True)
class Elsewhere:
    """The same text in another passage (a copied file, a page footer)."""

    score: float
    path: str
    page: int | None
    line: int | None


@dataclass(frozen=True)
class Answer:
    """One passage's best sentence: where it is (a page, else a line), the passage around it
    (``context``, starting with its ``heading``), its score and, in hybrid mode, whether it is a
    ``likely`` answer.  With a reranker, ``reranked`` says whether it ordered this passage and
    ``first_stage_rank`` where the first stage had put it."""

    rank: int
    score: float
    path: str
    page: int | None
    line: int | None
    sentence: str
    context: str
    heading: str | None = None
    likely: bool | None = None
    first_stage_rank: int | None = None
    reranked: bool | None = None
    phrase: Phrase | None = None
    collapsed: tuple[Collapsed, ...] = ()
    elsewhere: tuple[Elsewhere, ...] = ()
    offset: int = field(default=0, repr=False)  # the sentence's offset inside context
    contributions: Mapping[str, float] = field(default_factory=dict, repr=False)  # explain: token -> score
    logit: float | None = field(default=None, repr=False)  # the reranker's
    first_stage_score: float | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """`ask --json`'s object, keys in this order."""
        d: dict[str, Any] = {name: getattr(self, name) for name in _JSON_FIELDS}
        if self.reranked is not None:  # a reranker ran: which stage placed the answer
            d.update(first_stage_rank=self.first_stage_rank, reranked=self.reranked)
        d["phrase"] = self.phrase.to_json() if self.phrase else None
        d["collapsed"] = [vars(c).copy() for c in self.collapsed]
        d["elsewhere"] = [vars(e).copy() for e in self.elsewhere]
        return d

    @classmethod
    def of(cls, a: query.Answer) -> Answer:
        """The engine's answer as a value."""
        return cls(a.rank, a.score, a.path, a.page, a.line, a.sentence, a.context, a.heading, a.likely,
                   a.first_stage_rank, a.reranked, a.phrase,
                   tuple(Collapsed(c.score, c.page, c.line, c.sentence) for c in a.collapsed),
                   tuple(Elsewhere(e.score, e.path, e.page, e.line) for e in a.elsewhere),
                   a.offset, dict(a.contributions), a.logit, a.first_stage_score)


_JSON_FIELDS = ("rank", "score", "path", "page", "line", "sentence", "context", "heading", "likely")


@dataclass(frozen=True)
class AskResult:
    """The answers, best first (iterate, index or ``len`` it as a sequence of ``Answer``).
    ``stale``: the index was built with another model than the active one; ``unmatched``: the
    filters keep no indexed file, and what the indexed files are (None otherwise)."""

    answers: tuple[Answer, ...]
    stale: bool = False
    unmatched: NoMatch | None = None

    def __iter__(self) -> Iterator[Answer]:
        return iter(self.answers)

    def __len__(self) -> int:
        return len(self.answers)

    def __getitem__(self, i: int) -> Answer:
        return self.answers[i]

    def to_json(self) -> list[dict[str, Any]]:
        return [a.to_json() for a in self.answers]
