"""`adapt` end to end on a ReQA corpus's sentences: s/step, wall time, peak RSS, and eval before/after.

    python benchmarks/adapt_e2e.py --data ../shared/data/reqa/newsqa-dev \
        [--steps 500] [--batch-size 32] [--max-length 64] [--model DIR] [--home DIR]
        [--eval [--paired [--ranks DIR]]] [--no-switch] [--threads N] [--eval-only DIR ...] [--first N] [--force]
    python benchmarks/adapt_e2e.py --smoke    # the tiny adapt model, 3 steps, --eval --paired (smoke.py)

Builds an index from the corpus's sentences only (one "file" per passage, context = its other
sentences; the questions are never read), then runs the library's adapt in a child process (so
its peak RSS is its own): training, writing the new model, re-encoding the index, switching.
With --eval, `sparc-local eval` figures (MRR@10, R@1, R@10) of the base model and the adapted
one on the same dataset (--paired: question by question, more adapted than base or fewer, and
the mean reciprocal-rank difference with its 95% bootstrap interval, as benchmarks/desk.py's
--against); --no-switch skips the re-encoding (the eval encodes the corpus anyway).
--first N keeps only the set's first passages, up to N sentences (the issue's budget corpus:
`--data …/wikiqa-train --first 8000` is 8,004 sentences), written once as a ReQA folder under the
data dir. --eval-only evaluates the base and the given model folders (e.g. adapt_mechanism.py's variants),
without adapting. adapt declines a corpus close to the model's training text (adapt/domain.py):
the run then prints how close and evaluates only the base, which is what the user keeps; --force
adapts anyway. --threads sets the encoder's threads (default: onnxruntime's). The data dir (--home, default ~/.cache/sparc-local-train/adapt-e2e/
<dataset>) keeps the index and the eval cache between runs; the base encoding is reused.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import build_index, paired_line

from sparc_local.adapt.run import LOSS_WINDOW


def first_sentences(data: Path, n: int, out: Path) -> Path:
    """A ReQA folder holding `data`'s first passages, whole, up to n sentences (and the queries
    whose answers all lie in them); written once."""
    import gzip

    if (out / "meta.json").exists():
        return out
    rows = [json.loads(line) for line in gzip.open(data / "corpus.jsonl.gz", "rt")]
    kept: list[dict] = []
    for r in rows:
        if len(kept) >= n and r["passage"] != kept[-1]["passage"]:
            break
        kept.append(r)
    ids = {r["id"] for r in kept}
    queries = [json.loads(line) for line in gzip.open(data / "queries.jsonl.gz", "rt")]
    out.mkdir(parents=True, exist_ok=True)
    for name, items in (("corpus.jsonl.gz", kept), ("queries.jsonl.gz", [q for q in queries if set(q["answers"]) <= ids])):
        with gzip.open(out / name, "wt") as f:
            f.writelines(json.dumps(x) + "\n" for x in items)
    meta = json.loads((data / "meta.json").read_text())
    meta.update(name=out.name, sentences=len(kept), passages=len({r["passage"] for r in kept}),
                notes=f"the first passages of {data.name}, up to {n} sentences (benchmarks/adapt_e2e.py --first)")
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return out


def child(args: argparse.Namespace) -> dict:
    from sparc_local.adapt.run import AdaptError, AdaptOptions, adapt, revert, train_adapted_model
    from sparc_local.index.store import Index
    from sparc_local.paths import db_path

    if args.model:  # the base the pointer names; adapt starts from the active model's base
        (Path(os.environ["SPARC_LOCAL_HOME"]) / "active-model").write_text(str(Path(args.model).resolve()))
    marks: dict[str, list[float]] = {"train": [], "encode": []}

    def on_progress(phase: str, done: int, total: int, loss: float | None) -> None:
        if phase in marks:
            marks[phase].append(time.perf_counter())

    opts = AdaptOptions(steps=args.steps, batch_size=args.batch_size, max_length=args.max_length, seed=args.seed,
                        lr=args.lr,
                        threads=args.threads, force=args.force)
    t0 = time.perf_counter()
    with Index(db_path()) as idx:
        revert(idx)  # start from the base model's index
        t1 = time.perf_counter()
        try:
            if args.no_switch:
                r = train_adapted_model(idx, opts, on_progress=on_progress)
                r.checkpoint.unlink(missing_ok=True)  # the next run trains again instead of resuming
            else:
                r = adapt(idx, opts, on_progress=on_progress)
        except AdaptError as err:
            return {"declined": str(err), "seconds": time.perf_counter() - t1}
    steps = marks["train"]
    per_step = [b - a for a, b in zip(steps[1:], steps[2:])]  # from the 2nd step on: warm BLAS and allocator
    return {"steps": r.steps, "resumed_from": r.resumed_from, "corpus": r.corpus,
            "s_per_step_median": sorted(per_step)[len(per_step) // 2] if per_step else None,
            "s_per_step_mean": sum(per_step) / len(per_step) if per_step else None,
            "train_seconds": r.train_seconds, "encode_seconds": r.encode_seconds,
            "revert_seconds": t1 - t0, "wall_seconds": time.perf_counter() - t1,
            "first_loss": r.first_loss, "last_loss": r.last_loss,  # means of the first / last LOSS_WINDOW steps
            "model": r.model.id, "base": r.base.id,
            "model_dir": str(r.model.path), "cpu_seconds": time.process_time(),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="a ReQA folder; only corpus.jsonl.gz is indexed")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, help="encoder threads (default: onnxruntime's)")
    ap.add_argument("--eval-only", type=Path, nargs="*", metavar="DIR",
                    help="no adapt: eval the base model and these model folders on --data")
    ap.add_argument("--model", type=Path, help="base model folder (default: the shipped model)")
    ap.add_argument("--home", type=Path, help="data dir for the index and caches")
    ap.add_argument("--eval", action="store_true", help="eval the base and the adapted model on --data")
    ap.add_argument("--paired", action="store_true",
                    help="with --eval or --eval-only: compare each model with the base question by question")
    ap.add_argument("--ranks", type=Path, metavar="DIR",
                    help="with --paired: write each model's rank of every question to DIR/<model>.json")
    ap.add_argument("--no-switch", action="store_true",
                    help="train and write the model only: no re-encoding of the index (quality runs with --eval)")
    ap.add_argument("--first", type=int, metavar="N", help="only the set's first passages, up to N sentences")
    ap.add_argument("--force", action="store_true", help="adapt even a corpus close to the training text")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny adapt model on a tiny set, 3 steps of 4×16, --eval --paired (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        a = smoke.adapt_setup(s)
        args.data, args.model, args.home, args.eval, args.paired = a.data, a.model, s.folder / "adapt-home", True, True
        args.steps, args.batch_size, args.max_length, args.threads = 3, 4, 16, 1
    if not args.data:
        ap.error("--data is required")
    if args.child:
        print(json.dumps(child(args)))
        return
    name = args.data.name + (f"-first{args.first}" if args.first else "")
    home = args.home or Path.home() / ".cache" / "sparc-local-train" / "adapt-e2e" / name
    os.environ["SPARC_LOCAL_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    if args.first:
        args.data = first_sentences(args.data, args.first, home / name)
    if args.model:
        (home / "active-model").write_text(str(args.model.resolve()))
    else:
        (home / "active-model").unlink(missing_ok=True)
    print(f"data dir {home}; load avg {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores", flush=True)
    if args.eval_only is not None:
        _eval_models(args, [("base", None)] + [(d.name, d) for d in args.eval_only], {})
        return
    built = build_index(args.data, args.model, args.threads)
    print(f"index: {built['sentences']} sentences with {built['model']} ({built['seconds']:.0f}s)", flush=True)
    cmd = [sys.executable, __file__, "--child", "--data", str(args.data), "--steps", str(args.steps),
           "--batch-size", str(args.batch_size), "--max-length", str(args.max_length), "--lr", str(args.lr),
           "--seed", str(args.seed)] \
        + (["--threads", str(args.threads)] if args.threads else []) \
        + (["--model", str(args.model)] if args.model else []) \
        + (["--no-switch"] if args.no_switch else []) + (["--force"] if args.force else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    if out.returncode:
        sys.exit(out.stderr)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if "declined" in r:
        print(f"adapt declined in {r['seconds']:.1f}s: {r['declined']}; the index and the model are unchanged",
              flush=True)
        if args.eval:
            _eval_models(args, [("base", None)], {"adapt": r, "index": built})
        else:
            print(json.dumps({"adapt": r, "index": built}))
        return
    print(f"adapt {r['steps']} steps × {args.batch_size} (max length {args.max_length}) on "
          f"{r['corpus']} sentences: {r['s_per_step_median']:.2f} s/step median ({r['s_per_step_mean']:.2f} mean); "
          f"train {r['train_seconds']:.0f}s, re-encode {r['encode_seconds']:.0f}s, total {r['wall_seconds']:.0f}s "
          f"({r['cpu_seconds']:.0f} CPU-s); MLM loss, mean of the first / last {LOSS_WINDOW} steps "
          f"{r['first_loss']:.3f} → {r['last_loss']:.3f}; "
          f"peak RSS {r['peak_rss_mb']:.0f} MB; load avg {os.getloadavg()[0]:.2f}")
    result = {"adapt": r, "index": built}
    if args.eval:
        _eval_models(args, [("base", None), ("adapted", Path(r["model_dir"]))], result)
    else:
        print(json.dumps(result))


def _eval_models(args: argparse.Namespace, models: list[tuple[str, Path | None]], result: dict) -> None:
    """`sparc-local eval` figures of each model folder (None: the base) on --data; prints them and the JSON."""
    from sparc_local.app import run
    from sparc_local.app.jobs import EvalRequest
    from sparc_local.evaluation import reqa
    from sparc_local.model.info import shipped_model_dir
    from sparc_local.query.modes import HYBRID, MODES, SPARC

    hits: dict[str, dict[str, list[int]]] = {}
    ids = [q for q, _question, _answers in reqa.load(args.data).queries] if args.ranks else []
    for which, folder in models:
        request = EvalRequest(str(args.data), model=str(folder or args.model or shipped_model_dir()),
                              threads=args.threads, fast=True, hits=args.paired)
        info = run.eval_model(request)
        m = run.evaluate(request, info)
        hits[which] = {mode: m[mode].pop("hits") for mode in MODES if "hits" in m[mode]}
        if args.ranks and hits[which]:
            args.ranks.mkdir(parents=True, exist_ok=True)
            (args.ranks / f"{which}.json").write_text(json.dumps(
                {mode: dict(zip(ids, ranks)) for mode, ranks in hits[which].items()}))
        result[which] = m
        s, h = m[SPARC], m[HYBRID]
        print(f"eval {which:8} {info.id}: MRR@10 {s['mrr@10']:.4f}  R@1 {s['r@1']:.4f}  R@10 {s['r@10']:.4f}; "
              f"hybrid MRR@10 {h['mrr@10']:.4f}", flush=True)
    base = models[0][0]
    for which, _folder in models[1:] if args.paired else []:
        for mode in (HYBRID, SPARC):
            before, after = (dict(enumerate(hits[w][mode])) for w in (base, which))
            print(f"{which} against {base}, {mode}: {paired_line(before, after)}", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
