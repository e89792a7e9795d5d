"""`sparc-local eval`: ReQA metrics for SPARC and BM25 over the same sentences.

The SPARC side goes through the product's own path: the same input builder and encoder as
`index` (each passage is a paragraph), a real (throw-away) SQLite index, and the same query
tokens and scoring as `ask`.
Encoded corpora are cached by content hash, so a rerun with the same model skips encoding.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sparc_local import paths
from sparc_local.evaluation import reqa
from sparc_local.evaluation.metrics import first_hits, summary
from sparc_local.model.info import ModelInfo, load_tokenizer, record_model
from sparc_local.model.lexical import Lexical
from sparc_local.model.projection import FULL, Projection
from sparc_local.model.sparse import SparseVectors

if TYPE_CHECKING:
    from sparc_local.index.store import Index
    from sparc_local.query.ask import PassageScorer
    from sparc_local.query.searcher import Searcher

CACHE_K = 1000  # encode once at the largest K we study; smaller K is a prefix of it


def cache_k(info: ModelInfo, top_k: int | None = None) -> int:
    """The K to encode at so that the top ``top_k`` is a prefix of what `index` encodes at
    ``top_k``: a low-rank projection's own candidate count up to it (above it, the encoder runs
    the full projection), else CACHE_K."""
    projection = Projection.from_extra(info.extra)
    rows = projection.rows_at(top_k or info.top_k)
    return CACHE_K if projection.exact or rows == FULL else rows


def cache_file(ds_dir: Path, info: ModelInfo, top_k: int | None = None) -> Path:
    """Where the set's corpus, encoded by ``info`` for ``top_k`` (default: the model's K), is
    cached (benchmarks/scale.py reads it too)."""
    h = hashlib.sha256()
    for name in ("corpus.jsonl.gz",):
        h.update((ds_dir / name).read_bytes())
    h.update(f"inputs-v3|{info.id}|{info.inputs}|{cache_k(info, top_k)}".encode())
    folder = paths.user_dir() / "cache" / "eval"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder / f"{h.hexdigest()[:24]}.npz"


def encode_corpus(ds: reqa.ReqaSet, ds_dir: Path, info: ModelInfo, threads: int | None,
                  progress: Callable[[int], None] | None = None, top_k: int | None = None) -> SparseVectors:
    """The set's passages encoded as `index` encodes them, at ``top_k`` or more (cached)."""
    cache = cache_file(ds_dir, info, top_k)
    if cache.exists():
        with np.load(cache) as z:
            return SparseVectors(z["indptr"], z["token_ids"], z["weights"])
    from sparc_local.model.encoder import EncoderFactory

    vectors = EncoderFactory(info, threads)().encode(ds.paragraphs(), top_k=cache_k(info, top_k),
                                                    progress=progress)
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(tmp, indptr=vectors.indptr, token_ids=vectors.token_ids, weights=vectors.weights)
    tmp.replace(cache)
    return vectors


@dataclass
class EvalIndex:
    """A ReQA set written into a throw-away index through the product's write path, with its
    questions as query tokens and the index's sentence ids mapped back to the set's."""

    ds: reqa.ReqaSet
    vectors: SparseVectors
    searcher: Searcher
    questions: list[np.ndarray]
    answers: list[set[str]]
    to_sid: dict[int, str]


def fill_index(index: Index, ds: reqa.ReqaSet, vectors: SparseVectors, info: ModelInfo,
               keep: Callable[[str], bool] | None = None) -> dict[int, str]:
    """Write the set's passages (those ``keep`` accepts, by passage id) into an empty index, each
    as a file of one paragraph, with their encoded ``vectors``; returns db sentence id -> the
    set's sentence id."""
    from sparc_local.batch_writer import BatchWriter
    from sparc_local.index.store import FileUpdate, SentenceRow

    record_model(index, info)
    by_passage: dict[str, list[int]] = {}
    for i, p in enumerate(ds.passages):
        if keep is None or keep(p):
            by_passage.setdefault(p, []).append(i)
    writer = BatchWriter(index, None, merge=False)  # the vectors are the cached ones
    lexical = Lexical.of(info)
    for passage, members in by_passage.items():
        text = " ".join(ds.texts[i] for i in members)
        rows = [SentenceRow(text=ds.texts[i], context=text, offset_in_context=text.find(ds.texts[i]))
                for i in members]
        sub = vectors.slice(members[0], members[-1] + 1)  # a passage's sentences are consecutive
        writer.add(FileUpdate(path=passage, size=0, mtime=0.0, hash=passage, sentences=rows, vectors=sub,
                              lexical=lexical.rows(rows)))
    writer.flush()
    index.merge_all()
    # db sentence ids -> dataset sentence ids (rows were inserted in passage order)
    db_ids = index.sentence_ids_by_path()
    order = [i for p in sorted(by_passage) for i in by_passage[p]]
    return {db: ds.ids[i] for db, i in zip(db_ids, order)}


@contextlib.contextmanager
def eval_index(ds_dir: Path, info: ModelInfo, *, top_k: int | None = None, threads: int | None = None,
               progress: Callable[[int], None] | None = None) -> Iterator[EvalIndex]:
    from sparc_local.index.store import Index
    from sparc_local.query.searcher import Searcher
    from sparc_local.query.tokens import query_token_ids

    ds_dir = Path(ds_dir)
    ds = reqa.load(ds_dir)
    vectors = encode_corpus(ds, ds_dir, info, threads, progress, top_k).head(top_k or info.top_k)
    tokenizer = load_tokenizer(info.tokenizer_path)
    skip = info.skip_array()
    with tempfile.TemporaryDirectory(dir=paths.user_dir()) as tmp:
        index = Index(Path(tmp) / "eval.db")
        to_sid = fill_index(index, ds, vectors, info)
        try:
            yield EvalIndex(ds, vectors, Searcher(index), [query_token_ids(tokenizer, q, skip) for _, q, _ in ds.queries],
                            [set(a) for _, _, a in ds.queries], to_sid)
        finally:
            index.close()


def rank(ev: EvalIndex, mode: str, depth: int = 10, with_hits: bool = False) -> dict:
    """MRR@depth, R@1, R@depth and the query latency of one `ask --mode` (and with_hits, each
    question's first-hit rank, under "hits"; see metrics.py)."""
    ranked, latency = [], []
    for tokens in ev.questions:
        t0 = time.perf_counter()
        ids, _scores = ev.searcher.search(tokens, n=depth, mode=mode)
        latency.append((time.perf_counter() - t0) * 1000)
        ranked.append([ev.to_sid[int(i)] for i in ids])
    hits = first_hits(ranked, ev.answers, depth)
    out: dict[str, object] = dict(summary(hits, depth))
    if with_hits:
        out["hits"] = hits
    out.update(latency_ms_p50=float(np.percentile(latency, 50)), latency_ms_p99=float(np.percentile(latency, 99)))
    return out


def rank_stages(ev: EvalIndex, index: Index, info: ModelInfo, reranker: PassageScorer, depth: int = 10,
                sample: int | None = None, with_hits: bool = False) -> dict:
    """What `ask` shows, one answer per passage, by the first stage alone (``passages``) and
    reranked (``reranked``), paired question by question (``paired``: reciprocal ranks; ``paired_hit1``);
    over a seeded ``sample`` of the questions when given (the reranker costs time per question).
    ``with_hits``: each stage's first-hit ranks too, under ``hits``, keyed by question index."""
    from sparc_local.errors import NoQueryTokens
    from sparc_local.evaluation.metrics import paired_bootstrap
    from sparc_local.query.ask import Asker

    asker = Asker(index, info)
    ranked: dict[str, list[list[str]]] = {"passages": [], "reranked": []}
    latency: list[float] = []
    chosen: Sequence[int] = range(len(ev.ds.queries))
    if sample is not None and sample < len(chosen):
        chosen = sorted(np.random.default_rng(0).choice(len(chosen), sample, replace=False).tolist())
    answers_of = [ev.answers[i] for i in chosen]
    for i in chosen:
        question = ev.ds.queries[i][1]
        try:
            first = asker.ask(question, k=depth, phrases=0)
            t0 = time.perf_counter()
            answers = asker.ask(question, k=depth, phrases=0, reranker=reranker)
            latency.append((time.perf_counter() - t0) * 1000)
        except NoQueryTokens:  # `ask` says so; nothing found, in both stages
            first = answers = []
        ranked["passages"].append([ev.to_sid[a.sentence_id] for a in first])
        ranked["reranked"].append([ev.to_sid[a.sentence_id] for a in answers])
    hits = {name: first_hits(r, answers_of, depth) for name, r in ranked.items()}
    out: dict[str, object] = {name: dict(summary(h, depth)) for name, h in hits.items()}
    out["questions"] = len(answers_of)
    for name, at in (("paired", None), ("paired_hit1", 1)):
        p = paired_bootstrap(hits["passages"], hits["reranked"], hit_at=at)
        out[name] = {"mean": p.mean, "low": p.low, "high": p.high, "better": p.better, "worse": p.worse}
    out["reranked_latency_ms_p50"] = float(np.percentile(latency, 50)) if latency else 0.0
    if with_hits:
        out["hits"] = {name: dict(zip(chosen, h)) for name, h in hits.items()}
    return out


def evaluate(ds_dir: Path, info: ModelInfo, *, depth: int = 10, top_k: int | None = None,
             threads: int | None = None, progress: Callable[[int], None] | None = None,
             with_hits: bool = False, reranker: PassageScorer | None = None, sample: int | None = None) -> dict:
    """The three ways `ask --mode` ranks, on the same index, and the classic BM25 baseline; with a
    ``reranker``, also the default `ask` against its first stage alone (``rank_stages``)."""
    from sparc_local.query.bm25 import BM25
    from sparc_local.query.modes import MODES, SPARC

    with eval_index(ds_dir, info, top_k=top_k, threads=threads, progress=progress) as ev:
        results: dict[str, dict] = {mode: rank(ev, mode, depth, with_hits) for mode in MODES}
        if reranker is not None:
            results["stages"] = rank_stages(ev, ev.searcher.index, info, reranker, depth, sample, with_hits)
    ds = ev.ds
    words = BM25(ds.texts)  # the classic baseline: words, not WordPiece, and the sentence alone
    words_ranked = [[ds.ids[i] for i in words.search(q, depth)[0]] for _, q, _ in ds.queries]
    results[SPARC]["nnz_median"] = int(np.median(np.diff(ev.vectors.indptr)))
    return {"dataset": ds.name, "queries": len(ds.queries), "sentences": len(ds.ids), "model": info.id,
            **results, "bm25_words": summary(first_hits(words_ranked, ev.answers, depth), depth)}
