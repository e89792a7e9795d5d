"""Peak RSS of `index` on one file without blank lines, by its size (issue 48).

    python benchmarks/memory.py                        # 1, 10, 30 and 100 MB, prose and a log
    python benchmarks/memory.py --sizes 1 10 --seconds 120 --tree OTHER

Each row is one `sparc-local index FOLDER` in a fresh scratch home (the shipped model), a process
of its own whose peak RSS is wait4's. Files, all without one blank line:

- prose: lines of ten words drawn from the model's vocabulary (seeded), which no rule calls
  machine-written, so `index` reads, stores and encodes them: what bounds its memory is the
  paragraph bound, nothing else;
- log: syslog lines (benchmarks/messy_home.py's), left out as machine-written by default, and
  indexed anyway with `--logs`.

A file larger than `--max-sentences` (50,000) sentences is indexed up to there. Encoding 50,000
sentences takes a quarter of an hour here, so a run is stopped (SIGTERM: what is committed stays)
--seconds after encoding began; the table says how far it got. Reading stores every sentence
first, then the encoder goes a bounded batch at a time, so the peak is reached by then. Runs
are at normal priority: memory does not depend on it, and at nice 19 a busy machine starves them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRATCH = Path.home() / ".cache" / "sparc-local-bench" / "memory"


def _prose(path: Path, mb: float, seed: int = 48) -> None:
    from sparc_local.model.info import TOKENIZER_FILE, shipped_model_dir

    vocab_file = shipped_model_dir() / TOKENIZER_FILE
    vocab = [w for w in vocab_file.read_text().split('"') if w.isalpha() and len(w) > 4]
    rng = random.Random(seed)
    with open(path, "w") as fh:
        size = 0
        while size < mb * 1_000_000:
            line = " ".join(rng.choices(vocab, k=10)).capitalize() + ".\n"
            fh.write(line)
            size += len(line)


def _log(path: Path, mb: float, seed: int = 48) -> None:
    sys.path.insert(0, str(REPO))
    from benchmarks.messy_home import machine_samples

    made = machine_samples(path.parent / "gen", mb, seed)[0]
    made.rename(path)
    shutil.rmtree(path.parent / "gen")


def measure(tree: Path, folder: Path, extra: list[str], seconds: float) -> dict:
    home = SCRATCH / "home"
    if home.exists():
        shutil.rmtree(home)
    env = {**os.environ, "SPARC_LOCAL_HOME": str(home), "PYTHONPATH": str(tree)}
    t0 = time.monotonic()
    # normal priority: at nice 19 a busy machine starves it, and priority does not change memory
    proc = subprocess.Popen([sys.executable, "-m", "sparc_local", "index", str(folder), "--normal-priority", *extra],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    encoding: list[float] = []  # when its plain progress lines (stderr is a pipe) said it encodes

    def watch_lines() -> None:
        for line in proc.stderr:
            if line.startswith("encoding:") and not encoding:
                encoding.append(time.monotonic())

    threading.Thread(target=watch_lines, daemon=True).start()
    stopped = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if not stopped and encoding and time.monotonic() - encoding[0] > seconds:
            proc.send_signal(signal.SIGTERM)
            stopped = True
        time.sleep(0.2)
    st = subprocess.run([sys.executable, "-m", "sparc_local", "status", "--json"], cwd=tree, env=env,
                        capture_output=True, text=True)
    info = json.loads(st.stdout) if st.returncode == 0 else {}
    return {"peak_mb": usage.ru_maxrss / 1024, "seconds": time.monotonic() - t0, "stopped": stopped,
            "exit": os.waitstatus_to_exitcode(status), "sentences": info.get("sentences"),
            "encoded": info.get("encoded"), "left_out": len(info.get("machine_written", []))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=float, nargs="+", default=[1, 10, 30, 100])
    ap.add_argument("--seconds", type=float, default=120, help="stop a run this long after encoding began (SIGTERM)")
    ap.add_argument("--tree", type=Path, default=REPO)
    args = ap.parse_args()
    tree = args.tree.resolve()
    print(f"{'file':<22}{'options':<10}{'peak RSS':>10}{'sentences':>11}{'encoded':>9}{'time':>8}  note")
    for mb in args.sizes:
        for kind, extra in (("prose", []), ("log", []), ("log", ["--logs"])):
            if kind == "log" and extra and mb != max(args.sizes):
                continue  # the forced log only at the largest size
            folder = SCRATCH / f"{kind}-{mb:g}"
            if not folder.exists():
                folder.mkdir(parents=True)
                (_prose if kind == "prose" else _log)(folder / f"{kind}.txt", mb)
            r = measure(tree, folder, extra, args.seconds)
            note = "stopped while encoding" if r["stopped"] else f"exit {r['exit']}"
            if r["left_out"]:
                note = "left out as machine-written"
            print(f"{kind + f' {mb:g} MB':<22}{' '.join(extra) or '-':<10}{r['peak_mb']:>8.0f}MB"
                  f"{r['sentences'] or 0:>11}{r['encoded'] or 0:>9}{r['seconds']:>7.0f}s  {note}", flush=True)


if __name__ == "__main__":
    main()
