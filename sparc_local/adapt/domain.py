"""How far a corpus is from the text the model was trained on: the gate in front of `adapt`.

SPARC §5.1 replaces the embedding matrix E by one trained with masked-LM on the user's sentences,
to reduce "discrepancies between the sentence sets in the training and inference phases". The
paper's own table shows the other side: the replacement helped on TriviaQA, SearchQA and BioASQ,
and cost on SQuAD and Natural Questions, whose text is the training domain's. Ours does the same
(model card, "Adapt"): it loses a little on SQuAD and NewsQA. So `adapt` first measures the
discrepancy it is meant to reduce, and declines (unless forced) where there is little of it.

The measure: the share of the corpus's token occurrences that are of its OWN tokens, those at
least ``RATIO`` times more frequent in the corpus than in the model's training text (and seen at
least ``MIN_COUNT`` times). The training text's token counts ship in the model folder
(``REFERENCE_FILE``); a model without them is never gated.

Pure numpy apart from reading and writing that one file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REFERENCE_FILE = "reference_counts.npz"  # in a model folder: token counts of its training text
RATIO = 10.0  # a corpus's own token: at least this many times more frequent than in the training text
MIN_COUNT = 5  # ... and seen at least this often in the corpus (a few rare words are no domain)
# adapt when at least this share of the corpus's tokens are its own. Chosen on the training text
# alone (sparc_lab/reference.py prints it): corpora of 300 to 8,000 consecutive training sentences,
# each against the rest, have medians of 0.9% to 5.2% and at most 18.9% (at 300 sentences: the
# smaller the corpus, the more its topic's words stand out); the threshold lies above them all.
MIN_SHARE = 0.20


@dataclass(frozen=True)
class Distance:
    """How much of a corpus is its own vocabulary (see the module docstring)."""

    share: float  # of the corpus's token occurrences, those of its own tokens
    own_tokens: int  # how many distinct tokens are its own
    threshold: float = MIN_SHARE

    @property
    def far(self) -> bool:
        return self.share >= self.threshold


def percent(share: float, threshold: float = MIN_SHARE) -> str:
    """``share`` as a percentage; a share just below the threshold is cut, not rounded, to one
    decimal, so that it never prints as the threshold itself ("19.9%", not "20%")."""
    if share >= threshold or round(share, 2) < threshold:
        return f"{share:.0%}"
    return f"{math.floor(share * 1000) / 10:.1f}%"


def count_tokens(encodings: Iterable, vocab_size: int) -> np.ndarray:
    """Occurrences of each token id in tokenizer encodings (objects with ``.ids``)."""
    ids = np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), np.int64)
    return np.bincount(ids, minlength=vocab_size)


def distance(counts: np.ndarray, reference: np.ndarray) -> Distance:
    """The corpus's ``counts`` against the training text's ``reference`` (same vocabulary; add-one
    smoothing, so a token the training text never had counts as seen once)."""
    n = counts.sum()
    if n == 0:
        return Distance(0.0, 0)
    own = own_tokens(counts, reference)
    return Distance(float(counts[own].sum() / n), int(own.sum()))


def own_tokens(counts: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The mask of the corpus's own tokens: seen at least MIN_COUNT times, and at least RATIO
    times more frequent than in the training text (add-one smoothed)."""
    n = max(int(counts.sum()), 1)
    ratio = (counts / n) / ((reference + 1.0) / (reference.sum() + len(reference)))
    return (counts >= MIN_COUNT) & (ratio >= RATIO)


def load_reference(folder: Path) -> np.ndarray | None:
    """The training text's token counts of a model folder, or None when it ships none."""
    path = Path(folder) / REFERENCE_FILE
    if not path.is_file():
        return None
    with np.load(path) as z:
        return z["counts"].astype(np.int64)


def write_reference(folder: Path, counts: np.ndarray, sources: list[str]) -> Path:
    """Store the training text's token counts (and what they were counted on) in a model folder."""
    path = Path(folder) / REFERENCE_FILE
    np.savez_compressed(path, counts=np.asarray(counts, np.uint32), sources=np.array(sources))
    return path
