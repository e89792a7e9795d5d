"""The reranker: a model folder (model.onnx, tokenizer.json, rerank.json) read into a frozen
``RerankInfo``, and ``Reranker``, which scores (question, passage) pairs with onnxruntime.

The session and the tokenizer load at the first ``score``, so a question the first stage finds
nothing for loads neither.  Importing this module imports neither onnxruntime nor tokenizers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sparc_local.errors import ModelDamaged, ModelMissing
from sparc_local.model.info import ONNX_FILE, RERANKER_VAR, TOKENIZER_FILE, ModelFiles

CONFIG_FILE = "rerank.json"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # int64 (batch, length)
OUTPUT = "logits"  # float32 (batch,)
# onnxruntime's intra-op threads: the 2 cores of the machine the latency budget is set on
# (benchmarks/rerank_speed.py); one inter-op thread, nodes run in order
THREADS = 2
# pairs per onnxruntime run. One: no padding at all, and a pair's score depends on nothing else, which
# dynamic int8 (its activations' scale is per tensor) would otherwise break. On the software desk's
# passages (benchmarks/rerank_speed.py, N 30, MiniLM-L6 int8, paired) batches of 4 cost 1.14x the CPU
# time of single pairs, though texts are sorted by length so that a batch pads little.
BATCH = 1
PAD, CLS, SEP = "[PAD]", "[CLS]", "[SEP]"


class RerankerMissing(ModelMissing):
    """The reranker folder, or a file of it, is not there."""


class RerankerDamaged(ModelDamaged):
    """A reranker file is there but cannot be read."""


def reranker_remedy(folder: Path) -> str:
    """What to do about a broken reranker folder: the shipped one comes back with a reinstall, one
    named by RERANKER_VAR must be fixed; either way `ask --fast` answers without it."""
    from sparc_local.model.info import shipped_reranker_candidates

    folder = Path(folder).resolve()
    fast = "`sparc-local ask --fast` answers with the first stage alone meanwhile."
    if folder in {c.resolve() for c in shipped_reranker_candidates()}:
        return f"Reinstall sparc-local; {fast}"
    return (f"Point {RERANKER_VAR} at a reranker folder exported by sparc-local ({CONFIG_FILE}, {ONNX_FILE}, "
            f"{TOKENIZER_FILE}), or unset it; {fast}")


@dataclass(frozen=True)
class RerankInfo(ModelFiles):
    """A reranker folder's rerank.json: how the model reads (max_length tokens of a question and a
    passage) and how `ask` uses it: over the first stage's top ``n`` passages, each scored
    logit + ``alpha`` · its first-stage score, a likely answer from ``likely`` on."""

    name: str
    path: Path
    max_length: int
    n: int
    alpha: float
    likely: float
    source: str

    def to_json(self, **extra: Any) -> str:
        d = asdict(self)
        d.pop("path")
        return json.dumps({**d, **extra}, indent=1, sort_keys=True)

    @classmethod
    def load(cls, folder: Path) -> RerankInfo:
        """RerankerMissing without the folder or its rerank.json, RerankerDamaged when it cannot be read."""
        folder = Path(folder)
        cfg = folder / CONFIG_FILE
        if not folder.is_dir():
            raise RerankerMissing(f"the reranker folder {folder} is missing", reranker_remedy(folder))
        if not cfg.is_file():
            raise RerankerMissing(f"{folder} is not a reranker folder (no {CONFIG_FILE})", reranker_remedy(folder))
        try:
            d = json.loads(cfg.read_text())
            info = cls(path=folder, name=str(d["name"]), max_length=int(d["max_length"]), n=int(d["n"]),
                       alpha=float(d["alpha"]), likely=float(d["likely"]), source=str(d.get("source", "")))
        except (OSError, ValueError, KeyError, TypeError) as err:
            reason = (err.strerror if isinstance(err, OSError) else f"no {err}" if isinstance(err, KeyError)
                      else str(err))
            raise RerankerDamaged(f"{cfg} is damaged ({reason})", reranker_remedy(folder)) from err
        if info.max_length < 8 or info.n < 1:
            raise RerankerDamaged(f"{cfg} is damaged (max_length {info.max_length}, n {info.n})",
                                  reranker_remedy(folder))
        return info


class Reranker:
    """(question, passage texts) -> one relevance logit per text.  ``ask``'s ``PassageScorer``."""

    def __init__(self, info: RerankInfo, threads: int = THREADS, batch: int = BATCH,
                 max_length: int | None = None) -> None:
        """``max_length``: another input length than the model's (benchmarks)."""
        self.info = info
        self.threads = threads
        self.batch = batch
        self.max_length = max_length or info.max_length
        self._session: Any = None
        self._tokenizer: Any = None
        self._loading: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._scoring = threading.Lock()  # threads sharing a reranker (Library) score one at a time: its load is lazy

    @classmethod
    def load(cls, folder: Path, **kwargs: Any) -> Reranker:
        return cls(RerankInfo.load(folder), **kwargs)

    @property
    def n(self) -> int:
        return self.info.n

    @property
    def alpha(self) -> float:
        return self.info.alpha

    @property
    def likely(self) -> float:
        return self.info.likely

    def preload(self) -> Reranker:
        """Start loading the session and the tokenizer in a thread, which ``score`` waits for: onnxruntime
        builds the session without the GIL, so a cold `ask`'s first stage runs meanwhile."""
        if self._loading is None and (self._session is None or self._tokenizer is None):
            self._loading = threading.Thread(target=self._load, name="reranker-load", daemon=True)
            self._loading.start()
        return self

    def warm(self) -> Reranker:
        """The session and the tokenizer loaded (they load at the first ``score`` otherwise)."""
        if self._loading is not None:
            self._loading.join()
            self._loading = None
        if self._failed is not None:  # the thread's error, raised where the answer waits for it
            err, self._failed = self._failed, None
            raise err
        self._load()
        return self

    def _load(self) -> None:
        try:
            if self._session is None:
                self._session = self._load_session()
            if self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
        except BaseException as err:
            if threading.current_thread() is not self._loading:
                raise
            self._failed = err

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts),): the logit of each text answering ``question``."""
        out = np.zeros(len(texts), np.float32)
        if not texts:
            return out
        with self._scoring:
            self.warm()
            order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # a batch of like lengths pads little
            for start in range(0, len(order), self.batch):
                rows = order[start:start + self.batch]
                feed = self._encode(question, [texts[i] for i in rows])
                out[rows] = np.asarray(self._session.run([OUTPUT], feed)[0], np.float32).reshape(-1)
        return out

    def _encode(self, question: str, texts: list[str]) -> dict[str, np.ndarray]:
        """`[CLS] question [SEP] text [SEP]` (segment 1 from the text on), the text cut to fit
        max_length, padded to the batch's longest."""
        pairs = [(question, t) for t in texts]
        try:
            encodings = self._tokenizer.encode_batch(pairs)
        except Exception:  # a question too long to leave the text a token: both are cut then
            self._tokenizer.enable_truncation(self.max_length, strategy="longest_first")
            try:
                encodings = self._tokenizer.encode_batch(pairs)
            finally:
                self._tokenizer.enable_truncation(self.max_length, strategy="only_second")
        return {"input_ids": np.array([e.ids for e in encodings], np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], np.int64)}

    def _load_tokenizer(self) -> Any:
        """The folder's WordPiece tokenizer, making BERT's pairs whatever post-processor the file has
        (bert-base-uncased's is this one)."""
        from tokenizers import Tokenizer
        from tokenizers.processors import TemplateProcessing

        path = self.info.tokenizer_path
        if not path.is_file():
            raise RerankerMissing(f"{path} is missing", reranker_remedy(self.info.path))
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as err:  # the Rust binding raises plain Exception
            raise RerankerDamaged(f"{path} is damaged ({err})", reranker_remedy(self.info.path)) from err
        ids = {t: tok.token_to_id(t) for t in (PAD, CLS, SEP)}
        if None in ids.values():
            lost = ", ".join(t for t, i in ids.items() if i is None)
            raise RerankerDamaged(f"{path} is damaged (no {lost} token)", reranker_remedy(self.info.path))
        tok.post_processor = TemplateProcessing(single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
                                                special_tokens=[(CLS, ids[CLS]), (SEP, ids[SEP])])
        tok.enable_truncation(self.max_length, strategy="only_second")
        tok.enable_padding(pad_id=ids[PAD], pad_token=PAD)  # to the longest pair of each batch
        return tok

    def _options(self, ort: Any) -> Any:
        """The session's options, tuned for one question's latency."""
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        # int8-stored weights (export.QUANT_WEIGHTS) become float constants once, at load
        opts.add_session_config_entry("session.disable_quant_qdq", "1")
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        # pool threads sleep between the many small runs of one question (a run per pair) instead of
        # spinning, which cost 1.67x the CPU and 1.82x the wall time on a busy machine (rerank_speed.py --spin)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return opts

    def _load_session(self) -> Any:
        from sparc_local.model.runtime import onnxruntime

        path = self.info.onnx_path
        if not path.is_file():
            raise RerankerMissing(f"{path} is missing", reranker_remedy(self.info.path))
        ort = onnxruntime()
        try:
            session = ort.InferenceSession(str(path), self._options(ort), providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's own types (InvalidProtobuf, Fail, ...) derive from Exception only
            raise RerankerDamaged(f"{path} is damaged: onnxruntime cannot load it ({type(err).__name__})",
                                  reranker_remedy(self.info.path)) from err
        names = {i.name for i in session.get_inputs()}
        if names != set(INPUTS) or OUTPUT not in {o.name for o in session.get_outputs()}:
            raise RerankerDamaged(f"{path} is not a reranker graph (inputs {', '.join(sorted(names))})",
                                  reranker_remedy(self.info.path))
        return session
