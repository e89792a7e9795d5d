"""How long does a cold `sparc-local ask` take, from process start to exit, in one tree against another?

    git worktree add /tmp/sparc-old <commit>
    python benchmarks/cold_ask.py /tmp/sparc-old .                 # old, new; 20 runs each
    python benchmarks/cold_ask.py OLD STEP ... NEW --runs 40 --floor  # the first tree is the baseline
    python benchmarks/cold_ask.py --smoke    # this clone against itself, 2 runs, the tiny model (smoke.py)

Each tree (a checkout of sparc-local) indexes --folder (default: the bundled sample files) into a
data folder of its own, then runs `python -m sparc_local ask QUESTION` --runs times as a new
process (PYTHONPATH=tree), with the trees interleaved and their order turned from run to run, so
that the load of a shared machine falls on all of them alike.  The data folder is found as a user's
is (platformdirs, through XDG_DATA_HOME) rather than through SPARC_LOCAL_HOME, and bytecode caches
are written and used (PYTHONDONTWRITEBYTECODE is dropped) as in an installed package.

``--floor`` adds a row for `python -c "import numpy"`, what no `ask` can go below.  Prints each
row's median, min and p90 wall time and median and min CPU time (user + system, less
sensitive to other jobs on a shared machine), each with the row's median ratio to the baseline
over the runs (paired: the same run's baseline process ran next to it).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "How long should green tea steep?"


# a user's shell sets none of these; thread counts change how numpy and onnxruntime start
UNSET = ("SPARC_LOCAL_HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def tree_env(tree: Path, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(PYTHONPATH=str(tree), XDG_DATA_HOME=str(data))
    return env


def point_to_model(python: str, env: dict[str, str], model: Path) -> None:
    """Make ``model`` the active model of the data folder the tree finds under ``env`` (its own user_dir)."""
    from sparc_local.model.info import ACTIVE_POINTER

    where = subprocess.run([python, "-c", "from sparc_local.paths import user_dir; print(user_dir())"], env=env,
                           cwd=env["PYTHONPATH"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(where) / ACTIVE_POINTER).write_text(str(model.resolve()))


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one process, run in the tree (`python -m`
    puts the working folder first on sys.path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=env["PYTHONPATH"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return seconds, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", type=Path, help="checkouts of sparc-local; the first is the baseline")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--folder", type=Path, default=Path(__file__).resolve().parent.parent / "sparc_local" / "sample")
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--fast", action="store_true", help="`ask --fast`: the first stage alone, in every tree")
    ap.add_argument("--floor", action="store_true", help="also time `python -c 'import numpy'`")
    ap.add_argument("--model", type=Path, help="the model each tree indexes and asks with (default: the shipped one)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: this clone against itself, 2 runs, the tiny test model (smoke.py), --floor")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        here = Path(__file__).resolve().parent.parent
        args.trees, args.runs, args.model, args.floor = [here, here], 2, smoke.setup().model, True
    if not args.trees:
        ap.error("name at least one tree")
    if sys.platform != "linux":
        sys.exit("XDG_DATA_HOME places the data folder on Linux only")

    trees = [t.resolve() for t in args.trees]
    work = Path(tempfile.mkdtemp(prefix="sparc-cold-ask-"))
    try:
        rows: list[tuple[str, list[str], dict[str, str]]] = []  # label, command, environment
        for i, tree in enumerate(trees):
            env = tree_env(tree, work / f"data{i}")
            if args.model:
                point_to_model(args.python, env, args.model)
            run([args.python, "-m", "sparc_local", "index", str(args.folder.resolve()), "-q"], env)
            fast = ["--fast"] if args.fast else []
            rows.append((str(tree), [args.python, "-m", "sparc_local", "ask", args.question, *fast], env))
        if args.floor:  # what no `ask` can go below: the interpreter and numpy, as `ask` loads it
            rows.append(("floor: python -c 'import numpy'", [args.python, "-c", "import numpy"],
                         {**tree_env(trees[-1], work / "floor"), "OPENBLAS_NUM_THREADS": "1"}))
        for _, cmd, env in rows:  # bytecode caches and the page cache, as on a machine in use
            run(cmd, env)
        load = [os.getloadavg()[0]]
        runs: list[list[tuple[float, float]]] = [[] for _ in rows]
        for r in range(args.runs):
            order = list(range(len(rows)))
            shift = r % len(rows)
            for i in order[shift:] + order[:shift]:
                runs[i].append(run(rows[i][1], rows[i][2]))
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"cold `ask {args.question!r}`, {args.runs} runs per row, interleaved; {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} before, {load[1]:.2f} after")
    print(f"{'':<34}{'wall time':^34}  {'CPU time (user+sys)':^25}")
    print(f"{'':<34}{'median':>8}{'min':>8}{'p90':>8}{'ratio':>10}  {'median':>8}{'min':>8}{'ratio':>9}")
    for (label, _, _), tr in zip(rows, runs):
        wall, cpu = [w for w, _ in tr], [c for _, c in tr]
        ratio = statistics.median(w / b for w, (b, _) in zip(wall, runs[0]))
        cpu_ratio = statistics.median(c / b for c, (_, b) in zip(cpu, runs[0]))
        p90 = sorted(wall)[int(0.9 * (len(wall) - 1))]
        print(f"{label[-34:]:<34}{ms(statistics.median(wall))}{ms(min(wall))}{ms(p90)}{ratio:>10.2f}  "
              f"{ms(statistics.median(cpu))}{ms(min(cpu))}{cpu_ratio:>9.2f}")


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:>6.0f}ms"


if __name__ == "__main__":
    main()
