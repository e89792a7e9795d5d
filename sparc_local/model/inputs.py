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
SCHEME_PAIR, SCHEME_WINDOW = "pair", "window"


@dataclass(frozen=True)
class Window:
    """One forward pass of the window scheme: "[CLS] paragraph tokens [SEP]".

    `spans` are the [start, end) token positions of the sentences this window encodes, in
    paragraph order; the tokens around them are context only (another window encodes them).
    """

    ids: np.ndarray  # int64
    spans: tuple[tuple[int, int], ...]
    types: np.ndarray | None = None  # segment ids (int64) of a marked window; None: all 0

    @property
    def segments(self) -> np.ndarray:
        return self.types if self.types is not None else np.zeros_like(self.ids)


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
    scheme: str = SCHEME_PAIR  # SCHEME_WINDOW: window_inputs, one pass per paragraph window
    # window scheme: a [SEP] closes every sentence (in its span) and segment ids alternate from
    # sentence to sentence (BERTSum's interval segments), so each token can tell its own sentence
    # from its neighbours, as the pair scheme's segment A tells it
    marks: bool = False


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


def _windows(tokens: list[list[int]], spec: InputSpec) -> list[Window]:
    """Cut a paragraph into windows at sentence boundaries.

    A paragraph that fits is one window. A longer one gets windows whose own sentences take at
    most half the room; the other half is context from both sides, nearest first (the end of
    the sentences before, the start of the ones after), so every sentence sees its neighbours.
    With marks, each sentence or context piece is followed by [SEP] and its parity in the
    paragraph gives its segment id.
    """
    extra = int(spec.marks)  # the [SEP] a marked sentence carries
    room = spec.max_length - 2 + extra  # a marked window's last [SEP] is its last sentence's
    tokens = [t[:room - extra] for t in tokens]
    cost = [len(t) + extra for t in tokens]
    if sum(cost) <= room:
        groups = [(0, len(tokens))]
    else:
        groups, start = [], 0
        while start < len(tokens):
            end, size = start + 1, cost[start]
            while end < len(tokens) and size + cost[end] <= room // 2:
                size += cost[end]
                end += 1
            groups.append((start, end))
            start = end
    out = []
    for a, b in groups:
        free = room - sum(cost[a:b])
        before: list[tuple[int, list[int]]] = []
        after: list[tuple[int, list[int]]] = []
        for j in _nearest_outside(a, b, len(tokens)):
            if free <= extra:
                break
            n = free - extra
            part = tokens[j][-n:] if j < a else tokens[j][:n]
            (before if j < a else after).append((j, part))
            free -= len(part) + extra
        ids, types = [spec.cls_id], [0]

        def put(j: int, part: list[int]) -> tuple[int, int]:
            start = len(ids)
            ids.extend(part + [spec.sep_id] * extra)
            types.extend([j % 2 * extra] * (len(part) + extra))
            return start, len(ids)

        for j, part in reversed(before):
            put(j, part)
        spans = [put(j, tokens[j]) for j in range(a, b)]
        for j, part in after:
            put(j, part)
        if not spec.marks:
            ids.append(spec.sep_id)
        out.append(Window(np.asarray(ids, np.int64), tuple(spans),
                          np.asarray(types, np.int64) if spec.marks else None))
    return out


def _nearest_outside(a: int, b: int, n: int) -> list[int]:
    """Positions outside [a, b), nearest first, the earlier on ties."""
    out = []
    for d in range(1, n):
        for j in (a - d, b - 1 + d):
            if 0 <= j < n and not a <= j < b:
                out.append(j)
    return out


def window_inputs(tokenizer, paragraphs: Sequence[Sequence[str]], spec: InputSpec) -> list[Window]:
    """The window scheme's inputs; their spans, in order, are the paragraphs' sentences in order.
    A paragraph's heading is laid out as a sentence before the first and encoded by none."""
    flat, heads = _flat(paragraphs)
    encoded = tokenizer.encode_batch(flat, add_special_tokens=False) if flat else []
    out: list[Window] = []
    start = 0
    for p, h in zip(paragraphs, heads):
        windows = _windows([e.ids for e in encoded[start:start + h + len(p)]], spec)
        if h:
            first = windows[0]
            windows[0] = Window(first.ids, first.spans[1:], first.types)
        out += windows
        start += h + len(p)
    return out


@dataclass(frozen=True)
class SpanIndex:
    """Where each sentence's tokens are in a window batch padded to `length` (see span_index)."""

    tokens: np.ndarray  # (M,) positions of every sentence token in the flattened (B·length) batch
    sentence_of: np.ndarray  # (M,) each of those tokens' sentence
    spans: np.ndarray  # (N, longest sentence) rows into `tokens`, one per sentence, in order
    windows: np.ndarray  # (B, most sentences in a window) rows into the N sentences, per window
    window_of: np.ndarray  # (N,) each sentence's window
    # (N, 2·reach) the sentences of the same window at most `reach` sentences away, and how far
    # (1..reach); unused entries point at the sentence itself at distance 0
    neighbours: np.ndarray
    distance: np.ndarray


def span_index(windows: Sequence[Window], length: int, reach: int = 0) -> SpanIndex:
    """Index arrays that let the graph pool each sentence over its own tokens, and each window
    over its sentences.

    Only sentence tokens are projected onto the vocabulary (`tokens`): context-only, [CLS] and
    [SEP] positions are not. Rows are padded with their own first entry, since a max over a
    repeated entry is unchanged. An empty sentence has no token to pool; its row is garbage (it
    points at token 0), and the encoder gives it no weights.
    """
    tokens: list[np.ndarray] = []
    rows: list[tuple[int, int]] = []
    m = 0
    for r, w in enumerate(windows):
        for a, b in w.spans:
            tokens.append(np.arange(r * length + a, r * length + b))
            rows.append((m, b - a))
            m += b - a
    spans = _padded([(start, n) for start, n in rows])
    counts = [len(w.spans) for w in windows]
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if counts else np.zeros(0, np.int64)
    flat = np.concatenate(tokens) if tokens else np.zeros(0, np.int64)
    sentence_of = np.repeat(np.arange(len(rows)), [n for _, n in rows]).astype(np.int64)
    near = np.repeat(np.arange(len(rows)), 2 * reach).reshape(len(rows), 2 * reach).astype(np.int64)
    distance = np.zeros_like(near)
    for first, n in zip(firsts.tolist(), counts):
        for i in range(n):
            for c, j in enumerate(j for j in range(max(0, i - reach), min(n, i + reach + 1)) if j != i):
                near[first + i, c], distance[first + i, c] = first + j, abs(i - j)
    return SpanIndex(flat.astype(np.int64), sentence_of, spans, _padded(list(zip(firsts.tolist(), counts))),
                     np.repeat(np.arange(len(windows)), counts).astype(np.int64), near, distance)


def _padded(runs: list[tuple[int, int]]) -> np.ndarray:
    """(len(runs), longest) rows start..start+n-1, each padded with its own start."""
    out = np.zeros((len(runs), max([n for _, n in runs] + [1])), np.int64)
    for i, (start, n) in enumerate(runs):
        out[i] = start
        out[i, :n] = np.arange(start, start + n)
    return out


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
