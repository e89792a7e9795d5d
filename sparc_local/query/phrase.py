"""The answer phrase: the words of a sentence that carry its match to the question.

SPARC's f(v, s) is a max over the sentence's positions (Eq. 4); the position that gave it
(stored at index time, ``index/positions.py``) is where question token v found its evidence,
as DenSPI reads a phrase off per-position scores.  BM25's matches are literal: a matched token
sits wherever it occurs in the sentence.  Each word gets the score parts of the tokens found in
it (``Searcher.explain``), the words holding at least STRONG of the best word's score are
highlighted, adjacent highlighted words merge, and the run with the most score is the phrase.

Positions index the tokens of the sentence alone as the tokenizer splits it (the encoder's
input builder, ``model/inputs.py``, tokenizes each sentence on its own); ``QueryTokenizer.spans``
gives their characters.  A token whose max came from the context (the model max-pools over the
whole ``[CLS] sentence [SEP] context [SEP]`` window) has no position: it adds to no word.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from sparc_local.index import positions
from sparc_local.model.lexical import FIELD_BASE
from sparc_local.query.tokens import Span

# A word is highlighted when its score is at least this share of the best word's: a question's
# function words ("the", "of") match nearly every sentence a little, and would otherwise join in.
STRONG = 0.25
_WORDS = re.compile(r"\w+|\S")  # whole words, and each other visible character alone (BERT's split)


@dataclass(frozen=True)
class Phrase:
    """[start, end) characters of the sentence, and their text."""

    text: str
    start: int
    end: int

    def to_json(self) -> dict:
        return {"text": self.text, "start": self.start, "end": self.end}


def find_phrase(sentence: str, spans: Sequence[Span], contributions: dict[int, float],
                blob: bytes | None) -> Phrase | None:
    """The phrase of ``sentence`` (its tokens' ``spans``), from each posting key's part of the
    score (``Searcher.explain``) and the sentence's positions ``blob`` (None: not stored, e.g.
    an index encoded before positions were, or a sentence not encoded yet); None when no word
    of the sentence carries the match."""
    words = [(m.start(), m.end()) for m in _WORDS.finditer(sentence)]
    if not words or not spans:
        return None
    starts = [a for a, _ in words]
    score = [0.0] * len(words)

    def add(token_index: int, part: float) -> None:
        if 0 <= token_index < len(spans):
            score[bisect_right(starts, spans[token_index][1]) - 1] += part

    sparc = {key: part for key, part in contributions.items() if key < FIELD_BASE and part > 0}
    if sparc and blob is not None:
        for token, at in positions.lookup(blob, sparc).items():
            add(at, sparc[token])
    for key, part in contributions.items():
        if key >= FIELD_BASE and part > 0:  # a BM25 field: the token's literal occurrences
            token = key % FIELD_BASE
            found = [k for k, (t, _, _) in enumerate(spans) if t == token]
            for k in found:
                add(k, part / len(found))
    best = max(score)
    if best <= 0:
        return None
    runs: list[tuple[float, int, int]] = []  # (score, first word, last word)
    for w, sc in enumerate(score):
        if sc < STRONG * best:
            continue
        if runs and runs[-1][2] == w - 1:
            runs[-1] = (runs[-1][0] + sc, runs[-1][1], w)
        else:
            runs.append((sc, w, w))
    _, first, last = max(runs, key=lambda r: r[0])  # the first of equal runs
    start, end = words[first][0], words[last][1]
    return Phrase(sentence[start:end], start, end)
