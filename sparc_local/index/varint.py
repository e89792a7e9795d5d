"""LEB128 varints and the posting blob format that uses them, ``FORMAT_V1``.

V1 holds the lists ``FORMAT_U16`` cannot (ids >= 2^32, or spread over too many 65536-id
windows); ``postings.py`` gives the byte layout, and bitmap headers use the varints too.
Everything is numpy-vectorized: no Python loop runs per value, only per byte-length class of
the varints.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FORMAT_V1 = 6
HEAD = 2  # the tag and the largest weight (one byte each) before a V1 or bitmap blob's varints

_U8 = np.uint8
_I64 = np.int64


def varint_encode(values: np.ndarray) -> np.ndarray:
    """Non-negative integers -> concatenated LEB128 bytes (uint8 array)."""
    v = np.asarray(values).astype(np.uint64, copy=False)
    n = len(v)
    if n == 0:
        return np.zeros(0, _U8)
    # number of 7-bit groups of each value (>= 1)
    nbytes = np.ones(n, _I64)
    t = v >> np.uint64(7)
    while True:
        nz = t != 0
        if not nz.any():
            break
        nbytes += nz
        t >>= np.uint64(7)
    maxlen = int(nbytes.max())
    if maxlen == 1:
        return v.astype(_U8)  # every value < 128: the fast, common case
    starts = np.zeros(n, _I64)
    np.cumsum(nbytes[:-1], out=starts[1:])
    out = np.empty(int(starts[-1] + nbytes[-1]), _U8)
    for j in range(maxlen):
        m = nbytes > j
        vj = v[m] >> np.uint64(7 * j)
        b = (vj & np.uint64(0x7F)).astype(_U8)
        b[nbytes[m] > j + 1] |= 0x80
        out[starts[m] + j] = b
    return out


def varint_decode(buf: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` LEB128 values of ``buf`` (which must hold exactly n values) as int64."""
    b = buf
    if len(b) == n:  # n values in n bytes: all single-byte
        return b.astype(_I64)
    ends = np.flatnonzero(b < 0x80)  # the last (most significant) byte of every value
    if len(ends) != n or (n and ends[-1] != len(b) - 1):
        raise ValueError("corrupt posting blob: varint stream does not hold exactly n values")
    out = b[ends].astype(_I64)
    # multi-byte values: fold in the byte before, while it is a continuation byte (a previous
    # value's last byte never is); the first round is over all values, later ones over few
    pos = ends - 1
    multi = np.flatnonzero((pos >= 0) & (b[np.maximum(pos, 0)] >= 0x80))
    pos = pos[multi]
    while len(multi):
        out[multi] = (out[multi] << 7) | (b[pos] & 0x7F)
        pos -= 1
        keep = (pos >= 0) & (b[np.maximum(pos, 0)] >= 0x80)
        multi, pos = multi[keep], pos[keep]
    return out


def read_varint(blob: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = blob[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def varint_bytes(x: int) -> bytes:
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def gaps(ids: np.ndarray) -> np.ndarray:
    g = np.empty(len(ids), _I64)
    if len(ids):
        g[0] = ids[0]
        np.subtract(ids[1:], ids[:-1], out=g[1:])
        g[1:] -= 1
    return g


def decode_many_v1(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``decode_many`` for FORMAT_V1 blobs only (any other tag raises)."""
    m = len(blobs)
    if m == 0:
        return np.zeros(0, _I64), np.zeros(0, _I64), np.zeros(0, _U8)
    lens = np.fromiter(map(len, blobs), dtype=_I64, count=m)
    if lens.min() < HEAD + 1:
        raise ValueError("corrupt posting blob: too short")
    buf = np.frombuffer(b"".join(blobs), dtype=_U8)
    offs = np.zeros(m + 1, _I64)
    np.cumsum(lens, out=offs[1:])
    start = offs[:-1]
    if np.any(buf[start] != FORMAT_V1):
        raise ValueError(f"unknown posting blob format {int(buf[start][buf[start] != FORMAT_V1][0])}")
    # the count varint after the tag and largest-weight bytes
    counts = np.zeros(m, _I64)
    hdr = np.full(m, HEAD, _I64)  # header length so far
    active = np.arange(m)
    j = 0
    while len(active):
        b = buf[start[active] + HEAD + j].astype(_I64)
        counts[active] |= (b & 0x7F) << (7 * j)
        hdr[active] += 1
        active = active[b >= 0x80]
        j += 1
    wstart = start + hdr
    gstart = wstart + counts
    if np.any(gstart + counts > offs[1:]):
        raise ValueError("corrupt posting blob: shorter than its count")
    total = int(counts.sum())
    # label every byte header 0 / weight 1 / gap 2: two boolean masks beat index ranges
    lab = np.repeat(np.tile(np.array([0, 1, 2], _U8), m), np.stack([hdr, counts, offs[1:] - gstart], 1).ravel())
    q = buf[lab == 1]
    vals = varint_decode(buf[lab == 2], total)
    # per-list prefix sums: gap -> id (first value of a list is absolute); one cumsum over all
    # lists once each list's first value is reduced by the previous list's sum (its last id)
    vals += 1
    firsts = np.zeros(m, _I64)
    np.cumsum(counts[:-1], out=firsts[1:])
    firsts = firsts[counts > 0]
    if len(firsts) == 0:
        return counts, vals, q
    vals[firsts] -= 1
    if len(firsts) > 1:
        sums = np.add.reduceat(vals, firsts)
        vals[firsts[1:]] -= sums[:-1]
    return counts, np.cumsum(vals, out=vals), q
