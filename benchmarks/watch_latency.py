"""How fast does `sparc-local watch` make a saved sentence answerable, and what does it cost idle?

    python benchmarks/watch_latency.py                  # shipped model, default 2 s quiet period
    python benchmarks/watch_latency.py --quiet-period 0.3 --tiny
    python benchmarks/watch_latency.py --smoke

Runs the real detached daemon (`python -m sparc_local watch --daemon`) in a throw-away
SPARC_LOCAL_HOME and measures, from this process:

* latency: a file is saved (written and closed) with a new sentence; we poll `ask`
  (``Library.ask``, the first stage: `--fast`) every 20 ms until that sentence is among the top 3
  for its question.
  p50/p95 over --edits edits. The quiet period is a floor on it by design;
* idle cost of the daemon process over --idle seconds: CPU from /proc/PID/stat (utime+stime),
  RSS and peak RSS from /proc/PID/status;
* burst: 500 one-sentence files written at once into a new folder; files/s from the first write
  until all 500 are in the index (quiet period included).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import proc_cpu_seconds, proc_mem_mb

NOUNS = ("violin harbor glacier lantern orchard tractor volcano compass falcon canyon meadow cathedral "
         "submarine telescope blacksmith lighthouse vineyard avalanche parliament monastery").split()
CITIES = "oslo lima cairo dublin quito hanoi perth riga accra sofia".split()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--quiet-period", type=float, default=2.0)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--burst", type=int, default=500)
    ap.add_argument("--tiny", action="store_true", help="use the tiny test model instead of the shipped one")
    ap.add_argument("--smoke", action="store_true", help="a few seconds: --tiny, 3 edits, a burst of 20, 1 s idle")
    args = ap.parse_args()
    if args.smoke:
        args.tiny, args.edits, args.quiet_period, args.idle, args.burst = True, 3, 0.3, 1.0, 20

    scratch = Path.home() / ".cache" / "sparc-local-bench"  # not the temp folder; removed at exit
    scratch.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="watch-home-", dir=scratch))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["SPARC_LOCAL_HOME"] = str(home)
    repo = Path(__file__).resolve().parent.parent
    if args.tiny:
        sys.path.insert(0, str(repo))
        from tests.tiny import WORDS, make_tiny_model

        make_tiny_model(home / "tiny-model", top_k=48)
        (home / "active-model").write_text(str(home / "tiny-model"))
        nouns, cities = WORDS[30:60], WORDS[60:]
    else:
        nouns, cities = NOUNS, CITIES
    from sparc_local import Library
    from sparc_local.model.info import active_model

    info = active_model()
    root = Path(tempfile.mkdtemp(prefix="watch-docs-", dir=scratch))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (root / "filler.md").write_text("The committee meets on Tuesdays. Minutes are kept by the secretary.\n")
    note = root / "note.md"
    note.write_text("A first note.\n")

    env = {**os.environ}
    cmd = [sys.executable, "-m", "sparc_local"]
    t0 = time.perf_counter()
    out = subprocess.run([*cmd, "watch", "--daemon", "--quiet-period", str(args.quiet_period), str(root)],
                         env=env, capture_output=True, text=True, check=True)
    pid = int(out.stdout.split("(pid ")[1].split(")")[0])
    print(f"model: {info.name} ({'tiny test model' if args.tiny else 'shipped'}), daemon pid {pid}, "
          f"quiet period {args.quiet_period}s, encoder threads 1, {os.cpu_count()} cores "
          f"(load average {os.getloadavg()[0]:.1f}: other jobs compete for the CPU)")
    try:
        with Library(home) as lib:

            def wait_until(pred, timeout=120.0):
                end = time.perf_counter() + timeout
                while not pred():
                    if time.perf_counter() > end:
                        raise TimeoutError
                    time.sleep(0.02)

            wait_until(lambda: lib.status().files == 2)  # filler.md and note.md
            print(f"daemon started and caught up in {time.perf_counter() - t0:.2f}s")

            lat = []
            for i in range(args.edits):
                a, b, c = nouns[i % len(nouns)], nouns[(i * 7 + 3) % len(nouns)], cities[i % len(cities)]
                sentence = f"The {a} and the {b} arrived in {c} on day {i}."
                question = f"{a} {b} arrived {c} day {i}"
                tmp = note.with_name(".note.md.tmp")
                tmp.write_text(f"A note.\n\n{sentence}\n")  # an editor's atomic save
                os.replace(tmp, note)
                saved = time.perf_counter()
                wait_until(lambda: sentence in [x.sentence for x in lib.ask(question, k=3, fast=True)], timeout=60)
                lat.append(time.perf_counter() - saved)
            q = statistics.quantiles(lat, n=20)
            print(f"save -> answerable over {len(lat)} edits: p50 {statistics.median(lat) * 1000:.0f} ms, "
                  f"p95 {q[18] * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms")

            rss0, _ = proc_mem_mb(pid)
            c0, w0 = proc_cpu_seconds(pid), time.perf_counter()
            time.sleep(args.idle)
            cpu = proc_cpu_seconds(pid) - c0
            wall = time.perf_counter() - w0
            rss, hwm = proc_mem_mb(pid)
            print(f"idle {wall:.1f}s: daemon CPU {cpu:.2f}s ({100 * cpu / wall:.2f}% of one core); "
                  f"RSS {rss:.0f} MB (peak {hwm:.0f} MB)")

            burst = root / "burst"
            before = lib.status().files
            t1 = time.perf_counter()
            burst.mkdir()
            for i in range(args.burst):
                (burst / f"f{i:04d}.txt").write_text(f"File {i} says the {nouns[i % len(nouns)]} is in "
                                                     f"{cities[i % len(cities)]}.\n")
            written = time.perf_counter() - t1
            wait_until(lambda: lib.status().files == before + args.burst, timeout=600)
            dt = time.perf_counter() - t1
            print(f"burst of {args.burst} files (written in {written:.2f}s): all indexed after {dt:.2f}s "
                  f"-> {args.burst / dt:.0f} files/s end to end; daemon peak RSS {proc_mem_mb(pid)[1]:.0f} MB")
    finally:
        stop = subprocess.run([*cmd, "watch", "--stop"], env=env, capture_output=True, text=True)
        print(stop.stdout.strip() or stop.stderr.strip())
        state = json.loads((home / "watch.json").read_text())
        print(f"last_error: {state.get('last_error')}")


if __name__ == "__main__":
    main()
