"""A model folder's files read back: the encoder's weights from model.onnx (the inverse of
``export.py``) and the .npz files beside it (the MLM head, an MLM encoder), for `adapt`,
re-export and training.

model.onnx holds every encoder weight (initializers named by export.py's `const(..., prefix)`;
int8 MatMul weights renamed by onnxruntime's quantize_dynamic to
`<name>_quantized/_scale/_zero_point`).  Imports `onnx` lazily; `ask` never loads this module.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from sparc_local.errors import ModelError
from sparc_local.model.info import WEIGHT_AXIS, ModelInfo
from sparc_local.model.projection import BASIS_E, BASIS_E_INIT, BASIS_H, BASIS_H_INIT
from sparc_local.model.weights import ArchConfig, Weights, savez

HEAD_FILE = "mlm_head.npz"
ENCODER_FILE = "mlm_encoder.npz"
META_KEY = "__meta__"
HEAD_NAMES = ("mlm.dense.w", "mlm.dense.b", "mlm.ln.w", "mlm.ln.b", "mlm.bias")
_LINEARS = ("q", "k", "v", "o", "ff1", "ff2")
# export.py names initializers f"{prefix}_{counter}"; quantize_dynamic appends a part suffix
INITIALIZER_NAME = re.compile(r"^(?P<prefix>.+?)_(?P<n>\d+)(?:_(?P<part>quantized|scale|zero_point))?$")


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


def load_onnx(path: Path):
    import onnx

    return onnx.load(str(path))


def load_encoder_weights(info: ModelInfo) -> tuple[ArchConfig, Weights]:
    """The canonical float32 weights (emb.*, l{i}.*) of a model folder, read from model.onnx.

    int8 MatMul weights and the int8 E are dequantized, so they equal the exported weights up to
    quantization; an fp32 export round-trips exactly.
    """
    from onnx import numpy_helper

    cfg = arch_config(info)
    model = load_onnx(info.onnx_path)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    parts: dict[str, dict[str, np.ndarray]] = {}
    for name, arr in arrays.items():
        m = INITIALIZER_NAME.match(name)
        if m:
            parts.setdefault(m["prefix"], {})[m["part"] or "value"] = arr
    w: Weights = {}

    def take(prefix: str) -> np.ndarray:
        got = parts.get(prefix)
        if got is None:
            raise ModelFolderError(f"{info.onnx_path}: no initializer {prefix}_N", "Re-export the model.")
        if "value" in got:
            return np.asarray(got["value"], np.float32)
        return _dequantize(got["quantized"], got["scale"], got.get("zero_point"), axis=info.extra.get(WEIGHT_AXIS, 1))

    if "emb_word_int8" in parts:
        w["emb.word"] = _dequantize(parts["emb_word_int8"]["value"], parts["emb_word_scale"]["value"],
                                    parts.get("emb_word_zero", {}).get("value"), axis=0)
    else:
        w["emb.word"] = take("emb_word")
    w["emb.pos"] = take("emb_pos")
    if cfg.type_vocab:
        w["emb.type"] = take("emb_type")
    for i in range(cfg.layers):
        if f"l{i}_qkv_w" in parts:  # Q, K, V joined for onnxruntime's integer attention (graph.layers)
            for lin, wt, bias in zip(("q", "k", "v"), np.split(take(f"l{i}_qkv_w"), 3, axis=1),
                                     np.split(take(f"l{i}_qkv_b"), 3)):
                w[f"l{i}.{lin}.w"], w[f"l{i}.{lin}.b"] = np.ascontiguousarray(wt.T), bias
        for lin in _LINEARS:
            if f"l{i}.{lin}.w" not in w:
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
    if BASIS_H_INIT in parts and BASIS_E_INIT in parts:  # a fitted estimate's bases, so a re-export keeps them
        w[BASIS_H], w[BASIS_E] = take(BASIS_H_INIT), take(BASIS_E_INIT)
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
        savez(fh, {META_KEY: np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8), **arrays})
    tmp.replace(path)


def load_npz(path: Path) -> tuple[Weights, dict]:
    with np.load(path) as z:
        meta = json.loads(bytes(z[META_KEY]).decode()) if META_KEY in z.files else {}
        return {k: z[k] for k in z.files if k != META_KEY}, meta
