"""Posting-list blob codec and weight quantization.

A posting list is one token's (sentence_id, weight) pairs inside one segment, sentence ids
strictly ascending.  It is stored as one SQLite BLOB whose first byte is its format tag.
Everything here is numpy-vectorized: no Python loop runs per posting.  The writer picks one of
three formats per list (``encode``); ``schema.py`` rewrites blobs of any other format once.

``FORMAT_U16`` (tag 4), the default::

    byte 0        format tag = 4
    byte 1        w, the number of 65536-id windows the list spans (1..255)
    uint16        the first window, ids[0] >> 16
    uint32        n, the number of postings
    uint8         the list's largest weight
    w x uint16    postings per window (only when w > 1)
    n x 3 bytes   one record per posting, in id order: uint16 low 16 bits of the id, uint8 weight

All little-endian.  Why: search decodes it with no per-posting Python or varint passes: the
records of all of a question's lists are joined (one bytes slice per blob) and read as one
structured array, whose two fields are widened and offset by their window in a few vectorized
calls.  Interleaved records need one slice per blob where separate id and weight runs need
two.  Measured on 100k sentences, varint decoding was about a third of a question's latency.
It costs 3 bytes per posting against ~2.25 for varints (~390 against ~288 bytes per sentence
at K = 128).  The largest weight is a bound that search reads from the header: a sentence that
is only in lists whose bounds sum below the k-th best score need not be looked at
(``maxscore._top_k_acc``).

``FORMAT_BITMAP`` (tag 5), for lists dense in their id range (near-stop tokens such as "the",
in up to 86% of sentences at K=256)::

    byte 0        format tag = 5
    uint8         the list's largest weight
    varint        n, the number of postings
    varint        lo, the first sentence id
    varint        span = last id - lo + 1
    n bytes       weights, uint8, in id order
    ceil(span/8)  bitmap: bit j (little-endian bit order) of byte b is set iff lo + 8b + j is an id

The writer picks the bitmap only for a list of at least ``BITMAP_MIN_N`` ids that holds at
least ``BITMAP_DENSITY`` (5%) of the ids of its range.  A bitmap gives O(1) random access
(``BitmapSet``): the rank of an id is a popcount, so pruned search reads such a token's weights
only at candidate sentences instead of decoding its whole list.  Why only long lists, even
where a bitmap would be smaller than ``FORMAT_U16``: reading a list at candidates pays only
when the list is long; shorter dense lists are faster summed.  Measured at 100k sentences
(41k-sentence segments): p50 0.254 ms with no bitmaps under 32768 ids, against 0.340 ms with
bitmaps from 8192 ids or wherever smaller, for +4 B/sentence; at 1M, 0.925 against 0.975 ms.
Why 5%: measured on 1M sentences, 5%-12% tokens hold most of a question's postings left after
the near-stop ones.

``FORMAT_V1`` (tag 6, ``varint.py``), for a list ``FORMAT_U16`` cannot hold (ids >= 2^32, more
than 255 windows or 65535 ids in a window)::

    byte 0        format tag = 6
    uint8         the list's largest weight
    varint        n, the number of postings (LEB128: 7 bits per byte, low group first,
                  high bit set on every byte except the last)
    n bytes       weights, uint8 quantized (see below), in id order
    n varints     id gaps: gap[0] = ids[0], gap[i] = ids[i] - ids[i-1] - 1   (LEB128)

The "- 1" works because ids are strictly ascending, so a dense run of ids costs one byte per
posting for the id plus one for the weight.

Every format holds its list's largest weight in its header.  Why: the hybrid divides each field
by the question's attainable maximum, the sum of its keys' largest weights (``fusion.py``); a
bound that depended on the format (bitmaps and V1 once stored none) made the same question
weigh its fields differently once an index grew large enough to hold bitmaps.  Tags 1-3 are
earlier layouts, rewritten once by ``schema.py``.

``LAYOUT_VERSION`` numbers the writer's choices (benchmarks key cached indexes by it).

Weights: f(v, s) > 0 is stored as ``q = round(f / scale)`` clipped to 0..255, where ``scale``
is one number per index (meta key ``weight_scale``), chosen by the caller as
``ceiling / 255`` (default ceiling ``DEFAULT_WEIGHT_CEILING`` = 16.0, i.e. a step of ~0.063;
weights above the ceiling are clipped to 255).  Weights that round to 0 (f < scale / 2)
are dropped by the writer: they cannot change a score by more than half a step each.
Because the scale is global, scores can be accumulated on the uint8 values and multiplied
by the scale once at the end, and equal sums are exact ties.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from .bitmap import FORMAT_BITMAP, BitmapSet, decode_many_bitmap, encode_bitmap, use_bitmap  # noqa: F401 (BitmapSet: codec API)
from .varint import FORMAT_V1, HEAD, decode_many_v1, gaps, read_varint, varint_bytes, varint_decode, varint_encode

FORMAT_U16 = 4
# the writer's formats and its choice between them: FORMAT_U16, bitmaps at >= BITMAP_MIN_N ids
# and BITMAP_DENSITY, FORMAT_V1 where FORMAT_U16 does not fit
LAYOUT_VERSION = 8
DEFAULT_WEIGHT_CEILING = 16.0
QMAX = 255

_U8 = np.uint8
_I64 = np.int64
_U16LE = np.dtype("<u2")
_REC = np.dtype([("low", "<u2"), ("q", "u1")])  # a FORMAT_U16 record, 3 bytes
U16_HEAD = struct.Struct("<BBHI")  # tag, windows, first window, n
_U16_MAX = U16_HEAD.size  # FORMAT_U16: the offset of the max weight byte, after that header
_WIN_BITS = 16


# --------------------------------------------------------------------------- quantization


def scale_for_ceiling(ceiling: float = DEFAULT_WEIGHT_CEILING) -> float:
    """The scale mapping q = 255 to ``ceiling``."""
    if not ceiling > 0:
        raise ValueError(f"weight ceiling must be > 0, got {ceiling!r}")
    return float(ceiling) / QMAX


def quantize(weights: np.ndarray, scale: float) -> np.ndarray:
    """float weights -> uint8, q = round(w / scale) clipped to [0, 255]."""
    w = np.asarray(weights, dtype=np.float32)
    q = np.rint(w / np.float32(scale))
    np.clip(q, 0, QMAX, out=q)
    return q.astype(_U8)


def dequantize(q: np.ndarray, scale: float) -> np.ndarray:
    return np.asarray(q, dtype=np.float32) * np.float32(scale)


# --------------------------------------------------------------------------- codec


def encode(sentence_ids: np.ndarray, weights: np.ndarray) -> bytes:
    """Pack one posting list. ids strictly ascending and >= 0; weights uint8 (already quantized)."""
    ids = np.asarray(sentence_ids, dtype=_I64)
    q = np.asarray(weights)
    if q.dtype != _U8:
        raise TypeError(f"weights must be quantized uint8, got {q.dtype}")
    if ids.ndim != 1 or ids.shape != q.shape:
        raise ValueError("sentence_ids and weights must be 1-d arrays of equal length")
    g = gaps(ids)
    if len(g) and g.min() < 0:
        raise ValueError("sentence ids must be >= 0 and strictly ascending")
    if len(ids) and use_bitmap(len(ids), int(ids[-1] - ids[0] + 1)):
        return encode_bitmap(ids, q)
    return _encode_u16(ids, q) or encode_v1(ids, q)


def encode_v1(ids: np.ndarray, q: np.ndarray) -> bytes:
    """A FORMAT_V1 blob (any list: the writer keeps it for lists FORMAT_U16 cannot hold)."""
    return (bytes([FORMAT_V1, int(q.max()) if len(q) else 0]) + varint_bytes(len(ids)) + q.tobytes()
            + varint_encode(gaps(ids)).tobytes())


def _records(ids: np.ndarray, q: np.ndarray) -> bytes:
    """FORMAT_U16 records of a list (or of many lists, concatenated)."""
    rec = np.empty(len(ids), _REC)
    rec["low"] = ids & 0xFFFF
    rec["q"] = q
    return rec.tobytes()


def _encode_u16(ids: np.ndarray, q: np.ndarray) -> bytes | None:
    """A FORMAT_U16 blob, or None when the list does not fit the format."""
    n = len(ids)
    if n == 0 or int(ids[-1]) >> 32:
        return None
    w0 = int(ids[0]) >> _WIN_BITS
    nwin = (int(ids[-1]) >> _WIN_BITS) - w0 + 1
    table = b""
    if nwin > 1:
        if nwin > 255:
            return None
        per = np.bincount((ids >> _WIN_BITS) - w0, minlength=nwin)
        if per.max() > 0xFFFF:
            return None
        table = per.astype(_U16LE).tobytes()
    return U16_HEAD.pack(FORMAT_U16, nwin, w0, n) + bytes([int(q.max())]) + table + _records(ids, q)


def header(blob: bytes) -> tuple[int, int]:
    """(format tag, number of postings) without decoding anything."""
    if blob[0] == FORMAT_U16:
        return blob[0], U16_HEAD.unpack_from(blob)[3]
    return blob[0], read_varint(blob, HEAD)[0]


def bound(blob: bytes) -> int:
    """A blob's largest weight, read from its header (no decoding: search asks this of every
    summed blob, and the hybrid divides each field by the sum of its keys' maxima)."""
    return blob[_U16_MAX] if blob[0] == FORMAT_U16 else blob[1]


def decode(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Unpack a blob -> (sentence_ids int64 ascending, weights uint8).

    The weights array is a read-only view of ``blob``.
    """
    if not blob:
        raise ValueError("empty posting blob")
    tag = blob[0]
    if tag == FORMAT_BITMAP:
        return decode_many_bitmap([blob])[1:]
    if tag == FORMAT_U16:
        return decode_many_u16([blob])[1:]
    if tag != FORMAT_V1:
        raise ValueError(f"unknown posting blob format {tag}")
    n, pos = read_varint(blob, HEAD)
    q = np.frombuffer(blob, dtype=_U8, count=n, offset=pos)
    rest = np.frombuffer(blob, dtype=_U8, offset=pos + n)
    if n == 0:
        return np.zeros(0, _I64), q
    ids = varint_decode(rest, n)
    ids[1:] += 1
    np.cumsum(ids, out=ids)
    return ids, q


def encode_groups(
    keys: np.ndarray, sentence_ids: np.ndarray, weights: np.ndarray
) -> list[tuple[int, bytes]]:
    """Pack many posting lists at once.

    Input is sorted by (key, sentence_id), e.g. key = token id; weights uint8.  Returns
    ``[(key, blob), ...]`` with one blob per distinct key, identical to ``encode`` on each group.
    """
    keys = np.asarray(keys, dtype=_I64)
    ids = np.asarray(sentence_ids, dtype=_I64)
    q = np.asarray(weights)
    if q.dtype != _U8:
        raise TypeError(f"weights must be quantized uint8, got {q.dtype}")
    if not (keys.shape == ids.shape == q.shape) or keys.ndim != 1:
        raise ValueError("keys, sentence_ids and weights must be 1-d arrays of equal length")
    n = len(keys)
    if n == 0:
        return []
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    if np.any(keys[1:] < keys[:-1]):
        raise ValueError("keys must be sorted")
    g = np.empty(n, _I64)
    g[0] = ids[0]
    np.subtract(ids[1:], ids[:-1], out=g[1:])
    g -= 1
    g[starts] = ids[starts]
    if g.min() < 0:
        raise ValueError("sentence ids must be >= 0 and strictly ascending within each key")
    recs = _records(ids, q)
    ends = np.append(starts[1:], n)
    counts = ends - starts
    spans = ids[ends - 1] - ids[starts] + 1
    win = ids >> _WIN_BITS
    nwin = win[ends - 1] - win[starts] + 1
    bitmap = use_bitmap(counts, spans)
    qmax = np.maximum.reduceat(q, starts).tolist()
    head = U16_HEAD.pack
    out = []
    for k, a, b, w, bm, m in zip(keys[starts].tolist(), starts.tolist(), ends.tolist(), nwin.tolist(), bitmap.tolist(), qmax):
        if bm:
            out.append((k, encode_bitmap(ids[a:b], q[a:b])))
        elif w == 1 and not ids[b - 1] >> 32:  # the common case, without numpy calls
            out.append((k, head(FORMAT_U16, 1, int(ids[a]) >> _WIN_BITS, b - a) + bytes((m,)) + recs[3 * a : 3 * b]))
        else:
            out.append((k, encode(ids[a:b], q[a:b])))
    return out


def decode_many(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unpack many blobs at once -> (counts, ids, weights).

    ``ids``/``weights`` are all lists concatenated (blob i owns the ``counts[i]`` entries after
    ``counts[:i].sum()``), identical to calling ``decode`` on each.  Why: the per-call cost of
    numpy dominates on a question's ~100 lists, so the blobs of each format are decoded in one
    vectorized pass.
    """
    m = len(blobs)
    tags = [b[0] if b else 0 for b in blobs]
    bad = [i for i, t in enumerate(tags) if t not in _DECODERS]
    if bad:
        decode(blobs[bad[0]])  # raises the reason
    present = set(tags)
    if len(present) <= 1:
        return _DECODERS[tags[0]](blobs) if m else decode_many_u16(blobs)
    groups = []
    for tag in sorted(present):
        idx = np.array([i for i, t in enumerate(tags) if t == tag], _I64)
        groups.append((idx, _DECODERS[tag]([blobs[i] for i in idx.tolist()])))
    counts = np.empty(m, _I64)
    for idx, (c, _, _) in groups:
        counts[idx] = c
    offs = np.zeros(m, _I64)
    np.cumsum(counts[:-1], out=offs[1:])
    total = int(counts.sum())
    ids = np.empty(total, _I64)
    q = np.empty(total, _U8)
    for idx, (c, gids, gq) in groups:
        pos = _ranges(offs[idx], c, len(gids))
        ids[pos] = gids
        q[pos] = gq
    return counts, ids, q


def decode_many_u16(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``decode_many`` for FORMAT_U16 blobs only (any other tag raises).

    Per blob: one header unpack and one slice of its records; then one join, one structured
    view, and one window offset (``np.repeat``) for all of them.  (Measured: joining the
    window tables and expanding them vectorized was 2% faster at 1M sentences, 6% slower at
    100k, where lists span one or two windows.)
    """
    head = U16_HEAD.unpack_from
    recs, counts, win_n, win_base = [], [], [], []
    for b in blobs:
        tag, nwin, w0, n = head(b)
        hsize = _U16_MAX + 1
        if nwin == 1:
            o = hsize
            win_n.append(n)
            win_base.append(w0 << _WIN_BITS)
        else:
            o = hsize + 2 * nwin
            per = np.frombuffer(b, _U16LE, nwin, hsize).tolist()
            if nwin == 0 or sum(per) != n:
                raise ValueError("corrupt posting blob: FORMAT_U16 windows do not hold n ids")
            win_n += per
            win_base += range(w0 << _WIN_BITS, (w0 + nwin) << _WIN_BITS, 1 << _WIN_BITS)
        if tag != FORMAT_U16 or len(b) != o + 3 * n:
            raise ValueError("corrupt posting blob: FORMAT_U16 length does not match its header")
        recs.append(memoryview(b)[o:])  # no copy before the join
        counts.append(n)
    rec = np.frombuffer(b"".join(recs), _REC)
    ids = rec["low"].astype(_I64)
    if win_base:
        ids += np.repeat(np.array(win_base, _I64), win_n)
    return np.array(counts, _I64), ids, rec["q"]  # a strided view: callers widen it anyway


def decode_lists(blobs: Sequence[bytes]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[decode(b) for b in blobs]``, faster when many blobs are short."""
    m = len(blobs)
    out: list = [None] * m
    for tag in (FORMAT_V1, FORMAT_U16):
        small = [i for i, b in enumerate(blobs) if b and b[0] == tag]
        if len(small) > 1:
            counts, ids, q = _DECODERS[tag]([blobs[i] for i in small])
            a = 0
            for i, b in zip(small, np.cumsum(counts).tolist()):
                out[i] = (ids[a:b], q[a:b])
                a = b
    for i in range(m):
        if out[i] is None:
            out[i] = decode(blobs[i])
    return out


_DECODERS = {FORMAT_V1: decode_many_v1, FORMAT_BITMAP: decode_many_bitmap, FORMAT_U16: decode_many_u16}


def decoder(tag: int):
    """``decode_many`` for blobs that all have format ``tag``, without checking them first."""
    if tag not in _DECODERS:
        raise ValueError(f"unknown posting blob format {tag}")
    return _DECODERS[tag]


def _ranges(starts: np.ndarray, lengths: np.ndarray, total: int) -> np.ndarray:
    """concatenate(arange(s, s + n) for s, n in zip(starts, lengths)), vectorized."""
    if total == 0:
        return np.zeros(0, _I64)
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=_I64) + shift
