"""The SPARC encoder in torch, for training only (torch is never a runtime dependency).

Built from canonical weights (sparc_local.model.weights), so BERT and DistilBERT layouts train alike.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sparc_local.model.weights import ArchConfig, Weights


class TorchEncoder(nn.Module):
    """A post-LayerNorm BERT encoder; DistilBERT is the same graph without segment embeddings."""

    def __init__(self, cfg: ArchConfig, w: Weights) -> None:
        super().__init__()
        self.cfg = cfg
        t = lambda k: nn.Parameter(torch.from_numpy(np.array(w[k], dtype=np.float32)))
        # the word-embedding matrix stays frozen during fine-tuning (SPARC §5.1), which is what
        # lets `adapt` later swap in an embedding matrix trained on the user's corpus
        self.word = nn.Parameter(torch.from_numpy(np.array(w["emb.word"], dtype=np.float32)), requires_grad=False)
        self.pos = t("emb.pos")
        self.seg = t("emb.type") if cfg.type_vocab else None
        self.emb_ln = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.emb_ln.weight, self.emb_ln.bias = t("emb.ln.w"), t("emb.ln.b")
        self.layers = nn.ModuleList()
        for i in range(cfg.layers):
            layer = nn.Module()
            for name in ("q", "k", "v", "o", "ff1", "ff2"):
                wt = w[f"l{i}.{name}.w"]
                lin = nn.Linear(wt.shape[1], wt.shape[0])
                lin.weight, lin.bias = t(f"l{i}.{name}.w"), t(f"l{i}.{name}.b")
                setattr(layer, name, lin)
            for name in ("ln1", "ln2"):
                ln = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
                ln.weight, ln.bias = t(f"l{i}.{name}.w"), t(f"l{i}.{name}.b")
                setattr(layer, name, ln)
            self.layers.append(layer)
        # learnable sparsity parameter w of SPARC Eq. 4, stored as w (exp(w) scales the activation)
        self.sparsity = nn.Parameter(torch.zeros(()))

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Contextual token embeddings H(s), shape (B, L, d)."""
        b, l = ids.shape
        x = self.word[ids] + self.pos[:l].unsqueeze(0)
        if self.seg is not None:
            x = x + self.seg[types]
        x = self.emb_ln(x)
        h, dh = self.cfg.heads, self.cfg.hidden // self.cfg.heads
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            q = layer.q(x).view(b, l, h, dh).transpose(1, 2)
            k = layer.k(x).view(b, l, h, dh).transpose(1, 2)
            v = layer.v(x).view(b, l, h, dh).transpose(1, 2)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            x = layer.ln1(x + layer.o(att.transpose(1, 2).reshape(b, l, h * dh)))
            x = layer.ln2(x + layer.ff2(F.gelu(layer.ff1(x))))
        return x

    def token_scores(self, hidden: torch.Tensor, mask: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
        """f(v, s) for the given vocabulary tokens only (SPARC Eq. 4), shape (B, V_sub).

        f(v,s) = log(ReLU(max_i H(s)_i·e_v)·exp(w) + 1). Padding rows are zeroed rather than
        masked with -inf: ReLU(max(x, 0)) == ReLU(max(x)), so the result is exact.
        """
        e = self.word[token_ids]  # (V_sub, d)
        dots = torch.einsum("bld,vd->blv", hidden * mask.unsqueeze(-1).to(hidden.dtype), e)
        return torch.log1p(F.relu(dots.max(dim=1).values) * torch.exp(self.sparsity))

    @torch.no_grad()
    def topk_threshold(self, hidden: torch.Tensor, mask: torch.Tensor, sample: torch.Tensor, k: int,
                       vocab: int) -> torch.Tensor:
        """Estimate each sentence's K-th largest f over the vocabulary, shape (B,).

        The index keeps only the top K tokens of a sentence, so training that ignores the cut learns
        to rely on a long tail of small weights the index never stores. Scoring the whole vocabulary
        would cost ~1.5 GFLOP a sentence; the (K·n/V)-th largest f over a uniform sample of n tokens
        is an unbiased-enough quantile estimate at a tenth of that.
        """
        f = self.token_scores(hidden, mask, sample)
        rank = max(1, min(f.shape[1], round(k * sample.numel() / vocab)))
        return f.topk(rank, dim=1).values[:, -1]

    def retrieval_weights(self) -> Weights:
        """export_weights plus what the SPARC head learned (w), under the name export.py reads."""
        w = self.export_weights()
        w["sparsity.w"] = np.asarray(self.sparsity.item(), dtype=np.float32)
        return w

    def export_weights(self) -> Weights:
        """Back to canonical numpy weights, for the exporter."""
        w: Weights = {"emb.word": self.word.detach().numpy().copy(), "emb.pos": self.pos.detach().numpy().copy(),
                      "emb.ln.w": self.emb_ln.weight.detach().numpy().copy(),
                      "emb.ln.b": self.emb_ln.bias.detach().numpy().copy()}
        if self.seg is not None:
            w["emb.type"] = self.seg.detach().numpy().copy()
        for i, layer in enumerate(self.layers):
            for name in ("q", "k", "v", "o", "ff1", "ff2", "ln1", "ln2"):
                mod = getattr(layer, name)
                w[f"l{i}.{name}.w"] = mod.weight.detach().numpy().copy()
                w[f"l{i}.{name}.b"] = mod.bias.detach().numpy().copy()
        return w

