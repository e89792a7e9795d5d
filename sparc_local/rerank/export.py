"""Build a reranker folder (model.onnx, tokenizer.json, rerank.json) from a torch-free checkpoint.

    python -m sparc_local.rerank.export CHECKPOINT OUTDIR --name rerank-minilm-l6 --tokenizer TOKENIZER_JSON \
        [--alpha A --likely T --n N --max-length L] [--int8] [--source TEXT]

CHECKPOINT is a .npz of the canonical BERT layout (``model/weights.py``'s save_canonical) plus
``head.w`` [1, hidden] and ``head.b`` [1] (the lab's names): a linear head on the last layer's [CLS]. The
graph is the SPARC exporter's encoder (``model/graph.py``), then that head: inputs ``input_ids``,
``attention_mask``, ``token_type_ids`` (int64 [batch, length]), output ``logits`` (float32 [batch]).

``fp32`` stores every weight in float.  The int8 forms store E as int8 rows and dequantize only
the rows gathered (a reranker never projects onto E, so a float copy of it, 47 MB for BERT's
vocabulary, would only cost load time and memory), and the linear layers' weights either as int8
dequantized in-graph and folded into float at load (``int8-weights``: a quarter of the file, float
compute) or through onnxruntime's dynamic quantization (``int8``: its integer kernels, the fused
attention's Q, K and V joined into one weight so that it becomes QAttention; the head stays float).  ``--int8``
picks the int8 form that benchmarks/rerank_speed.py measured faster (INT8 below).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sparc_local.model.export import OPSET, QUANT_DYNAMIC, QUANT_FP32, QUANT_WEIGHTS, QUANTS
from sparc_local.model.graph import MS_DOMAIN, GraphBuilder, embeddings, int64_input, layers, quantize_rows
from sparc_local.model.weights import ArchConfig, Weights
from sparc_local.rerank.model import CONFIG_FILE, INPUTS, OUTPUT, RerankInfo

HEAD_W, HEAD_B = "head.w", "head.b"  # the lab's names (sparc_lab/rerank_train.py)
INT8 = QUANT_DYNAMIC  # --int8's form (benchmarks/rerank_speed.py --quant)
# rerank.json's defaults: placeholders until the trainer calibrates them (N and the length from the speed table)
N, MAX_LENGTH, ALPHA, LIKELY = 30, 256, 1.0, 0.0


def _word_vectors(b: GraphBuilder) -> str:
    """E's rows of input_ids, (batch, length, hidden): int8 rows gathered, then scaled."""
    from onnx import TensorProto

    q, scale = quantize_rows(b.w["emb.word"])
    ids = INPUTS[0]
    rows = b.op("Cast", [b.op("Gather", [b.const(q, "emb_word_int8"), ids])], to=TensorProto.FLOAT)
    scales = b.op("Unsqueeze", [b.op("Gather", [b.const(scale, "emb_word_scale"), ids]),
                                b.const(np.array([2], np.int64))])
    return b.op("Mul", [rows, scales], "emb_word_rows")


def build_graph(cfg: ArchConfig, w: Weights, quant: str = QUANT_FP32) -> Any:
    """The reranker's ONNX model: the encoder, its [CLS] row, the linear head."""
    from onnx import TensorProto, helper

    b = GraphBuilder(w, cfg, weight_axis=1 if quant == QUANT_WEIGHTS else None)
    if quant == QUANT_FP32:
        x = embeddings(b, b.const(w["emb.word"].astype(np.float32), "emb_word"))
    else:
        x = embeddings(b, _word_vectors(b), gathered=True)
    x = layers(b, x, joined_qkv=quant == QUANT_DYNAMIC)
    cls = b.op("Gather", [x, b.const(np.array(0, np.int64))], axis=1)  # (batch, hidden): [CLS]
    head = b.op("Add", [b.op("MatMul", [cls, b.const(w[HEAD_W].T.astype(np.float32).copy(), "head_w")], "head"),
                        b.const(w[HEAD_B].astype(np.float32).reshape(1), "head_b")])
    b.nodes.append(helper.make_node("Squeeze", [head, b.const(np.array([1], np.int64))], [OUTPUT]))
    graph = helper.make_graph(b.nodes, "sparc_reranker", [int64_input(n, ["batch", "length"]) for n in INPUTS],
                              [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch"])], b.inits)
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="sparc-local")
    model.ir_version = 8
    return model


def load_checkpoint(path: Path) -> tuple[ArchConfig, Weights]:
    """The canonical encoder weights and the head of a reranker .npz; ValueError when it has no head."""
    from sparc_local.model.weights import load_canonical

    cfg, w = load_canonical(Path(path))
    missing = [k for k in (HEAD_W, HEAD_B) if k not in w]
    if missing:
        raise ValueError(f"{path} has no {' or '.join(missing)}: not a reranker checkpoint")
    if w[HEAD_W].shape != (1, cfg.hidden) or w[HEAD_B].size != 1:
        raise ValueError(f"{path}: the head is {w[HEAD_W].shape} + {w[HEAD_B].shape}, not (1, {cfg.hidden}) + (1,)")
    return cfg, w


def export_reranker(cfg: ArchConfig, w: Weights, tokenizer_json: Path, out_dir: Path, *, name: str, source: str,
                    n: int = N, max_length: int = MAX_LENGTH,
                    alpha: float = ALPHA, likely: float = LIKELY,
                    quant: str = QUANT_FP32) -> RerankInfo:
    """Write out_dir/{model.onnx, tokenizer.json, rerank.json}, replacing an earlier export."""
    import onnx

    if quant not in QUANTS:
        raise ValueError(f"quant must be one of {QUANTS}")
    if max_length > cfg.max_positions:
        raise ValueError(f"max_length {max_length} is more than the model's {cfg.max_positions} positions")
    model = build_graph(cfg, w, quant)
    onnx.checker.check_model(model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "model.onnx"
    if quant == QUANT_DYNAMIC:
        _quantize_dynamic(model, target)
    else:
        onnx.save(model, target)
    tok = json.loads(Path(tokenizer_json).read_text())
    tok["padding"], tok["truncation"] = None, None  # the reranker sets its own (rerank.model)
    (out_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    info = RerankInfo(name=name, path=out_dir, max_length=max_length, n=n, alpha=float(alpha), likely=float(likely),
                      source=source)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    (out_dir / CONFIG_FILE).write_text(info.to_json(quantization=quant, digest=digest, arch=cfg.to_dict()) + "\n")
    return RerankInfo.load(out_dir)


def _quantize_dynamic(model: Any, target: Path) -> None:
    """onnxruntime's dynamic quantization of the encoder's MatMuls (the head stays float)."""
    import onnx

    from sparc_local.model.runtime import onnxruntime

    onnxruntime()  # its telemetry off before onnxruntime.quantization imports it
    from onnxruntime.quantization import QuantType, quantize_dynamic

    head = [n.name for n in model.graph.node if n.output and n.output[0].startswith("head_")]
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        onnx.save(model, fp32)
        # shape inference knows no contrib op, hence the default type (as model/export.py)
        quantize_dynamic(fp32, Path(tmp) / "int8.onnx", op_types_to_quantize=["MatMul", "Attention"],
                         nodes_to_exclude=head,
                         weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        shutil.move(str(Path(tmp) / "int8.onnx"), target)


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(description="Export a reranker checkpoint to an ONNX reranker folder.")
    p.add_argument("checkpoint", help="a .npz of canonical BERT weights plus head.w and head.b")
    p.add_argument("out_dir")
    p.add_argument("--name", required=True)
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (bert-base-uncased WordPiece)")
    p.add_argument("--source", default="", help="provenance recorded in rerank.json")
    p.add_argument("--n", type=int, default=N, help="passages `ask` reranks")
    p.add_argument("--max-length", type=int, default=MAX_LENGTH, help="tokens of question + passage")
    p.add_argument("--alpha", type=float, default=ALPHA, help="the first stage's weight in the score")
    p.add_argument("--likely", type=float, default=LIKELY, help="a likely answer scores this or more")
    p.add_argument("--int8", action="store_true", help=f"int8 linear layers ({INT8}, see the module's docstring)")
    args = p.parse_args(argv)
    cfg, w = load_checkpoint(Path(args.checkpoint))
    info = export_reranker(cfg, w, Path(args.tokenizer), Path(args.out_dir), name=args.name,
                           source=args.source or str(args.checkpoint), n=args.n, max_length=args.max_length,
                           alpha=args.alpha, likely=args.likely, quant=INT8 if args.int8 else QUANT_FP32)
    print(f"exported {info.name} ({INT8 if args.int8 else QUANT_FP32}, N={info.n}, "
          f"max_length={info.max_length}) to {info.path}")


if __name__ == "__main__":
    main()
