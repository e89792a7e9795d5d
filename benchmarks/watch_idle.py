"""Does `sparc-local watch` idle on a big tree? Its CPU over a window, on N empty folders.

    python benchmarks/watch_idle.py                    # 50,000 folders, 60 s, the shipped model
    python benchmarks/watch_idle.py --folders 5000
    python benchmarks/watch_idle.py --walks 3          # the tree walked 3 times in the window (a backup, a find)
    python benchmarks/watch_idle.py --code OLD_TREE    # another checkout's sparc_local: before/after
    python benchmarks/watch_idle.py --smoke

Builds a seeded tree of --folders empty folders (depth 3 to 5) and a few small text files under
~/.cache/sparc-local-bench (removed at exit), indexes it (`sparc-local index`) in a scratch
SPARC_LOCAL_HOME, starts `sparc-local watch ROOT` in the foreground as a child process, waits
until its state file says "watching" and then --settle seconds more, and measures the child's
CPU seconds (utime + stime from /proc/PID/stat, all its threads) over --seconds. Prints the idle
CPU as a share of one core, its RSS, and what its state file says: folders watched and polled,
overflows of the OS event queue, rescans. The acceptance of issue 48: at most 2% over 60 s with
50,000 folders.
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
import time
from pathlib import Path

from common import proc_cpu_seconds, proc_mem_mb

SCRATCH = Path.home() / ".cache" / "sparc-local-bench"
REPO = Path(__file__).resolve().parent.parent


def make_tree(root: Path, folders: int, seed: int, max_depth: int = 5, min_depth: int = 3) -> int:
    """Exactly ``folders`` folders below root: each new one under a random folder that is not at
    max_depth yet (the first ones laid down to min_depth), so most of the tree is 3 to 5 deep."""
    rng = random.Random(seed)
    open_: list[tuple[Path, int]] = [(root, 0)]
    made = 0
    while made < folders:
        i = rng.randrange(len(open_))
        parent, depth = open_[i]
        child = parent / f"d{made:06d}"
        child.mkdir()
        made += 1
        if depth + 1 < max_depth:
            open_.append((child, depth + 1))
        if depth + 1 >= min_depth and rng.random() < 0.5:  # deep enough: the parent takes fewer children
            open_[i] = open_[-1]
            open_.pop()
        if not open_:
            open_.append((root, 0))
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folders", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=60.0, help="the window the CPU is measured over")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after 'watching' before the window")
    ap.add_argument("--walks", type=int, default=0, help="walk the tree this many times during the window")
    ap.add_argument("--files", type=int, default=20, help="small text files in the tree")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout whose sparc_local runs (default: this one)")
    ap.add_argument("--tiny", action="store_true", help="the tiny test model instead of the shipped one")
    ap.add_argument("--smoke", action="store_true", help="a few seconds: --tiny, 300 folders, a 2 s window")
    args = ap.parse_args()
    if args.smoke:
        args.tiny, args.folders, args.seconds, args.settle, args.files, args.walks = True, 300, 2.0, 0.5, 3, 1

    SCRATCH.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="watch-idle-", dir=SCRATCH))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    home, root = work / "home", work / "tree"
    home.mkdir(mode=0o700)
    root.mkdir()
    env = {**os.environ, "SPARC_LOCAL_HOME": str(home), "PYTHONPATH": str(args.code.resolve())}
    if args.tiny:
        sys.path.insert(0, str(REPO))
        from tests.tiny import make_tiny_model

        make_tiny_model(home / "tiny-model", top_k=48)
        (home / "active-model").write_text(str(home / "tiny-model"))

    t0 = time.perf_counter()
    made = make_tree(root, args.folders, args.seed)
    rng = random.Random(args.seed)
    all_dirs = [Path(d) for d, _, _ in os.walk(root)]
    for i in range(args.files):
        (rng.choice(all_dirs) / f"note{i}.txt").write_text(f"Note {i}: the meeting moved to room {i}. "
                                                           "Bring the report and the budget.\n")
    print(f"tree: {made:,} folders (max depth {max(len(d.relative_to(root).parts) for d in all_dirs)}), "
          f"{args.files} files, made in {time.perf_counter() - t0:.1f}s; code {args.code.resolve()}; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    cmd = [sys.executable, "-m", "sparc_local"]
    subprocess.run([*cmd, "index", "-q", str(root)], env=env, check=True, cwd=work)

    state = home / "watch.json"
    err = work / "watch.stderr"  # where watchdog's own warnings go (not to watch.log)
    with open(err, "wb") as fh:
        proc = subprocess.Popen([*cmd, "watch", str(root)], env=env, cwd=work, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=fh)
    try:
        t1 = time.perf_counter()
        while json.loads(state.read_text() if state.exists() else "{}").get("phase") != "watching":
            if proc.poll() is not None:
                raise SystemExit(f"the watcher exited with {proc.returncode}; see {home / 'watch.log'}")
            if time.perf_counter() - t1 > 600:
                raise SystemExit("the watcher was not watching after 600 s")
            time.sleep(0.1)
        print(f"watching after {time.perf_counter() - t1:.1f}s (CPU {proc_cpu_seconds(proc.pid):.1f}s so far); "
              f"settling {args.settle:g}s")
        time.sleep(args.settle)
        c0, w0 = proc_cpu_seconds(proc.pid), time.perf_counter()
        for _ in range(args.walks):  # what a backup or a `find` does: every folder opened and read
            for folder, _, names in os.walk(root):
                for name in names:
                    Path(folder, name).read_bytes()
        time.sleep(max(0.0, args.seconds - (time.perf_counter() - w0)))
        cpu, wall = proc_cpu_seconds(proc.pid) - c0, time.perf_counter() - w0
        rss, hwm = proc_mem_mb(proc.pid)
        st = json.loads(state.read_text())
        print(f"idle over {wall:.1f}s{f' ({args.walks} walks of the tree)' if args.walks else ''}: "
              f"CPU {cpu:.2f}s = {100 * cpu / wall:.2f}% of one core; RSS {rss:.0f} MB (peak {hwm:.0f} MB)")
        print(f"state: observer {st.get('observer')}, {st.get('watched', '?')} folders watched, "
              f"{st.get('polled', '?')} polled, {st.get('overflows', '?')} overflows, {st.get('rescans', '?')} "
              f"rescans, last error {st.get('last_error')}")
        log = "".join(f.read_text(errors="replace") for f in (home / "watch.log", err) if f.exists())
        print(f"watch.log and stderr: {log.count('queue overflowed')} lines on a queue overflow, "
              f"{log.count('reconciling recursive watches')} of watchdog's re-watches of the tree, "
              f"{log.count('rescanning')} rescans")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
