"""From a question to the set of vocabulary tokens whose stored weights are summed.

g(q,s) = Σ_{v∈q} f(v,s) (SPARC Eq. 2) is a sum over the question's tokens as a set:
- a repeated token counts once ("the the" is not twice as much evidence);
- special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]) never count;
- punctuation-only tokens ("?", ",") never count: every question has them, they carry no
  information, and a sentence's weight for them only adds noise;
- stop words do count: the model learned their weights in training, and f is already small
  for them wherever they do not matter.
Training uses this same function, so the model is trained on the queries it will see.
"""

from __future__ import annotations

import unicodedata

import numpy as np


def _is_punct(token: str) -> bool:
    token = token[2:] if token.startswith("##") else token
    return bool(token) and all(unicodedata.category(c).startswith(("P", "S")) for c in token)


def skip_token_ids(vocab: dict[str, int]) -> np.ndarray:
    """Special and punctuation-only token ids, computed once when a model is exported."""
    skip = {i for t, i in vocab.items() if (t.startswith("[") and t.endswith("]")) or _is_punct(t)}
    return np.asarray(sorted(skip), dtype=np.int32)


def query_token_ids(tokenizer, text: str, skip: np.ndarray) -> np.ndarray:
    # plain sets: np.unique/np.isin would import numpy.ma on every cold `ask` (~9 ms)
    ids = set(tokenizer.encode(text, add_special_tokens=False).ids).difference(skip.tolist())
    return np.asarray(sorted(ids), dtype=np.int32)
