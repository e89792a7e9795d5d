"""FORMAT_BITMAP posting blobs: a dense token's list as a bitmap over its id span plus the weights
in id order, so pruned search can read it at a few candidate sentences (``BitmapSet``) instead
of decoding it whole. ``postings.py`` chooses this format for long, dense lists."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .varint import HEAD, read_varint, varint_bytes

FORMAT_BITMAP = 5
BITMAP_DENSITY = 0.05
# Shorter lists are cheaper to decode in full than to prune (measured at 100k sentences: a
# 5-12% token's lists in 41k-sentence segments made search slower as bitmaps, not faster).
BITMAP_MIN_N = 32768

_U8 = np.uint8
_I64 = np.int64


def use_bitmap(n, span):
    """Bitmap if long and dense enough to be read at candidates only (see the module doc).
    Ints or arrays (``encode_groups`` asks for many lists at once)."""
    return (n >= BITMAP_MIN_N) & (n >= BITMAP_DENSITY * span)


def encode_bitmap(ids: np.ndarray, q: np.ndarray) -> bytes:
    lo = int(ids[0])
    span = int(ids[-1]) - lo + 1
    bits = np.zeros(span, bool)
    bits[ids - lo] = True
    return (bytes([FORMAT_BITMAP, int(q.max())]) + varint_bytes(len(ids)) + varint_bytes(lo) + varint_bytes(span)
            + q.tobytes() + np.packbits(bits, bitorder="little").tobytes())


def bitmap_header(blob: bytes) -> tuple[int, int, int, int]:
    """(n, lo, span, offset of the weights) of a FORMAT_BITMAP blob."""
    n, pos = read_varint(blob, HEAD)
    lo, pos = read_varint(blob, pos)
    span, pos = read_varint(blob, pos)
    return n, lo, span, pos


class BitmapSet:
    """Random access to several FORMAT_BITMAP blobs of one token at once (one per segment).

    Why: pruned search reads a dense token's weights only at a few candidate sentences;
    decoding its whole lists would cost O(number of sentences).  The blobs' bitmaps are ORed
    into one bitmap indexed by sentence id itself (bit i = id i, so a lookup needs no search
    for the segment) and their weights concatenated in id order, so the rank of an id (set
    bits before it: per-word popcount prefix sums) indexes the weights directly.  Blobs whose
    id ranges overlap (possible after out-of-order merges) go to separate layers (usually one).
    """

    def __init__(self, blobs: Sequence[bytes]) -> None:
        heads = sorted((bitmap_header(b) + (b,) for b in blobs), key=lambda h: h[1])
        self.n = sum(h[0] for h in heads)
        layers: list[list[tuple]] = []
        ends: list[int] = []
        for h in heads:  # greedy: the first layer whose last range ends before this one starts
            for li, e in enumerate(ends):
                if h[1] >= e:
                    layers[li].append(h)
                    ends[li] = h[1] + h[2]
                    break
            else:
                layers.append([h])
                ends.append(h[1] + h[2])
        self.layers = [self._layer(hs, e) for hs, e in zip(layers, ends)]
        self.ub = max((b[1] for b in blobs), default=0)  # a bound for pruning: each header's largest weight

    @staticmethod
    def _layer(heads: list[tuple], end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(words, set bits before each word, weights) of blobs with disjoint id ranges."""
        words = np.zeros((end + 63) // 64 + 1, np.uint64)  # + one zero word for ids >= end
        # each blob's bits padded to whole words (one copy), then shifted into place word-wise
        nw = [(h[2] + 63) // 64 for h in heads]
        scratch = np.zeros(sum(nw), np.uint64)
        raw = scratch.view(_U8)
        qs = []
        a = 0
        for (n, lo, span, pos, blob), m in zip(heads, nw):
            qs.append(np.frombuffer(blob, dtype=_U8, count=n, offset=pos))
            raw[a * 8 : a * 8 + (span + 7) // 8] = np.frombuffer(blob, dtype=_U8, count=(span + 7) // 8, offset=pos + n)
            w = scratch[a : a + m]
            o, sh = lo >> 6, lo & 63
            if sh == 0:
                words[o : o + m] |= w
            else:  # bit j of the blob is id lo + j: the high bits of a word spill into the next
                words[o : o + m] |= w << np.uint64(sh)
                words[o + 1 : o + 1 + m] |= w >> np.uint64(64 - sh)
            a += m
        before = np.zeros(len(words), _I64)
        np.cumsum(np.bitwise_count(words[:-1]), out=before[1:])
        q = np.concatenate(qs) if len(qs) > 1 else qs[0]
        if int(before[-1]) != len(q) or words[-1]:
            raise ValueError("corrupt posting blob: bitmap does not hold n ids")
        return words, before, q

    def get(self, ids: np.ndarray) -> np.ndarray:
        """Stored weights at ``ids`` (int64 >= 0, any order), 0 where a sentence is not listed."""
        ids = np.asarray(ids, dtype=_I64)
        out = np.zeros(len(ids), _U8)
        for words, before, q in self.layers:
            i = np.minimum(ids, (len(words) - 1) << 6)  # past the end: the zero word
            wi = i >> 6
            sh = (i & 63).astype(np.uint64)
            word = words[wi]
            present = ((word >> sh) & np.uint64(1)).astype(bool)
            # set bits at or below bit sh, before it in earlier words: rank + 1 when present
            r = before[wi] + np.bitwise_count(word << (np.uint64(63) - sh))
            out[present] = q[r[present] - 1]
        return out


def decode_many_bitmap(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``decode_many`` for FORMAT_BITMAP blobs only.

    Every bit is unpacked: at the format's 5% density floor that is 20 bits per id, which
    measured as fast as expanding only the nonzero bytes, and 2x faster at 30%.
    """
    heads = [bitmap_header(b) for b in blobs]
    counts = np.array([h[0] for h in heads], _I64)
    nbytes = np.array([(h[2] + 7) // 8 for h in heads], _I64)
    views = [memoryview(b) for b in blobs]  # slices without copies before the joins
    q = np.frombuffer(b"".join([v[h[3] : h[3] + h[0]] for v, h in zip(views, heads)]), _U8)
    bits = np.frombuffer(b"".join([v[h[3] + h[0] : h[3] + h[0] + n] for v, h, n in zip(views, heads, nbytes.tolist())]), _U8)
    if len(q) != counts.sum() or len(bits) != nbytes.sum():
        raise ValueError("corrupt posting blob: shorter than its header")
    # bit index in the concatenated bitmaps; as bool: numpy's nonzero is ~4x slower on uint8
    ids = np.flatnonzero(np.unpackbits(bits, bitorder="little").view(bool))
    if len(ids) != len(q):
        raise ValueError("corrupt posting blob: bitmap does not hold n ids")
    # bit index -> sentence id: + lo - (the blob's first bit) for each blob's ids
    first_bit = np.zeros(len(blobs), _I64)
    np.cumsum(nbytes[:-1] * 8, out=first_bit[1:])
    ids += np.repeat(np.array([h[1] for h in heads], _I64) - first_bit, counts)
    return counts, ids, q
