"""`sparc-local adapt`: train E on the indexed sentences, write a new model version, re-encode, switch.

SPARC §5.1 on the user's machine: the word-embedding matrix E of the model is trained with
masked-LM on the sentences already in the index (all other weights frozen, numpy only), swapped
into a copy of model.onnx, and the whole index is re-encoded with it. Until the last step the old
index and the old model stay in use, so an interrupted run changes nothing but its checkpoint
(in <data dir>/adapt/), and running it again resumes from there.

First the corpus's distance from the model's training text (``adapt.domain``): adapt declines,
unless forced, sentences too close to it to gain, as the paper's own SQuAD and NQ did not.

Training data: each indexed sentence alone, "[CLS] sentence [SEP]". The paper trains the MLM on
the target domain's sentence set; the contexts are those same sentences again, and a pair input
would make every step several times longer (cost grows with sequence length, and a sentence is
~30 tokens while sentence + context fills max_length). Batches are drawn in a seeded random
order, grouped by length and padded only to their longest member.

The library never prints: progress goes to `on_progress(phase, done, total, loss)`, and the gate's
measure, before any training, to `on_distance(Distance)`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import fmean

import numpy as np

from sparc_local import paths
from sparc_local.adapt import domain
from sparc_local.adapt.mlm import Mode
from sparc_local.adapt.train_embeddings import TokenBatch, adapt_embeddings, pad_sequences
from sparc_local.errors import ModelError, ModelMissing, SparcError
from sparc_local.index.store import Index
from sparc_local.model.info import ACTIVE_POINTER as POINTER
from sparc_local.model.info import ModelInfo, active_model, index_is_stale, load_tokenizer, shipped_model_dir

NEW_DB_SUFFIX = ".adapting"
# which rows of E train (trainable_rows), recorded in the adapted model; the lab's other rules
# (sparc_lab/adapt_rules.py) were never on the CLI
ROWS_OWN = "own"  # the rows of the corpus's own tokens (adapt.domain.own_tokens)
ROWS_CORPUS = "corpus"  # the rows of every token in the indexed sentences: when there is no own token
MLM_MODE: Mode = "exact"  # adapt.mlm: E's gradient through both of its uses (decoder and input embedding)
POOL_BATCHES = 16  # batches drawn together and grouped by length: little padding, still random
_CKPT_FORMAT = 1

Progress = Callable[[str, int, int, "float | None"], None]  # (phase, done, total, loss)


class AdaptError(SparcError):
    """A problem the user can fix; `remedy` says how."""


@dataclass(frozen=True)
class AdaptOptions:
    steps: int = 500
    batch_size: int = 32
    lr: float = 5e-5
    seed: int = 0
    max_length: int = 64  # tokens per training sentence, [CLS] and [SEP] included
    checkpoint_every: int = 25
    min_sentences: int = 100
    force: bool = False  # adapt even a corpus close to the training text (see corpus_distance)
    threads: int | None = None  # encoder threads while re-encoding


LOSS_WINDOW = 20  # steps whose mean MLM loss is reported at each end of a run: one batch's loss is noisy


@dataclass
class AdaptResult:
    model: ModelInfo
    base: ModelInfo
    steps: int
    resumed_from: int
    corpus: int  # sentences in the index
    encoded: int  # sentences re-encoded
    first_loss: float | None  # MLM loss, mean of this run's first LOSS_WINDOW steps
    last_loss: float | None  # and of its last LOSS_WINDOW steps
    train_seconds: float
    encode_seconds: float
    checkpoint: Path | None = None  # kept until the switch, so an interrupted adapt resumes


# ---------------------------------------------------------------- models and the pointer

def is_adapted(info: ModelInfo) -> bool:
    return bool(info.extra.get("adapted_from"))


def _is_shipped(info: ModelInfo) -> bool:
    try:
        return info.path.resolve() == shipped_model_dir().resolve()
    except ModelMissing:
        return False


def base_model(info: ModelInfo) -> ModelInfo:
    """The model an adapted one was made from (adapt always starts from it, never stacks)."""
    src = info.extra.get("adapted_from")
    if not src:
        return info
    try:
        return ModelInfo.load(shipped_model_dir() if src.get("shipped") else Path(src["path"]))
    except ModelMissing as err:
        raise AdaptError(f"the model {info.name} was adapted from {src.get('path')}, which is gone",
                         "Reinstall sparc-local, or point the active model elsewhere.") from err


def set_active_model(info: ModelInfo | None) -> None:
    """Write the active-model pointer atomically; None (or the shipped model) removes it."""
    pointer = paths.user_dir() / POINTER
    if info is None or _is_shipped(info):
        pointer.unlink(missing_ok=True)
        return
    tmp = pointer.with_name(POINTER + ".tmp")
    tmp.write_text(str(info.path.resolve()) + "\n")
    os.replace(tmp, pointer)


def _cleanup_models(keep: ModelInfo | None) -> None:
    """Delete adapted model versions other than `keep` (each is a full model.onnx)."""
    for folder in paths.models_dir().iterdir():
        if keep is not None and folder.resolve() == keep.path.resolve():
            continue
        try:
            adapted = is_adapted(ModelInfo.load(folder))
        except ModelError:
            adapted = folder.name.startswith(".") and folder.name.endswith(".tmp")
        if adapted:
            shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- training data

def corpus_ids(index: Index, minimum: int) -> np.ndarray:
    """The live sentence ids adapt trains on; refused when there are fewer than ``minimum``."""
    ids = index.live_sentence_ids()
    if len(ids) == 0:
        raise AdaptError("the index has no sentences to adapt to", "Run `sparc-local index FOLDER` first.")
    if len(ids) < minimum:
        raise AdaptError(f"the index has only {len(ids)} sentences; adapt needs at least {minimum}",
                         "Index more of your documents first (`sparc-local index FOLDER`).")
    return ids


def token_batches(index: Index, ids: np.ndarray, tokenizer, info: ModelInfo, batch_size: int,
                  max_length: int, seed: int) -> Iterator[TokenBatch]:
    """Endless, deterministic batches of "[CLS] sentence [SEP]": same seed + same corpus, same batches.

    Epoch by epoch in a seeded permutation; each pool of POOL_BATCHES batches is sorted by length
    and cut into batches, which are yielded in a seeded random order.
    """
    rng = np.random.default_rng([seed, 1])  # separate from the masking stream
    pool = batch_size * POOL_BATCHES
    cls_id, sep_id = info.cls_id, info.sep_id
    while True:
        perm = rng.permutation(ids)
        for start in range(0, len(perm), pool):
            texts = [r.text for r in index.sentences(perm[start:start + pool])]
            seqs = [[cls_id, *e.ids[: max_length - 2], sep_id]
                    for e in tokenizer.encode_batch(texts, add_special_tokens=False) if e.ids]
            if not seqs:
                continue
            order = np.argsort([len(s) for s in seqs], kind="stable")
            groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
            for g in rng.permutation(len(groups)):
                yield _pad([seqs[i] for i in groups[g]], info.has_segments)


def _pad(seqs: list[list[int]], segments: bool) -> TokenBatch:
    ids, mask, special = pad_sequences(seqs)
    return TokenBatch(ids, np.zeros_like(ids) if segments else None, mask, special)


def corpus_counts(index: Index, ids: np.ndarray, tokenizer) -> np.ndarray:
    """Occurrences of each vocabulary token in the indexed sentences ``ids`` (special tokens: 0)."""
    counts = np.zeros(tokenizer.get_vocab_size(), np.int64)
    for start in range(0, len(ids), POOL_BATCHES * 256):
        texts = [r.text for r in index.sentences(ids[start:start + POOL_BATCHES * 256])]
        counts += domain.count_tokens(tokenizer.encode_batch(texts, add_special_tokens=False), len(counts))
    counts[list(tokenizer.get_added_tokens_decoder())] = 0
    return counts


def trainable_rows(counts: np.ndarray, reference: np.ndarray | None) -> tuple[str, np.ndarray]:
    """The rows of E adapt may change, and their rule: the sorted ids of the corpus's own tokens
    (``counts``: ``corpus_counts``; ``reference``: the training text's counts), or, without such
    counts or without one own token (a corpus adapted with --force), of all the corpus's tokens.

    Own tokens only: MLM on the user's text makes E predict its frequent words
    better, and the retrieval model reads that as more weight for them in every sentence; on
    software FAQs the corpus rule's learned change cost more than a random change of the same
    size, and the own rule lost 4 times less (model card, "Adapt").

    With a tied decoder every row of E gets a gradient each step: the softmax pushes down the
    logit of every token that is not the masked one. For a token the corpus never uses that
    gradient is tiny but always points the same way, and Adam, which normalises each coordinate's
    step, moves such a row as far as a frequent token's (benchmarks/adapt_mechanism.py). The
    retrieval model reads those rows only on its output side, as the expansion terms of every
    sentence (f(v, s) for question words the sentence lacks), so moving them changes scores the
    user's sentences give no evidence for. The special tokens stay too: [CLS] and [SEP] are in
    every retrieval input, and [MASK] is in none.
    """
    own = domain.own_tokens(counts, reference) if reference is not None else None
    rule, kept = (ROWS_OWN, np.where(own, counts, 0)) if own is not None and own.any() else (ROWS_CORPUS, counts)
    rows = np.flatnonzero(kept)
    if rows.size == 0:
        raise AdaptError("the indexed sentences have no ordinary token to adapt", "Index more of your documents first.")
    return rule, rows


def corpus_distance(reference: np.ndarray | None, counts: np.ndarray, force: bool) -> domain.Distance | None:
    """How far the corpus is from the training text whose token counts are ``reference`` (None:
    the model ships none, and is never gated).

    Raises AdaptError when it is too close for adapt to help (see ``adapt.domain``), unless forced.
    """
    if reference is None:
        return None
    d = domain.distance(counts, reference)
    if not d.far and not force:
        raise AdaptError(f"your sentences are close to the text the model was trained on: "
                         f"{domain.percent(d.share, d.threshold)} of their words are their own, "
                         f"adapt needs {d.threshold:.0%}",
                         "Adapting would not help them and can cost a little. To adapt anyway: "
                         "`sparc-local adapt --force`.")
    return d


def checkpoint_path(base: ModelInfo, ids: np.ndarray, opts: AdaptOptions, rule: str) -> Path:
    """One checkpoint per (base model, corpus, data options, row rule): a rerun of the same adapt resumes it."""
    key = dict(format=_CKPT_FORMAT, base=base.id, corpus=hashlib.sha256(ids.tobytes()).hexdigest(),
               batch=opts.batch_size, max_length=opts.max_length, seed=opts.seed, lr=opts.lr, mode=MLM_MODE,
               rows=rule)
    fp = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    folder = paths.user_dir() / "adapt"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder / f"ckpt-{fp}.npz"


def _completed_steps(ckpt: Path) -> int:
    if not ckpt.is_file():
        return 0
    try:
        with np.load(ckpt) as z:
            return int(z["step"])
    except (OSError, KeyError, ValueError):
        return 0


# ---------------------------------------------------------------- adapt / revert

def _switch(index: Index, info: ModelInfo, threads: int | None, on_progress: Progress | None) -> int:
    """Re-encode the index with `info` into a new database, switch to it, point at `info`."""
    from sparc_local.adapt.reencode import reencode
    from sparc_local.index.db import remove_database
    from sparc_local.model.encoder import EncoderFactory

    new_db = index.path.with_name(index.path.name + NEW_DB_SUFFIX)
    try:
        n = reencode(index, new_db, info, EncoderFactory(info, threads),
                     on_progress=(lambda d, t: on_progress("encode", d, t, None)) if on_progress else None)
        index.replace_with(new_db)
    except BaseException:
        remove_database(new_db)
        raise
    set_active_model(info)
    return n


def train_adapted_model(index: Index, opts: AdaptOptions = AdaptOptions(), *, model: ModelInfo | None = None,
                        on_progress: Progress | None = None,
                        on_distance: Callable[[domain.Distance], None] | None = None) -> AdaptResult:
    """Train E of `model` (default: the active model's base) on the index's sentences and write the
    new model version; the index and the active model are not touched (result.encoded == 0).
    ``on_distance`` hears the gate's measure when the model has one (``corpus_distance``).

    Resumes from the run's checkpoint, which stays until `adapt` has switched to the new model.
    """
    from sparc_local.adapt.model_folder import load_adapt_weights, write_adapted_model

    base = base_model(model or active_model())
    ids = corpus_ids(index, opts.min_sentences)
    tokenizer = load_tokenizer(base.tokenizer_path)
    counts = corpus_counts(index, ids, tokenizer)
    reference = domain.load_reference(base.path)
    dist = corpus_distance(reference, counts, opts.force)  # before any heavy work: it may decline
    if dist is not None and on_distance:
        on_distance(dist)
    rule, rows = trainable_rows(counts, reference)
    cfg, w, head_meta = load_adapt_weights(base)
    mask_id = tokenizer.token_to_id("[MASK]")
    if mask_id is None:
        raise AdaptError(f"the tokenizer of {base.name} has no [MASK] token", "adapt needs a BERT-style tokenizer.")
    ckpt = checkpoint_path(base, ids, opts, rule)
    for stale in ckpt.parent.glob("ckpt-*"):
        if stale != ckpt:
            stale.unlink(missing_ok=True)
    resumed = min(_completed_steps(ckpt), opts.steps)
    losses: list[float] = []

    def on_step(step: int, loss: float) -> None:
        losses.append(loss)
        if on_progress:
            on_progress("train", step, opts.steps, loss)

    if on_progress:
        on_progress("train", resumed, opts.steps, None)
    t0 = time.perf_counter()
    batches = token_batches(index, ids, tokenizer, base, opts.batch_size, opts.max_length, opts.seed)
    E = adapt_embeddings(cfg, w, batches, steps=opts.steps, lr=opts.lr, seed=opts.seed, checkpoint_path=ckpt,
                         checkpoint_every=opts.checkpoint_every, on_step=on_step, mask_id=mask_id,
                         mode=MLM_MODE, rows=rows)
    train_seconds = time.perf_counter() - t0
    del w
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"{base.name}-adapted-{stamp}"
    if on_progress:
        on_progress("export", 0, 1, None)
    first, last = (fmean(losses[:LOSS_WINDOW]), fmean(losses[-LOSS_WINDOW:])) if losses else (None, None)
    extra = {"adapted_from": {"id": base.id, "name": base.name, "path": str(base.path.resolve()),
                              "shipped": _is_shipped(base)},
             "adapt": {**{k: v for k, v in asdict(opts).items() if k not in ("threads", "checkpoint_every")},
                       "rows": rule,
                       "corpus_sentences": int(len(ids)), "own_share": None if dist is None else round(dist.share, 4),
                       "head": head_meta, "first_loss": first,
                       "last_loss": last, "created": stamp}}
    out = paths.models_dir() / name
    if out.exists():  # two runs in the same second
        shutil.rmtree(out)
    # SPARC §5.1 swaps both sides (the input embeddings and the projection). Keeping the input
    # embeddings the encoder's layers were fine-tuned on lost less near home, where adapt now
    # declines (corpus_distance), and more far from it (model card, "Adapt"; tag v2-research)
    info = write_adapted_model(base, E, out, name=name, extra=extra)
    if on_progress:
        on_progress("export", 1, 1, None)
    return AdaptResult(info, base, opts.steps, resumed, int(len(ids)), 0, first, last, train_seconds, 0.0, ckpt)


def adapt(index: Index, opts: AdaptOptions = AdaptOptions(), *, model: ModelInfo | None = None,
          on_progress: Progress | None = None,
          on_distance: Callable[[domain.Distance], None] | None = None) -> AdaptResult:
    """Adapt E of `model` (default: the active model's base) to the index's sentences, re-encode the
    index with the new model version and switch to it."""
    result = train_adapted_model(index, opts, model=model, on_progress=on_progress, on_distance=on_distance)
    t1 = time.perf_counter()
    result.encoded = _switch(index, result.model, opts.threads, on_progress)
    result.encode_seconds = time.perf_counter() - t1
    if result.checkpoint is not None:
        result.checkpoint.unlink(missing_ok=True)
    _cleanup_models(keep=result.model)
    return result


def revert(index: Index | None, *, threads: int | None = None,
           on_progress: Progress | None = None) -> tuple[ModelInfo, int] | None:
    """Go back to the model adapt started from: re-encode the index with it and point at it.

    Returns (base model, sentences re-encoded), or None if there was nothing to revert.
    """
    try:
        active: ModelInfo | None = active_model()
    except ModelError:
        if not (paths.user_dir() / POINTER).is_file():
            raise
        active = None  # a damaged adapted version: what it was adapted from is unknown, take the shipped one
    base = base_model(active) if active else ModelInfo.load(shipped_model_dir())
    stale_index = index is not None and index_is_stale(index, base)
    if active is not None and not is_adapted(active) and not stale_index:
        return None
    n = _switch(index, base, threads, on_progress) if stale_index and index is not None else 0
    set_active_model(base)
    _cleanup_models(keep=None)
    return base, n
