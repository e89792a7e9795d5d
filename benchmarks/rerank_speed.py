"""What does the reranker cost `ask`, and how does its cost grow with N and the input length? (issue 44)

    SPARC_LOCAL_HOME=HOME python benchmarks/rerank_speed.py --reranker DIR [--limit 30] [--rounds 2]
    ... --compare DIR2 DIR3     # other reranker folders (int8, fewer layers) against DIR at its N and length
    ... --batches 4 8 --threads 1 --spin   # other batch sizes and sessions, at DIR's N and length
    python benchmarks/rerank_speed.py --smoke   # the tiny models (smoke.py, tests/rerank_tiny.py): seconds

On the index of SPARC_LOCAL_HOME (with its active model) and a reranker folder (default: the one
`ask` would use), over questions (default: the software desk's, benchmarks/desk/questions.tsv; the
index should hold that desk, `benchmarks/desk.py` builds it):

1. warm `ask`: one process, the index, tokenizer and reranker loaded; each question asked as
   `ask -k 10` does it (``app.run.ask``), with the reranker at its N and with `--fast`, back to
   back, the order turned each round. Wall and CPU time (the process's, onnxruntime's threads included) p50/p95.
2. the table: the reranker's own time (tokenizing and scoring) on the first stage's top N passages,
   for N x max_length, every cell of a question run back to back in an order turned from question
   to question and round to round, so a load that comes and goes falls on all cells alike. The
   median of wall and CPU time over questions and rounds, the paired median ratio to the
   reranker's own cell, and the tokens read per question (after truncation, padding not counted).
3. `--compare`/`--batches`: the same cost for other folders or batch sizes at the reranker's N
   and length, paired with it; for another folder, how often its top passage is the reranker's.
4. cold `ask`: a new process (`python -m sparc_local ask Q`) with the reranker and with `--fast`,
   interleaved: median wall and CPU time, and the peak RSS of the process (its rusage).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "benchmarks" / "desk" / "questions.tsv"
NS = (10, 20, 30, 50)
LENGTHS = (128, 192, 256)


def read_questions(path: Path, limit: int) -> list[str]:
    """The first column of a questions file (desk.py's .tsv or one question a line), every
    len/limit-th so a limit still spans the file."""
    rows = [line.split("\t")[0] for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    step = max(1, len(rows) // limit) if limit else 1
    return rows[::step][:limit or None]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of fn(); CPU is the process's, every thread's."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f}"


def turned(items: list, by: int) -> list:
    by %= len(items)
    return items[by:] + items[:by]


def warm_ask(reranker, questions: list[str], rounds: int) -> None:
    """1: `ask -k 10` with the reranker and with --fast, per question back to back, as `ask` asks
    (``app.run.ask``: the terminal's request, one index kept open between questions)."""
    from sparc_local.app import run
    from sparc_local.app.requests import AskRequest

    session = run.AskSession()

    def ask(q: str, fast: bool) -> object:
        return run.ask(AskRequest(q, k=10, fast=fast, phrases=1), reranker=lambda: reranker, session=session)

    runs: dict[str, list[tuple[float, float]]] = {"reranked": [], "fast": []}
    for q in questions:  # caches and the page cache warm, as in a process that asked before
        ask(q, False)
    for r in range(rounds):
        for i, q in enumerate(questions):
            for kind in turned(["reranked", "fast"], r + i):
                runs[kind].append(timed(lambda: ask(q, kind == "fast")))
    session.close()
    print(f"\n## warm `ask -k 10`: {len(questions)} questions x {rounds} rounds, N = {reranker.n}, "
          f"max_length = {reranker.max_length}\n")
    print("| | wall p50 ms | wall p95 ms | CPU p50 ms | CPU p95 ms |\n|---|---:|---:|---:|---:|")
    for kind, values in runs.items():
        wall, cpu = [w for w, _ in values], [c for _, c in values]
        print(f"| {kind} | {ms(pct(wall, .5))} | {ms(pct(wall, .95))} | {ms(pct(cpu, .5))} | {ms(pct(cpu, .95))} |")


def candidates(asker, questions: list[str], n: int) -> list[list[str]]:
    """Each question's top n passages of the first stage, as the reranker reads them."""
    from sparc_local.query.ask import rerank_input

    return [[rerank_input(a, None) for a in asker.ask(q, k=n, phrases=0)]
            for q in questions]


def sharing(base, max_length: int | None = None, batch: int | None = None):
    """A Reranker on base's session (one session per folder) with another length or batch size."""
    from sparc_local.rerank.model import Reranker

    r = Reranker(base.info, threads=base.threads, batch=batch or base.batch, max_length=max_length or base.max_length)
    r._session = base._session
    return r.warm()


def tokens(reranker, question: str, texts: list[str]) -> int:
    return sum(int(m.sum()) for m in (reranker._encode(question, texts[i:i + 1])["attention_mask"]
                                      for i in range(len(texts))))


def paired(cells: dict[str, tuple], questions: list[str], texts: list[list[str]], rounds: int,
           base: str) -> dict[str, dict]:
    """Every cell (label -> (reranker, n)) timed on each question's first n passages, back to back."""
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label in cells}
    top: dict[str, list[int]] = {label: [] for label in cells}
    labels = list(cells)
    for r in range(rounds):
        for i, (q, t) in enumerate(zip(questions, texts)):
            for label in turned(labels, r * len(questions) + i):
                reranker, n = cells[label]
                scores: list = []
                runs[label].append(timed(lambda: scores.append(reranker.score(q, t[:n]))))
                if r == 0 and len(t):
                    top[label].append(int(scores[0].argmax()))
    out = {}
    for label, values in runs.items():
        ratio = statistics.median(w / b for (w, _), (b, _) in zip(values, runs[base]))
        cpu_ratio = statistics.median(c / b for (_, c), (_, b) in zip(values, runs[base]))
        same = sum(a == b for a, b in zip(top[label], top[base])) / max(1, len(top[base]))
        out[label] = {"wall": statistics.median(w for w, _ in values), "cpu": statistics.median(c for _, c in values),
                      "p95": pct([w for w, _ in values], .95), "ratio": ratio, "cpu_ratio": cpu_ratio, "same_top": same}
    return out


def table(reranker, questions: list[str], texts: list[list[str]], rounds: int, ns: list[int],
          lengths: list[int]) -> None:
    """2: N x max_length."""
    readers = {length: sharing(reranker, max_length=length) for length in lengths}
    cells = {f"{n}x{length}": (readers[length], n) for n in ns for length in lengths}
    base = f"{reranker.n}x{reranker.max_length}"
    if base not in cells:
        cells[base] = (reranker, reranker.n)
    got = paired(cells, questions, texts, rounds, base)
    print(f"\n## the reranker's time per question (tokenize + score), {len(questions)} questions x {rounds} rounds; "
          f"ratios paired with {base}\n")
    print("| N | max_length | tokens/question | wall ms | wall p95 ms | CPU ms | ratio | CPU ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, (r, n) in cells.items():
        tok = statistics.mean(tokens(r, q, t[:n]) for q, t in zip(questions, texts))
        g = got[label]
        print(f"| {n} | {r.max_length} | {tok:.0f} | {ms(g['wall'])} | {ms(g['p95'])} | {ms(g['cpu'])} | "
              f"{g['ratio']:.2f} | {g['cpu_ratio']:.2f} |")


def session(base, threads: int, spin: bool):
    """A Reranker on a session of its own, as rerank.model makes it but for threads and spinning."""
    from sparc_local.model.runtime import onnxruntime
    from sparc_local.rerank.model import Reranker

    ort = onnxruntime()
    r = Reranker(base.info, threads=threads, batch=base.batch, max_length=base.max_length)
    opts = r._options(ort)
    # onnxruntime's pool threads spin between runs, or sleep as the product's do
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    r._session = ort.InferenceSession(str(base.info.onnx_path), opts, providers=["CPUExecutionProvider"])
    return r.warm()


def compare(reranker, others: list[Path], batches: list[int], threads: list[int], spin: bool, questions: list[str],
            texts: list[list[str]], rounds: int) -> None:
    """3: other folders, batch sizes and sessions at the reranker's N and length."""
    from sparc_local.rerank.model import Reranker

    name = reranker.info.name
    cells: dict[str, tuple] = {f"{name} (batch {reranker.batch})": (reranker, reranker.n)}
    for folder in others:
        r = Reranker.load(folder, max_length=reranker.max_length).warm()
        cells[f"{r.info.name} ({folder.name})"] = (r, reranker.n)
    for b in batches:
        cells[f"{name} (batch {b})"] = (sharing(reranker, batch=b), reranker.n)
    for t in threads:
        cells[f"{name} ({t} intra-op threads)"] = (session(reranker, t, False), reranker.n)
    if spin:
        cells[f"{name} (spinning)"] = (session(reranker, reranker.threads, True), reranker.n)
    base = next(iter(cells))
    got = paired(cells, questions, texts, rounds, base)
    print(f"\n## at N = {reranker.n}, max_length = {reranker.max_length}: paired with {base}\n")
    print("| reranker | wall ms | CPU ms | ratio | CPU ratio | same top passage |\n|---|---:|---:|---:|---:|---:|")
    for label, g in got.items():
        print(f"| {label} | {ms(g['wall'])} | {ms(g['cpu'])} | {g['ratio']:.2f} | {g['cpu_ratio']:.2f} | "
              f"{g['same_top']:.0%} |")


# Linux counts a parent's resident memory at fork in its child's peak (ru_maxrss survives exec), so
# the cold runs are started by a small Python of their own, not by this process with onnxruntime
# loaded: their peak then errs by at most that launcher's ~10 MB, never by this process's size.
LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    cmd, env, cwd = json.loads(line)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    err = p.stderr.read().decode()
    print(json.dumps([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, os.waitstatus_to_exitcode(status), err]),
          flush=True)
"""


def cold(home: Path, folder: Path, questions: list[str], runs: int) -> None:
    """4: a new process per question, with the reranker and with --fast, interleaved."""
    import json

    from sparc_local.model.info import RERANKER_VAR

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "OMP_NUM_THREADS",
                                                            "OPENBLAS_NUM_THREADS")}
    env.update(SPARC_LOCAL_HOME=str(home), PYTHONPATH=str(ROOT), **{RERANKER_VAR: str(folder)})
    kinds = {"reranked": [], "fast": ["--fast"]}
    got: dict[str, list[tuple[float, float, int]]] = {k: [] for k in kinds}
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)

    def one(args: list[str]) -> tuple[float, float, int]:
        assert launcher.stdin and launcher.stdout
        launcher.stdin.write(json.dumps([[sys.executable, "-m", "sparc_local", "ask", *args], env, str(ROOT)]) + "\n")
        launcher.stdin.flush()
        wall, cpu, rss, code, err = json.loads(launcher.stdout.readline())
        if code:
            sys.exit(f"ask {args} failed ({code}): {err}")
        return wall, cpu, rss  # KB on Linux

    for kind, extra in kinds.items():  # bytecode and page caches, as on a machine in use
        one([questions[0], *extra])
    for r in range(runs):
        q = questions[r % len(questions)]
        for kind in turned(list(kinds), r):
            got[kind].append(one([q, *kinds[kind]]))
    launcher.communicate("")
    print(f"\n## cold `ask` (a new process), {runs} runs each, interleaved\n")
    print("| | wall median ms | wall p90 ms | CPU median ms | peak RSS median MB | peak RSS max MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, values in got.items():
        wall, cpu, rss = ([v[i] for v in values] for i in range(3))
        print(f"| {kind} | {ms(statistics.median(wall))} | {ms(pct(wall, .9))} | {ms(statistics.median(cpu))} | "
              f"{statistics.median(rss) / 1024:.0f} | {max(rss) / 1024:.0f} |")


def smoke_setup() -> tuple[Path, Path, list[str]]:
    """The tiny encoder's index of smoke.py's desk texts, and a tiny reranker; their questions."""
    import smoke

    s = smoke.setup()
    from sparc_local.model.info import ACTIVE_POINTER
    from tests.rerank_tiny import make_tiny_reranker, steered_weights

    home = Path(os.environ["SPARC_LOCAL_HOME"])
    (home / ACTIVE_POINTER).write_text(str(s.model))
    docs = smoke.write_tree(s.folder / "docs", {name: text for name, (_, text) in smoke.DESK_FILES.items()})
    subprocess.run([sys.executable, "-m", "sparc_local", "index", str(docs), "-q"], cwd=ROOT, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    folder = s.folder / "rerank"
    make_tiny_reranker(folder, weights=steered_weights("museum"), n=3)
    return home, folder, [q for q, _, _ in smoke.DESK_QUESTIONS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reranker", type=Path, help="the reranker folder (default: the one `ask` uses)")
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--limit", type=int, default=30, help="questions (spread over the file; 0: all)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, nargs="+", default=list(NS), help="the table's N")
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS), help="the table's max_length")
    ap.add_argument("--compare", type=Path, nargs="*", default=[], help="other reranker folders")
    ap.add_argument("--batches", type=int, nargs="*", default=[], help="other batch sizes")
    ap.add_argument("--threads", type=int, nargs="*", default=[], help="other intra-op thread counts")
    ap.add_argument("--spin", action="store_true", help="also a session whose threads spin between runs")
    ap.add_argument("--cold", type=int, default=15, help="cold runs of each kind (0: none)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["warm", "table"], help="parts not to run")
    ap.add_argument("--smoke", action="store_true", help="seconds: the tiny models, 1 round, a 2x2 table")
    args = ap.parse_args()
    if args.smoke:
        home, args.reranker, questions = smoke_setup()
        args.rounds, args.n, args.lengths, args.cold, args.batches, args.threads = 1, [2, 3], [16, 32], 1, [2], [1]
        args.spin = True
    else:
        home = Path(os.environ.get("SPARC_LOCAL_HOME", "")) if os.environ.get("SPARC_LOCAL_HOME") else None
        questions = read_questions(args.questions, args.limit)
    from sparc_local.index.store import Index
    from sparc_local.model.info import active_model, reranker_dir
    from sparc_local.paths import db_path
    from sparc_local.query.ask import Asker
    from sparc_local.rerank.model import Reranker

    folder = args.reranker or reranker_dir()
    if folder is None:
        sys.exit("no reranker: give --reranker DIR")
    home = home or db_path().parent
    reranker = Reranker.load(folder).warm()
    print(f"index {db_path()}, reranker {folder} (N {reranker.n}, max_length {reranker.max_length}, "
          f"{reranker.threads} threads, batch {reranker.batch}); {len(questions)} questions; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    if "warm" not in args.skip:
        warm_ask(reranker, questions, args.rounds)
    with Index(db_path()) as idx:  # the first stage's passages, as the reranker reads them
        texts = candidates(Asker(idx, active_model()), questions, max([*args.n, reranker.n]))
    print(f"\npassages read: {statistics.mean(len(t) for t in texts):.1f} per question, "
          f"{statistics.mean(len(x) for t in texts for x in t):.0f} characters each on average")
    if "table" not in args.skip:
        table(reranker, questions, texts, args.rounds, args.n, args.lengths)
    if args.compare or args.batches or args.threads or args.spin:
        compare(reranker, args.compare, args.batches, args.threads, args.spin, questions, texts, args.rounds)
    if args.cold:
        cold(home, folder, questions, args.cold)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
