"""How long does a cold `sparc-local ask` take, from process start to exit, in one tree against another?

    git worktree add /tmp/sparc-old <commit>
    python benchmarks/cold_ask.py /tmp/sparc-old .                 # old, new; 20 runs each
    python benchmarks/cold_ask.py OLD NEW STEP ... --runs 40        # the first tree is the baseline

Each tree (a checkout of sparc-local) indexes --folder (default: the bundled sample files) into a
data folder of its own, then runs `python -m sparc_local ask QUESTION` --runs times as a new
process (PYTHONPATH=tree), with the trees interleaved and their order turned from run to run, so
that the load of a shared machine falls on all of them alike.  The data folder is found as a user's
is (platformdirs, through XDG_DATA_HOME) rather than through SPARC_LOCAL_HOME, and bytecode caches
are written and used (PYTHONDONTWRITEBYTECODE is dropped) as in an installed package.

Prints each tree's median, min and p90 wall time, and each tree's median ratio to the baseline over
the runs (paired: the same run's baseline process ran next to it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "How long should green tea steep?"


def tree_env(tree: Path, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARC_LOCAL_HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(PYTHONPATH=str(tree), XDG_DATA_HOME=str(data), OMP_NUM_THREADS="1")
    return env


def run(cmd: list[str], env: dict[str, str]) -> float:
    # run in the tree: `python -m` puts the working folder first on sys.path
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=env["PYTHONPATH"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path, help="checkouts of sparc-local; the first is the baseline")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--folder", type=Path, default=Path(__file__).resolve().parent.parent / "sparc_local" / "sample")
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    if sys.platform != "linux":
        sys.exit("XDG_DATA_HOME places the data folder on Linux only")

    trees = [t.resolve() for t in args.trees]
    work = Path(tempfile.mkdtemp(prefix="sparc-cold-ask-"))
    try:
        envs = []
        for i, tree in enumerate(trees):
            env = tree_env(tree, work / f"data{i}")
            run([args.python, "-m", "sparc_local", "index", str(args.folder.resolve()), "-q"], env)
            envs.append(env)
        cmd = [args.python, "-m", "sparc_local", "ask", args.question]
        for env in envs:  # bytecode caches and the page cache, as on a machine in use
            run(cmd, env)
        times: list[list[float]] = [[] for _ in trees]
        for r in range(args.runs):
            order = list(range(len(trees)))
            shift = r % len(trees)
            for i in order[shift:] + order[:shift]:
                times[i].append(run(cmd, envs[i]))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"cold `ask {args.question!r}`, {args.runs} runs per tree, interleaved; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'tree':<40}{'median':>9}{'min':>9}{'p90':>9}{'ratio':>8}")
    for tree, ts in zip(trees, times):
        ratio = statistics.median(t / b for t, b in zip(ts, times[0]))
        p90 = sorted(ts)[int(0.9 * (len(ts) - 1))]
        print(f"{str(tree)[-40:]:<40}{statistics.median(ts) * 1e3:>7.0f}ms{min(ts) * 1e3:>7.0f}ms"
              f"{p90 * 1e3:>7.0f}ms{ratio:>8.2f}")


if __name__ == "__main__":
    main()
