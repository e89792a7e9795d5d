"""A deterministic tiny SPARC model (random weights, 150-token WordPiece vocab) for fast tests."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

from sparc_local.model.export import QUANT_FP32, QUANT_WEIGHTS, export_model
from sparc_local.model.folder import HEAD_FILE, save_npz
from sparc_local.model.info import ModelInfo
from sparc_local.model.projection import BASIS_E, BASIS_H, CANDIDATE_PROJECTION, Projection
from sparc_local.model.weights import EMB_NAMES, LAYER_NAMES, MLM_NAMES, ArchConfig, Weights

WORDS = (
    "the a of and to in is was for on with as by at it from that this which who what when where how why "
    "tea green black steep minutes water boil cup tower paris built year city river bridge train station "
    "battery charge hours phone screen manual warranty recipe bread flour oven bake travel museum ticket "
    "capital france london history king queen war music piano school student book page"
).split()


def tiny_vocab() -> list[str]:
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    punct = list(".,?!;:'\"()-")
    tokens = specials + punct + letters + ["##" + c for c in letters] + list("0123456789") + WORDS
    return list(dict.fromkeys(tokens))  # unique, in order: ids must be dense


def write_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate(tiny_vocab())}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.save(str(path))
    return path


def tiny_weights(layout: str, vocab: int, seed: int = 0):
    cfg, w = random_weights(layout, vocab=vocab, hidden=32, layers=2, heads=4, intermediate=64,
                            max_positions=64, seed=seed)
    # damp the layers' residual branches so each token's output stays close to its own embedding:
    # the random model then behaves lexically, and tests can assert which sentence answers
    for i in range(cfg.layers):
        w[f"l{i}.o.w"] *= 0.1
        w[f"l{i}.ff2.w"] *= 0.1
    if "emb.type" in w:
        # a strong context-segment vector, so context tokens match weakly and the sentence decides
        w["emb.type"][1] = 4.0 * w["emb.word"][0] / (abs(w["emb.word"][0]).max() + 1e-6)
    return cfg, w


def make_tiny_model(folder: Path, layout: str = "bert", int8: bool = False, top_k: int = 32,
                    seed: int = 0, quant: str | None = None, projection: Projection = CANDIDATE_PROJECTION,
                    basis: tuple[np.ndarray, np.ndarray] | None = None) -> ModelInfo:
    """``basis``: a rank-R projection's fitted bases (projection.fitted_bases), among the weights."""
    folder.mkdir(parents=True, exist_ok=True)
    tok = write_tokenizer(folder / "source-tokenizer.json")
    vocab = json.loads(tok.read_text())["model"]["vocab"]
    cfg, w = tiny_weights(layout, len(vocab), seed)
    if basis is not None:
        w[BASIS_H], w[BASIS_E] = basis
    info = export_model(cfg, w, tok, folder, name=f"tiny-{layout}", source="random (tests)", sparsity_w=0.5,
                        top_k=top_k, max_length=48, quant=quant or (QUANT_WEIGHTS if int8 else QUANT_FP32),
                        projection=projection)
    tok.unlink()
    return info


def make_tiny_adapt_model(folder: Path, layout: str = "bert", int8: bool = False, seed: int = 0,
                          quant: str | None = None) -> ModelInfo:
    """The tiny model plus its MLM head (mlm_head.npz), as the head trainer would write it."""
    info = make_tiny_model(folder, layout=layout, int8=int8, top_k=48, seed=seed, quant=quant)
    _, w = tiny_weights(layout, len(tiny_vocab()), seed)
    head = {k: w[k].astype(np.float16) for k in w if k.startswith("mlm.")}
    save_npz(folder / HEAD_FILE, head, {"encoder": "model", "encoder_digest": info.extra["digest"]})
    return info


def random_weights(layout: str = "bert", vocab: int = 120, hidden: int = 32, layers: int = 2,
                   heads: int = 4, intermediate: int = 64, max_positions: int = 64,
                   seed: int = 0, mlm_head: bool = True) -> tuple[ArchConfig, Weights]:
    """A tiny deterministic encoder, so tests never depend on the big model."""
    rng = np.random.default_rng(seed)

    def r(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    cfg = ArchConfig(layout, vocab, hidden, layers, heads, intermediate, max_positions,
                     2 if layout == "bert" else 0)
    w: Weights = {"emb.word": r(vocab, hidden, scale=1.0), "emb.pos": r(max_positions, hidden),
                  "emb.ln.w": 1 + r(hidden, scale=0.05), "emb.ln.b": r(hidden, scale=0.05)}
    if layout == "bert":
        w["emb.type"] = r(2, hidden)
    for i in range(layers):
        for canon in LAYER_NAMES:
            out_in = {"ff1.w": (intermediate, hidden), "ff2.w": (hidden, intermediate), "ff1.b": (intermediate,)}
            if canon in out_in:
                shape = out_in[canon]
            elif canon.endswith(".w") and not canon.startswith("ln"):
                shape = (hidden, hidden)
            else:
                shape = (hidden,)
            w[f"l{i}.{canon}"] = (1 + r(*shape, scale=0.05)) if canon.startswith("ln") and canon.endswith(".w") else r(*shape)
    if mlm_head:
        w.update({"mlm.dense.w": r(hidden, hidden), "mlm.dense.b": r(hidden, scale=0.05),
                  "mlm.ln.w": 1 + r(hidden, scale=0.05), "mlm.ln.b": r(hidden, scale=0.05),
                  "mlm.bias": r(vocab, scale=0.05)})
    return cfg, w


def to_checkpoint_names(cfg: ArchConfig, w: Weights) -> Weights:
    """Inverse of canonicalize, for tests that feed both layouts through the loader."""
    idx = 0 if cfg.layout == "bert" else 1
    layer_prefix = "encoder.layer." if cfg.layout == "bert" else "transformer.layer."
    out = {name: w[c] for c, name in EMB_NAMES.items() if c in w}
    for i in range(cfg.layers):
        for canon, names in LAYER_NAMES.items():
            out[f"{layer_prefix}{i}.{names[idx]}"] = w[f"l{i}.{canon}"]
    for canon, names in MLM_NAMES.items():
        if canon in w:
            out[names[idx]] = w[canon]
    return out


def write_reqa_set(folder: Path, seed: int, articles: list[str]) -> None:
    """A tiny ReQA set in the tiny vocabulary: 3 passages of 4 sentences per article; every sentence
    is an answer, its question three of its words (the trainer's tests, the benchmarks' --smoke)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    corpus, queries = [], []
    for a in articles:
        for p in range(3):
            for pos in range(4):
                words = rng.sample([w for w in WORDS if len(w) > 3], 6)
                sid = f"{a}_{p:03d}-{pos}"
                corpus.append({"id": sid, "text": " ".join(words).capitalize() + ".", "passage": f"{a}_{p:03d}",
                               "position": pos})
                queries.append({"id": f"q{len(queries)}", "question": "what " + " ".join(words[1:4]) + "?",
                                "answers": [sid]})
    for name, rows in (("corpus", corpus), ("queries", queries)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
