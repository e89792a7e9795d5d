"""Embedding-matrix replacement (SPARC §5.1): MLM-train only E on the user's sentences, in numpy."""

from sparc_local.adapt.mlm import MODES, FrozenWeights, forward_backward, prepare
from sparc_local.adapt.train_embeddings import Adam, TokenBatch, adapt_embeddings, mask_tokens, save_checkpoint

__all__ = ["MODES", "Adam", "FrozenWeights", "TokenBatch", "adapt_embeddings", "forward_backward",
           "mask_tokens", "prepare", "save_checkpoint"]
