"""Where in a sentence each of its K tokens had its max: a static function from token id to
position, stored once per sentence (the ``positions`` table) for the answer phrase.

SPARC's f(v, s) = log(ReLU(max_i H(s)_i·e_v)·exp(w) + 1) (Eq. 4) is a max over the sentence's
positions i; the argmax i says which word carries token v's match (DenSPI's phrase).  `ask`
asks it only for the question tokens that scored in the sentence (``Searcher.explain``), so the
blob need not hold the token ids themselves: it is a *retrieval* structure (a Bloomier filter,
built as an XOR filter without fingerprints, Graf & Lemire 2020) that returns the right
position for any of the K stored tokens and garbage for any other.

Measured on 1,684 squad-dev sentences at K = 128 (``benchmarks/phrase_size.py``): 108 B of blob
per sentence (122 B in the VACUUMed database, 5.7% of the index), against 307 B for sorted
token-id gaps plus a byte per position and 128 B for a byte beside each posting (which the
posting codec and every merge would have to carry).

Blob layout::

    byte 0        seed of the hash (the first of 256 that builds)
    byte 1        b, bits per value (1..8): positions are < 2**b - 1, and 2**b - 1 is NO_POSITION
    uint16        s, slots per part (little-endian)
    bytes 4..     3·s values of b bits, little-endian bit order

A token's value is the XOR of its three slots, one in each third of the table.  Scoring never
reads this table: only the shown answers' rows are read, by sentence id.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sparc_local.model.sparse import NO_POSITION

_M64 = (1 << 64) - 1
_LOAD = 1.23  # table slots per key: 3-wise peeling succeeds above ~1.222 (Graf & Lemire 2020)
_SEEDS = 256  # seeds tried per table size before the table grows by a slot per part
_HEAD = 4


def _slots(token: int, seed: int, s: int) -> tuple[int, int, int]:
    """The token's three slots, one per part of s slots (a splitmix64-style mix of token and seed)."""
    x = (token * 0x9E3779B97F4A7C15 + (seed + 1) * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 31
    x = (x * 0x94D049BB133111EB) & _M64
    x ^= x >> 29
    return (x & 0x1FFFFF) % s, ((x >> 21) & 0x1FFFFF) % s + s, ((x >> 42) & 0x1FFFFF) % s + 2 * s


def _build(tokens: Sequence[int], values: Sequence[int], s: int, seed: int) -> list[int] | None:
    """The table for one seed, or None when the 3-hypergraph does not peel."""
    m = 3 * s
    hs = [_slots(t, seed, s) for t in tokens]
    count, xor = [0] * m, [0] * m
    for i, h in enumerate(hs):
        for j in h:
            count[j] += 1
            xor[j] ^= i
    order, todo = [], [j for j in range(m) if count[j] == 1]
    while todo:
        j = todo.pop()
        if count[j] != 1:
            continue
        i = xor[j]
        order.append((i, j))
        for t in hs[i]:
            count[t] -= 1
            xor[t] ^= i
            if count[t] == 1:
                todo.append(t)
    if len(order) != len(tokens):
        return None
    table = [0] * m
    for i, j in reversed(order):
        a, b, c = hs[i]
        table[j] = values[i] ^ table[a] ^ table[b] ^ table[c] ^ table[j]
    return table


def encode(tokens: Iterable[int], positions: Iterable[int]) -> bytes:
    """The blob of one sentence's (token id, position) pairs; token ids distinct, positions
    0..NO_POSITION."""
    tokens, positions = [int(t) for t in tokens], [int(p) for p in positions]
    real = [p for p in positions if p != NO_POSITION]
    bits = (max(real, default=0) + 1).bit_length()
    none = (1 << bits) - 1
    values = [none if p == NO_POSITION else p for p in positions]
    s = max(1, -(-int(_LOAD * len(tokens) + 0.999) // 3))
    while True:
        for seed in range(_SEEDS):
            table = _build(tokens, values, s, seed)
            if table is not None:
                packed = 0
                for j, v in enumerate(table):
                    packed |= v << (j * bits)
                return (bytes([seed, bits]) + s.to_bytes(2, "little")
                        + packed.to_bytes((len(table) * bits + 7) // 8, "little"))
        s += 1


def lookup(blob: bytes, tokens: Iterable[int]) -> dict[int, int]:
    """{token: its position} for tokens that are among the blob's (any other gets garbage, so
    pass only tokens that scored in the sentence); a token whose max was outside the sentence
    is left out."""
    seed, bits, s = blob[0], blob[1], int.from_bytes(blob[2:_HEAD], "little")
    packed = int.from_bytes(blob[_HEAD:], "little")
    mask = (1 << bits) - 1
    out = {}
    for t in tokens:
        a, b, c = _slots(int(t), seed, s)
        v = ((packed >> (a * bits)) ^ (packed >> (b * bits)) ^ (packed >> (c * bits))) & mask
        if v != mask:
            out[int(t)] = v
    return out
