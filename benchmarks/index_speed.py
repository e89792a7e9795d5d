"""Indexing speed of two model folders on the same real files, paired in one run (issue #13).

    python benchmarks/index_speed.py MODEL_A MODEL_B [--passages 300] [--rounds 2] [--threads 2]
    python benchmarks/index_speed.py --smoke     # the tiny model, fp32 against int8 (smoke.py)

squad-dev's first passages are written as .txt files (one per passage), and each model indexes
them with `sparc-local index` in a fresh process and a fresh home: walk, extract, segment, the
input builder, the encoder and SQLite, as a user runs it. Runs alternate A B A B ..., so the
VM's drifting speed hits both alike; printed per model are the best and median sentences/s,
peak RSS, and the median of the per-round speed ratios B/A.
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


def index_once(model: Path, docs: Path, home: Path, threads: int) -> tuple[float, int, int]:
    """(seconds, sentences, peak RSS in KB) of one `sparc-local index` in a fresh home."""
    home.mkdir(mode=0o700)
    (home / "active-model").write_text(str(model.resolve()))
    env = {**os.environ, "SPARC_LOCAL_HOME": str(home)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "sparc_local", "index", str(docs), "--threads", str(threads)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    out = proc.stdout.read() + proc.stderr.read()
    if status != 0:
        raise SystemExit(f"index failed with {model}: {out}")
    sentences = int(re.search(r"\((\d+) sentences\)", out).group(1))
    return seconds, sentences, usage.ru_maxrss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", type=Path)
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
    if len(args.models) != 2:
        p.error("give two model folders, MODEL_A MODEL_B")
    ds = reqa.load(args.data)
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        paras = ds.paragraphs()[: args.passages]
        for i, para in enumerate(paras):
            (docs / f"p{i:05d}.txt").write_text(" ".join(para) + "\n")
        runs: dict[Path, list[tuple[float, int, int]]] = {m: [] for m in args.models}
        for r in range(args.rounds):
            for m in args.models:
                runs[m].append(index_once(m, docs, Path(tmp) / f"home-{r}-{args.models.index(m)}", args.threads))
        print(f"{len(paras)} {args.data.name} passages as .txt files, {args.threads} threads, {args.rounds} rounds (A B A B ...)")
        for m, rs in runs.items():
            speeds = [n / s for s, n, _ in rs]
            print(f"{m.name:28s} {rs[0][1]} sentences  best {max(speeds):7.1f} sentences/s  median "
                  f"{statistics.median(speeds):7.1f}  peak RSS {max(kb for *_, kb in rs) / 1024:.0f} MB")
        a, b = (runs[m] for m in args.models)
        ratios = [(nb / sb) / (na / sa) for (sa, na, _), (sb, nb, _) in zip(a, b)]
        print(f"speed ratio B/A per round: {' '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
