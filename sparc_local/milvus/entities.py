"""What a file's sentences become in the store: entities with SPARC's and BM25's fields holding
the same uint8 values the local index stores (``store.py``'s module doc)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sparc_local.index import postings as codec
from sparc_local.milvus.store import FIELDS, PLACEHOLDER, Entity
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, SENTENCE_FIELD


def entities(path: str, mtime: float, sentences: Sequence[Any], ids: Sequence[int], vectors: Any, lexical: Any,
             scale: float) -> list[Entity]:
    """A file's sentences (``SentenceRow``s), with their ids in the store, SPARC ``vectors`` and
    ``lexical`` impacts (float, quantized here as the local index quantizes them)."""
    sparc = _quantized(vectors, scale, 0)
    sent = _quantized(lexical, scale, SENTENCE_FIELD)
    para = _quantized(lexical, scale, PARAGRAPH_FIELD)
    first: dict[str, int] = {}
    out = []
    for i, (sid, s) in enumerate(zip(ids, sentences)):
        ctx = first.setdefault(s.context, int(sid))
        out.append(Entity(int(sid), path, mtime, s.text, s.context, s.offset_in_context, s.page, s.line, ctx,
                          {FIELDS[0]: sparc[i], FIELDS[SENTENCE_FIELD]: sent[i], FIELDS[PARAGRAPH_FIELD]: para[i]}))
    return out


def _quantized(vectors: Any, scale: float, field: int) -> list[dict[int, float]]:
    """Each row's postings of one field, token id -> uint8 value; zeros dropped as the local
    index drops them."""
    out = []
    for i in range(len(vectors)):
        keys, w = vectors.row(i)
        keys = np.asarray(keys, np.int64)
        sel = keys // FIELD_BASE == field
        q = codec.quantize(w[sel], scale)
        toks = (keys[sel] % FIELD_BASE).tolist()
        out.append({t: float(v) for t, v in zip(toks, q.tolist()) if v > 0} or {PLACEHOLDER: 1e-30})
    return out
