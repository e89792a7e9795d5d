"""How long does a warm `Library.ask` take (the Python API, docs/api.md), p50 and p90?

    python benchmarks/library_ask.py                 # the sample files, the active model, 50 rounds
    python benchmarks/library_ask.py --folder DIR --runs 100 --fast
    python benchmarks/library_ask.py --smoke         # the tiny model, 3 rounds (smoke.py)

Indexes --folder (default: the bundled sample files) into a data folder of its own, asks each of
the sample questions once to warm up (tokenizer, reranker, page cache), then --runs rounds of all
of them through one ``Library``, and prints the wall time per question: p50, p90 and max.  A cold
`ask` (a new process) is benchmarks/cold_ask.py.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SCRATCH = Path.home() / ".cache" / "sparc-local-bench"  # the data folder, removed at exit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, help="the folder to index (default: the sample files)")
    parser.add_argument("--runs", type=int, default=50, help="rounds of the sample questions")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--fast", action="store_true", help="without the reranker")
    parser.add_argument("--smoke", action="store_true", help="the tiny model, 3 rounds")
    args = parser.parse_args()
    if args.smoke:
        import smoke
        from common import use_model

        s = smoke.setup()
        home = Path(os.environ["SPARC_LOCAL_HOME"])
        use_model(home, s.model)
        args.runs = 3
    else:
        SCRATCH.mkdir(parents=True, exist_ok=True)
        home = Path(tempfile.mkdtemp(prefix="library-ask-", dir=SCRATCH))
        atexit.register(shutil.rmtree, home, ignore_errors=True)
    from sparc_local import Library
    from sparc_local.sample import sample_dir, sample_questions

    questions = sample_questions()
    lib = Library(home=home)
    report = lib.index(args.folder or sample_dir())
    for q in questions:
        lib.ask(q, k=args.k, fast=args.fast)
    times = []
    for _ in range(args.runs):
        for q in questions:
            t0 = time.perf_counter()
            lib.ask(q, k=args.k, fast=args.fast)
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    from sparc_local.model.info import reranker_dir

    reranker = "--fast" if args.fast else f"reranker {reranker_dir()}" if reranker_dir() else "no reranker installed"
    print(f"{report.indexed} files, {report.sentences} sentences; {len(times)} questions ({reranker}), k {args.k}")
    print(f"warm Library.ask: p50 {statistics.median(times):.1f} ms, p90 {p90:.1f} ms, max {times[-1]:.1f} ms")


if __name__ == "__main__":
    main()
