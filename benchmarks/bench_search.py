"""Micro-benchmark of the index: build size (bytes/posting) and query latency.

    python benchmarks/bench_search.py --sentences 100000 --k 150
    python benchmarks/bench_search.py --smoke     # 2,000 sentences, 10 questions

Synthetic data: each sentence gets ``k`` distinct token ids drawn from a Zipf-like
distribution over a BERT-sized vocabulary (``--uniform`` draws them uniformly instead,
the worst case for the id-gap codec), weights uniform in (0, 12].  Queries are 8-16 tokens
drawn from the same distribution.  Single-threaded; builds in batches like the indexer.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from sparc_local.index.store import FileUpdate, Index, SentenceRow
from sparc_local.model.sparse import SparseVectors
from sparc_local.query.searcher import Searcher


def token_sampler(rng, vocab: int, uniform: bool):
    if uniform:
        p = None
    else:
        p = 1.0 / np.arange(1, vocab + 1) ** 0.9
        p /= p.sum()
        p = p[rng.permutation(vocab)]
    return p


def make_batch(rng, p, vocab, n, k):
    rows = []
    if p is None:
        for _ in range(n):
            rows.append(rng.choice(vocab, k, replace=False))
    else:
        # k distinct tokens per row, approximately Zipf: oversample with replacement, keep the
        # first k distinct (a row can end up a little shorter than k)
        cdf = np.cumsum(p)
        draws = np.minimum(np.searchsorted(cdf, rng.random((n, 4 * k))), vocab - 1)
        for d in draws:
            _, first = np.unique(d, return_index=True)
            rows.append(d[np.sort(first)[:k]])
    sizes = np.array([len(r) for r in rows])
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    toks = np.concatenate(rows).astype(np.int32)
    w = rng.uniform(0.05, 12.0, len(toks)).astype(np.float32)
    return SparseVectors(indptr, toks, w)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=150)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--uniform", action="store_true")
    ap.add_argument("--db", default=None)
    ap.add_argument("--smoke", action="store_true", help="a few seconds: 2,000 sentences, 10 questions")
    args = ap.parse_args()
    if args.smoke:
        args.sentences, args.batch, args.queries = 2000, 1000, 10

    rng = np.random.default_rng(0)
    p = token_sampler(rng, args.vocab, args.uniform)
    scratch = Path.home() / ".cache" / "sparc-local-bench"
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="bench-search-", dir=scratch)
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    db = args.db or os.path.join(tmp, "bench.db")
    ix = Index(db)
    t0 = time.perf_counter()
    done = f = 0
    while done < args.sentences:
        n = min(args.batch, args.sentences - done)
        vec = make_batch(rng, p, args.vocab, n, args.k)
        rows = [SentenceRow("s", "s", 0)] * n
        ix.write_files([FileUpdate(f"/bench/{f}.txt", 1, 1.0, "h", rows, vec)], merge=False)
        done += n
        f += 1
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    ix.merge_all()
    t_merge = time.perf_counter() - t0
    ix.checkpoint()
    st = ix.stats()
    print(
        f"{args.sentences} sentences x {st['postings'] / args.sentences:.0f} postings,"
        f" {'uniform' if args.uniform else 'zipf'} tokens"
    )
    print(f"build {t_build:.1f}s, merge_all {t_merge:.1f}s")
    print(
        f"posting blobs: {st['posting_bytes'] / st['postings']:.2f} B/posting, "
        f"{st['posting_bytes'] / args.sentences:.0f} B/sentence; "
        f"db file {st['db_bytes'] / args.sentences:.0f} B/sentence (incl. sqlite overhead, tiny texts)"
    )

    qs = [rng.choice(args.vocab, rng.integers(8, 17), replace=False, p=p) for _ in range(args.queries)]
    times, tread = [], []
    searcher = Searcher(ix)
    for q in qs:
        t0 = time.perf_counter()
        ix.postings(q)  # timed: the blob read and decode alone
        t1 = time.perf_counter()
        searcher.search(q, 10)
        t2 = time.perf_counter()
        tread.append(t1 - t0)
        times.append(t2 - t1)
    npost = [sum(len(i) for _, i, _ in ix.postings(q)) for q in qs[:50]]
    print(
        f"query: search() median {1e3 * statistics.median(times):.2f} ms, p95 "
        f"{1e3 * sorted(times)[int(0.95 * len(times))]:.2f} ms; postings read+decode median "
        f"{1e3 * statistics.median(tread):.2f} ms; ~{int(statistics.median(npost))} postings/query"
    )
    ix.close()


if __name__ == "__main__":
    main()
