"""Answering a question: tokenizer + index, no neural network (SPARC Eq. 2).

This module is the whole `ask` path. It must never import onnxruntime or the encoder.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field

import numpy as np

from sparc_local.errors import NoQueryTokens
from sparc_local.modelinfo import load_tokenizer
from sparc_local.modelinfo import ModelInfo
from sparc_local.query import query_token_ids
from sparc_local.store import Index


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
    """Holds the tokenizer so several questions (tests, benchmarks) pay its load once."""

    def __init__(self, index: Index, info: ModelInfo) -> None:
        self.index = index
        self.info = info
        self.tokenizer = load_tokenizer(info.tokenizer_path)
        self.skip = info.skip_array()

    def tokens(self, question: str) -> np.ndarray:
        return query_token_ids(self.tokenizer, question, self.skip)

    def ask(self, question: str, k: int = 10, path_glob: str | None = None, ext: str | None = None,
            explain: bool = False) -> list[Answer]:
        tokens = self.tokens(question)
        if len(tokens) == 0:
            raise NoQueryTokens(f'the question "{question}" has no word to search for',
                                "Ask with words: punctuation, symbols and characters the model does not know "
                                "are ignored.")
        filtered = bool(path_glob or ext)
        ids, scores = self.index.search(tokens, n=None if filtered else k)
        answers: list[Answer] = []
        suffix = ("." + ext.lstrip(".").lower()) if ext else None
        for start in range(0, len(ids), 256):
            for row, score in zip(self.index.sentences(ids[start:start + 256]), scores[start:start + 256]):
                path = row["path"]
                if path is None or score <= 0:
                    continue
                if suffix and not path.lower().endswith(suffix):
                    continue
                if path_glob and not fnmatch.fnmatch(path, path_glob):
                    continue
                answers.append(Answer(len(answers) + 1, round(float(score), 4), path, row["page"], row["line"],
                                      row["text"], row["context"], row["offset_in_context"], row["id"]))
                if len(answers) == k:
                    break
            if len(answers) == k or scores[min(start + 256, len(scores)) - 1] <= 0:
                break
        if explain and answers:
            per = self.index.explain(tokens, [a.sentence_id for a in answers])
            for answer, contrib in zip(answers, per):
                answer.contributions = {self.tokenizer.id_to_token(int(t)): round(float(v), 3)
                                        for t, v in sorted(contrib.items(), key=lambda kv: -kv[1]) if v > 0}
        return answers
