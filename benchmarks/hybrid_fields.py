"""What each lexical field costs a hybrid question at scale (issue 14's speed bound).

    OMP_NUM_THREADS=1 python benchmarks/hybrid_fields.py [--sizes 100k,1M] [--rounds 3]
    python benchmarks/hybrid_fields.py --smoke    # on scale.py's 1k smoke index (the tiny model, smoke.py)

On the indexes ``benchmarks/scale.py`` builds (run it first; the same cache key), times
``Searcher.search`` (top 10, one core, squad-dev questions) in four variants, their rounds
interleaved so a drift of the VM's speed weighs on all alike:

* sparc: SPARC's g(q, s) alone (no lexical posting read);
* hybrid: the shipped fusion (``fusion.WEIGHTS``: the sentence field and the paragraph field);
* sentence only / paragraph only: the hybrid with one lexical field's weight set to zero, so its
  keys are neither read nor summed (``fusion.keys`` and ``fusion.multipliers`` skip a field that
  ``fusion.WEIGHTS`` does not list).

Prints each variant's p50 per round and the postings it scored (mean per question). The
difference between a variant and sparc is what its lexical postings cost in this engine.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import scale

VARIANTS = ("sparc", "hybrid", "sentence only", "paragraph only")


def main() -> None:
    from sparc_local.evaluation import reqa
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo, load_tokenizer, shipped_model_dir
    from sparc_local.model.lexical import PARAGRAPH_FIELD, SENTENCE_FIELD
    from sparc_local.query import fusion
    from sparc_local.query.searcher import Searcher
    from sparc_local.query.tokens import query_token_ids

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100k,1M")
    ap.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "sparc-local-bench")
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=None, help="pin to this core (default: the last one)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: scale.py's 1k smoke index, built here (the tiny test model, smoke.py)")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[-1] if args.cpu is None else args.cpu})

    model, data = shipped_model_dir(), scale.SETS[0]
    if args.smoke:
        s = scale.smoke_setup()
        model, data, args.workdir, args.sizes, args.queries, args.rounds = s.model, s.data, s.folder, scale.SMOKE_SIZE, 20, 1
    info = ModelInfo.load(model)
    if args.smoke:  # scale.py's index of that size, as `scale.py --smoke` builds it
        size = scale.parse_size(scale.SMOKE_SIZE)
        passages = scale.load_real(info, Path(os.environ["SPARC_LOCAL_HOME"]), (data,))
        scale.build(scale.cache_db(args.workdir, size, info), passages, size, 4096, info)
    tok = load_tokenizer(info.tokenizer_path)
    questions = [q for _, q, _ in reqa.load(data).queries[: args.queries]]
    tokens = [query_token_ids(tok, q, info.skip_array()) for q in questions]
    shipped = dict(fusion.WEIGHTS)
    weights = {"sparc": shipped, "hybrid": shipped,
               "sentence only": {SENTENCE_FIELD: shipped[SENTENCE_FIELD]},
               "paragraph only": {PARAGRAPH_FIELD: shipped[PARAGRAPH_FIELD]}}
    for size in map(scale.parse_size, args.sizes.split(",")):
        db = scale.cache_db(args.workdir, size, info)
        if not db.exists():
            raise SystemExit(f"{db} is missing: build it with benchmarks/scale.py --sizes {size} --build-only")
        p50: dict[str, list[float]] = {v: [] for v in VARIANTS}
        scored: dict[str, float] = {}
        try:
            with Index(db) as ix:
                searcher = Searcher(ix)
                for _ in range(args.rounds):
                    for v in VARIANTS:
                        fusion.WEIGHTS.clear()
                        fusion.WEIGHTS.update(weights[v])
                        mode = fusion.SPARC if v == "sparc" else fusion.HYBRID
                        for t in tokens[:30]:  # warm the caches for this variant's keys
                            searcher.search(t, 10, mode=mode)
                        lat, post = [], []
                        for t in tokens:
                            stats: dict = {}
                            t0 = time.perf_counter()
                            searcher.search(t, 10, stats=stats, mode=mode)
                            lat.append(time.perf_counter() - t0)
                            post.append(stats.get("postings_scored", 0))
                        p50[v].append(float(np.percentile(lat, 50)) * 1e3)
                        scored[v] = float(np.mean(post))
        finally:
            fusion.WEIGHTS.clear()
            fusion.WEIGHTS.update(shipped)
        print(f"== {size:,} sentences, {len(tokens)} questions, top 10, one core: p50 per round (ms)")
        for v in VARIANTS:
            print(f"  {v:<15} {' '.join(f'{x:.3f}' for x in p50[v])}   best {min(p50[v]):.3f}"
                  f"   postings scored {scored[v]:,.0f}")


if __name__ == "__main__":
    main()
