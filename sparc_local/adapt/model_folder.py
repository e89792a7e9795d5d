"""Model folders as `adapt` sees them: weights read back from model.onnx, the MLM head, and
writing an adapted copy with a new word-embedding matrix E.

`adapt` needs no second copy of the encoder: model.onnx already holds every encoder weight
(initializers named by export.py's `const(..., prefix)`; int8 MatMul weights renamed by
onnxruntime's quantize_dynamic to `<name>_quantized/_scale/_zero_point`). The MLM head, which
all-MiniLM-L6-v2 ships without, is trained once at build time (training/mlm_head.py) and saved next to
the model as mlm_head.npz; if it was trained on top of another encoder (the original PLM, as in
SPARC §5.1), that encoder is saved beside it as mlm_encoder.npz and adapt runs it instead.

Imports `onnx`, so only `adapt` and tests load this module; `ask` never does.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np

from sparc_local.errors import ModelError
from sparc_local.model.info import CONFIG_FILE, ModelInfo
from sparc_local.model.weights import ArchConfig, Weights

HEAD_FILE = "mlm_head.npz"
ENCODER_FILE = "mlm_encoder.npz"
META_KEY = "__meta__"
HEAD_NAMES = ("mlm.dense.w", "mlm.dense.b", "mlm.ln.w", "mlm.ln.b", "mlm.bias")
_LINEARS = ("q", "k", "v", "o", "ff1", "ff2")
# export.py names initializers f"{prefix}_{counter}"; quantize_dynamic appends a part suffix
_INIT = re.compile(r"^(?P<prefix>.+?)_(?P<n>\d+)(?:_(?P<part>quantized|scale|zero_point))?$")


class ModelFolderError(ModelError):
    """A model folder adapt cannot use; `remedy` says what to do."""


def arch_config(info: ModelInfo) -> ArchConfig:
    arch = info.extra.get("arch")
    if not arch:
        raise ModelFolderError(f"{info.path}: sparc.json has no extra.arch", "Re-export the model with this version.")
    return ArchConfig.from_dict(arch)


def _dequantize(q: np.ndarray, scale: np.ndarray, zero: np.ndarray | None, axis: int) -> np.ndarray:
    """x = (q − zero_point)·scale, per tensor (scalar scale) or per channel along `axis`.

    A MatMul weight (in, out) quantized per channel has one scale per output column (axis 1:
    MatMulInteger's output is rescaled column by column); E has one per row (axis 0).
    """
    x = q.astype(np.float32)
    scale = np.asarray(scale, np.float32)
    zero = np.zeros_like(scale) if zero is None else np.asarray(zero, np.float32)
    if scale.size == 1:
        return (x - zero.reshape(())) * scale.reshape(())
    if scale.size != q.shape[axis]:
        raise ModelFolderError(f"cannot apply {scale.size} scales along axis {axis} of a {q.shape} weight",
                               "Re-export the model.")
    shape = [1] * q.ndim
    shape[axis] = -1
    return (x - zero.reshape(shape)) * scale.reshape(shape)


def _load_onnx(path: Path):
    import onnx

    return onnx.load(str(path))


def load_encoder_weights(info: ModelInfo) -> tuple[ArchConfig, Weights]:
    """The canonical float32 weights (emb.*, l{i}.*) of a model folder, read from model.onnx.

    int8 MatMul weights and the int8 E are dequantized, so they equal the exported weights up to
    quantization; an fp32 export round-trips exactly.
    """
    from onnx import numpy_helper

    cfg = arch_config(info)
    model = _load_onnx(info.onnx_path)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    parts: dict[str, dict[str, np.ndarray]] = {}
    for name, arr in arrays.items():
        m = _INIT.match(name)
        if m:
            parts.setdefault(m["prefix"], {})[m["part"] or "value"] = arr
    w: Weights = {}

    def take(prefix: str) -> np.ndarray:
        got = parts.get(prefix)
        if got is None:
            raise ModelFolderError(f"{info.onnx_path}: no initializer {prefix}_N", "Re-export the model.")
        if "value" in got:
            return np.asarray(got["value"], np.float32)
        return _dequantize(got["quantized"], got["scale"], got.get("zero_point"), axis=1)

    if "emb_word_int8" in parts:
        w["emb.word"] = _dequantize(parts["emb_word_int8"]["value"], parts["emb_word_scale"]["value"],
                                    parts.get("emb_word_zero", {}).get("value"), axis=0)
    else:
        w["emb.word"] = take("emb_word")
    w["emb.pos"] = take("emb_pos")
    if cfg.type_vocab:
        w["emb.type"] = take("emb_type")
    for i in range(cfg.layers):
        for lin in _LINEARS:
            w[f"l{i}.{lin}.w"] = np.ascontiguousarray(take(f"l{i}_{lin}_w").T)  # exported as (in, out)
            w[f"l{i}.{lin}.b"] = take(f"l{i}_{lin}_b")
    # LayerNorm parameters are anonymous constants: name them by graph order (emb, then ln1/ln2 per layer)
    ln_names = ["emb.ln"] + [f"l{i}.{n}" for i in range(cfg.layers) for n in ("ln1", "ln2")]
    lns = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    if len(lns) != len(ln_names):
        raise ModelFolderError(f"{info.onnx_path}: {len(lns)} LayerNormalization nodes, expected {len(ln_names)}",
                               "Re-export the model.")
    for key, node in zip(ln_names, lns):
        w[f"{key}.w"] = np.asarray(arrays[node.input[1]], np.float32)
        w[f"{key}.b"] = np.asarray(arrays[node.input[2]], np.float32)
    if w["emb.word"].shape != (cfg.vocab_size, cfg.hidden):
        raise ModelFolderError(f"{info.onnx_path}: E has shape {w['emb.word'].shape}", "Re-export the model.")
    return cfg, w


# ---------------------------------------------------------------- MLM head (+ optional encoder)

def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def save_npz(path: Path, arrays: Weights, meta: dict) -> None:
    """Write arrays + a JSON meta record atomically (tmp + replace)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **{META_KEY: np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)}, **arrays)
    tmp.replace(path)


def load_npz(path: Path) -> tuple[Weights, dict]:
    with np.load(path) as z:
        meta = json.loads(bytes(z[META_KEY]).decode()) if META_KEY in z.files else {}
        return {k: z[k] for k in z.files if k != META_KEY}, meta


def has_mlm_head(info: ModelInfo) -> bool:
    return (info.path / HEAD_FILE).is_file()


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
            "Use a model folder built with its MLM head (python -m sparc_local.training.mlm_head), or reinstall sparc-local.")
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
                               "Retrain the MLM head for this model (python -m sparc_local.training.mlm_head).")
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

    E is one initializer read by both the input Gather and the output Gemm, so this swaps it on
    both sides. Returns the quantization ("int8" or "fp32") found.
    """
    import onnx
    from onnx import numpy_helper

    from sparc_local.model.export import quantize_rows

    model = _load_onnx(src)
    by_prefix = {}
    for t in model.graph.initializer:
        m = _INIT.match(t.name)
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
        old.CopyFrom(numpy_helper.from_array(arr, old.name))
    onnx.save(model, str(dst))
    return kind


def write_adapted_model(base: ModelInfo, E: np.ndarray, out_dir: Path, *, name: str, extra: dict) -> ModelInfo:
    """A new model folder: base's model.onnx with E swapped, its tokenizer, a new sparc.json.

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
