"""Seconds per `adapt` step of two MLMs / row rules, interleaved step by step on the same batches.

    python benchmarks/adapt_paired.py --home HOME --a shipped=MODEL_DIR:all --b companion=EXPORT_DIR:corpus \
        [--steps 40] [--threads 2]
    python benchmarks/adapt_paired.py --smoke    # the tiny adapt model, rows all against corpus, 2 steps, 1 thread

On a shared machine the load changes from minute to minute; alternating A and B on the same
batches of the index's sentences (HOME: a SPARC_LOCAL_HOME with an index) makes the ratio fair.
Each side runs adapt's own step (forward_backward + Adam, its row rule); the first step of each
is warm-up and not counted.
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":  # BLAS reads its thread count when numpy is imported
    _t = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1" if "--smoke" in sys.argv else "2"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = _t

import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the clone's top: sparc_lab/ is not installed


def side(spec: str, index, ids):
    """(label, step function) for LABEL=DIR:ROWS."""
    from sparc_lab.adapt_rules import rows_by_rule
    from sparc_local.adapt.domain import load_reference
    from sparc_local.adapt.mlm import prepare
    from sparc_local.adapt.model_folder import load_adapt_weights
    from sparc_local.adapt.run import corpus_counts
    from sparc_local.adapt.train_embeddings import Adam, train_step
    from sparc_local.model.info import ModelInfo, load_tokenizer

    label, rest = spec.split("=", 1)
    folder, rule = rest.rsplit(":", 1)
    info = ModelInfo.load(Path(folder))
    cfg, w, _ = load_adapt_weights(info)
    tok = load_tokenizer(info.tokenizer_path)
    rows = rows_by_rule(rule, corpus_counts(index, ids, tok), load_reference(info.path))
    E = np.array(w["emb.word"], np.float32)
    fw = prepare(cfg, w)
    opt = Adam(E.shape if rows is None else (len(rows), E.shape[1]))
    rng = np.random.default_rng(0)
    mask_id = tok.token_to_id("[MASK]")

    def step(batch) -> float:
        t0 = time.perf_counter()
        train_step(cfg, fw, E, opt, batch, rng, mask_id=mask_id, rows=rows)
        return time.perf_counter() - t0

    return f"{label} ({rule}, {len(E) if rows is None else len(rows)} rows)", step, tok, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path)
    ap.add_argument("--a", metavar="LABEL=DIR:ROWS")
    ap.add_argument("--b", metavar="LABEL=DIR:ROWS")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny adapt model on a tiny index, rows all against corpus, 2 steps (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        a = smoke.adapt_setup(smoke.setup(), indexed=True)
        args.home, args.a, args.b = a.home, f"all={a.model}:all", f"corpus={a.model}:corpus"
        args.steps, args.threads = 2, 1
    if not args.home or not args.a or not args.b:
        ap.error("--home, --a and --b are required")
    os.environ["SPARC_LOCAL_HOME"] = str(args.home.resolve())
    from sparc_local.adapt.run import AdaptOptions, token_batches
    from sparc_local.index.store import Index
    from sparc_local.paths import db_path

    opts = AdaptOptions()
    with Index(db_path()) as idx:
        ids = idx.live_sentence_ids()
        la, sa, tok, info = side(args.a, idx, ids)
        lb, sb, _, _ = side(args.b, idx, ids)
        batches = token_batches(idx, ids, tok, info, opts.batch_size, opts.max_length, seed=0)
        times: dict[str, list[float]] = {la: [], lb: []}
        load0 = os.getloadavg()[0]
        for i in range(args.steps + 1):
            batch = next(batches)
            order = ((la, sa), (lb, sb)) if i % 2 == 0 else ((lb, sb), (la, sa))
            for label, fn in order:
                t = fn(batch)
                if i:
                    times[label].append(t)
    med = {k: float(np.median(v)) for k, v in times.items()}
    out = {"threads": args.threads, "steps": args.steps, "load_before": load0, "load_after": os.getloadavg()[0],
           "s_per_step_median": med, "ratio_b_over_a": med[lb] / med[la]}
    for k, v in med.items():
        print(f"{k}: {v:.3f} s/step median over {args.steps} steps")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
