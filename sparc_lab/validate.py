"""Compare exported model folders on the held-out training split (du2017 articles a42-a43).

    python -m sparc_lab.validate --run ~/.cache/sparc-local-train/run1 MODEL_DIR [MODEL_DIR ...] \
        [--top-k 64 128 256 512 1000]

Export decisions (int8 or fp32, K, max length) are made here, never on the evaluation sets.
The candidates are all sentences of the held-out passages; scoring is the product's own
(query tokens from sparc_local.query.tokens, sums of f over the question's tokens).
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np

from sparc_local.evaluation.metrics import first_hits, positions, summary
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.query.scoring import score
from sparc_local.query.tokens import query_token_ids

DEPTH = 10  # MRR@10, the figure training's validation reports too


def held_out_paragraphs(pool, sents: list[int]) -> list[list[str]]:
    """The paragraphs that hold exactly the held-out sentences (whole passages, in order)."""
    out, start, want = [], 0, set(sents)
    for para in pool.paragraphs:
        ids = range(start, start + len(para))
        start += len(para)
        if ids[0] in want:
            assert all(i in want for i in ids), "held-out sentences must be whole passages"
            out.append(para)
    return out


def validate(info: ModelInfo, pool, ks: list[int], threads: int | None = None) -> dict[int, dict]:
    valid = pool.valid
    sents = sorted({s for ex in valid for s in ex.answers + ex.passage_negs})
    enc = Encoder(info, threads=threads)
    vectors = enc.encode(held_out_paragraphs(pool, sents), top_k=max(ks))
    gold = positions(sents, (ex.answers for ex in valid))
    out = {}
    for k in ks:
        v = vectors.head(k)
        # inverted lists: token -> (row ids, weights)
        rows = np.repeat(np.arange(len(v)), np.diff(v.indptr))
        order = np.argsort(v.token_ids, kind="stable")
        tok_sorted = v.token_ids[order]
        ranked = []
        for ex in valid:
            q = query_token_ids(enc.tokenizer, ex.question, info.skip_array())
            lists = []
            for t in q:
                a, b = np.searchsorted(tok_sorted, t), np.searchsorted(tok_sorted, t, side="right")
                lists.append((rows[order[a:b]], v.weights[order[a:b]]))
            ranked.append(score(lists, DEPTH, size=len(v))[0].tolist())
        m = summary(first_hits(ranked, gold, DEPTH), DEPTH)
        out[k] = {"mrr@10": round(m["mrr@10"], 4), "r@1": round(m["r@1"], 4),
                  "nnz_median": int(np.median(np.diff(v.indptr)))}
    return out


def full_nnz(info: ModelInfo, pool, threads: int | None = None) -> int:
    """Median number of vocabulary tokens with f(v,s) > 0 before TopK, on the held-out sentences."""
    sents = sorted({s for ex in pool.valid for s in ex.answers + ex.passage_negs})
    vectors = Encoder(info, threads=threads).encode(held_out_paragraphs(pool, sents), top_k=info.vocab_size)
    return int(np.median(np.diff(vectors.indptr)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="training run folder (its pool.pkl holds the split)")
    p.add_argument("models", nargs="+")
    p.add_argument("--top-k", type=int, nargs="+", default=[256])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--full-nnz", action="store_true",
                   help="also report the median count of f(v,s) > 0 over the whole vocabulary (paper Table 2)")
    args = p.parse_args()
    pool = pickle.loads((Path(args.run).expanduser() / "pool.pkl").read_bytes())
    print(f"{len(pool.valid)} held-out questions")
    for folder in args.models:
        info = ModelInfo.load(Path(folder))
        for k, m in validate(info, pool, args.top_k, args.threads).items():
            print(f"{folder}  {info.quantization}  len={info.max_length}  K={k}  {m}", flush=True)
        if args.full_nnz:
            print(f"{folder}  non-zeros over the vocabulary, median: {full_nnz(info, pool, args.threads)}")


if __name__ == "__main__":
    main()
