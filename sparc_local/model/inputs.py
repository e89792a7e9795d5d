"""Encoder inputs: "[CLS] sentence [SEP] context [SEP]" with segment ids (SPARC §6.2).

`paragraph_inputs` is the one place that turns a paragraph's sentences into encoder inputs.
`index`, the watcher, adapt's re-encode, `eval` and training all call it, so the model is
trained and measured on exactly the inputs it sees in a user's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EncoderInput = tuple[np.ndarray, np.ndarray]  # token ids, segment ids (int64)


@dataclass(frozen=True)
class InputSpec:
    """What the input builder needs to know of a model (ModelInfo.inputs) or a training run.

    A sentence's context is drawn from the other sentences of its paragraph, nearest first
    (the one before, the one after, two before, ...), at most `context_sentences` of them and
    no more than fits in `max_length`; the last one taken may be cut. `context_order` says
    how the chosen ones are laid out: "document" (paragraph order) or "nearest" (nearest first).
    """

    max_length: int
    cls_id: int
    sep_id: int
    context_sentences: int = 6
    context_order: str = "document"


CONTEXT_ORDERS = ("document", "nearest")


def _nearest(i: int, n: int) -> list[int]:
    """The other positions of a paragraph of n sentences, nearest to i first, the earlier on ties."""
    out = []
    for d in range(1, n):
        for j in (i - d, i + d):
            if 0 <= j < n:
                out.append(j)
    return out


def heading_of(paragraph: Sequence[str]) -> str:
    """A paragraph's context-only text (ingest's `Paragraph.heading`); "" for a plain list."""
    return getattr(paragraph, "heading", "")


def _one(tokens: list[list[int]], i: int, spec: InputSpec, head: Sequence[int] = ()) -> EncoderInput:
    s_ids = tokens[i][: spec.max_length - 3]
    room = spec.max_length - 3 - len(s_ids)
    chosen: list[tuple[int, list[int]]] = [(-1, list(head[:room]))] if head and room > 0 else []
    room -= len(chosen[0][1]) if chosen else 0
    for j in _nearest(i, len(tokens))[: max(spec.context_sentences, 0)]:
        if room <= 0:
            break
        part = tokens[j][:room]
        if part:
            chosen.append((j, part))
            room -= len(part)
    if spec.context_order == "document":
        chosen.sort()
    ids = [spec.cls_id, *s_ids, spec.sep_id]
    types = [0] * len(ids)
    if chosen:
        c_ids = [t for _, part in chosen for t in part]
        ids += [*c_ids, spec.sep_id]
        types += [1] * (len(c_ids) + 1)
    return np.asarray(ids, np.int64), np.asarray(types, np.int64)


def sentence_span(item: EncoderInput) -> tuple[int, int]:
    """Where an input of ``_one`` holds its sentence's tokens: [start, end) after [CLS], up to the
    first [SEP] (the segment-0 tokens between them)."""
    return 1, int((item[1] == 0).sum()) - 1


def paragraph_inputs(tokenizer, paragraphs: Sequence[Sequence[str]], spec: InputSpec) -> list[EncoderInput]:
    """One encoder input per sentence, paragraph after paragraph, in order.

    Each sentence is tokenized once; BERT's pre-tokenizer splits at whitespace, so a context made
    of token lists equals the tokenization of the joined sentences. The sentence keeps priority:
    it is cut only if it alone overflows max_length. A paragraph's heading (`heading_of`) opens
    the context of each of its sentences, before the nearest sentences.
    """
    if spec.context_order not in CONTEXT_ORDERS:
        raise ValueError(f"context_order must be one of {CONTEXT_ORDERS}")
    flat, heads = _flat(paragraphs)
    encoded = tokenizer.encode_batch(flat, add_special_tokens=False) if flat else []
    out: list[EncoderInput] = []
    start = 0
    for p, h in zip(paragraphs, heads):
        head = encoded[start].ids if h else []
        start += h
        tokens = [e.ids for e in encoded[start:start + len(p)]]
        start += len(p)
        out.extend(_one(tokens, i, spec, head) for i in range(len(tokens)))
    return out


def _flat(paragraphs: Sequence[Sequence[str]]) -> tuple[list[str], list[int]]:
    """The texts to tokenize, each paragraph's heading (if any) before its sentences, and how
    many headings (0 or 1) each paragraph put there."""
    flat: list[str] = []
    heads: list[int] = []
    for p in paragraphs:
        head = heading_of(p)
        if head:
            flat.append(head)
        heads.append(int(bool(head)))
        flat.extend(p)
    return flat, heads


def pad_batch(items: Sequence[EncoderInput]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
