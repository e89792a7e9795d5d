"""Indexing speed of model folders, or of checkouts, on the same real files, paired in one run (issue #13).

    python benchmarks/index_speed.py MODEL_A MODEL_B [...] [--passages 300] [--rounds 2] [--threads 2]
    python benchmarks/index_speed.py --trees OLD NEW [...] --docs FOLDER [--keep DIR]   # checkouts (issue 32)
    python benchmarks/index_speed.py --smoke     # the tiny model, fp32 against int8 (smoke.py)

With --trees each checkout's code indexes FOLDER (e.g. the desk, ~/.cache/sparc-local-bench/desk)
with the model it ships; --keep DIR keeps each run's home (DIR/home-ROUND-A|B|...) for desk.py
--reuse --home. Three arms (issue 46: a baseline commit, today's main and a candidate) give both
comparisons from the same rounds.

squad-dev's first passages are written as .txt files (one per passage), and each model indexes
them with `sparc-local index` in a fresh process and a fresh home: walk, extract, segment, the
input builder, the encoder and SQLite, as a user runs it. Runs alternate A B A B ..., so the
VM's drifting speed hits every arm alike; printed per arm are the best and median sentences/s,
peak RSS, and the median of the per-round speed ratios to A; the same per CPU second (user +
system time of the index process and its threads), which other jobs on the machine disturb far
less than wall time. Arms that keep different sentences of the same files (a tree from before
page furniture was dropped keeps more) differ in sentences/s more than in the wait, so the ratio of
the wall times for the same files, what a user waits for, is printed too.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparc_local.evaluation import reqa

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa" / "squad-dev"
ARM_NAMES = "ABCDEFGH"  # the arms in the order given; ratios are against A


def index_once(model: Path | None, docs: Path, home: Path, threads: int,
               tree: Path | None = None) -> tuple[float, int, int, float]:
    """(seconds, sentences, peak RSS in KB, CPU seconds) of one `sparc-local index` in a fresh home, by this
    checkout with ``model``, else by the checkout ``tree`` with its own model."""
    home.mkdir(mode=0o700)
    env = {**os.environ, "SPARC_LOCAL_HOME": str(home)}
    if model is not None:
        (home / "active-model").write_text(str(model.resolve()))
    if tree is not None:
        env["PYTHONPATH"] = str(tree.resolve())
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "sparc_local", "index", str(docs), "--threads", str(threads)],
                            env=env, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    out = proc.stdout.read() + proc.stderr.read()
    if status != 0:
        raise SystemExit(f"index failed with {model}: {out}")
    sentences = int(re.search(r"\((\d+) sentences\)", out).group(1))
    return seconds, sentences, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", type=Path, help="two or more model folders (or --trees)")
    p.add_argument("--trees", nargs="+", type=Path, help="two or more checkouts instead, each with its shipped model")
    p.add_argument("--docs", type=Path, help="index this folder instead of squad-dev passages")
    p.add_argument("--keep", type=Path, help="keep each run's home under this folder")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--passages", type=int, default=300)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="seconds: the tiny test model on a tiny set (smoke.py)")
    args = p.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.models, args.data, args.rounds, args.threads = [s.model, s.model_int8], s.data, 1, 1
    arms = args.trees or args.models
    if len(arms) < 2:
        p.error("give two or more model folders, or --trees OLD NEW [NEWER ...]")
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        if args.docs:
            docs, what = args.docs, f"{args.docs}"
        else:
            docs = Path(tmp) / "docs"
            docs.mkdir()
            paras = reqa.load(args.data).paragraphs()[: args.passages]
            for i, para in enumerate(paras):
                (docs / f"p{i:05d}.txt").write_text(" ".join(para) + "\n")
            what = f"{len(paras)} squad-dev passages as .txt files"
        homes = args.keep or Path(tmp)
        homes.mkdir(parents=True, exist_ok=True)
        runs: dict[Path, list[tuple[float, int, int, float]]] = {m: [] for m in arms}
        for r in range(args.rounds):
            for i, m in enumerate(arms):
                home = homes / f"home-{r}-{ARM_NAMES[i]}"
                runs[m].append(index_once(None if args.trees else m, docs, home, args.threads,
                                          m if args.trees else None))
        names = " ".join(ARM_NAMES[: len(arms)])
        print(f"{what}, {args.threads} threads, {args.rounds} rounds ({names}, {names}, ...)")
        for m, rs in runs.items():
            speeds = [n / s for s, n, _, _ in rs]
            cpu = [n / c for _, n, _, c in rs]
            print(f"{str(m):28s} {rs[0][1]} sentences  best {max(speeds):7.1f} sentences/s  median "
                  f"{statistics.median(speeds):7.1f}  peak RSS {max(r[2] for r in rs) / 1024:.0f} MB  "
                  f"per round: {' '.join(f'{x:.1f}' for x in speeds)}; per CPU second: {' '.join(f'{x:.1f}' for x in cpu)}")
        a = runs[arms[0]]
        for name, m in zip(ARM_NAMES[1:], arms[1:]):
            b = runs[m]
            ratios = [(nb / sb) / (na / sa) for (sa, na, *_), (sb, nb, *_) in zip(a, b)]
            cpu_ratios = [(nb / cb) / (na / ca) for (_, na, _, ca), (_, nb, _, cb) in zip(a, b)]
            print(f"speed ratio {name}/A per round: {' '.join(f'{x:.2f}' for x in ratios)}; "
                  f"median {statistics.median(ratios):.2f}")
            print(f"per CPU second, {name}/A per round: {' '.join(f'{x:.2f}' for x in cpu_ratios)}; "
                  f"median {statistics.median(cpu_ratios):.2f}")
            times = [sa / sb for (sa, *_), (sb, *_) in zip(a, b)]
            print(f"time for the same files, A/{name} per round: {' '.join(f'{x:.2f}' for x in times)}; "
                  f"median {statistics.median(times):.2f}")


if __name__ == "__main__":
    main()
