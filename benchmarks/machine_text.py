"""Does `index` tell machine-written text from prose? (issue 48)

    python benchmarks/machine_text.py                    # this machine's logs against its documentation
    python benchmarks/machine_text.py --logs A B --prose C D   # other files or folders

Every file is judged as `index` judges a plain text file (readers.read_text, then
machine.verdict). Logs: /var/log's, the kernel's (`dmesg`, `dmesg -T`), a journal export when
journalctl has one, and the logs and dumps benchmarks/messy_home.py generates. Prose: every file
of /usr/share/doc that `index` would read as plain text (.txt, README, NEWS, changelog, TODO...;
gzip unpacked) and man pages rendered to text by `man`, the kinds of .txt a person keeps.
Prints how many of each are called machine-written, and each call on prose and each miss.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sparc_local.ingest import plaintext  # noqa: E402  (after the sys.path insert)
from sparc_local.ingest.extract import reader_for  # noqa: E402  (after the sys.path insert)
from sparc_local.ingest.machine import SAMPLE_CHARS, verdict  # noqa: E402  (after the sys.path insert)
from sparc_local.ingest.readers import ExtractError, read_text  # noqa: E402  (after the sys.path insert)

LOG_DIRS = [Path("/var/log")]
PROSE_DIRS = [Path("/usr/share/doc")]
MAN_PAGES = 150  # man pages rendered to text


def _text(path: Path) -> str | None:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                data = fh.read(4 * SAMPLE_CHARS)
            return data.decode("utf-8", "replace")
        return read_text(path, SAMPLE_CHARS + 1)[0]
    except (OSError, ExtractError, EOFError):
        return None


def _files(roots: list[Path], keep=lambda p: True) -> list[Path]:
    out = []
    for root in roots:
        if root.is_file():
            out.append(root)
            continue
        for dirpath, _, names in os.walk(root):
            out += [p for name in sorted(names) if (p := Path(dirpath, name)).is_file() and not p.is_symlink() and keep(p)]
    return out


def _man_pages(n: int) -> list[tuple[str, str]]:
    pages = sorted(Path("/usr/share/man/man1").glob("*.1.gz"))[:n]
    out = []
    env = {**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": ""}
    for p in pages:
        r = subprocess.run(["man", "-P", "cat", str(p)], capture_output=True, text=True, env=env, timeout=30)
        if r.returncode == 0 and r.stdout.strip():
            out.append((f"man:{p.name}", r.stdout))
    return out


def _system_logs() -> list[tuple[str, str]]:
    """The journal and the kernel's ring buffer, as a user would save them to a .txt."""
    out = []
    for cmd in (["journalctl", "--no-pager", "-n", "2000", "-o", "short-iso"], ["journalctl", "--no-pager", "-n", "2000"],
                ["dmesg"], ["dmesg", "-T"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = [line for line in r.stdout.splitlines() if not line.startswith("--")]
        if len(lines) > 20:
            out.append((" ".join(cmd), "\n".join(lines)))
    return out


def _plain(path: Path) -> bool:
    """Whether `index` reads this file (its .gz unpacked) as plain text: what machine.sniff judges."""
    return reader_for(path.name.removesuffix(".gz")) is plaintext.plain_text


def judge(named: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    return [(name, verdict(text)) for name, text in named]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", nargs="*", type=Path, help="log files or folders (default: /var/log and a generated home's)")
    ap.add_argument("--prose", nargs="*", type=Path, help="prose files or folders (default: /usr/share/doc, man pages)")
    args = ap.parse_args()
    logs = [(str(p), t) for p in _files(args.logs or LOG_DIRS) if (t := _text(p)) is not None and t.strip()]
    if not args.logs:
        logs += _system_logs()
        from benchmarks.messy_home import SCRATCH, machine_samples

        for p in machine_samples(SCRATCH / "machine-samples"):
            logs.append((f"generated:{p.name}", _text(p) or ""))
    prose = [(str(p), t) for p in _files(args.prose or PROSE_DIRS, _plain if not args.prose else (lambda p: True))
             if (t := _text(p)) is not None and t.strip()]
    if not args.prose:
        prose += _man_pages(MAN_PAGES)
    judged_logs, judged_prose = judge(logs), judge(prose)
    short = sum(1 for _, t in logs if len([x for x in t.splitlines() if x.strip()]) < 20)
    caught = [n for n, v in judged_logs if v]
    flagged = [(n, v) for n, v in judged_prose if v]
    print(f"logs and dumps: {len(caught)} of {len(logs)} called machine-written ({short} have under 20 lines)")
    for name, v in judged_logs:
        print(f"  {'caught' if v else 'MISSED'}  {name}: {v or '-'}")
    print(f"prose: {len(flagged)} of {len(prose)} called machine-written")
    for name, v in flagged:
        print(f"  FLAGGED  {name}: {v}")


if __name__ == "__main__":
    main()
