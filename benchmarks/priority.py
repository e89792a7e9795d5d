"""What `index` costs a program the user works in, at low priority (the default) and at normal.

    python benchmarks/priority.py [--data ../shared/data/reqa/squad-dev] [--limit 300] [--rounds 7]
    python benchmarks/priority.py --smoke   # one round of ~2 s: the tiny model on 1,500 tiny files (smoke.py)

The interactive task is another process that runs a fixed CPU-bound loop in bursts (a burst,
then a short pause, as a program answering its user does) and times each burst. Each round
times it alone, beside `sparc-local index --normal-priority` and beside `sparc-local index`
(nice 19, idle I/O), in a rotating order, each `index` a first run over the same squad-dev
passages with every core (--threads 0). Prints the median burst of each condition per round,
then the medians over rounds of the paired slowdowns (beside / alone).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparc_local.evaluation import reqa

SMOKE_ARTICLES = 500  # --smoke's set: 3 passages (files) each, more than the tiny model indexes in a round

PROBE = """
import sys, time
bursts, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(bursts):
    t = time.perf_counter()
    s = 0
    for i in range(n):
        s += i * i
    print(time.perf_counter() - t, flush=True)
    time.sleep(0.1)
"""


def probe(bursts: int, n: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(bursts), str(n)], capture_output=True, text=True,
                         check=True)
    return [float(x) for x in out.stdout.split()]


def beside_index(docs: Path, home: Path, flags: list[str], warmup: float, bursts: int, n: int) -> list[float]:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(mode=0o700)
    env = {**os.environ, "SPARC_LOCAL_HOME": str(home)}
    model = os.environ.get("SPARC_LOCAL_MODEL")
    if model:
        (home / "active-model").write_text(model)
    proc = subprocess.Popen([sys.executable, "-m", "sparc_local", "index", str(docs), "-q", "--threads", "0",
                             *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(warmup)  # the model is loaded and encoding runs
        times = probe(bursts, n)
        if proc.poll() is not None:
            raise SystemExit(f"index ended before the probe did (exit {proc.returncode}): use more --limit")
        return times
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared/data/reqa/squad-dev"))
    p.add_argument("--limit", type=int, default=300, help="passages (files) to index")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--bursts", type=int, default=5, help="bursts of the interactive task per condition")
    p.add_argument("--loop", type=int, default=2_000_000, help="iterations of one burst (~0.15 s alone)")
    p.add_argument("--warmup", type=float, default=4.0, help="seconds between starting index and the probe")
    p.add_argument("--smoke", action="store_true",
                   help="seconds: one round on the tiny test model, 1,500 tiny files (more than it indexes in the "
                        "round), 3 short bursts (smoke.py)")
    args = p.parse_args()
    scratch = None
    if args.smoke:
        import smoke

        s = smoke.setup()  # puts the clone's top on sys.path: tests/ is not installed
        from tests.tiny import write_reqa_set

        write_reqa_set(s.folder / "priority-set", seed=2, articles=[f"a{i:03d}" for i in range(SMOKE_ARTICLES)])
        os.environ["SPARC_LOCAL_MODEL"] = str(s.model)
        args.data, args.limit, args.rounds, args.bursts, args.loop, args.warmup, scratch = (
            s.folder / "priority-set", SMOKE_ARTICLES * 3, 1, 3, 200_000, 1.0, s.folder)

    ds = reqa.load(Path(args.data))
    passages: dict[str, list[str]] = {}
    for text, passage in zip(ds.texts, ds.passages):
        passages.setdefault(passage, []).append(text)
    conditions = {"alone": None, "normal": ["--normal-priority"], "low": []}
    medians: dict[str, list[float]] = {c: [] for c in conditions}
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        docs, home = Path(tmp) / "docs", Path(tmp) / "home"
        docs.mkdir()
        for name in sorted(passages)[: args.limit]:
            (docs / f"{name}.txt").write_text(" ".join(passages[name]) + "\n")
        names = list(conditions)
        print(f"{os.cpu_count()} cores; a burst is {args.loop} iterations; {args.bursts} bursts per condition")
        print("round  " + "  ".join(f"{c:>8}" for c in names) + "   (median burst, s)")
        for r in range(args.rounds):
            order = names[r % 3:] + names[: r % 3]  # rotate which condition goes first
            for c in order:
                flags = conditions[c]
                times = probe(args.bursts, args.loop) if flags is None else beside_index(
                    docs, home, flags, args.warmup, args.bursts, args.loop)
                medians[c].append(statistics.median(times))
            print(f"{r:5d}  " + "  ".join(f"{medians[c][-1]:8.3f}" for c in names))
    for c in ("normal", "low"):
        ratios = [b / a for a, b in zip(medians["alone"], medians[c])]
        print(f"beside index at {c} priority: median burst {statistics.median(medians[c]):.3f} s vs "
              f"{statistics.median(medians['alone']):.3f} s alone; paired slowdown median x{statistics.median(ratios):.2f} "
              f"(min x{min(ratios):.2f}, max x{max(ratios):.2f})")


if __name__ == "__main__":
    main()
