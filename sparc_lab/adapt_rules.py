"""adapt's row rules for research: which rows of E an MLM run may change.

The product trains its corpus's own tokens' rows (``sparc_local.adapt.run.trainable_rows``, with
the corpus's tokens when it has none of its own). The other rules were measured and lost (model
card, "Adapt"; README, "Is it worth it?") and were never on the CLI; the benchmarks that compare
them (benchmarks/adapt_mechanism.py, benchmarks/adapt_paired.py) take them from here. The other
variant that lost, E swapped on the output side only, is kept by the git tag `v2-research`.
"""

from __future__ import annotations

import numpy as np

from sparc_local.adapt.run import ROWS_CORPUS, ROWS_OWN, AdaptError, trainable_rows

ROWS_ALL = "all"  # every row, SPARC §5.1 as published
ROW_RULES = (ROWS_OWN, ROWS_CORPUS, ROWS_ALL)


def rows_by_rule(rule: str, counts: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray | None:
    """The rows ``rule`` trains: None for every row, else sorted token ids. ``counts`` are the
    corpus's token counts (``adapt.run.corpus_counts``); ``reference``, the training text's, which
    the own rule needs (without them it trains the corpus's tokens, as adapt does)."""
    if rule == ROWS_ALL:
        return None
    if rule == ROWS_CORPUS:
        return trainable_rows(counts, None)[1]
    if rule == ROWS_OWN:
        return trainable_rows(counts, reference)[1]
    raise AdaptError(f"unknown row rule {rule!r}", f"Use one of {', '.join(ROW_RULES)}.")
