"""Choose the input builder's context rule on the training data's held-out split (issue #12).

    python benchmarks/input_rule.py [--model DIR] [--sentences 0 2 4 6 10 1000] [--orders document nearest]
    python benchmarks/input_rule.py --smoke    # the tiny model on tiny training sets (smoke.py), rules 0 and 2

The held-out split is du2017-train's articles a42-a43 (training.data.DU_VALIDATION_ARTICLES),
never squad-dev or newsqa-dev. It is written as two ReQA folders:

* `passages`: du2017's own passages (at most 6 sentences), so a rule's window size barely matters;
* `articles`: each article's passages joined, in order, into one long paragraph (~100+
  sentences), as a long block of a user's file or a NewsQA story is.

Every rule is scored by `evaluate` (the product path: input builder, encoder, SQLite index,
`ask`'s query tokens and scoring), on a copy of the model folder whose sparc.json names the rule.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the clone's top: sparc_lab/ is not installed

from sparc_lab.data import DU_VALIDATION_ARTICLES
from sparc_local.app import run
from sparc_local.app.jobs import EvalRequest
from sparc_local.evaluation import reqa
from sparc_local.model.info import CONFIG_FILE, ModelInfo, shipped_model_dir

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa"
WORK = Path.home() / ".cache" / "sparc-local-train" / "input-rule"


def _write(folder: Path, rows: list[dict], queries: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, items in (("corpus.jsonl.gz", rows), ("queries.jsonl.gz", queries)):
        with gzip.open(folder / name, "wt", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in items)
    return folder


def held_out_sets(data: Path, work: Path = WORK) -> dict[str, Path]:
    """The held-out split as two ReQA folders (see the module docstring)."""
    ds = reqa.load(data / "du2017-train")
    keep = [i for i, p in enumerate(ds.passages) if p.split("_")[0] in DU_VALIDATION_ARTICLES]
    ids = {ds.ids[i] for i in keep}
    queries = [{"id": q, "question": text, "answers": [a for a in ans if a in ids]}
               for q, text, ans in ds.queries if any(a in ids for a in ans)]
    passages = [{"id": ds.ids[i], "text": ds.texts[i], "passage": ds.passages[i],
                 "position": int(ds.ids[i].rsplit("-", 1)[1])} for i in keep]
    position: dict[str, int] = {}
    articles = []
    for r in passages:  # reqa.load sorts by (passage, position): passage ids follow article order
        article = r["passage"].split("_")[0]
        articles.append({**r, "passage": article, "position": position.setdefault(article, 0)})
        position[article] += 1
    return {"passages": _write(work / "passages", passages, queries),
            "articles": _write(work / "articles", articles, queries)}


def rule_model(base: ModelInfo, sentences: int, order: str, work: Path = WORK) -> ModelInfo:
    """base's model folder with another context rule in its sparc.json (files linked, not copied)."""
    folder = work / "models" / f"{base.name}-{sentences}-{order}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for f in base.path.iterdir():
        if f.name != CONFIG_FILE:
            os.symlink(f.resolve(), folder / f.name)
    d = json.loads((base.path / CONFIG_FILE).read_text())
    d.update(context_sentences=sentences, context_order=order)
    d.setdefault("extra", {})["digest"] = f"{d['extra'].get('digest', '')}|{sentences}|{order}"
    (folder / CONFIG_FILE).write_text(json.dumps(d, indent=1))
    return ModelInfo.load(folder)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=None, help="model folder (default: the shipped model)")
    p.add_argument("--sentences", type=int, nargs="+", default=[0, 2, 4, 6, 10, 1000])
    p.add_argument("--orders", nargs="+", default=["document", "nearest"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--smoke", action="store_true",
                   help="seconds: the tiny test model on tiny training sets (smoke.py), context 0 and 2 sentences")
    args = p.parse_args()
    data, work = DATA, WORK
    if args.smoke:
        import smoke

        s = smoke.setup()
        data, work, args.model, args.sentences, args.threads = smoke.lab_data(s), s.folder / "input-rule", s.model, [0, 2], 1
    os.environ.setdefault("SPARC_LOCAL_HOME", str(work / "home"))
    base = ModelInfo.load(args.model or shipped_model_dir())
    sets = held_out_sets(data, work)
    print(f"model {base.id}, max_length {base.max_length}")
    print(f"{'set':9s} {'sentences':>9s} {'order':9s} {'MRR@10':>7s} {'R@1':>6s} {'R@10':>6s}  queries")
    for name, folder in sets.items():
        for sentences in args.sentences:
            for order in args.orders if sentences > 1 else args.orders[:1]:
                model = rule_model(base, sentences, order, work)
                r = run.evaluate(EvalRequest(str(folder), model=str(model.path), threads=args.threads, fast=True),
                                 model)
                m = r["sparc"]
                print(f"{name:9s} {sentences:9d} {order:9s} {m['mrr@10']:7.4f} {m['r@1']:6.4f} {m['r@10']:6.4f}"
                      f"  {r['queries']}", flush=True)


if __name__ == "__main__":
    main()
