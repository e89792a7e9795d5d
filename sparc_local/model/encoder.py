"""The document encoder: paragraphs of sentences in, one top-K sparse vector per sentence out.

Only indexing, eval and adapt import this module; `ask` never does, so onnxruntime stays off the
query path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparc_local.errors import ModelDamaged, ModelMissing
from sparc_local.model.info import ModelInfo, load_tokenizer, model_remedy
from sparc_local.model.inputs import pad_batch, paragraph_inputs, sentence_span
from sparc_local.model.projection import CANDIDATES_INPUT, CERTIFIED, FULL, FULL_PROJECTION, Projection, keep_rows
from sparc_local.model.reuse import MEMO_SENTENCES, ParagraphMemo
from sparc_local.model.runtime import onnxruntime
from sparc_local.model.sparse import MAX_POSITION, NO_POSITION, POSITIONS, SparseVectors

# the graph inputs this version feeds (model/export.py declares them)
GRAPH_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "top_k")
TOKEN_BUDGET = 512  # input tokens per onnxruntime run: the vocab projection holds batch·length·|V| floats


def session_options(threads: int | None = None) -> Any:
    """How the encoder loads a model.onnx (the tests load one the same way to see what it holds)."""
    opts = onnxruntime().SessionOptions()
    opts.log_severity_level = 3
    # fold the int8 weights' DequantizeLinear into float constants once, at load: the graph
    # then computes in float on every CPU (export.QUANT_WEIGHTS), as fast as an fp32 export
    opts.add_session_config_entry("session.disable_quant_qdq", "1")
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    return opts


class Encoder:
    """An onnxruntime session over a model folder's model.onnx."""

    def __init__(self, info: ModelInfo, threads: int | None = None, token_budget: int = TOKEN_BUDGET,
                 full_projection: bool = False, memo_sentences: int = MEMO_SENTENCES) -> None:
        """full_projection: a candidate-projection graph (projection.py) projects onto every row,
        for checks; its certified result is the same. memo_sentences: how many sentences' vectors
        reuse.py remembers (0: none, for benchmarks that encode the same text again)."""
        ort = onnxruntime()
        self.info = info
        self.tokenizer = load_tokenizer(info.tokenizer_path)
        opts = session_options(threads)
        self.threads = threads or 0
        if not info.onnx_path.is_file():
            raise ModelMissing(f"{info.onnx_path} is missing", model_remedy(info.path))
        try:
            self.session = ort.InferenceSession(str(info.onnx_path), opts, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's own types (InvalidProtobuf, Fail, ...) derive from Exception only
            raise ModelDamaged(f"{info.onnx_path} is damaged: onnxruntime cannot load it ({type(err).__name__})",
                               model_remedy(info.path)) from err
        inputs = {i.name for i in self.session.get_inputs()}
        missing = sorted(set(GRAPH_INPUTS) - inputs)
        if missing:  # another version's graph: onnxruntime would fail at the first batch, mid-run
            raise ModelDamaged(f"{info.onnx_path} was exported by another version of sparc-local (no input "
                               f"{', '.join(missing)})", model_remedy(info.path))
        self.token_budget = token_budget
        # a graph with the candidate projection takes its row count per run (FULL: every row)
        self.projection = FULL_PROJECTION if full_projection else Projection.from_extra(info.extra)
        self.has_candidates = CANDIDATES_INPUT in inputs
        if not self.projection.full and not self.has_candidates:
            raise ModelDamaged(f"{info.onnx_path} was exported by another version of sparc-local (no input "
                               f"{CANDIDATES_INPUT})", model_remedy(info.path))
        # the most a TopK can keep: the rows the projection scores (no specials, no punctuation;
        # an older graph scores them as 0, which is dropped anyway)
        self.rows = len(keep_rows(info.vocab_size, info.skip_array()))
        self.uncertified = 0  # sentences encoded again with the full projection, for benchmarks
        self.memo = ParagraphMemo(memo_sentences)
        # a model exported before the phrase has no positions output: its vectors carry none
        self.outputs = ["weights", "token_ids"] + [POSITIONS] * any(o.name == POSITIONS
                                                                    for o in self.session.get_outputs())
        self.outputs += [CERTIFIED] * self.has_candidates

    def encode(self, paragraphs: Sequence[Sequence[str]], top_k: int | None = None,
               progress: Callable[[int], None] | None = None) -> SparseVectors:
        """Top-K (token id, f(v,s)) per sentence, zeros dropped, paragraph after paragraph in order.

        A paragraph encoded before (reuse.py) is not encoded again. Inputs are sorted by length and
        cut into batches of similar length, so little is padding.
        """
        return self.memo.encode(paragraphs, top_k, lambda todo, step: self._encode(todo, top_k, step), progress)

    def _encode(self, paragraphs: Sequence[Sequence[str]], top_k: int | None,
                progress: Callable[[int], None] | None) -> SparseVectors:
        info = self.info
        k = min(top_k or info.top_k, self.rows)
        candidates = self.projection.rows_at(k)
        items = paragraph_inputs(self.tokenizer, paragraphs, info.inputs)
        rows: list[tuple[np.ndarray, ...] | None] = [None] * len(items)
        todo = list(range(len(items)))
        while todo:  # a second round, with the full projection, only for uncertified sentences
            again = []
            for batch in self._batches([len(items[i][0]) for i in todo]):
                batch = [todo[b] for b in batch]
                ids, types, mask = pad_batch([items[i] for i in batch])
                feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
                         "top_k": np.array([k], np.int64)}
                if self.has_candidates:
                    feeds[CANDIDATES_INPUT] = np.array([candidates], np.int64)
                weights, token_ids, *more = self.session.run(self.outputs, feeds)
                certified = more.pop() if self.has_candidates else np.ones(len(batch), bool)
                for row, i in enumerate(batch):
                    if not certified[row]:
                        again.append(i)
                        continue
                    at = _in_sentence(more[0][row], *sentence_span(items[i])) if more else None
                    rows[i] = _kept(weights[row], token_ids[row], at)
                if progress:
                    progress(int(certified.sum()))
            self.uncertified += len(again)
            todo, candidates = again, FULL
        return SparseVectors.from_rows(rows)  # type: ignore[arg-type]  # rows of (ids, weights, positions) arrays

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Input indices sorted by length, cut into batches of similar length, so little is padding;
        a batch grows while its longest member times its count stays in the token budget."""
        order = np.argsort(lengths, kind="stable").tolist()
        out, start = [], 0
        while start < len(order):
            end = start + 1
            while end < len(order) and lengths[order[end]] * (end - start + 1) <= max(self.token_budget,
                                                                                      lengths[order[start]]):
                end += 1
            out.append(order[start:end])
            start = end
        return out


@dataclass(frozen=True)
class EncoderFactory:
    """The one place an Encoder is made: calling it loads model.onnx into an onnxruntime session.

    Commands hand the factory down and it is called only when something needs encoding (through
    LazyEncoder), so a run with nothing to encode never pays the model's load time and memory.
    """

    info: ModelInfo
    threads: int | None = None  # None: onnxruntime's default
    token_budget: int = TOKEN_BUDGET
    full_projection: bool = False  # Encoder's check: every vocabulary row projected

    def __call__(self) -> Encoder:
        return Encoder(self.info, threads=self.threads, token_budget=self.token_budget,
                       full_projection=self.full_projection)


class LazyEncoder:
    """An encoder built by its factory on first use and dropped by release(), as fastembed's
    lazy_load: a no-op refresh never loads the model, and an idle process gives its memory back."""

    def __init__(self, factory: Callable[[], Encoder]) -> None:
        self._factory = factory
        self._encoder: Encoder | None = None

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    @property
    def threads(self) -> int:
        """The session's intra-op threads; 0 for onnxruntime's default, or while not loaded."""
        return getattr(self._encoder, "threads", 0)  # a factory may build a stand-in without it

    def encode(self, paragraphs: Sequence[Sequence[str]], top_k: int | None = None,
               progress: Callable[[int], None] | None = None) -> SparseVectors:
        """Encoder.encode, loading the model first if it is not loaded."""
        if self._encoder is None:
            self._encoder = self._factory()
        return self._encoder.encode(paragraphs, top_k=top_k, progress=progress)

    def release(self) -> None:
        self._encoder = None


def _in_sentence(positions: np.ndarray, start: int, end: int) -> np.ndarray:
    """Input positions as token indices in the sentence at [start, end) of the input; NO_POSITION
    for a max found in the context (the graph max-pools over the whole input: that token's
    evidence is not in the sentence, so the phrase shows none for it)."""
    rel = positions - start
    return np.where((positions >= start) & (positions < end) & (rel <= MAX_POSITION), rel, NO_POSITION)


def _kept(weights: np.ndarray, token_ids: np.ndarray,
          positions: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """One row's (token ids, weights[, positions]) with the zero weights dropped."""
    keep = weights > 0
    row = token_ids[keep].astype(np.int32), weights[keep].astype(np.float32)
    return row if positions is None else (*row, positions[keep].astype(np.uint8))
