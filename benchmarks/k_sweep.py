"""K (pairs kept per sentence) against quality and index bytes: the export's K decision.

    python benchmarks/k_sweep.py MODEL_DIR --run ~/.cache/sparc-local-train/run4 \
        [--corpus ../shared/data/reqa/squad-dev] [--ks 64 128 256 512 1000]
    python benchmarks/k_sweep.py --smoke    # the tiny model; a run folder holding the pool train.py builds of
                                            # tiny training sets (smoke.py), K 8, 16, 32

Quality is measured on the held-out training split only (sparc_lab.validate), never on
an evaluation set's questions. Bytes are the product's own posting codec over a real corpus's
sentences (only corpus.jsonl.gz is read; its questions are not): every token's list encoded as
one merged segment, weights quantized as the index stores them. That is the postings part of
the index; stored text and SQLite row overhead come on top (see benchmarks/scale.py).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the clone's top: sparc_lab/ is not installed

from sparc_lab.validate import validate
from sparc_local.evaluation import reqa
from sparc_local.evaluation.evaluate import encode_corpus
from sparc_local.index import postings
from sparc_local.model.info import ModelInfo
from sparc_local.model.sparse import SparseVectors


def postings_bytes(vectors: SparseVectors, scale: float) -> int:
    """Size of the inverted lists of these vectors, as one segment of the index would store them."""
    rows = np.repeat(np.arange(len(vectors)), np.diff(vectors.indptr))
    order = np.lexsort((rows, vectors.token_ids))
    q = postings.quantize(vectors.weights[order], scale)
    return sum(len(blob) for _, blob in postings.encode_groups(vectors.token_ids[order], rows[order], q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, nargs="?")
    ap.add_argument("--run", type=Path, help="training run folder (pool.pkl: the held-out split)")
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/reqa/squad-dev")
    ap.add_argument("--ks", type=int, nargs="+", default=[64, 128, 256, 512, 1000])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny test model, the pool of tiny training sets, K 8 16 32 (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        from sparc_lab.data import build_pool

        s = smoke.setup()
        args.model, args.run, args.corpus, args.ks, args.threads = s.model, s.folder / "run", s.data, [8, 16, 32], 1
        args.run.mkdir()
        (args.run / "pool.pkl").write_bytes(pickle.dumps(build_pool(smoke.lab_data(s))))  # as train.py caches it
    if not args.model or not args.run:
        ap.error("MODEL_DIR and --run are required")
    info = ModelInfo.load(args.model)
    pool = pickle.loads((args.run.expanduser() / "pool.pkl").read_bytes())
    quality = validate(info, pool, args.ks, args.threads)
    ds = reqa.load(args.corpus)
    full = encode_corpus(ds, args.corpus, info, args.threads)
    scale = postings.scale_for_ceiling()
    print(f"model {info.id} ({info.quantization}); quality: {len(pool.valid)} held-out questions; "
          f"bytes: {len(full)} sentences of {args.corpus.name}")
    print(f"{'K':>6} {'MRR@10':>7} {'R@1':>6} {'postings B/sentence':>20}")
    for k in args.ks:
        v = full.head(k)
        q = quality[k]
        print(f"{k:>6} {q['mrr@10']:>7.4f} {q['r@1']:>6.4f} {postings_bytes(v, scale) / len(v):>20.1f}", flush=True)


if __name__ == "__main__":
    main()
