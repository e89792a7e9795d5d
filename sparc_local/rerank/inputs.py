"""The reranker's candidate text: one function that training (sparc_lab) and `ask` share (issue 44).

Pure str, no numpy or tokenizers: the pair's tokenization is the caller's. The model reads
``[CLS] question [SEP] rerank_text(...) [SEP]`` (token types 0, then 1), cut to MAX_LENGTH tokens
with only the passage truncated at its end (tokenizers' ``only_second``); ``rerank_text`` puts the
best sentence early enough that the cut keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_LENGTH = 256  # tokens of the whole pair, [CLS] and both [SEP] included
MAX_CHARS = 1000  # passage text kept around the best sentence, before the token cut
HEADING_SEP = " — "


def rerank_text(passage_sentences: Sequence[str], best_index: int, heading: str = "",
                max_chars: int = MAX_CHARS) -> str:
    """The passage as the reranker reads it: its heading (if any) then its sentences in document
    order, only those nearest the best sentence (the first stage's) when the whole passage is
    longer than ``max_chars``, so that the answer's neighbourhood survives the token cut of a long
    passage. The best sentence is always kept (it alone may exceed ``max_chars``)."""
    sentences = [" ".join(s.split()) for s in passage_sentences]
    n = len(sentences)
    if n == 0:
        return heading.strip()
    best = min(max(best_index, 0), n - 1)
    used = len(sentences[best])
    lo, hi = best, best + 1  # the kept window [lo, hi): contiguous, so it stops at the first that does not fit
    for d in range(1, n):
        grew = False
        for j in (best - d, best + d):  # nearest first, the one before on ties
            if 0 <= j < n:
                if used + 1 + len(sentences[j]) > max_chars:
                    return _joined(heading, sentences[lo:hi])
                used += 1 + len(sentences[j])
                lo, hi, grew = min(lo, j), max(hi, j + 1), True
        if not grew:
            break
    return _joined(heading, sentences[lo:hi])


def _joined(heading: str, sentences: Sequence[str]) -> str:
    text = " ".join(s for s in sentences if s)
    heading = " ".join(heading.split())
    return f"{heading}{HEADING_SEP}{text}" if heading else text
