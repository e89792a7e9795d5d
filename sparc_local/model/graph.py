"""The ONNX graph builder both exporters share, and the BERT encoder written once with it.

``model/export.py`` puts SPARC's vocabulary projection on the encoder's output, ``rerank/export.py``
a linear head on its [CLS]: one transformer, so a fix or a faster kernel reaches both. Initializers
are named f"{prefix}_{counter}", the names ``model/folder.py`` reads back. Imports ``onnx`` lazily:
only exporters load this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparc_local.model.projection import GraphOps
from sparc_local.model.weights import ArchConfig, Weights

MS_DOMAIN = "com.microsoft"  # onnxruntime's contrib ops (fused Attention, Gelu)
INPUTS = ("input_ids", "token_type_ids", "attention_mask")  # int64 (batch, length), as BERT names them


def quantize_rows(emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row of E: (q int8 (V, d), scale float32 (V,)); `adapt` re-quantizes with it."""
    emb = np.asarray(emb, dtype=np.float32)
    scale = (np.maximum(np.abs(emb).max(axis=1), 1e-8) / 127.0).astype(np.float32)
    q = np.clip(np.round(emb / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


class GraphBuilder:
    """Nodes and initializers of one graph, built from canonical weights ``w``.

    ``weight_axis`` None stores the linear layers' weights in float; 1 or 0 stores them as int8
    with a scale per output or input channel, dequantized in-graph (export.QUANT_WEIGHTS)."""

    def __init__(self, w: Weights, cfg: ArchConfig, weight_axis: int | None = None) -> None:
        self.w, self.cfg, self.weight_axis = w, cfg, weight_axis
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.into: list[list[Any]] = [self.nodes]  # the list op() appends to: the graph's, or an If branch's
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def const(self, arr: np.ndarray, prefix: str = "c") -> str:
        from onnx import numpy_helper

        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, kind: str, inputs: list[str], prefix: str | None = None, n_out: int = 1, **attrs: Any) -> Any:
        """A node's output name (a list of them when ``n_out`` > 1)."""
        from onnx import helper

        outs = [self.name(prefix or kind.lower()) for _ in range(n_out)]
        self.into[-1].append(helper.make_node(kind, inputs, outs, name=self.name("n_" + kind), **attrs))
        return outs[0] if n_out == 1 else outs

    def branch(self, cond: str, then_fn: Any, else_fn: Any, types: list[int]) -> list[str]:
        """An If node on cond whose branches are built by then_fn and else_fn (each returns its
        outputs, of `types`); the branches read the graph's values and initializers."""
        from onnx import helper

        graphs = []
        for fn, label in ((then_fn, "then"), (else_fn, "else")):
            self.into.append([])
            outs = fn()
            body = self.into.pop()
            graphs.append(helper.make_graph(body, self.name(label), [], [helper.make_tensor_value_info(o, t, None)
                                                                         for o, t in zip(outs, types)]))
        return self.op("If", [cond], n_out=len(types), then_branch=graphs[0], else_branch=graphs[1])

    def ops(self) -> GraphOps:
        return GraphOps(self.op, self.const, self.branch)

    def weight(self, key: str) -> str:
        """A linear layer's weight as MatMul wants it, (in, out); canonical weights are (out, in)."""
        from onnx import numpy_helper

        prefix = key.replace(".", "_") + "_w"
        w = self.w[f"{key}.w"]
        if self.weight_axis is not None:
            # int8 storage, float compute: every CPU computes the same thing (see export.QUANT_WEIGHTS).
            # Named as quantize_dynamic names its parts, so adapt reads both kinds alike.
            q, scale = quantize_rows(w if self.weight_axis == 1 else w.T)
            n = self.name(prefix)
            parts = {"quantized": q.T.copy() if self.weight_axis == 1 else q, "scale": scale,
                     "zero_point": np.zeros(len(scale), np.int8)}
            self.inits.extend(numpy_helper.from_array(a, f"{n}_{part}") for part, a in parts.items())
            return self.op("DequantizeLinear", [f"{n}_{part}" for part in parts], axis=self.weight_axis)
        return self.const(w.T.copy(), prefix)

    def bias(self, key: str) -> str:
        return self.const(self.w[f"{key}.b"], key.replace(".", "_") + "_b")

    def linear(self, x: str, key: str) -> str:
        return self.op("Add", [self.op("MatMul", [x, self.weight(key)]), self.bias(key)])

    def layer_norm(self, x: str, key: str) -> str:
        return self.op("LayerNormalization", [x, self.const(self.w[f"{key}.w"]), self.const(self.w[f"{key}.b"])],
                       axis=-1, epsilon=self.cfg.eps)


def word_embeddings(b: GraphBuilder, int8: bool) -> tuple[str, str | None, str | None]:
    """E, stored once, as (E float, its int8 rows, their scales); the int8 parts are None in float."""
    emb = b.w["emb.word"].astype(np.float32)
    if not int8:
        return b.const(emb, "emb_word"), None, None
    q, scale = quantize_rows(emb)
    e8, e_scale = b.const(q, "emb_word_int8"), b.const(scale.astype(np.float32), "emb_word_scale")
    E = b.op("DequantizeLinear", [e8, e_scale, b.const(np.zeros(len(scale), np.int8), "emb_word_zero")],
             "emb_word", axis=0)
    return E, e8, e_scale


def embeddings(b: GraphBuilder, E: str, gathered: bool = False) -> str:
    """The input embeddings of INPUTS: word + position (+ segment) vectors, layer-normed.
    ``gathered``: E is already the input's word vectors (batch, length, hidden)."""
    ids, types, _ = INPUTS
    x = E if gathered else b.op("Gather", [E, ids])
    seq_len = b.op("Gather", [b.op("Shape", [ids]), b.const(np.array(1, np.int64))])
    positions = b.op("Range", [b.const(np.array(0, np.int64)), seq_len, b.const(np.array(1, np.int64))])
    x = b.op("Add", [x, b.op("Gather", [b.const(b.w["emb.pos"], "emb_pos"), positions])])
    if b.cfg.type_vocab:
        x = b.op("Add", [x, b.op("Gather", [b.const(b.w["emb.type"], "emb_type"), types])])
    return b.layer_norm(x, "emb.ln")


def layers(b: GraphBuilder, x: str, joined_qkv: bool = False) -> str:
    """The transformer layers over x (batch, length, hidden), attending to attention_mask's tokens.
    ``joined_qkv``: Q, K and V as one float initializer, which onnxruntime's dynamic quantization
    turns into its integer attention (QAttention); it skips a Concat, as it skips every non-initializer."""
    from onnx import TensorProto

    # onnxruntime's fused multi-head attention (com.microsoft Attention): softmax(QKᵀ/√d_h)V over the
    # unmasked tokens, with Q, K, V from one (in, 3·out) weight; 1.5x faster than MatMul/Softmax
    # nodes on a 256-token window, the same values. Q, K and V stay separate initializers (adapt
    # and re-export read them back), concatenated in-graph and folded into one constant at load.
    mask32 = b.op("Cast", [INPUTS[2]], to=TensorProto.INT32)
    for i in range(b.cfg.layers):
        qkv = [f"l{i}.{n}" for n in ("q", "k", "v")]
        if joined_qkv and b.weight_axis is None:
            wqkv = b.const(np.concatenate([b.w[f"{key}.w"].T for key in qkv], axis=1), f"l{i}_qkv_w")
            bqkv = b.const(np.concatenate([b.w[f"{key}.b"] for key in qkv]), f"l{i}_qkv_b")
        else:
            wqkv = b.op("Concat", [b.weight(key) for key in qkv], axis=1)
            bqkv = b.op("Concat", [b.bias(key) for key in qkv], axis=0)
        ctx = b.op("Attention", [x, wqkv, bqkv, mask32], domain=MS_DOMAIN, num_heads=b.cfg.heads)
        x = b.layer_norm(b.op("Add", [x, b.linear(ctx, f"l{i}.o")]), f"l{i}.ln1")
        # exact (erf) GELU, as BERT uses: 0.5·x·(1 + erf(x/√2))
        ff = b.op("Gelu", [b.linear(x, f"l{i}.ff1")], domain=MS_DOMAIN)
        x = b.layer_norm(b.op("Add", [x, b.linear(ff, f"l{i}.ff2")]), f"l{i}.ln2")
    return x


def int64_input(name: str, shape: list[str | int]) -> Any:
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)
