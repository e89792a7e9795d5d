"""Distillation from a teacher SPARC model's sparse vectors (issue 13, lever 4: model v1 into v2).

The teacher's vectors of every training sentence are encoded once through the product path
(``evaluation.evaluate.encode_corpus``, cached per set and model in the data dir given as
``home``), at the eval cache's K, so they stand in for the teacher's full-vocabulary f. Its score
of (question, candidate) is then a sparse lookup, g_t(q, s) = Σ_{v∈q} f_t(v, s) (SPARC Eq. 2),
with no teacher forward pass at training time.

The term added to the cross-entropy is Hinton et al. (2015)'s, over each question's in-batch
candidates: α·T²·KL(softmax(g_t/T) ‖ softmax(g/T)); T² keeps its gradient's scale independent of
T. Formal et al. (SIGIR 2022) distil a sparse retriever's scores the same way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sparc_local import paths
from sparc_local.evaluation import reqa
from sparc_local.evaluation.evaluate import encode_corpus
from sparc_local.model.info import ModelInfo
from sparc_local.model.sparse import SparseVectors


class Teacher:
    """A teacher's sparse vectors, one row per training sentence in the pool's global order."""

    def __init__(self, vectors: SparseVectors) -> None:
        self.vectors = vectors

    @classmethod
    def load(cls, model: Path, data_dir: Path, sets: tuple[str, ...], home: Path,
             threads: int | None = 1) -> Teacher:
        """The teacher's vectors of ``sets`` (the pool's order), encoded once and then read from
        ``home``'s eval cache. The first call encodes every sentence, which takes long."""
        info = ModelInfo.load(Path(model))
        parts = []
        with paths.using(Path(home).expanduser()):
            for name in sets:
                folder = Path(data_dir) / name
                parts.append(encode_corpus(reqa.load(folder), folder, info, threads))
        return cls(SparseVectors.concat(parts))

    def f(self, sents: list[int], union: np.ndarray) -> torch.Tensor:
        """The teacher's f(v, s) of the sentences ``sents`` at the tokens ``union`` (0 where it
        stored none), shape (sentences, tokens); g_t = qmask @ f.T."""
        return torch.from_numpy(dense_rows(self.vectors, sents, union))

    def top_tokens(self, sents: list[int], k: int) -> np.ndarray:
        """The union of the sentences' k highest-weighted teacher tokens, sorted."""
        keys = [t[np.argsort(-w, kind="stable")[:k]] for t, w in (self.vectors.row(s) for s in sents)]
        return np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)


def dense_rows(vectors: SparseVectors, rows: list[int], columns: np.ndarray) -> np.ndarray:
    """``vectors``' weights of ``rows`` at the sorted keys ``columns`` (0 where a row has none),
    shape (rows, columns)."""
    out = np.zeros((len(rows), len(columns)), dtype=np.float32)
    for i, r in enumerate(rows):
        keys, w = vectors.row(r)
        at = np.minimum(np.searchsorted(columns, keys), len(columns) - 1)
        hit = columns[at] == keys
        out[i, at[hit]] = w[hit]
    return out


def kl_term(student: torch.Tensor, teacher: torch.Tensor, temp: float) -> torch.Tensor:
    """T²·KL(softmax(teacher/T) ‖ softmax(student/T)), the mean over questions (rows).

    A candidate the student's scores mask out (-inf, e.g. another answer of the question) is
    left out of the teacher's distribution too, so both range over the same candidates.
    """
    keep = torch.isfinite(student)
    log_p = F.log_softmax(teacher.masked_fill(~keep, float("-inf")) / temp, dim=1)
    log_q = F.log_softmax(student / temp, dim=1)
    # where() before the product: masked entries are -inf - -inf, whose gradient would be NaN
    diff = torch.where(keep, log_p - log_q, torch.zeros_like(log_q))
    return temp ** 2 * (log_p.exp() * diff).sum(1).mean()
