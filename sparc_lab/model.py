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
        # model v2's window share λ = sigmoid(share) (span_scores); None: each sentence's own tokens only
        self.share: nn.Parameter | None = None
        # model v2's neighbour evidence (span_scores): a token's salience and a decay per sentence distance
        self.salience: nn.Linear | None = None
        self.decay: nn.Parameter | None = None

    def spread(self, reach: int, salience: float = 3.0, decay: float = 1.0) -> None:
        """Let each sentence take its neighbours' salient evidence (span_scores), gates starting at
        sigmoid(salience)·sigmoid(decay) ≈ 0.7: an untrained v1 gained most (0.564 -> 0.580, held
        out) from neighbours at about that weight."""
        self.salience = nn.Linear(self.cfg.hidden, 1)
        with torch.no_grad():
            self.salience.weight.zero_()
            self.salience.bias.fill_(float(salience))
        self.decay = nn.Parameter(torch.full((reach,), float(decay)))

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

    def span_scores(self, hidden: torch.Tensor, at, token_ids: torch.Tensor) -> torch.Tensor:
        """f(v, s) for each sentence of a window batch (model v2), shape (N, V_sub).

        SPARC Eq. 4's max runs over the sentence's own token positions (`at`, an
        inputs.SpanIndex of tensors); the rest of the window shapes them through attention. With
        a window share λ = sigmoid(self.share), f = log(1 + ReLU((1−λ)·max_s + λ·max_window)·exp(w)),
        where max_window is over the window's sentences: a little of the paragraph's evidence.
        """
        h = hidden.reshape(-1, hidden.shape[-1])[at.tokens]  # (M, d): sentence tokens only
        logits = h @ self.word[token_ids].T  # (M, V_sub)
        pooled = logits[at.spans].max(dim=1).values  # (N, V_sub)
        if self.share is not None:
            lam = torch.sigmoid(self.share)
            window = pooled[at.windows].max(dim=1).values[at.window_of]
            pooled = (1 - lam) * pooled + lam * window
        f = torch.log1p(F.relu(pooled) * torch.exp(self.sparsity))
        if self.salience is None:
            return f
        # neighbour evidence: f(v,s) = max(f_s(v), max_t d(|s−t|)·f̃_t(v)) over the window's sentences
        # t within reach, where f̃_t is Eq. 4 over t's tokens with each logit scaled by its salience
        # c_j = sigmoid(salience(H_j)), and d is a learned decay: the pair scheme's max-pool over
        # context tokens, with gates in place of the focus its segment ids give
        gated = (logits * torch.sigmoid(self.salience(h)))[at.spans].max(dim=1).values  # (N, V_sub)
        f_near = torch.log1p(F.relu(gated) * torch.exp(self.sparsity))
        gate = torch.cat([torch.zeros(1), torch.sigmoid(self.decay)])[at.distance]  # (N, 2·reach)
        return torch.maximum(f, (f_near[at.neighbours] * gate.unsqueeze(-1)).max(dim=1).values)

    @torch.no_grad()
    def span_threshold(self, hidden: torch.Tensor, at, sample: torch.Tensor, k: int, vocab: int) -> torch.Tensor:
        """Each sentence's estimated K-th largest f over the vocabulary (see topk_threshold)."""
        f = self.span_scores(hidden, at, sample)
        rank = max(1, min(f.shape[1], round(k * sample.numel() / vocab)))
        return f.topk(rank, dim=1).values[:, -1]

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
        """export_weights plus what the SPARC head learned (w, the window share, the neighbour
        gates), under the names export.py reads."""
        w = self.export_weights()
        w["sparsity.w"] = np.asarray(self.sparsity.item(), dtype=np.float32)
        if self.salience is not None:
            w["spread.salience.w"] = self.salience.weight.detach().numpy().reshape(-1).copy()
            w["spread.salience.b"] = self.salience.bias.detach().numpy().copy()
            w["spread.decay"] = self.decay.detach().numpy().copy()
        if self.share is not None:
            w["window.share"] = np.asarray(torch.sigmoid(self.share).item(), dtype=np.float32)
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

