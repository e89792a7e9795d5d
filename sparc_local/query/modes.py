"""`ask --mode`'s names, spelled once. No imports: the CLI's parsers (Typer's and entry.py's) read
them without loading the scorer."""

from __future__ import annotations

from enum import Enum


class Mode(str, Enum):
    """hybrid: SPARC fused with BM25 (``fusion.py``); sparc or bm25: one alone. Lowercase members:
    Typer shows a choice by its value and documents (str, Enum) choices."""

    hybrid = "hybrid"
    sparc = "sparc"
    bm25 = "bm25"


HYBRID, SPARC, BM25 = Mode.hybrid.value, Mode.sparc.value, Mode.bm25.value
MODES = tuple(m.value for m in Mode)
