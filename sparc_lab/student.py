"""Distil a smaller SPARC encoder from a shipped one: fewer layers, the same E and head (issue 46).

    python -m sparc_lab.student --teacher ~/.cache/sparc-local-train/teacher-l6 --keep 0,2,5 \
        --tech ~/.cache/sparc-local-train/tech-v3 --tech-share 0.5 --tech-rewrite 0.5 --tech-natural-first \
        --run ~/.cache/sparc-local-train/student3 --steps 900 --batch 16 --lr 1e-4 --warmup 50 \
        --topk 128 --topk-temp 0.2 --threads 2 --valid-every 200 --ckpt-every 20 --seed 46

The whole chain from nothing (the technical build, the three stages, the export as it ships, the
MLM head and the comparisons), resumable, and the one place its settings are written:
`bash sparc_lab/recipes/student46.sh`.

The student starts from the teacher's own weights with the other layers dropped (DistilBERT's
initialisation, Sanh et al. 2019) and keeps the frozen E that `adapt` retrains (SPARC §5.1). Each
step trains on train.py's batches (the same questions, hard negatives and top-K-aware f) with:
- the SPARC cross-entropy over in-batch candidates (SPARC §6.2);
- Hinton's KL of the teacher's g(q, s) over the same candidates (distill.kl_term), the teacher's f
  cut at its top K as the index cuts it;
- the mean squared error of f(v, s) against the teacher's (SPARC Eq. 4) over the questions' tokens,
  the candidates' own input tokens and a uniform sample of the vocabulary, so the projection onto
  all of V is never computed with a gradient; with --f-teacher-top N also at each candidate's top N
  tokens under the teacher, the pairs its index keeps, expansion terms included;
- the mean squared error of the last hidden states H(s) over real tokens (TinyBERT's hidden-state
  term, Jiao et al. 2020).
With --hybrid the cross-entropy and the KL are taken on the hybrid score (sparc_lab/hybrid.py), so
the student learns what the teacher adds on top of BM25, which is how `ask` uses it; --sparc-kl
adds the KL of SPARC's own score, which `ask --mode sparc` ranks by. The teacher
runs forward, without gradient, on the same inputs at every step; a rerun resumes.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sparc_lab.distill import kl_term
from sparc_lab.model import TorchEncoder
from sparc_lab.train import Trainer, in_batch_ce, run
from sparc_lab.train import parse_args as train_args
from sparc_local.model.folder import load_encoder_weights
from sparc_local.model.info import ModelInfo
from sparc_local.model.inputs import pad_batch
from sparc_local.model.weights import ArchConfig, Weights, load_canonical

_SLICE = 4096  # vocabulary rows per slice of _teacher_top's exact projection


def student_weights(cfg: ArchConfig, w: Weights, keep: list[int]) -> tuple[ArchConfig, Weights]:
    """The teacher's embeddings and its layers ``keep``, renumbered 0..len(keep)-1."""
    if not keep or any(not 0 <= i < cfg.layers for i in keep):
        raise ValueError(f"--keep takes layers of 0..{cfg.layers - 1}")
    out = {k: v for k, v in w.items() if not k.startswith("l") or not k[1].isdigit()}
    for new, old in enumerate(keep):
        prefix = f"l{old}."
        out.update({f"l{new}.{k[len(prefix):]}": v for k, v in w.items() if k.startswith(prefix)})
    return replace(cfg, layers=len(keep)), out


class StudentTrainer(Trainer):
    def _weights(self, base: Path) -> tuple[ArchConfig, Weights]:
        info = ModelInfo.load(base)
        cfg, w = load_encoder_weights(info)
        self.teacher_model = TorchEncoder(cfg, w).eval()
        for p in self.teacher_model.parameters():
            p.requires_grad_(False)
        with torch.no_grad():
            self.teacher_model.sparsity.fill_(info.sparsity_w)
        self.args.w_init = info.sparsity_w
        if self.args.init:  # a student's own weights and w, trained further
            scfg, sw = load_canonical(self.args.init)
            if "sparsity.w" in sw:
                self.args.w_init = float(sw["sparsity.w"])
            return scfg, sw
        keep = [int(i) for i in self.args.keep.split(",")]
        return student_weights(cfg, w, keep)

    def _columns(self, union: np.ndarray, ids: torch.Tensor, t_hidden: torch.Tensor,
                 mask: torch.Tensor) -> np.ndarray:
        """Where f is compared with the teacher's: the questions' tokens, the candidates' input
        tokens the index can keep, a uniform sample of the vocabulary and, with --f-teacher-top,
        each candidate's top tokens under the teacher (the pairs its index keeps, expansion terms
        included); sorted, unique."""
        own = np.intersect1d(np.unique(ids.numpy()), self.kept_vocab)
        sample = self.rng.choice(self.kept_vocab, self.args.column_sample, replace=False)
        parts = [union, own, sample]
        if self.args.f_teacher_top:
            parts.append(self._teacher_top(t_hidden, mask, self.args.f_teacher_top))
        return np.unique(np.concatenate(parts))

    @torch.no_grad()
    def _teacher_top(self, t_hidden: torch.Tensor, mask: torch.Tensor, k: int) -> np.ndarray:
        """The union over the candidates of each one's ``k`` largest teacher f over the kept
        vocabulary, exact (the projection in slices of the vocabulary, without gradient)."""
        vocab = torch.from_numpy(self.kept_vocab.astype(np.int64))
        f = torch.cat([self.teacher_model.token_scores(t_hidden, mask, vocab[i:i + _SLICE])
                       for i in range(0, len(vocab), _SLICE)], dim=1)
        top = f.topk(min(k, f.shape[1]), dim=1).indices
        return np.unique(self.kept_vocab[top.numpy()])

    def _loss(self, questions: list[str], cand: list[int],
              answer_sets: list[set[int]]) -> tuple[torch.Tensor, dict[str, float]]:
        a = self.args
        qmask, union = self._question_tokens(questions)
        ids, types, mask = (torch.from_numpy(x) for x in pad_batch([self.inputs[c] for c in cand]))
        hidden = self.model(ids, types, mask)
        with torch.no_grad():
            t_hidden = self.teacher_model(ids, types, mask)
        cols = self._columns(union, ids, t_hidden, mask)
        tokens = torch.from_numpy(cols.astype(np.int64))
        f_all = self.model.token_scores(hidden, mask, tokens)
        with torch.no_grad():
            ft_all = self.teacher_model.token_scores(t_hidden, mask, tokens)
        at = np.searchsorted(cols, union)
        f, ft = f_all[:, at], ft_all[:, at]
        if a.topk:
            f = f * self._keep(f, False, lambda s: self.model.topk_threshold(hidden, mask, s, a.topk, len(self.kept_vocab)))
            ft = ft * self._keep(ft, True, lambda s: self.teacher_model.topk_threshold(
                t_hidden, mask, s, a.topk, len(self.kept_vocab)))
        # with --hybrid both scores carry the fused BM25 parts (sparc_lab/hybrid.py), so the
        # student is taught what the teacher adds on top of BM25, where `ask` uses it
        g, ce = in_batch_ce(self._score(qmask, union, cand, f), cand, answer_sets)
        kl = kl_term(g, self._score(qmask, union, cand, ft), a.distill_temp)
        if a.sparc_kl and self.lexical is not None:  # SPARC alone (`ask --mode sparc`) kept the teacher's too
            plain, _ = in_batch_ce(qmask @ f.T, cand, answer_sets)
            kl = kl + a.sparc_kl * kl_term(plain, qmask @ ft.T, a.distill_temp)
        mse_f = F.mse_loss(f_all, ft_all)
        real = mask.unsqueeze(-1).to(hidden.dtype)
        mse_h = ((hidden - t_hidden) ** 2 * real).sum() / (real.sum() * hidden.shape[-1])
        loss = ce + a.distill_weight * kl + a.f_weight * mse_f + a.h_weight * mse_h
        parts = {"ce": ce.item(), "kl": kl.item(), "mse_f": mse_f.item(), "mse_h": mse_h.item()}
        return loss, {k: round(v, 4) for k, v in parts.items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--teacher", required=True, help="the teacher's model folder (student46.sh takes sparc-minilm-l6 from git)")
    own.add_argument("--keep", default="0,2,5", help="the teacher's layers the student starts from")
    own.add_argument("--init", type=Path, help="start from this student's canonical .npz (a run's final.npz) instead")
    own.add_argument("--column-sample", type=int, default=1024, help="uniform vocabulary sample of the f term")
    own.add_argument("--f-weight", type=float, default=1.0, help="weight of the f(v, s) term")
    own.add_argument("--h-weight", type=float, default=1.0, help="weight of the hidden-state term")
    own.add_argument("--sparc-kl", type=float, default=0.0,
                     help="with --hybrid: also the KL of SPARC's own score, weighed this much against the hybrid's")
    own.add_argument("--f-teacher-top", type=int, default=0,
                     help="also compare f at each candidate's top N tokens under the teacher (0: off)")
    mine, rest = own.parse_known_args(argv)
    teacher = Path(mine.teacher)
    args = train_args(["--base", str(teacher), "--tokenizer", str(teacher), *rest])
    args.__dict__.update(vars(mine))
    return args


def main(argv: list[str] | None = None) -> None:
    run(StudentTrainer(parse_args(argv)))


if __name__ == "__main__":
    main()
