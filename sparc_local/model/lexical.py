"""The lexical side of a sentence: BM25 term impacts of the sentence and of its paragraph.

The hybrid score (``query/fusion.py``) adds these to SPARC's g(q, s), as the dense+sparse hybrid
paper adds TF-IDF to DPR. They need only the tokenizer, so a sentence is answerable by them
before the encoder has seen it.

- Tokens are the model's WordPiece ids minus the special, punctuation and stop-word ones (a
  question's tokens, ``query/tokens.py``, so one token set reads both kinds of postings). On
  du2017's held-out articles `sparc-local eval` gives this BM25 0.714 MRR@10 against 0.696 for
  classic word BM25 over the sentence alone. Dropping the 33 stop words cost the hybrid 0.0005
  to 0.0008 MRR@10 on the training sets and saved a third of its query time.
- Two fields: the sentence, and the paragraph it sits in (the context ``ask`` shows). A
  paragraph's impacts are posted for each of its sentences.
- The stored value is BM25's term-frequency part, tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)),
  with avgdl FIXED per field (the mean of the training corpora), so a posting never depends on
  what else is indexed and an incremental index equals one built at once. idf is the only
  corpus statistic, and it is computed at question time from the posting counts (``fusion``).
- Keys: field · ``FIELD_BASE`` + token id, beside SPARC's token ids in the same postings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparc_local.model.sparse import SparseVectors

# Lucene's English stop set (the classic 33 words): BM25's idf already damps the rest;
# the index's BM25 and eval's classic baseline (query/bm25.py) both leave them out.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)

K1 = 1.2
B = 0.75
FIELD_BASE = 1 << 24  # above any vocabulary id
SENTENCE_FIELD = 1
PARAGRAPH_FIELD = 2
# a sentence stored before the encoder has seen it keeps its lexical postings in these fields
# (sentence, paragraph), so a question can weigh them up in place of the missing SPARC part
PENDING = {SENTENCE_FIELD: 3, PARAGRAPH_FIELD: 4}
# mean length in tokens (WordPiece, no special or punctuation tokens) on squad-train-head,
# du2017-train and wikiqa-train: sentences 24-29, paragraphs 133-229
AVGDL = {SENTENCE_FIELD: 27.0, PARAGRAPH_FIELD: 170.0}
# impacts are stored in f units by the index's weight quantizer: this maps BM25's (0, k1 + 1]
# onto SPARC's weight ceiling (16, see index/postings.py), so 255 levels cover it
UNIT = 16.0 / (K1 + 1)


def field_keys(token_ids: np.ndarray, field: int) -> np.ndarray:
    """The posting keys of ``token_ids`` in ``field``."""
    return np.asarray(token_ids, np.int64) + field * FIELD_BASE


def as_pending(keys: np.ndarray) -> np.ndarray:
    """Lexical keys moved to the fields of sentences not encoded yet."""
    keys = np.asarray(keys, np.int64)
    return keys + (PENDING[SENTENCE_FIELD] - SENTENCE_FIELD) * FIELD_BASE


def _impacts(tokens: list[int], field: int) -> tuple[np.ndarray, np.ndarray]:
    """(token ids ascending, stored impacts) of one text's tokens."""
    ids, tf = np.unique(np.asarray(tokens, np.int64), return_counts=True)
    norm = K1 * (1 - B + B * len(tokens) / AVGDL[field])
    return ids, (tf * (K1 + 1) / (tf + norm) * UNIT).astype(np.float32)


class Lexical:
    """Computes the lexical postings of sentences with one tokenizer and skip set."""

    def __init__(self, tokenizer, skip: np.ndarray) -> None:
        self.tokenizer = tokenizer
        stop = {tokenizer.token_to_id(w) for w in STOPWORDS}
        self.skip = frozenset(skip.tolist()) | (stop - {None})

    @classmethod
    def of(cls, info) -> Lexical:
        """The lexical side of a model folder (``ModelInfo``): its tokenizer and skip set."""
        from sparc_local.model.info import load_tokenizer

        return cls(load_tokenizer(info.tokenizer_path), info.skip_array())

    def rows(self, rows: Sequence) -> SparseVectors:
        """``vectors`` of ``SentenceRow``s."""
        return self.vectors([r.text for r in rows], [r.context for r in rows])

    def _tokens(self, texts: Sequence[str]) -> list[list[int]]:
        enc = self.tokenizer.encode_batch(list(texts), add_special_tokens=False) if texts else []
        return [[t for t in e.ids if t not in self.skip] for e in enc]

    def vectors(self, texts: Sequence[str], contexts: Sequence[str]) -> SparseVectors:
        """One row per sentence: its sentence-field and paragraph-field impacts, keyed by field."""
        paragraphs = list(dict.fromkeys(contexts))
        para = {c: _impacts(t, PARAGRAPH_FIELD) for c, t in zip(paragraphs, self._tokens(paragraphs))}
        rows = []
        for toks, context in zip(self._tokens(texts), contexts):
            sid, sw = _impacts(toks, SENTENCE_FIELD)
            pid, pw = para[context]
            rows.append((np.concatenate([field_keys(sid, SENTENCE_FIELD), field_keys(pid, PARAGRAPH_FIELD)]),
                         np.concatenate([sw, pw])))
        return SparseVectors.from_rows(rows)
