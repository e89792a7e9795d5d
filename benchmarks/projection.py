"""The candidate projection against the full one, sentence by sentence, on ReQA sets (issue 36).

    SPARC_LOCAL_HOME=~/.cache/sparc-local-bench/speed2-eval python benchmarks/projection.py \\
        --base FULL_MODEL [--model MODEL] [--data SET ...] [--paragraphs N] [--threads 2]
    python benchmarks/projection.py --smoke     # the tiny model (smoke.py)

MODEL (default: the shipped model, with its candidate projection) encodes each set's corpus at its
own K through `Encoder.encode`, as `index` does: the int8 estimate, the exact candidates, and the
full projection again for every sentence the bound did not certify. BASE is a folder with the
full projection (e.g. main's shipped model), whose corpus comes from `eval`'s cache when it is
there (benchmarks/model_compare.py fills it) and is encoded otherwise. Printed per set: the share
of sentences certified, the top-K overlap with BASE per sentence (|kept ∩ base's kept| / |base's
kept|: mean, 1st/5th/50th percentile, minimum), the share whose kept tokens are exactly BASE's,
and the largest weight difference on shared tokens.

With all of a set's paragraphs (no --paragraphs), MODEL's vectors are written to `eval`'s cache
in SPARC_LOCAL_HOME under MODEL's id, so `benchmarks/model_compare.py --base BASE --new MODEL`
then ranks with them (MRR@10) without encoding again; they hold MODEL's K tokens, not
evaluate.CACHE_K, so use a home of its own for this.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from sparc_local.evaluation import reqa
from sparc_local.evaluation.evaluate import cache_file, encode_corpus
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo, shipped_model_dir

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa"


def overlap(base, got) -> tuple[np.ndarray, np.ndarray, float]:
    """Per sentence: the share of base's kept tokens that got keeps, exact equality of the kept
    sets; the largest weight difference on shared tokens."""
    shares, equal, diff = [], [], 0.0
    for i in range(len(base)):
        a = dict(zip(*(x.tolist() for x in base.row(i))))
        b = dict(zip(*(x.tolist() for x in got.row(i))))
        shared = a.keys() & b.keys()
        shares.append(len(shared) / max(len(a), 1))
        equal.append(a.keys() == b.keys())
        diff = max([diff, *(abs(a[t] - b[t]) for t in shared)])
    return np.array(shares), np.array(equal), diff


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, help="a model folder with the full projection")
    p.add_argument("--model", type=Path, help="default: the shipped model")
    p.add_argument("--data", type=Path, nargs="+", default=[DATA / "squad-dev", DATA / "newsqa-dev"])
    p.add_argument("--paragraphs", type=int, default=0, help="only the first N paragraphs (0: all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="seconds: the tiny model on a tiny set (smoke.py)")
    args = p.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.model, args.base, args.data, args.threads = s.model_int8, s.model, [s.data], 1
    if args.base is None:
        p.error("--base is required")
    info = ModelInfo.load(args.model or shipped_model_dir())
    base = ModelInfo.load(args.base)
    for ds_dir in args.data:
        ds = reqa.load(ds_dir)
        paras = ds.paragraphs()[: args.paragraphs or None]
        n = sum(map(len, paras))
        want = encode_corpus(ds, ds_dir, base, args.threads).slice(0, n).head(info.top_k)
        enc = Encoder(info, threads=args.threads)
        t = time.perf_counter()
        got = enc.encode(paras)
        seconds = time.perf_counter() - t
        if not args.paragraphs and info.id != base.id:
            cache = cache_file(ds_dir, info)
            np.savez(cache, indptr=got.indptr, token_ids=got.token_ids, weights=got.weights)
        shares, equal, diff = overlap(want, got)
        q = np.percentile(shares, [1, 5, 50])
        print(f"{ds_dir.name}: {n} sentences, {info.id} against {base.id} (K={info.top_k}), {args.threads} threads, "
              f"{n / seconds:.1f} sentences/s")
        print(f"  certified {1 - enc.uncertified / max(n, 1):.4f} ({enc.uncertified} encoded again in full); "
              f"overlap mean {shares.mean():.5f} p1 {q[0]:.3f} p5 {q[1]:.3f} p50 {q[2]:.3f} min {shares.min():.3f}; "
              f"exactly equal {equal.mean():.4f}; max |dw| {diff:.1e}")


if __name__ == "__main__":
    main()
