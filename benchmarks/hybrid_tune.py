"""Choose the hybrid's weights (query/fusion.py WEIGHTS) on TRAINING data, through the product path.

    OMP_NUM_THREADS=1 SPARC_LOCAL_HOME=~/.cache/sparc-local-train/evalhome \\
        python benchmarks/hybrid_tune.py [--sets du2017-train,heldout,DIR] [--model DIR]
    python benchmarks/hybrid_tune.py --smoke    # the tiny model on a tiny set (smoke.py), the whole grid

Each set is written once into a throw-away index as `eval` writes it (``evaluation.eval_index``:
the same input builder, encoder, lexical postings, index and searcher as `index` and `ask`),
then ranked in hybrid mode for every (sentence BM25, context BM25) weight pair of the grid,
SPARC's weight being 1. Prints MRR@10 per set and their mean; the evaluation sets (squad-dev,
newsqa-dev) are never read.

``heldout``: du2017-train's articles a42-a43, which the shipped model was not trained on, as
benchmarks/input_rule.py writes them (its folder under ~/.cache/sparc-local-train/input-rule).
du2017-train itself was trained on, so SPARC is at its strongest there and the weights it
picks lean, if anything, towards SPARC. Any other entry of --sets is a ReQA folder, such as the
technical dev packages (sparc_lab/techdata.py's `dev`); the best pair maximises the mean over sets.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparc_local.evaluation.evaluate import eval_index, rank
from sparc_local.model.info import ModelInfo, shipped_model_dir
from sparc_local.model.lexical import PARAGRAPH_FIELD, SENTENCE_FIELD
from sparc_local.query import fusion

SETS = {"du2017-train": ROOT.parent / "shared" / "data" / "reqa" / "du2017-train",
        "heldout": Path.home() / ".cache" / "sparc-local-train" / "input-rule" / "passages"}
GRID = list(itertools.product((0.0, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5), (0.0, 0.1, 0.2, 0.3, 0.5, 0.8)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--model", type=Path, help="model folder (default: the shipped model)")
    ap.add_argument("--smoke", action="store_true", help="seconds: the tiny test model on a tiny set (smoke.py)")
    a = ap.parse_args()
    if a.smoke:
        import smoke

        s = smoke.setup()
        a.sets, a.model = str(s.data), s.model
    info = ModelInfo.load(a.model or shipped_model_dir())
    chosen = dict(fusion.WEIGHTS)
    table: dict[tuple[float, float], list[float]] = {}
    names = a.sets.split(",")
    for name in names:
        with eval_index(SETS.get(name) or Path(name).expanduser(), info) as ev:
            sparc = rank(ev, fusion.SPARC)["mrr@10"]
            print(f"{name}: {len(ev.questions)} questions, SPARC alone {sparc:.4f}", flush=True)
            for b, c in GRID:
                fusion.WEIGHTS[SENTENCE_FIELD], fusion.WEIGHTS[PARAGRAPH_FIELD] = b, c
                table.setdefault((b, c), []).append(rank(ev, fusion.HYBRID)["mrr@10"])
    fusion.WEIGHTS.update(chosen)
    names = [Path(n).name for n in names]
    print(f"\n{'sentence':>8} {'context':>8} " + " ".join(f"{n:>14}" for n in names) + f" {'mean':>8}")
    best = max(table, key=lambda k: sum(table[k]))
    for (b, c), vals in sorted(table.items()):
        mark = "  <- best" if (b, c) == best else "  <- shipped" if (b, c) == tuple(chosen.values()) else ""
        print(f"{b:>8.1f} {c:>8.1f} " + " ".join(f"{v:>14.4f}" for v in vals) + f" {sum(vals) / len(vals):>8.4f}{mark}")
    print(f"\nshipped: {chosen} (SPARC 1.0); {os.environ.get('SPARC_LOCAL_HOME', 'the default home')} caches the encodings")


if __name__ == "__main__":
    main()
