"""Which vocabulary tokens never count as evidence: special tokens ([CLS], [SEP], [PAD], [UNK],
[MASK], [unused...]) and punctuation-only tokens ("?", ",", "##.").

The exporter zeroes them before TopK (a sentence spends no index space on them) and records them
in sparc.json as `skip_ids`; the query side (`query/tokens.py`) drops them from a question, and
training from its questions. One definition here, below both `model/` and `query/`.
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
