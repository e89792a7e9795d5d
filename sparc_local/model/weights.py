"""Encoder weights in one canonical layout, whichever checkpoint they came from.

BERT (`bert.*`/bare `embeddings.*`, `encoder.layer.N.*`) and DistilBERT (`distilbert.*`,
`transformer.layer.N.*`) checkpoints differ only in names and in DistilBERT having no
token-type embeddings. Everything downstream (exporter, training, adapt) reads the canonical
dict, so a DistilBERT checkpoint drops in where all-MiniLM-L6-v2 is used today.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

Weights = dict[str, np.ndarray]

# canonical per-layer name -> (BERT suffix, DistilBERT suffix); weights keep torch's (out, in) layout
LAYER_NAMES = {
    "q.w": ("attention.self.query.weight", "attention.q_lin.weight"),
    "q.b": ("attention.self.query.bias", "attention.q_lin.bias"),
    "k.w": ("attention.self.key.weight", "attention.k_lin.weight"),
    "k.b": ("attention.self.key.bias", "attention.k_lin.bias"),
    "v.w": ("attention.self.value.weight", "attention.v_lin.weight"),
    "v.b": ("attention.self.value.bias", "attention.v_lin.bias"),
    "o.w": ("attention.output.dense.weight", "attention.out_lin.weight"),
    "o.b": ("attention.output.dense.bias", "attention.out_lin.bias"),
    "ln1.w": ("attention.output.LayerNorm.weight", "sa_layer_norm.weight"),
    "ln1.b": ("attention.output.LayerNorm.bias", "sa_layer_norm.bias"),
    "ff1.w": ("intermediate.dense.weight", "ffn.lin1.weight"),
    "ff1.b": ("intermediate.dense.bias", "ffn.lin1.bias"),
    "ff2.w": ("output.dense.weight", "ffn.lin2.weight"),
    "ff2.b": ("output.dense.bias", "ffn.lin2.bias"),
    "ln2.w": ("output.LayerNorm.weight", "output_layer_norm.weight"),
    "ln2.b": ("output.LayerNorm.bias", "output_layer_norm.bias"),
}
EMB_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
# the masked-LM head (adapt, SPARC §5.1); the decoder is tied to emb.word
MLM_NAMES = {
    "mlm.dense.w": ("cls.predictions.transform.dense.weight", "vocab_transform.weight"),
    "mlm.dense.b": ("cls.predictions.transform.dense.bias", "vocab_transform.bias"),
    "mlm.ln.w": ("cls.predictions.transform.LayerNorm.weight", "vocab_layer_norm.weight"),
    "mlm.ln.b": ("cls.predictions.transform.LayerNorm.bias", "vocab_layer_norm.bias"),
    "mlm.bias": ("cls.predictions.bias", "vocab_projector.bias"),
}


@dataclass(frozen=True)
class ArchConfig:
    """The shape of a BERT-family encoder; `layout` records where the weights came from."""

    layout: str  # "bert" or "distilbert"
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    type_vocab: int  # 0 for DistilBERT: no segment embeddings
    eps: float = 1e-12

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ArchConfig:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def detect_layout(names: set[str]) -> str:
    if any(".q_lin." in n for n in names):
        return "distilbert"
    if any(".attention.self.query." in n for n in names):
        return "bert"
    raise ValueError("unrecognised checkpoint: neither BERT nor DistilBERT weight names")


def _strip_prefix(raw: Weights) -> Weights:
    out = {}
    for name, arr in raw.items():
        for prefix in ("bert.", "distilbert.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        out[name] = arr
    return out


def canonicalize(raw: Weights, heads: int, eps: float = 1e-12) -> tuple[ArchConfig, Weights]:
    """Map a BERT or DistilBERT state dict onto canonical names. `heads` is not in the tensors."""
    raw = _strip_prefix(raw)
    layout = detect_layout(set(raw))
    idx = 0 if layout == "bert" else 1
    layer_prefix = "encoder.layer." if layout == "bert" else "transformer.layer."
    w: Weights = {}
    for canon, name in EMB_NAMES.items():
        if name in raw:
            w[canon] = np.asarray(raw[name], dtype=np.float32)
    n_layers = 0
    while f"{layer_prefix}{n_layers}.{LAYER_NAMES['q.w'][idx]}" in raw:
        for canon, names in LAYER_NAMES.items():
            w[f"l{n_layers}.{canon}"] = np.asarray(raw[f"{layer_prefix}{n_layers}.{names[idx]}"], dtype=np.float32)
        n_layers += 1
    for canon, names in MLM_NAMES.items():
        if names[idx] in raw:
            w[canon] = np.asarray(raw[names[idx]], dtype=np.float32)
    vocab, hidden = w["emb.word"].shape
    cfg = ArchConfig(
        layout=layout,
        vocab_size=int(vocab),
        hidden=int(hidden),
        layers=n_layers,
        heads=heads,
        intermediate=int(w["l0.ff1.w"].shape[0]),
        max_positions=int(w["emb.pos"].shape[0]),
        type_vocab=int(w["emb.type"].shape[0]) if "emb.type" in w else 0,
        eps=eps,
    )
    return cfg, w


def load_checkpoint(folder: Path) -> tuple[ArchConfig, Weights]:
    """Load a Hugging Face style folder (config.json + model.safetensors) into canonical form."""
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    heads = cfg.get("num_attention_heads") or cfg.get("n_heads")
    eps = cfg.get("layer_norm_eps", 1e-12)
    return canonicalize(load_file(str(folder / "model.safetensors")), heads=int(heads), eps=float(eps))


def save_canonical(path: Path, cfg: ArchConfig, w: Weights) -> None:
    savez(path, {"__config__": np.frombuffer(json.dumps(cfg.to_dict()).encode(), dtype=np.uint8), **w})


def savez(file: Path | IO[bytes], arrays: Weights) -> None:
    """``np.savez`` of named arrays, passed as Any: numpy's stub reads a keyword array as if it
    could be the ``allow_pickle`` flag."""
    named: dict[str, Any] = arrays
    np.savez(file, **named)


def load_canonical(path: Path) -> tuple[ArchConfig, Weights]:
    with np.load(path) as z:
        cfg = ArchConfig.from_dict(json.loads(bytes(z["__config__"]).decode()))
        return cfg, {k: z[k] for k in z.files if k != "__config__"}
