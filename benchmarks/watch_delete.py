"""How soon does a deleted file leave `ask` while `sparc-local watch` encodes a long catch-up?

    python benchmarks/watch_delete.py                  # ~20,000 new sentences, the shipped model
    python benchmarks/watch_delete.py --mode live      # the new files written while it watches (a batch)
    python benchmarks/watch_delete.py --code OLD_TREE  # another checkout's sparc_local: before/after
    python benchmarks/watch_delete.py --normal-priority # on a machine busy with other work
    python benchmarks/watch_delete.py --smoke

In a scratch SPARC_LOCAL_HOME (under ~/.cache/sparc-local-bench, removed at exit), `sparc-local
index` a folder holding private.txt (a sentence no other file has), so it is encoded and
answerable. Then --sentences new sentences in --files new files are written: --mode catch-up,
before `sparc-local watch` starts, so its start-up catch-up reads and encodes them; --mode live,
while it watches, so it applies them as a batch. Once the watcher is encoding (the count of
encoded sentences in `status --json` moves), private.txt is deleted and so is one of the new
files (stored, not encoded yet), and `sparc-local ask --json` runs in a loop until neither is
among its answers. Prints each delete-to-gone latency, and how far the encoding was then. The
acceptance of issue 48: not answerable within 10 s while a catch-up of 20,000 sentences runs.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCRATCH = Path.home() / ".cache" / "sparc-local-bench"
REPO = Path(__file__).resolve().parent.parent
WORDS = ("river mountain window garden kitchen letter morning evening station village market doctor teacher "
         "engine bridge forest winter summer coffee bottle pocket ticket airport harbor island school "
         "library museum theater office printer laptop monitor battery cable router server budget report "
         "meeting project deadline invoice contract customer supplier warehouse truck driver engineer "
         "painter farmer baker tailor nurse pilot captain soldier student professor neighbor cousin "
         "walks builds opens closes carries paints repairs writes reads sends buys sells finds keeps "
         "quickly slowly quietly carefully early late often rarely always never near under above behind "
         "red green yellow heavy light old new small large quiet busy warm cold bright dark").split()
PRIVATE = ("private.txt", "The vault code for the lake house is seven four nine two.",
           "what is the vault code for the lake house")
FRESH = ("The orchid greenhouse key hangs behind the blue shed door.", "where does the orchid greenhouse key hang")


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 14))]
    return " ".join(words).capitalize() + "."


def write_files(folder: Path, files: int, sentences: int, seed: int) -> Path:
    """``sentences`` distinct sentences in ``files`` files, paragraphs of 5; returns the file that
    holds FRESH's sentence (the middle one)."""
    rng = random.Random(seed)
    per = max(1, sentences // files)
    target = folder / f"new{files // 2:04d}.txt"
    for i in range(files):
        lines = [sentence(rng) for _ in range(per)]
        if folder / f"new{i:04d}.txt" == target:
            lines[per // 2] = FRESH[0]
        paras = [" ".join(lines[j:j + 5]) for j in range(0, len(lines), 5)]
        (folder / f"new{i:04d}.txt").write_text("\n\n".join(paras) + "\n")
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--mode", choices=["catch-up", "live"], default="catch-up")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up on a deletion after this many seconds")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--normal-priority", action="store_true",
                    help="run the watcher at normal priority (`watch --normal-priority`): on a machine busy with "
                         "other work, nice 19 leaves it too little CPU to get far into encoding")
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout whose sparc_local runs (default: this one)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (its watch.log) and say where")
    ap.add_argument("--tiny", action="store_true", help="the tiny test model instead of the shipped one")
    ap.add_argument("--smoke", action="store_true", help="a few seconds: --tiny, 600 sentences in 20 files")
    args = ap.parse_args()
    if args.smoke:
        args.tiny, args.sentences, args.files = True, 600, 20

    SCRATCH.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="watch-delete-", dir=SCRATCH))
    if args.keep:
        print(f"scratch folder (kept): {work}")
    else:
        atexit.register(shutil.rmtree, work, ignore_errors=True)
    home, root = work / "home", work / "docs"
    home.mkdir(mode=0o700)
    root.mkdir()
    env = {**os.environ, "SPARC_LOCAL_HOME": str(home), "PYTHONPATH": str(args.code.resolve())}
    if args.tiny:
        sys.path.insert(0, str(REPO))
        from tests.tiny import make_tiny_model

        make_tiny_model(home / "tiny-model", top_k=48)
        (home / "active-model").write_text(str(home / "tiny-model"))
    cmd = [sys.executable, "-m", "sparc_local"]

    def cli(*a: str) -> str:
        return subprocess.run([*cmd, *a], env=env, cwd=work, capture_output=True, text=True, check=True).stdout

    def answered(question: str, path: Path) -> bool:
        return any(a["path"] == str(path) for a in json.loads(cli("ask", "--json", question) or "[]"))

    def counts() -> tuple[int, int]:
        st = json.loads(cli("status", "--json"))
        return st["encoded"], st["sentences"]

    private = root / PRIVATE[0]
    private.write_text(f"A note about the house.\n\n{PRIVATE[1]}\n")
    cli("index", "-q", str(root))
    assert answered(PRIVATE[2], private), "private.txt is not answerable after `index`"
    new = root / "new"
    new.mkdir()
    if args.mode == "catch-up":
        fresh = write_files(new, args.files, args.sentences, args.seed)
    state = home / "watch.json"
    watch = [*cmd, "watch", *(["--normal-priority"] if args.normal_priority else []), str(root)]
    proc = subprocess.Popen(watch, env=env, cwd=work, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if args.mode == "live":
            while json.loads(state.read_text() if state.exists() else "{}").get("phase") != "watching":
                time.sleep(0.1)
            fresh = write_files(new, args.files, args.sentences, args.seed)
        print(f"{args.mode}: {args.sentences:,} sentences in {args.files} files, model "
              f"{'tiny' if args.tiny else 'shipped'}, code {args.code.resolve()}, watcher at "
              f"{'normal' if args.normal_priority else 'low'} priority; {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f}")
        t0 = time.perf_counter()
        start = None
        while time.perf_counter() - t0 < args.timeout:  # until the new files are stored and encoding moves
            done, total = counts()
            if total > 2 and start is None:
                start = done
            if start is not None and done > start and answered(FRESH[1], fresh):
                break
            if proc.poll() is not None:
                raise SystemExit(f"the watcher exited with {proc.returncode}; see {home / 'watch.log'}")
            time.sleep(0.2)
        else:
            raise SystemExit("the watcher did not start encoding")
        done, total = counts()
        print(f"encoding: {done:,} of {total:,} sentences encoded, {time.perf_counter() - t0:.1f}s after start; "
              "deleting private.txt (encoded before) and "
              f"{fresh.name} (one of the new files)")
        deleted = time.perf_counter()
        private.unlink()
        fresh.unlink()

        def poll(question: str, path: Path) -> None:  # one `ask` after another, each target in its own thread
            while time.perf_counter() - deleted < args.timeout:
                if not answered(question, path):
                    gone = time.perf_counter() - deleted
                    done, total = counts()
                    phase = json.loads(state.read_text()).get("phase")
                    print(f"{path.name}: gone from `ask` {gone:.1f}s after its deletion (the watcher: {phase}, "
                          f"{done:,} of {total:,} sentences encoded)", flush=True)
                    return
            print(f"{path.name}: still answerable {args.timeout:.0f}s after its deletion", flush=True)

        threads = [threading.Thread(target=poll, args=a) for a in ((PRIVATE[2], private), (FRESH[1], fresh))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
