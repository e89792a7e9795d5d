"""Build a model folder (model.onnx, tokenizer.json, sparc.json) from canonical weights.

The ONNX graph is written directly from the weights with onnx.helper, so exporting needs no
torch and works the same for BERT and DistilBERT layouts. The whole SPARC document side runs
inside the graph: encoder, vocabulary projection H·Eᵀ, masked max-pool, log(ReLU(·)·exp(w)+1)
and TopK, so Python only ever sees K (token, weight) pairs per sentence.

The word-embedding matrix E is stored once: the input Gather and the output projection (a Gemm
with transB) read the same tensor. With int8 it is stored as int8 rows with per-row scales and
dequantized in-graph; the encoder's MatMul weights go through onnxruntime's dynamic quantization.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sparc_local.model.graph import (
    INPUTS,
    MS_DOMAIN,
    GraphBuilder,
    embeddings,
    int64_input,
    layers,
    word_embeddings,
)
from sparc_local.model.graph import quantize_rows as quantize_rows  # adapt and the tests import it from here
from sparc_local.model.info import CONFIG_FILE, WEIGHT_AXIS, ModelInfo
from sparc_local.model.projection import (
    BASIS_E,
    BASIS_E_INIT,
    BASIS_H,
    BASIS_H_INIT,
    CANDIDATE_PROJECTION,
    CANDIDATES_INPUT,
    CERTIFIED,
    FULL_PROJECTION,
    PROJECTION,
    Projection,
    keep_rows,
    low_rank_basis,
    project,
)
from sparc_local.model.runtime import onnxruntime
from sparc_local.model.sparse import POSITIONS
from sparc_local.model.vocab import skip_token_ids
from sparc_local.model.weights import ArchConfig, Weights

OPSET = 17
# How the encoder's MatMul weights are stored and computed:
# - QUANT_WEIGHTS: int8 per output channel, dequantized in-graph, float compute. Every x86 CPU
#   computes the same thing. onnxruntime's int8 kernels do not: u8·s8 products are summed in
#   pairs with int16 saturation on AVX2 CPUs without VNNI (onnxruntime issues #5849, #6004), so
#   the same model ranked tokens differently on AMD EPYC and on Intel VNNI machines.
# - QUANT_DYNAMIC: onnxruntime's dynamic quantization (uint8 activations, MatMulInteger).
# - QUANT_FP32: float weights, 4x the size.
QUANT_WEIGHTS, QUANT_DYNAMIC, QUANT_FP32 = "int8-weights", "int8", "fp32"
QUANTS = (QUANT_WEIGHTS, QUANT_DYNAMIC, QUANT_FP32)
# QUANT_WEIGHTS' int8 scales: one per output channel (1) or per input channel (0), recorded in
# sparc.json's extra under info.WEIGHT_AXIS. A model fine-tuned from a dequantized int8 model sits
# within half a step of that model's per-output grid, so quantizing it on the same grid rounds it
# back to where it started; the per-input grid is independent of it.


def _graph(cfg: ArchConfig, w: Weights, sparsity_w: float, int8_embeddings: bool, skip: np.ndarray,
           pool: str = "all", weight_axis: int | None = None, projection: Projection = FULL_PROJECTION,
           joined_qkv: bool = False):
    from onnx import TensorProto, helper

    b = GraphBuilder(w, cfg, weight_axis)
    nodes, op, const = b.nodes, b.op, b.const

    def argmax_of(scores: str, indices: str) -> str:
        """(rows, K) positions along axis 1 of ``scores`` (rows, positions, V) where each row's K
        ``indices`` (columns of V) take their max: only the K kept columns are searched, and
        ArgMax keeps the first of equal values, as ReduceMax's max is the first one's."""
        cols = op("Unsqueeze", [indices, const(np.array([1], np.int64))])  # (rows, 1, K)
        size = op("Concat", [const(np.array([1], np.int64)), op("Gather", [op("Shape", [scores]),
                                                                             const(np.array([1], np.int64))]),
                             const(np.array([1], np.int64))], axis=0)
        kept = op("GatherElements", [scores, op("Expand", [cols, size])], axis=2)  # (rows, positions, K)
        return op("ArgMax", [kept], axis=1, keepdims=0)

    E, e8, e_scale = word_embeddings(b, int8_embeddings)  # stored once: the input Gather and the projection
    _, types, mask = INPUTS
    x = embeddings(b, E)
    maskf = op("Cast", [mask], to=TensorProto.FLOAT)
    x = layers(b, x, joined_qkv=joined_qkv)

    scale = const(np.array(math.exp(sparsity_w), np.float32))
    one = const(np.array(1.0, np.float32))
    # f(v,s) = log(ReLU(max_i H(s)_i·e_v)·exp(w) + 1), SPARC Eq. 4. Padding rows of H are zeroed,
    # which is exact under the ReLU: ReLU(max(x, 0)) == ReLU(max(x)).
    pool_mask = maskf
    if pool == "sentence":
        # max-pool over the sentence segment only ([CLS] sentence [SEP]); the context still
        # shapes every token's H through attention
        pool_mask = op("Mul", [maskf, op("Sub", [const(np.array(1.0, np.float32)),
                                                 op("Cast", [types], to=TensorProto.FLOAT)])])
    hm = op("Mul", [x, op("Unsqueeze", [pool_mask, const(np.array([2], np.int64))])])
    # tokens that are never query terms (specials, [unused], punctuation) would only waste top-K
    # slots: they are out of the projection, whose columns map back to vocabulary ids through keep
    kept = keep_rows(cfg.vocab_size, skip)
    keep = const(kept, "query_vocab")
    candidate = not projection.full and e8 is not None
    basis = None
    if candidate and projection.rank:
        if BASIS_H in w:  # fitted to the encoder's hidden states (projection.fitted_bases)
            a, e = w[BASIS_H], w[BASIS_E]
            if a.shape != (cfg.hidden, projection.rank) or e.shape != a.shape:
                raise ValueError(f"the projection's bases are {a.shape} and {e.shape}, "
                                 f"not ({cfg.hidden}, {projection.rank}): fit them at rank {projection.rank}")
            basis = const(a, BASIS_H_INIT), const(e, BASIS_E_INIT)
        else:
            p_name = const(low_rank_basis(w["emb.word"].astype(np.float32)[kept], projection.rank), "projection_basis")
            basis = p_name, p_name
    scores, cols, certified = project(b.ops(), hm, E, e8 if candidate else None,
                                      e_scale, keep, cfg.hidden, basis)  # (B, L, C), (B, C), (B,)
    pooled = op("ReduceMax", [scores], axes=[1], keepdims=0)
    f = op("Log", [op("Add", [op("Mul", [op("Relu", [pooled]), scale]), one])])
    values, indices = op("TopK", [f, "top_k"], n_out=2, axis=-1, largest=1, sorted=1)
    nodes.append(helper.make_node("Gather", [keep, op("GatherElements", [cols, indices], axis=1)], ["token_ids"]))
    # the phrase (DenSPI-style): the input position whose H gave each kept token's max
    nodes.append(helper.make_node("Identity", [argmax_of(scores, indices)], [POSITIONS]))
    inputs = [int64_input(n, ["batch", "length"]) for n in INPUTS]
    if certified is None:
        return _model(nodes, b.inits, values, inputs, "batch")
    nodes.append(helper.make_node("Identity", [certified], [CERTIFIED]))
    return _model(nodes, b.inits, values, [*inputs, int64_input(CANDIDATES_INPUT, [1])], "batch",
                  [helper.make_tensor_value_info(CERTIFIED, TensorProto.BOOL, ["batch"])])


def _model(nodes: list, inits: list, weights: str, inputs: list, rows: str, more: Sequence[Any] = ()):
    """The graph around its nodes: outputs `weights`, `token_ids` and their `positions`, one row
    per sentence, then `more` (value infos)."""
    from onnx import TensorProto, helper

    nodes.append(helper.make_node("Identity", [weights], ["weights"]))
    outputs = [helper.make_tensor_value_info("weights", TensorProto.FLOAT, [rows, "k"]),
               helper.make_tensor_value_info("token_ids", TensorProto.INT64, [rows, "k"]),
               helper.make_tensor_value_info(POSITIONS, TensorProto.INT64, [rows, "k"]), *more]
    graph = helper.make_graph(nodes, "sparc_document_encoder", [*inputs, int64_input("top_k", [1])], outputs,
                              inits)
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="sparc-local")
    model.ir_version = 8
    return model


def export_model(cfg: ArchConfig, w: Weights, tokenizer_json: Path, out_dir: Path, *, name: str,
                 source: str, sparsity_w: float = 0.0, top_k: int = 256, max_length: int = 256,
                 quant: str = QUANT_WEIGHTS, per_channel: bool = True, pool: str = "all",
                 inputs: dict | None = None, extra: dict | None = None,
                 weight_axis: int = 1, projection: Projection = CANDIDATE_PROJECTION) -> ModelInfo:
    """Write out_dir/{model.onnx, tokenizer.json, sparc.json}, replacing any earlier export.

    `projection`: the vocabulary projection through certified candidates (projection.py), for a
    model with int8 E rows; an fp32 export always projects onto every row."""
    import onnx

    if quant not in QUANTS:
        raise ValueError(f"quant must be one of {QUANTS}")
    int8 = quant != QUANT_FP32
    vocab = json.loads(Path(tokenizer_json).read_text())["model"]["vocab"]
    skip = skip_token_ids(vocab)
    projection = projection if int8 else FULL_PROJECTION
    model = _graph(cfg, w, sparsity_w, int8_embeddings=int8, skip=skip, pool=pool,
                   weight_axis=weight_axis if quant == QUANT_WEIGHTS else None, projection=projection,
                   joined_qkv=quant == QUANT_DYNAMIC)
    onnx.checker.check_model(model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "model.onnx"
    if quant == QUANT_DYNAMIC:
        onnxruntime()  # its telemetry off before onnxruntime.quantization imports it
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory() as tmp:
            fp32 = Path(tmp) / "fp32.onnx"
            onnx.save(model, fp32)
            # the encoder's MatMul weights and the fused Attention's joined Q, K, V (QAttention);
            # E is already int8 and feeds a Gemm/Gather (shape inference knows no contrib op,
            # hence the default type)
            quantize_dynamic(fp32, Path(tmp) / "int8.onnx", op_types_to_quantize=["MatMul", "Attention"],
                             weight_type=QuantType.QInt8, per_channel=per_channel,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            onnx.save(gemms_restored(onnx.load(Path(tmp) / "int8.onnx")), target)
    else:
        onnx.save(model, target)
    # the shipped tokenizer carries no padding/truncation: lengths are sparc-local's to decide
    tok = json.loads(Path(tokenizer_json).read_text())
    tok["padding"], tok["truncation"] = None, None
    (out_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    info = ModelInfo(
        name=name, path=out_dir, layout=cfg.layout, vocab_size=cfg.vocab_size, hidden=cfg.hidden,
        top_k=top_k, max_length=max_length, sparsity_w=float(sparsity_w),
        cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"], skip_ids=tuple(int(i) for i in skip),
        quantization=quant, source=source, has_segments=bool(cfg.type_vocab), **(inputs or {}),
        extra={"digest": digest, "arch": cfg.to_dict(), "pool": pool,
               **({WEIGHT_AXIS: weight_axis} if quant == QUANT_WEIGHTS and weight_axis != 1 else {}),
               **(extra or {}), **({} if projection.full else {PROJECTION: projection.to_dict()})},
    )
    (out_dir / CONFIG_FILE).write_text(info.to_json() + "\n")
    return info


def gemms_restored(model: Any) -> Any:
    """`model` with each Gemm that onnxruntime's dynamic quantization split into Transpose(B) and
    MatMul put back together (Gemm transB=1), in every subgraph.

    The quantizer splits every Gemm, including the full projection's H·Eᵀ, whose B is E's
    dequantized rows: onnxruntime would fold that Transpose at load into a float copy of Eᵀ
    (45 MB) beside E."""
    from onnx import helper

    def restore(graph: Any) -> None:
        made = {n.output[0]: n for n in graph.node if n.op_type == "Transpose" and n.output[0].endswith("_Transposed")
                and not n.attribute}
        readers = Counter(i for n in graph.node for i in n.input)
        joined = {n.input[1] for n in graph.node
                  if n.op_type == "MatMul" and n.input[1] in made and readers[n.input[1]] == 1}
        kept = []
        for n in graph.node:
            for a in n.attribute:
                if a.g.node:
                    restore(a.g)
            if n.op_type == "MatMul" and n.input[1] in joined:
                kept.append(helper.make_node("Gemm", [n.input[0], made[n.input[1]].input[0]], list(n.output),
                                             name=n.name, transB=1))
            elif n.output[0] not in joined:
                kept.append(n)
        del graph.node[:]
        graph.node.extend(kept)

    restore(model.graph)
    return model


def _own_projection(info: ModelInfo) -> Projection:
    """A model folder's projection; one exported before the candidates had none, so the default."""
    return Projection.from_extra(info.extra) if PROJECTION in info.extra else CANDIDATE_PROJECTION


def reexport(src: Path, out_dir: Path, projection: Projection | None = None,
             basis: tuple[np.ndarray, np.ndarray] | None = None) -> ModelInfo:
    """A model folder exported again with this version's graph, from its own weights and settings
    (the projection: `projection`, else the folder's own, else the default; a fitted estimate's
    bases: `basis`, else the folder's own).

    The int8 weights are read back from model.onnx and quantized again to the same int8 values
    and scales, so the encoder computes what it did (tests/golden holds it to that); the MLM head
    beside it is carried over with the new digest, since its encoder is the same, and so is every
    other file of the folder that the export does not write (adapt's reference counts, the card).
    """
    from sparc_local.model.folder import HEAD_FILE, load_encoder_weights, load_npz, save_npz

    old = ModelInfo.load(src)
    cfg, w = load_encoder_weights(old)
    if basis is not None:
        w[BASIS_H], w[BASIS_E] = basis
    old_extra = {k: v for k, v in old.extra.items() if k not in ("digest", "arch", "pool", WEIGHT_AXIS, PROJECTION)}
    projection = _own_projection(old) if projection is None else projection
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
        info = export_model(cfg, w, old.tokenizer_path, Path(tmp), name=old.name, source=old.source,
                            sparsity_w=old.sparsity_w, top_k=old.top_k, max_length=old.max_length,
                            quant=old.quantization, pool=old.extra.get("pool", "all"),
                            extra=old_extra,
                            weight_axis=old.extra.get(WEIGHT_AXIS, 1), projection=projection,
                            inputs={"context_sentences": old.context_sentences, "context_order": old.context_order})
        if (src / HEAD_FILE).is_file():
            head, meta = load_npz(src / HEAD_FILE)
            if meta.get("encoder_digest") == old.extra.get("digest"):
                meta["encoder_digest"] = info.extra["digest"]
            save_npz(Path(tmp) / HEAD_FILE, head, meta)
        for f in src.iterdir():
            if f.is_file() and not (Path(tmp) / f.name).exists():
                shutil.copy2(f, Path(tmp) / f.name)
        out_dir.mkdir(parents=True, exist_ok=True)
        for f in Path(tmp).iterdir():
            shutil.move(str(f), out_dir / f.name)
    return ModelInfo.load(out_dir)


def _fitted(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """--basis: the (A, B) arrays h and e of an .npz (projection.fitted_bases)."""
    with np.load(path) as z:
        return z["h"], z["e"]


FOLDER_OPTIONS = ("--candidates", "--rank", "--basis")  # what a re-export of a model folder takes


def main(argv: list[str] | None = None) -> None:
    """python -m sparc_local.model.export WEIGHTS OUT_DIR --name NAME [--fp32] [--top-k K]

    WEIGHTS may be a model folder: it is re-exported with its own settings (``reexport``)."""
    import argparse

    from sparc_local.model.weights import load_canonical, load_checkpoint

    p = argparse.ArgumentParser(prog="python -m sparc_local.model.export", allow_abbrev=False,
                                description="Export SPARC weights to an ONNX model folder.")
    p.add_argument("weights", help="HF folder (config.json + model.safetensors), a canonical .npz from training, "
                                   "or a model folder to re-export with its own settings")
    p.add_argument("out_dir")
    p.add_argument("--name", help="required unless WEIGHTS is a model folder")
    p.add_argument("--tokenizer", help="tokenizer.json (default: inside the weights folder)")
    p.add_argument("--source", default="", help="provenance recorded in sparc.json")
    p.add_argument("--top-k", type=int, default=256)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--quant", choices=QUANTS, default=QUANT_WEIGHTS,
                   help="int8-weights: int8 storage, float compute (the same on every CPU)")
    # per-tensor int8 lost 0.021 MRR@10 on the held-out split where per-channel matched fp32
    p.add_argument("--pool", choices=["all", "sentence"], default="all",
                   help="max-pool over all input tokens (the paper) or the sentence's own")
    p.add_argument("--context-sentences", type=int, default=6, help="as the model was trained (inputs.InputSpec)")
    p.add_argument("--context-order", default="document")
    p.add_argument("--weight-axis", choices=["output", "input"], default="output",
                   help="int8-weights: a scale per output or per input channel (see WEIGHT_AXIS)")
    p.add_argument("--per-tensor", action="store_true", help="one int8 scale per weight matrix")
    p.add_argument("--candidates", type=int, default=None,
                   help=f"rows scored exactly per sentence after the int8 estimate (default "
                        f"{CANDIDATE_PROJECTION.candidates}, or a re-exported folder's own; 0: the full projection)")
    p.add_argument("--rank", type=int, default=None,
                   help="choose the candidates by a rank-R estimate, not certified (projection.py); "
                        "default 0 (certified), or a re-exported folder's own")
    p.add_argument("--basis", type=Path, help="with --rank: the estimate's bases fitted to the encoder's hidden "
                                             "states, an .npz of (d, R) arrays h and e (python -m sparc_lab.rank_estimate "
                                             "--save); default: E's own subspace")
    args = p.parse_args(argv)
    src = Path(args.weights)
    folder = (src / CONFIG_FILE).is_file()
    # an option not given keeps the folder's own, not the default: --candidates alone must not
    # turn a rank-R folder into a certified one
    own = _own_projection(ModelInfo.load(src)) if folder else CANDIDATE_PROJECTION
    projection = (None if args.candidates is None and args.rank is None
                  else Projection(own.candidates if args.candidates is None else args.candidates,
                                  own.rank if args.rank is None else args.rank))
    if folder:
        ignored = [a for a in (argv if argv is not None else sys.argv[1:])
                   if a.startswith("--") and a.split("=")[0] not in FOLDER_OPTIONS]
        if ignored:  # a folder keeps its own settings: an option that would be dropped is an error
            p.error(f"{', '.join(ignored)}: a model folder is re-exported with its own settings; "
                    "only --candidates, --rank and --basis change (export its training weights to change the rest)")
        reexport(src, Path(args.out_dir), projection, _fitted(args.basis) if args.basis else None)
        print(f"re-exported {src} to {args.out_dir}")
        return
    if not args.name:
        p.error("--name is required")
    if src.suffix == ".npz":
        cfg, w = load_canonical(src)
        sparsity = float(w.pop("sparsity.w", np.array(0.0)))
    else:
        cfg, w = load_checkpoint(src)
        sparsity = 0.0
    if args.basis:
        w[BASIS_H], w[BASIS_E] = _fitted(args.basis)
    tok = Path(args.tokenizer) if args.tokenizer else src / "tokenizer.json"
    info = export_model(cfg, w, tok, Path(args.out_dir), name=args.name, source=args.source or str(src),
                        sparsity_w=sparsity, top_k=args.top_k, max_length=args.max_length, quant=args.quant,
                        per_channel=not args.per_tensor, pool=args.pool,
                        weight_axis=0 if args.weight_axis == "input" else 1,
                        projection=projection or CANDIDATE_PROJECTION,
                        inputs={"context_sentences": args.context_sentences, "context_order": args.context_order})
    print(f"exported {info.name} ({info.quantization}, K={info.top_k}) to {info.path}")


if __name__ == "__main__":
    main()
