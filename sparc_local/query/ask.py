"""Answering a question: tokenizer + index, no neural network (SPARC Eq. 2).

This module is the whole `ask` path. It must never import onnxruntime or the encoder.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from sparc_local.errors import NoQueryTokens
from sparc_local.model.info import ModelInfo
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, SENTENCE_FIELD
from sparc_local.query import fusion
from sparc_local.query.pathfilter import PathFilter
from sparc_local.query.searcher import Searcher
from sparc_local.query.tokens import QueryTokenizer, query_token_ids
from sparc_local.index.store import Index


_FIELD_LABELS = {SENTENCE_FIELD: " (bm25)", PARAGRAPH_FIELD: " (bm25, context)"}


@dataclass
class Answer:
    rank: int
    score: float
    path: str
    page: int | None
    line: int | None
    sentence: str
    context: str
    offset: int = field(repr=False, default=0)  # the sentence's offset inside context
    sentence_id: int = field(repr=False, default=0)
    contributions: dict[str, float] = field(repr=False, default_factory=dict)

    def to_json(self) -> dict:
        d = asdict(self)
        for private in ("offset", "contributions", "sentence_id"):
            d.pop(private)
        return d


class Asker:
    """Holds the tokenizer and the searcher so several questions (tests, benchmarks) pay their
    loads once."""

    def __init__(self, index: Index, info: ModelInfo) -> None:
        self.index = index
        self.searcher = Searcher(index)
        self.info = info
        self.tokenizer = QueryTokenizer(info.tokenizer_path)
        self.skip = info.skip_array()

    def tokens(self, question: str) -> np.ndarray:
        return query_token_ids(self.tokenizer, question, self.skip)

    def ask(self, question: str, k: int = 10, path_glob: str | None = None, ext: str | None = None,
            explain: bool = False, since: float | None = None, before: float | None = None,
            mode: str = fusion.HYBRID) -> list[Answer]:
        """The top ``k`` answers among the files the filters keep (``pathfilter.PathFilter``:
        ``since``/``before`` bound the modification time, in seconds since the epoch), ranked by
        ``mode`` (``fusion.MODES``)."""
        tokens = self.tokens(question)
        if len(tokens) == 0:
            raise NoQueryTokens(f'the question "{question}" has no word to search for',
                                "Ask with words: punctuation, symbols and characters the model does not know "
                                "are ignored.")
        bounded = since is not None or before is not None
        file_filter = PathFilter(path_glob, ext, since, before) if path_glob or ext or bounded else None
        ids, scores = self.searcher.search(tokens, n=k, file_filter=file_filter, mode=mode)
        rows = {row["id"]: row for row in self.index.sentences(ids)}
        answers: list[Answer] = []
        for i, score in zip(ids.tolist(), scores.tolist()):
            row = rows.get(i)
            if row is None or row["path"] is None:  # removed since the search (a writer committed)
                continue
            answers.append(Answer(len(answers) + 1, round(score, 4), row["path"], row["page"], row["line"],
                                  row["text"], row["context"], row["offset_in_context"], row["id"]))
        if explain and answers:
            per = self.searcher.explain(tokens, [a.sentence_id for a in answers], mode=mode)
            for answer, contrib in zip(answers, per):
                answer.contributions = {self._label(int(key)): round(float(v), 3)
                                        for key, v in sorted(contrib.items(), key=lambda kv: -kv[1]) if v > 0}
        return answers

    def _label(self, key: int) -> str:
        """How ``--explain`` names a posting key: the token, with the BM25 field it is from."""
        field, token = divmod(key, FIELD_BASE)
        return self.tokenizer.id_to_token(token) + _FIELD_LABELS.get(field, "")
