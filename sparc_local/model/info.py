"""Everything sparc-local knows about a model, read from its folder's sparc.json."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from sparc_local.errors import ModelDamaged, ModelMissing
from sparc_local.model.inputs import InputSpec
from sparc_local.model.projection import Projection

CONFIG_FILE = "sparc.json"
SHIPPED_MODEL = "sparc-minilm-l6"
# the reranker `ask` runs over the first stage's top passages (rerank/), shipped beside the encoder;
# RERANKER_VAR names another folder (tests: a tiny one), or NO_RERANKER: the first stage alone
SHIPPED_RERANKER = "rerank-minilm-l6"
RERANKER_VAR = "SPARC_LOCAL_RERANKER"
NO_RERANKER = "none"
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
ACTIVE_POINTER = "active-model"  # a file in the data dir naming the adapted model in use
# extra key: the axis of the int8 weights' scales (export.QUANT_WEIGHTS); 1 when absent
WEIGHT_AXIS = "weight_axis"
INDEX_MODEL_KEY = "model"  # the index meta key holding the id of the model that encoded it
# ... and the one holding its settings that change the vectors of the same weights (ModelInfo.settings)
INDEX_SETTINGS_KEY = "model_settings"
_REINSTALL = "Reinstall sparc-local."
# the one encoder input scheme, "[CLS] sentence [SEP] context [SEP]": sparc.json records it. Model v2's
# paragraph windows ("window", issue 13; tag v2-research) matched none of v1's figures and are gone
SCHEME_KEY, SCHEME = "scheme", "pair"


class ModelFiles:
    """The files an exported model folder holds (the encoder's and the reranker's alike)."""

    path: Path

    @property
    def onnx_path(self) -> Path:
        return self.path / ONNX_FILE

    @property
    def tokenizer_path(self) -> Path:
        return self.path / TOKENIZER_FILE


@dataclass(frozen=True)
class ModelInfo(ModelFiles):
    """A model folder's metadata. The folder holds model.onnx, tokenizer.json and sparc.json."""

    name: str
    path: Path
    layout: str  # "bert" or "distilbert": the weight layout the model was exported from
    vocab_size: int
    hidden: int
    top_k: int  # K: (token, weight) pairs kept per sentence
    max_length: int  # encoder input length, sentence + context
    sparsity_w: float  # w of SPARC Eq. 4 (baked into the graph; recorded for reference)
    cls_id: int
    sep_id: int
    skip_ids: tuple[int, ...]  # special and punctuation-only tokens, never query terms
    quantization: str  # "int8" or "fp32"
    source: str  # where the weights came from
    has_segments: bool = True  # DistilBERT has no segment embeddings
    context_sentences: int = 6  # a sentence's context: its nearest paragraph neighbours (inputs.InputSpec)
    context_order: str = "document"
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Stable identity of what encodes: the index records it to know when to re-encode. The
        weights' digest, and a low-rank projection's candidate count (a sparc.json setting that
        changes the vectors)."""
        projection = Projection.from_extra(self.extra)
        rows = "" if projection.exact else f"/c{projection.candidates}"
        return f"{self.name}@{self.extra.get('digest', 'unknown')[:12]}{rows}"

    @property
    def settings(self) -> str:
        """The sparc.json settings beside the weights that change what a sentence encodes to: its
        input window, the K pairs kept and the context rule (one set of weights may ship at
        another window). The index records them beside ``id``."""
        return f"L{self.max_length}/K{self.top_k}/ctx{self.context_sentences}-{self.context_order}"

    @property
    def inputs(self) -> InputSpec:
        """How inputs.paragraph_inputs builds this model's encoder inputs."""
        return InputSpec(self.max_length, self.cls_id, self.sep_id, self.context_sentences, self.context_order)

    def skip_array(self) -> np.ndarray:
        return np.asarray(self.skip_ids, dtype=np.int32)

    def to_json(self) -> str:
        d = asdict(self)
        d.pop("path")
        d["skip_ids"] = list(self.skip_ids)
        d[SCHEME_KEY] = SCHEME
        return json.dumps(d, indent=1, sort_keys=True)

    @classmethod
    def load(cls, folder: Path) -> ModelInfo:
        """Raises ModelMissing without sparc.json, ModelDamaged when it cannot be read."""
        folder = Path(folder)
        cfg_file = folder / CONFIG_FILE
        if not cfg_file.is_file():
            raise ModelMissing(f"{folder} is not a sparc-local model folder (no {CONFIG_FILE})", model_remedy(folder))
        try:
            d = json.loads(cfg_file.read_text())
            d["skip_ids"] = tuple(d["skip_ids"])
            if d.get(SCHEME_KEY, SCHEME) != SCHEME:
                raise ModelDamaged(f"{cfg_file} describes a model of input scheme {d[SCHEME_KEY]!r}, which this "
                                   f"version of sparc-local does not run", model_remedy(folder))
            # keys no field reads (an older export's weight_cap, model v2's marks and reach) are ignored
            known = {k: d[k] for k in cls.__dataclass_fields__ if k in d and k != "path"}
            return cls(path=folder, **known)
        except (OSError, ValueError, KeyError, TypeError) as err:
            reason = (err.strerror if isinstance(err, OSError) else f"no {err}" if isinstance(err, KeyError)
                      else str(err))
            raise ModelDamaged(f"{cfg_file} is damaged ({reason})", model_remedy(folder)) from err


def _shipped_candidates(name: str = SHIPPED_MODEL) -> tuple[Path, Path]:
    """Where a shipped model lives: exported_models/ is installed as sparc_local/models."""
    here = Path(__file__).resolve().parent.parent
    return here / "models" / name, here.parent / "exported_models" / name


def shipped_model_dir() -> Path:
    """The model that ships with the package; ModelMissing if the installation lost it."""
    for candidate in _shipped_candidates():
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise ModelMissing(f"the shipped model {SHIPPED_MODEL} is missing from the installation", _REINSTALL)


def shipped_reranker_candidates() -> tuple[Path, Path]:
    """Where the shipped reranker would be (installed, or in a clone)."""
    return _shipped_candidates(SHIPPED_RERANKER)


def reranker_dir() -> Path | None:
    """The reranker's folder: RERANKER_VAR's when set (used even if it is missing or damaged, so that
    `ask` says so; NO_RERANKER: none), else the shipped one when the installation has it; None: `ask`
    answers with the first stage alone.  A stat or two: `ask` calls it on every question."""
    named = os.environ.get(RERANKER_VAR)
    if named == NO_RERANKER:
        return None
    if named:
        return Path(named).expanduser()
    return next((c for c in shipped_reranker_candidates() if c.is_dir()), None)


def model_remedy(folder: Path) -> str:
    """What to do about a broken model folder, by where it is: the shipped model comes back with a
    reinstall, an adapted version with `adapt --revert`, a folder the user gave must be fixed."""
    from sparc_local.paths import models_dir

    folder = Path(folder).resolve()
    if folder in {c.resolve() for c in _shipped_candidates()}:
        return _REINSTALL
    if folder.is_relative_to(models_dir().resolve()):
        return "Run `sparc-local adapt --revert` to go back to the model adapt started from."
    return f"Give a model folder exported by sparc-local ({CONFIG_FILE}, {ONNX_FILE} and {TOKENIZER_FILE})."


def active_model() -> ModelInfo:
    """The model `index` and `ask` use: an adapted version if `adapt` made one, else the shipped one.

    A pointer to a folder that is gone falls back to the shipped model; a damaged folder raises.
    """
    from sparc_local.paths import user_dir

    pointer = user_dir() / ACTIVE_POINTER
    if pointer.is_file():
        folder = Path(pointer.read_text().strip())
        if (folder / CONFIG_FILE).is_file():
            return ModelInfo.load(folder)
    return ModelInfo.load(shipped_model_dir())


class _Meta(Protocol):
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str | None) -> None: ...


def record_model(index: _Meta, info: ModelInfo) -> None:
    """The index's vectors are ``info``'s: its id and its settings (``index_is_stale`` reads them)."""
    index.set_meta(INDEX_MODEL_KEY, info.id)
    index.set_meta(INDEX_SETTINGS_KEY, info.settings)


def index_is_stale(index: _Meta, info: ModelInfo) -> bool:
    """The index was encoded by another model than `info`, or by its weights at other settings
    (window, K, context): its vectors do not match this model's query side until every sentence is
    encoded again. An index that records no model is not stale, nor one that records no settings
    (encoded before they were recorded) by the same weights."""
    model = index.get_meta(INDEX_MODEL_KEY)
    if model is None:
        return False
    return model != info.id or index.get_meta(INDEX_SETTINGS_KEY) not in (None, info.settings)


def load_tokenizer(path: str | Path):
    """The model's tokenizer with its padding and truncation switched off.

    Hugging Face tokenizer.json files often carry fixed padding (all-MiniLM-L6-v2's pads every
    text to 128 tokens) and truncation; left on, every sentence would come back padded and
    leave no room for its context. Lengths are decided by the input builder (inputs.py), and nowhere else.
    """
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.is_file():
        raise ModelMissing(f"{path} is missing", model_remedy(path.parent))
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # the Rust binding raises plain Exception
        raise ModelDamaged(f"{path} is damaged ({err})", model_remedy(path.parent)) from err
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer
