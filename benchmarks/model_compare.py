"""Two model folders on the same ReQA sets through `eval`'s path, paired question by question.

    SPARC_LOCAL_HOME=~/.cache/sparc-local-bench/compare python benchmarks/model_compare.py \\
        --base exported_models/sparc-minilm-l6 --new DIR --data SET [SET ...] [--ranks DIR] [--pooled] \
        [--rerank N]
    python benchmarks/model_compare.py --smoke    # the tiny model, fp32 against int8 (smoke.py)

For each set: MRR@10 of every `ask --mode` for both models (the same input builder, encoder,
index and scoring as `index` and `ask`; `app.run.evaluate`), then paired lines (questions
better / worse, mean reciprocal-rank difference, 95% bootstrap interval; benchmarks/common.py's
`paired_line`): the new model against the base in hybrid and SPARC mode, and the new model's
hybrid and SPARC against its own BM25 (issue 31's acceptance). `--base` alone evaluates one model.
`--pooled` adds the same lines over every set's questions together (small dev sets kept apart so
that each keeps its encoding cache). `--rerank N` also asks a seeded sample of N questions (0: all)
as `ask` does by default, reranked, one answer per passage, and pairs the two models' answers there
and their first stages' (the reranker costs time per question; the sample is the same for both).
Encoded corpora are cached per model in the data dir, so a rerun costs only the ranking; the
reranker's logit of each (question, passage text) is cached there too (``MemoScorer``: the same
Reranker and the same `ask` fusion, each pair scored once), so the base, and every passage both
models rank, is read once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import paired_line  # the desks' paired bootstrap

from sparc_local import paths
from sparc_local.app import run
from sparc_local.app.jobs import EvalRequest
from sparc_local.evaluation.evaluate import evaluate
from sparc_local.evaluation.metrics import mrr
from sparc_local.query.modes import BM25, HYBRID, MODES, SPARC

STAGES = ("passages", "reranked")  # eval's rows of what `ask` shows: the first stage alone, and reranked


class MemoScorer:
    """The installed reranker (a ``PassageScorer``) with each (question, text)'s logit kept in a
    SQLite file per reranker (its weights, tokenizer and settings hashed): a pair that another
    model, or an earlier run, already had scored is read, not run again. Batches of like lengths
    pad differently, so a logit may differ from a fresh one in its last float bits."""

    def __init__(self, scorer: Any):
        self._scorer = scorer
        info = scorer.info
        h = hashlib.sha256(info.to_json(read_length=scorer.max_length).encode())
        for f in (info.onnx_path, info.tokenizer_path):
            h.update(f.read_bytes())
        folder = paths.user_dir() / "cache" / "rerank"
        folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(folder / f"{h.hexdigest()[:16]}.sqlite")
        self._db.execute("CREATE TABLE IF NOT EXISTS logits (pair BLOB PRIMARY KEY, logit REAL) WITHOUT ROWID")
        self.n, self.alpha, self.likely = scorer.n, scorer.alpha, scorer.likely
        self.fresh = self.read = 0

    def score(self, question: str, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(f"{question}\x00{t}".encode()).digest() for t in texts]
        known = dict(self._db.execute(f"SELECT pair, logit FROM logits WHERE pair IN ({','.join('?' * len(keys))})",
                                      keys).fetchall()) if keys else {}
        todo = [i for i, k in enumerate(keys) if k not in known]
        if todo:
            logits = self._scorer.score(question, [texts[i] for i in todo])
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO logits VALUES (?, ?)",
                                     [(keys[i], float(x)) for i, x in zip(todo, logits)])
            known.update((keys[i], float(x)) for i, x in zip(todo, logits))
        self.fresh += len(todo)
        self.read += len(keys) - len(todo)
        return np.array([known[k] for k in keys], np.float32)


def hits_of(data: Path, folder: Path, threads: int | None,
            rerank: int | None = None, scorer: MemoScorer | None = None) -> tuple[dict, dict[str, dict[int, int]]]:
    """`eval` of the model ``folder`` on ``data``, with each question's first-hit rank per mode;
    the first stage alone (``--fast``) unless ``rerank`` (a sample size, 0: all) asks for the
    stages' rows too, reranked by ``scorer``."""
    request = EvalRequest(str(data), model=str(folder), threads=threads, fast=rerank is None, hits=True,
                          sample=rerank or None)
    info = run.eval_model(request)
    if rerank is None:
        m = run.evaluate(request, info)
    else:
        m = evaluate(Path(request.dataset), info, depth=request.k, top_k=request.top_k, threads=threads,
                     with_hits=True, reranker=scorer, sample=request.sample)
    ranks = {mode: dict(enumerate(m[mode].pop("hits"))) for mode in MODES}
    if rerank is not None:
        ranks.update(m["stages"].pop("hits"))
    return m, ranks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path)
    ap.add_argument("--new", type=Path)
    ap.add_argument("--data", type=Path, nargs="+")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--ranks", type=Path, help="write each model's rank of every question here, per set and mode")
    ap.add_argument("--pooled", action="store_true", help="also the paired lines over all sets' questions together")
    ap.add_argument("--rerank", type=int, metavar="N",
                    help="also `ask`'s default answers, reranked, on a seeded sample of N questions (0: all)")
    ap.add_argument("--smoke", action="store_true", help="a few seconds on the tiny test model (benchmarks/smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.base, args.new, args.data, args.pooled = s.model, s.model_int8, [s.data, s.data], True
    if not args.base or not args.data:
        ap.error("--base and --data are required")
    models = {"base": args.base, **({"new": args.new} if args.new else {})}
    pooled: dict[str, dict[str, dict[str, int]]] = {which: {mode: {} for mode in MODES} for which in models}
    scorer = None
    if args.rerank is not None:
        for which in models:
            pooled[which].update({stage: {} for stage in STAGES})
        installed = run.load_reranker()
        if installed is None:
            sys.exit("--rerank: no reranker is installed")
        scorer = MemoScorer(installed)
    for n, data in enumerate(args.data):
        ranks: dict[str, dict[str, dict[int, int]]] = {}
        for which, folder in models.items():
            m, ranks[which] = hits_of(data, folder, args.threads, args.rerank, scorer)
            stages = [f"{stage} {m['stages'][stage]['mrr@10']:.4f} hit@1 {m['stages'][stage]['r@1']:.4f}"
                      for stage in STAGES if stage in m.get("stages", {})]
            print(f"{data.name} {which} ({m['model']}, {m['queries']} q): "
                  + "  ".join(f"{mode} {m[mode]['mrr@10']:.4f}" for mode in MODES)
                  + (f"; {m['stages']['questions']} asked: " + "  ".join(stages) if stages else "")
                  + (f" (reranker: {scorer.fresh} pairs scored, {scorer.read} cached)" if scorer else ""), flush=True)
            for mode in pooled[which]:
                pooled[which][mode].update({f"{n}|{q}": r for q, r in ranks[which][mode].items()})
        print_lines(ranks)
        if args.ranks:
            args.ranks.mkdir(parents=True, exist_ok=True)
            (args.ranks / f"{data.name}.json").write_text(json.dumps(ranks))
    if args.pooled and len(args.data) > 1:
        print(f"pooled over {len(args.data)} sets: " + ", ".join(
            f"{which} {mode} {mrr(list(pooled[which][mode].values())):.4f}" for which in models for mode in MODES))
        print_lines(pooled)


def print_lines(ranks: dict[str, dict[str, Any]]) -> None:
    """The paired lines: the new model against the base, and the last model against its own BM25."""
    last = list(ranks)[-1]
    lines = [(f"{last} hybrid vs its bm25", ranks[last][BM25], ranks[last][HYBRID]),
             (f"{last} sparc vs its bm25", ranks[last][BM25], ranks[last][SPARC])]
    if "new" in ranks:
        lines = [("new vs base, hybrid", ranks["base"][HYBRID], ranks["new"][HYBRID]),
                 ("new vs base, sparc", ranks["base"][SPARC], ranks["new"][SPARC]), *lines]
        lines = [(f"new vs base, ask {stage}", ranks["base"][stage], ranks["new"][stage])
                 for stage in STAGES if stage in ranks["base"]] + lines
    for label, before, after in lines:
        print(f"  {label}: {paired_line(before, after)}", flush=True)


if __name__ == "__main__":
    main()
