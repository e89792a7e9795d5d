"""Model folders as `adapt` sees them: the weights its MLM runs (``model/folder.py`` reads them
back), and writing an adapted copy with a new word-embedding matrix E.

`adapt` needs no second copy of the encoder: model.onnx already holds every encoder weight. The MLM head, which
all-MiniLM-L6-v2 ships without, is trained once at build time (sparc_lab/mlm_head.py) and saved next to
the model as mlm_head.npz; if it was trained on top of another encoder (the original PLM, as in
SPARC §5.1), that encoder is saved beside it as mlm_encoder.npz and adapt runs it instead.

Imports `onnx`, so only `adapt` and tests load this module; `ask` never does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from sparc_local.model.folder import (
    HEAD_FILE,
    HEAD_NAMES,
    INITIALIZER_NAME,
    ModelFolderError,
    file_digest,
    load_encoder_weights,
    load_npz,
    load_onnx,
)
from sparc_local.model.info import CONFIG_FILE, ModelInfo
from sparc_local.model.weights import ArchConfig, Weights


def load_adapt_weights(info: ModelInfo) -> tuple[ArchConfig, Weights, dict]:
    """Everything adapt's MLM needs, float32: encoder, E (always the model's own) and MLM head.

    The encoder is mlm_encoder.npz if the head was trained on a separate encoder (the original
    PLM, SPARC's choice), else the model's own encoder read back from model.onnx. Returns the
    head's meta record too (provenance, recorded in the adapted model).
    """
    head_file = info.path / HEAD_FILE
    if not head_file.is_file():
        raise ModelFolderError(
            f"the model {info.name} has no MLM head ({head_file} is missing), which adapt needs",
            "Use a model folder built with its MLM head (python -m sparc_lab.mlm_head), or reinstall sparc-local.")
    cfg, w = load_encoder_weights(info)
    head, meta = load_npz(head_file)
    missing = [k for k in HEAD_NAMES if k not in head]
    if missing:
        raise ModelFolderError(f"{head_file} lacks {', '.join(missing)}", "Retrain the MLM head.")
    if meta.get("encoder_file"):
        enc, _ = load_npz(info.path / meta["encoder_file"])
        for k, v in enc.items():
            if k != "emb.word":  # E stays the model's own: that is the matrix adapt trains and swaps
                w[k] = v
    elif meta.get("encoder_digest") and meta["encoder_digest"] != info.extra.get("digest"):
        raise ModelFolderError(f"{head_file} was trained on another version of {info.name}'s encoder",
                               "Retrain the MLM head for this model (python -m sparc_lab.mlm_head).")
    for k in HEAD_NAMES:
        w[k] = head[k]
    w = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}
    if w["mlm.bias"].shape != (cfg.vocab_size,) or w["mlm.dense.w"].shape != (cfg.hidden, cfg.hidden):
        raise ModelFolderError(f"{head_file} does not fit {info.name} (vocab {cfg.vocab_size}, hidden {cfg.hidden})",
                               "Retrain the MLM head for this model.")
    return cfg, w, meta


# ---------------------------------------------------------------- writing an adapted model

def replace_embeddings(src: Path, dst: Path, E: np.ndarray) -> str:
    """Copy model.onnx with its E initializers replaced (int8 per row, or fp32 as found).

    E is one initializer read by both the input Gather and the output projection, so this swaps
    it on both sides, as SPARC §5.1 does. Returns the quantization ("int8" or "fp32") found.
    """
    import onnx
    from onnx import numpy_helper

    from sparc_local.model.export import quantize_rows

    model = load_onnx(src)
    graph = model.graph
    by_prefix = {}
    for t in graph.initializer:
        m = INITIALIZER_NAME.match(t.name)
        if m and m["part"] is None and m["prefix"] in ("emb_word", "emb_word_int8", "emb_word_scale", "emb_word_zero"):
            by_prefix[m["prefix"]] = t
    E = np.asarray(E, np.float32)
    if "emb_word_int8" in by_prefix:
        q, scale = quantize_rows(E)
        new = {"emb_word_int8": q, "emb_word_scale": scale}
        kind = "int8"
    elif "emb_word" in by_prefix:
        new = {"emb_word": E}
        kind = "fp32"
    else:
        raise ModelFolderError(f"{src}: no word-embedding initializer", "Re-export the model.")
    for prefix, arr in new.items():
        old = by_prefix[prefix]
        if tuple(old.dims) != arr.shape:
            raise ModelFolderError(f"{src}: {old.name} has shape {tuple(old.dims)}, new E {arr.shape}", "")
    for prefix, arr in new.items():
        by_prefix[prefix].CopyFrom(numpy_helper.from_array(arr, by_prefix[prefix].name))
    onnx.save(model, str(dst))
    return kind


def write_adapted_model(base: ModelInfo, E: np.ndarray, out_dir: Path, *, name: str, extra: dict) -> ModelInfo:
    """A new model folder: base's model.onnx with E swapped (replace_embeddings), its tokenizer, a
    new sparc.json.

    Written under a temporary name and renamed into place, so a crash never leaves a folder
    that looks complete.
    """
    out_dir = Path(out_dir)
    tmp = out_dir.with_name("." + out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, mode=0o700)
    try:
        replace_embeddings(base.onnx_path, tmp / "model.onnx", E)
        shutil.copyfile(base.tokenizer_path, tmp / "tokenizer.json")
        digest = file_digest(tmp / "model.onnx")
        d = json.loads((base.path / CONFIG_FILE).read_text())
        d["name"] = name
        d["source"] = f"{base.source}; word embeddings adapted to the user's sentences (SPARC §5.1)"
        d["extra"] = {**d.get("extra", {}), **extra, "digest": digest}
        (tmp / CONFIG_FILE).write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ModelInfo.load(out_dir)
