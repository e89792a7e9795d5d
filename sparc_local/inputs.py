"""Encoder inputs: "[CLS] sentence [SEP] context [SEP]" with segment ids (SPARC §6.2).

One function builds them for indexing, eval and training, so the model is trained on exactly
the inputs it later sees.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def load_tokenizer(path: str | Path):
    """The model's tokenizer with its padding and truncation switched off.

    Hugging Face tokenizer.json files often carry fixed padding (all-MiniLM-L6-v2's pads every
    text to 128 tokens) and truncation; left on, every sentence would come back padded and
    leave no room for its context. Lengths are decided here, in pair_inputs, and nowhere else.
    """
    from tokenizers import Tokenizer

    from sparc_local.errors import ModelDamaged, ModelMissing
    from sparc_local.modelinfo import model_remedy

    path = Path(path)
    if not path.is_file():
        raise ModelMissing(f"{path} is missing", model_remedy(path.parent))
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # the Rust binding raises plain Exception
        raise ModelDamaged(f"{path} is damaged ({err})", model_remedy(path.parent)) from err
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def pair_inputs(tokenizer, sentences: list[str], contexts: list[str], max_length: int,
                cls_id: int, sep_id: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Token ids and segment ids per (sentence, context) pair.

    The sentence keeps priority: it is cut only if it alone overflows max_length, and the
    context fills what is left.
    """
    sents = tokenizer.encode_batch(sentences, add_special_tokens=False)
    ctxs = tokenizer.encode_batch(contexts, add_special_tokens=False) if any(contexts) else None
    out = []
    for i, s in enumerate(sents):
        s_ids = s.ids[: max_length - 3]
        room = max_length - 3 - len(s_ids)
        c_ids = ctxs[i].ids[:room] if ctxs is not None else []
        ids = [cls_id, *s_ids, sep_id]
        types = [0] * len(ids)
        if c_ids:
            ids += [*c_ids, sep_id]
            types += [1] * (len(c_ids) + 1)
        out.append((np.asarray(ids, np.int64), np.asarray(types, np.int64)))
    return out


def pad_batch(items: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Right-pad to the longest item: ids, segment ids, attention mask (all int64)."""
    length = max(len(ids) for ids, _ in items)
    ids = np.zeros((len(items), length), np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, (a, t) in enumerate(items):
        ids[i, : len(a)] = a
        types[i, : len(a)] = t
        mask[i, : len(a)] = 1
    return ids, types, mask
