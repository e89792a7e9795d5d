"""The document encoder: paragraphs of sentences in, one top-K sparse vector per sentence out.

Only indexing, eval and adapt import this module; `ask` never does, so onnxruntime stays off the
query path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sparc_local.errors import ModelDamaged, ModelMissing
from sparc_local.inputs import load_tokenizer, pad_batch, paragraph_inputs
from sparc_local.modelinfo import ModelInfo, model_remedy
from sparc_local.sparse import SparseVectors


class Encoder:
    """An onnxruntime session over a model folder's model.onnx."""

    def __init__(self, info: ModelInfo, threads: int | None = None, token_budget: int = 512) -> None:
        import onnxruntime as ort

        self.info = info
        self.tokenizer = load_tokenizer(info.tokenizer_path)
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        # fold the int8 weights' DequantizeLinear into float constants once, at load: the graph
        # then computes in float on every CPU (export.QUANT_WEIGHTS), as fast as an fp32 export
        opts.add_session_config_entry("session.disable_quant_qdq", "1")
        if threads:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        self.threads = threads or 0
        if not info.onnx_path.is_file():
            raise ModelMissing(f"{info.onnx_path} is missing", model_remedy(info.path))
        try:
            self.session = ort.InferenceSession(str(info.onnx_path), opts, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's own types (InvalidProtobuf, Fail, ...) derive from Exception only
            raise ModelDamaged(f"{info.onnx_path} is damaged: onnxruntime cannot load it ({type(err).__name__})",
                               model_remedy(info.path)) from err
        # the vocab projection holds batch·length·|V| floats: cap tokens per run, not sentences
        self.token_budget = token_budget

    def encode(self, paragraphs: Sequence[Sequence[str]], top_k: int | None = None,
               progress: Callable[[int], None] | None = None) -> SparseVectors:
        """Top-K (token id, f(v,s)) per sentence, zeros dropped, paragraph after paragraph in order.

        Inputs are sorted by length and cut into batches of similar length, so little is padding.
        """
        info = self.info
        items = paragraph_inputs(self.tokenizer, paragraphs, info.inputs)
        k = np.array([min(top_k or info.top_k, info.vocab_size)], np.int64)
        order = np.argsort([len(ids) for ids, _ in items], kind="stable")
        rows: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(items)
        start = 0
        while start < len(order):
            length = len(items[order[start]][0])
            end = start + 1
            # grow the batch while the longest member times the count stays in budget
            while end < len(order) and len(items[order[end]][0]) * (end - start + 1) <= max(self.token_budget, length):
                end += 1
            batch = [items[i] for i in order[start:end]]
            ids, types, mask = pad_batch(batch)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "top_k": k}
            weights, token_ids = self.session.run(["weights", "token_ids"], feeds)
            for row, i in enumerate(order[start:end]):
                keep = weights[row] > 0
                rows[i] = (token_ids[row][keep].astype(np.int32), weights[row][keep].astype(np.float32))
            if progress:
                progress(end - start)
            start = end
        return SparseVectors.from_rows(rows)  # type: ignore[arg-type]
