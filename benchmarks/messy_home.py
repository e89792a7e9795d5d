"""A developer's messy home, generated, and what `index`, `ask`, `watch` and `forget` make of it (issue 48).

    python benchmarks/messy_home.py generate [--seed 48] [--log-mb 30] [--folders 5000]
    python benchmarks/messy_home.py run [--watch-seconds 60] [--catchup-sentences 20000]
    python benchmarks/messy_home.py run --tree OTHER     # the same with another checkout's code
    python benchmarks/messy_home.py run --watch-only     # the watcher's part, on the index the last run left

`generate` writes, under ~/.cache/sparc-local-bench/messy-home (seeded: the same tree every time;
`run` deletes a file and adds a catch-up folder, so generate again before the next run):

- documents: prose the user wrote (passages of squad-dev and newsqa-dev as .txt and .md), 12
  README/NEWS/TODO-like files without an extension, a Korean note in ISO-2022-KR, odd names;
- logs and data saved as .txt: a syslog-style log of --log-mb MB without one blank line, a CSV
  export, a JSON-lines dump (``machine_samples``);
- downloads: a .log, a .csv, an .iso and a .deb (types `index` does not read, only walks past);
- two repositories, one with a `.gitignore` and one without: `node_modules` with READMEs,
  CHANGELOGs and LICENSEs, a `venv` with dist-info metadata, Sphinx `_build` output, `build/`;
- a copy of this Python's standard library text files (with its `__future__.py`);
- hostile bits: a symlink loop, a FIFO, a dangling link, a 60-level path, a newline in a name;
- --folders folders in all (empty ones fill the count).

`run` indexes it with `sparc-local index` (the shipped model, a scratch SPARC_LOCAL_HOME) and
prints: peak RSS of `index`; the time to the first right answer (`ask` polled while it runs);
sentences indexed per kind; then, with the watcher running, its idle CPU over --watch-seconds
and how long a deleted file stays answerable while a catch-up of --catchup-sentences runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections import Counter, defaultdict
from pathlib import Path

from common import proc_cpu_seconds

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "reqa"
SCRATCH = Path.home() / ".cache" / "sparc-local-bench"
HOME = SCRATCH / "messy-home"
INDEX_HOME = SCRATCH / "messy-home-index"
TEXT_NAMES = ["README", "NEWS", "CHANGELOG", "INSTALL", "TODO", "AUTHORS", "THANKS", "FAQ", "NOTES", "HACKING",
              "BUGS", "CONTRIBUTING"]
KOREAN = "회의는 매주 화요일 오전 열 시에 시작합니다. 자료는 공유 폴더에 있습니다.\n"


def _passages(name: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    with gzip.open(DATA / name / "corpus.jsonl.gz", "rt") as fh:
        for line in fh:
            row = json.loads(line)
            out[row["passage"]].append(row["text"])
    return out


def _questions(name: str) -> list[dict]:
    with gzip.open(DATA / name / "queries.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


def machine_samples(folder: Path, log_mb: float = 0.5, seed: int = 48) -> list[Path]:
    """Machine-written text saved as .txt: a syslog-style log without blank lines, a CSV export
    and a JSON-lines dump."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    hosts, daemons = ["ana-laptop"], ["sshd", "systemd", "NetworkManager", "kernel", "cron", "dbus-daemon", "gdm"]
    messages = ["Accepted publickey for ana from 192.168.1.{} port {} ssh2", "Started Session {} of user ana.",
                "wlp2s0: link becomes ready (channel {}, signal -{} dBm)", "(root) CMD (run-parts /etc/cron.{})",
                "Activating via systemd: service name='org.freedesktop.{}' unit='dbus-{}.service'",
                "usb 1-{}: new high-speed USB device number {} using xhci_hcd"]
    log = folder / "syslog-export.txt"
    with open(log, "w") as fh:
        size, t = 0, 1_700_000_000
        while size < log_mb * 1_000_000:
            t += rng.randint(0, 30)
            stamp = time.strftime("%b %d %H:%M:%S", time.gmtime(t))
            msg = rng.choice(messages).format(rng.randint(1, 254), rng.randint(1000, 65000))
            line = f"{stamp} {hosts[0]} {rng.choice(daemons)}[{rng.randint(100, 9999)}]: {msg}\n"
            fh.write(line)
            size += len(line)
    csv = folder / "bank-export.txt"
    with open(csv, "w") as fh:
        fh.write("date,description,amount,balance\n")
        for i in range(3000):
            fh.write(f"2026-{i % 12 + 1:02d}-{i % 28 + 1:02d},CARD PAYMENT {rng.randint(1000, 9999)},"
                     f"{rng.uniform(-200, 50):.2f},{rng.uniform(0, 5000):.2f}\n")
    dump = folder / "events-dump.txt"
    with open(dump, "w") as fh:
        for i in range(3000):
            fh.write(json.dumps({"id": i, "type": rng.choice(["click", "view"]), "ts": 1_700_000_000 + i}) + "\n")
    return [log, csv, dump]


def _npm_package(folder: Path, name: str, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(
        f"# {name}\n\nA small library for {rng.choice(['parsing', 'formatting', 'streaming'])} things.\n\n"
        f"## Install\n\nHow do I install it? Run `npm install {name}` in your project.\n\n"
        f"## Usage\n\nCall `{name}()` with your options. It returns a promise.\n")
    (folder / "CHANGELOG.md").write_text("".join(
        f"## {v}.0.0\n\n- Fixed a bug in the parser.\n- Dropped support for old Node versions.\n\n" for v in range(5, 0, -1)))
    (folder / "LICENSE").write_text("MIT License\n\nPermission is hereby granted, free of charge, to any person "
                                    "obtaining a copy of this software.\n")
    (folder / "package.json").write_text(json.dumps({"name": name, "version": "1.0.0"}))


def _repository(root: Path, name: str, gitignore: bool, packages: int, rng: random.Random) -> None:
    repo = root / "code" / name
    (repo / "src").mkdir(parents=True, exist_ok=True)
    (repo / "README.md").write_text(f"# {name}\n\nOur team's service. Deploy it with `make deploy` on Fridays "
                                    "before noon.\n\nThe staging database is refreshed every night at two.\n")
    (repo / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (repo / "src" / "app.py").write_text("print('hello')\n")
    if gitignore:
        (repo / ".gitignore").write_text("node_modules/\nvenv/\n_build/\nbuild/\n")
    for i in range(packages):
        _npm_package(repo / "node_modules" / f"pkg-{name}-{i}", f"pkg-{name}-{i}", rng)
    site = repo / "venv" / "lib" / "python3.11" / "site-packages"
    (repo / "venv" / "pyvenv.cfg").parent.mkdir(parents=True, exist_ok=True)
    (repo / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    for i in range(max(packages // 4, 1)):
        meta = site / f"lib{i}-1.0.dist-info"
        meta.mkdir(parents=True, exist_ok=True)
        (meta / "METADATA.txt").write_text(f"Metadata-Version: 2.1\nName: lib{i}\n\nlib{i} makes requests simple.\n")
        (site / f"lib{i}").mkdir(exist_ok=True)
        (site / f"lib{i}" / "README.txt").write_text(f"lib{i}: install it with pip install lib{i}.\n")
    html = repo / "docs" / "_build" / "html"
    html.mkdir(parents=True, exist_ok=True)
    for i in range(20):
        (html / f"page{i}.html").write_text(f"<html><title>{name} docs</title><body><p>Page {i} of the generated "
                                            "documentation. Install it with pip.</p></body></html>")
    (repo / "build" / "lib").mkdir(parents=True, exist_ok=True)
    (repo / "build" / "lib" / "notes.txt").write_text("Build output copied from the source tree.\n")


def _stdlib_copy(root: Path) -> int:
    lib = Path(sysconfig.get_paths()["stdlib"])
    dest = root / "old-projects" / "python-3.11-copy"
    n = 0
    for path in lib.rglob("*"):
        if path.suffix in (".txt", ".rst", ".html", ".md") and "site-packages" not in path.parts and path.is_file():
            target = dest / path.relative_to(lib)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            n += 1
    shutil.copyfile(lib / "__future__.py", dest / "__future__.py")
    return n


def _hostile(root: Path) -> None:
    h = root / "hostile"
    h.mkdir(parents=True, exist_ok=True)
    os.symlink(".", h / "loop")
    os.symlink("nowhere.txt", h / "dangling.txt")
    os.mkfifo(h / "pipe.txt")
    deep = h
    for i in range(60):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("The deepest note says the spare key is under the blue pot.\n")
    (h / "new\nline.txt").write_text("A file whose name holds a newline still answers.\n")


def generate(root: Path, seed: int = 48, log_mb: float = 30, folders: int = 5000, packages: int = 1500) -> dict:
    """The messy home at ``root`` (replaced); returns what the benchmark asks about it."""
    rng = random.Random(seed)
    if root.exists():
        shutil.rmtree(root)
    docs = root / "Documents"
    docs.mkdir(parents=True)
    squad, news = _passages("squad-dev"), _passages("newsqa-dev")
    keys = sorted(squad)
    rng.shuffle(keys)
    for i in range(0, 600, 6):  # 100 files of 6 passages
        ext = ".md" if i % 12 else ".txt"
        (docs / f"notes-{i // 6:03d}{ext}").write_text("\n\n".join(" ".join(squad[k]) for k in keys[i:i + 6]) + "\n")
    for j, name in enumerate(TEXT_NAMES):
        proj = docs / "projects" / f"p{j}"
        proj.mkdir(parents=True)
        (proj / name).write_text(" ".join(squad[keys[600 + j]]) + "\n")
    (docs / "회의-kr.txt").write_bytes((KOREAN * 40).encode("iso2022_kr"))
    (docs / "odd name with spaces ü.txt").write_text("Odd names are indexed like any other.\n")
    machine_samples(docs / "saved-logs", log_mb, seed)
    down = root / "Downloads"
    down.mkdir()
    with open(down / "server.log", "w") as fh:  # 100 MB, 50 MB: walked past, never read
        for _ in range(100):
            fh.write("2026-01-01 00:00:00 INFO request served in 12 ms\n" * 20_000)
    with open(down / "data.csv", "w") as fh:
        for _ in range(50):
            fh.write("id,name,value\n1,alpha,3.25\n" * 40_000)
    (down / "distro.iso").write_bytes(rng.randbytes(20_000_000))
    (down / "tool.deb").write_bytes(rng.randbytes(2_000_000))
    _repository(root, "service-a", True, packages // 2, rng)
    _repository(root, "tool-b", False, packages, rng)
    _stdlib_copy(root)
    _hostile(root)
    made = sum(len(d) for _, d, _ in os.walk(root))
    for i in range(max(folders - made, 0)):
        (root / "archive" / f"y{i // 500}" / f"m{i // 50 % 10}" / f"f{i}").mkdir(parents=True, exist_ok=True)
    # held back for the catch-up: newsqa articles, copied in while the watcher runs
    question = next(q for q in _questions("squad-dev") if q["answers"][0].rsplit("-", 1)[0] in keys[:6])
    files = sum(len(f) for _, _, f in os.walk(root))
    return {"question": question["question"], "answer_file": str(docs / "notes-000.txt"), "files": files,
            "folders": sum(len(d) for _, d, _ in os.walk(root)), "catchup": sorted(news)}


def kind(path: str) -> str:
    """Which kind of the generated home a path belongs to."""
    rel = Path(path).relative_to(HOME).as_posix()
    for marker, name in (("/node_modules/", "node_modules"), ("/venv/", "venv"), ("/_build/", "build"),
                         ("/build/", "build"), ("python-3.11-copy/", "stdlib copy"), ("saved-logs/", "logs"),
                         ("Documents/catchup/", "catch-up"), ("Documents/", "documents"), ("code/", "code"),
                         ("hostile/", "hostile")):
        if marker in "/" + rel:
            return name
    return "other"


def _cli(args: list[str], tree: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "SPARC_LOCAL_HOME": str(INDEX_HOME), "PYTHONPATH": str(tree)}
    return subprocess.Popen([sys.executable, "-m", "sparc_local", *args], cwd=tree, env=env, **kw)


def _ask(question: str, tree: Path) -> list[dict]:
    p = _cli(["ask", question, "--json", "-k", "10"], tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = p.communicate(timeout=60)
    try:
        return json.loads(out) if p.returncode == 0 else []
    except json.JSONDecodeError:
        return []


def run_index(meta: dict, tree: Path) -> dict:
    """`index` of the home: peak RSS (wait4's), the first right answer while it runs, per kind."""
    if INDEX_HOME.exists():
        shutil.rmtree(INDEX_HOME)
    t0 = time.monotonic()
    logs = SCRATCH / "messy-home-index.out", SCRATCH / "messy-home-index.err"
    with open(logs[0], "w") as out, open(logs[1], "w") as err:
        proc = _cli(["index", str(HOME)], tree, stdout=out, stderr=err)
    first, usage = None, None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
        if first is None and any(a["path"] == meta["answer_file"] for a in _ask(meta["question"], tree)[:1]):
            first = time.monotonic() - t0
        time.sleep(1.0)
    seconds = time.monotonic() - t0
    if first is None and any(a["path"] == meta["answer_file"] for a in _ask(meta["question"], tree)[:1]):
        first = seconds
    peak = usage.ru_maxrss / 1024  # KiB on Linux: the child's own peak
    out_text, err_text = logs[0].read_text(), logs[1].read_text()
    per_kind: Counter[str] = Counter()
    sys.path.insert(0, str(tree))
    from sparc_local.index.store import Index

    with Index(INDEX_HOME / "index.db") as idx:
        for f in idx.all_files():
            per_kind[kind(f.path)] += f.n_sentences
    return {"seconds": seconds, "peak_rss_mb": peak, "first_answer_s": first, "per_kind": dict(per_kind),
            "summary": out_text.strip().splitlines()[-1:], "exit": proc.returncode, "stderr_tail": err_text[-400:]}


def run_watch(meta: dict, tree: Path, idle_seconds: float, catchup_sentences: int) -> dict:
    """The watcher on the indexed home: CPU over ``idle_seconds`` once settled, then a catch-up of
    newsqa articles copied in, a known file deleted meanwhile, and how long it stays answerable."""
    # normal priority: at nice 19 on a busy machine the scheduler, not the watcher, decides (watch_delete.py)
    watcher = _cli(["watch", str(HOME), "--normal-priority"], tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(20)  # its start: the catch-up walk finds nothing new
        cpu0, t0 = proc_cpu_seconds(watcher.pid), time.monotonic()
        time.sleep(idle_seconds)
        idle = (proc_cpu_seconds(watcher.pid) - cpu0) / (time.monotonic() - t0)
        news = _passages("newsqa-dev")
        catch = HOME / "Documents" / "catchup"
        catch.mkdir(exist_ok=True)
        n = 0
        for i, key in enumerate(meta["catchup"]):
            if n >= catchup_sentences:
                break
            (catch / f"article-{i:04d}.txt").write_text(" ".join(news[key]) + "\n")
            n += len(news[key])
        time.sleep(15)  # the batch is taken and encoding has begun
        victim = HOME / "Documents" / "notes-000.txt"
        victim.unlink()
        t_del = time.monotonic()
        gone = None
        while time.monotonic() - t_del < 300:
            if not any(a["path"] == str(victim) for a in _ask(meta["question"], tree)):
                gone = time.monotonic() - t_del
                break
            time.sleep(0.5)
        return {"idle_cpu_pct": 100 * idle, "catchup_sentences": n, "delete_to_gone_s": gone}
    finally:
        watcher.send_signal(signal.SIGTERM)
        try:
            watcher.wait(60)
        except subprocess.TimeoutExpired:
            watcher.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["generate", "run"])
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--log-mb", type=float, default=30)
    ap.add_argument("--folders", type=int, default=5000)
    ap.add_argument("--tree", type=Path, default=REPO, help="the checkout whose sparc_local runs")
    ap.add_argument("--watch-seconds", type=float, default=60)
    ap.add_argument("--catchup-sentences", type=int, default=20_000)
    ap.add_argument("--no-watch", action="store_true", help="index and ask only")
    ap.add_argument("--watch-only", action="store_true", help="the watcher's part, on the index a run left")
    args = ap.parse_args()
    meta_path = SCRATCH / "messy-home.json"
    if args.action == "generate":
        meta = generate(HOME, args.seed, args.log_mb, args.folders)
        meta_path.write_text(json.dumps(meta))
        du = sum(f.stat().st_size for f in HOME.rglob("*") if f.is_file() and not f.is_symlink())
        print(f"{HOME}: {meta['files']} files, {meta['folders']} folders, {du / 1e6:.0f} MB")
        return
    meta = json.loads(meta_path.read_text())
    if args.watch_only:
        _print_watch(run_watch(meta, args.tree.resolve(), args.watch_seconds, args.catchup_sentences), args)
        return
    r = run_index(meta, args.tree.resolve())
    print(f"index: exit {r['exit']}, {r['seconds']:.0f} s, peak RSS {r['peak_rss_mb']:.0f} MB; "
          f"first right answer after {r['first_answer_s'] if r['first_answer_s'] is None else round(r['first_answer_s'], 1)} s")
    print("  " + " ".join(r["summary"]))
    print("sentences indexed per kind:")
    for name, n in sorted(r["per_kind"].items(), key=lambda kv: -kv[1]):
        print(f"  {name:14} {n:>8}")
    if r["exit"] != 0:
        print(r["stderr_tail"])
    if not args.no_watch:
        _print_watch(run_watch(meta, args.tree.resolve(), args.watch_seconds, args.catchup_sentences), args)


def _print_watch(w: dict, args: argparse.Namespace) -> None:
    print(f"watch: idle CPU {w['idle_cpu_pct']:.2f}% over {args.watch_seconds:.0f} s; a file deleted during a "
          f"catch-up of {w['catchup_sentences']} sentences was gone from `ask` after {w['delete_to_gone_s']} s")


if __name__ == "__main__":
    main()
