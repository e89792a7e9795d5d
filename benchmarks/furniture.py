"""Man-page furniture in text: the generic rule (ingest/furniture.py) against a rule per source (issue 45).

    python benchmarks/furniture.py                 # man pages of this machine, rendered by `man`
    python benchmarks/furniture.py --pages 200     # more of them
    python benchmarks/furniture.py --smoke         # seconds: two man pages, twenty text files

The man pages: every 12th page of sections 1, 5 and 8 installed here (none of the packages kept out
of tuning: bash, dpkg, rsync, python, sqlite3; nor the software desk's grep, gzip and sed), rendered
to text as benchmarks/desk.py does (`man -P cat`, MANWIDTH=80), into
~/.cache/sparc-local-bench/furniture. A man page's head is its first line and its foot its last:
the truth. The rule per source is what one would write for man pages alone: a first line
`NAME(N)  ...  NAME(N)` and, below such a head, a last line ending in `NAME(N)`. Prints, per rule,
the heads and feet found and missed and the other lines taken on the man pages, and the lines taken
from every plain text file of /usr/share/doc (.txt, .md, .rst, README-like names; none of the
packages kept out), where every line taken is a mistake.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparc_local.ingest.extract import TEXT_NAMES  # noqa: E402  (after the sys.path insert)
from sparc_local.ingest.furniture import text_furniture  # noqa: E402  (after the sys.path insert)
from sparc_local.ingest.readers import read_text  # noqa: E402  (after the sys.path insert)

OUT = Path.home() / ".cache/sparc-local-bench/furniture"
KEPT_OUT = re.compile(r"/(bash|dpkg|rsync|python|sqlite|git-subtree|grep|gzip|sed|debian-reference|shared-mime|"
                      r"libtasn1)")
_HEAD = re.compile(r"^(\S+\(\w+\))\s{2,}.*\s{2,}\1\s*$")
_FOOT = re.compile(r"\s{2,}\S+\(\w+\)\s*$")


def per_source(lines: list[str]) -> set[int]:
    """A man page's head and foot as a rule written for man pages would find them."""
    full = [i for i, ln in enumerate(lines) if ln.strip()]
    if not full or not _HEAD.match(lines[full[0]]):
        return set()
    return {full[0]} | ({full[-1]} if _FOOT.search(lines[full[-1]]) else set())


RULES: dict[str, Callable[[list[str]], set[int]]] = {"generic": text_furniture, "per source": per_source}


def man_pages(n: int) -> list[Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    sources = sorted(p for s in ("man1", "man5", "man8") for p in Path(f"/usr/share/man/{s}").glob("*.gz")
                     if not KEPT_OUT.search(str(p)) and not p.name.startswith(("gcloud", "bq_", "gsutil")))
    out = []
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    for src in sources[11::12][:n]:
        dest = OUT / (src.name.removesuffix(".gz") + ".txt")
        if not dest.exists():
            done = subprocess.run(["man", "-E", "UTF-8", "-P", "cat", str(src)], capture_output=True, text=True,
                                  env=env)
            dest.write_text(re.sub(r".\x08", "", done.stdout), encoding="utf-8")
        if dest.read_text(encoding="utf-8").strip():
            out.append(dest)
    return out


def doc_texts() -> list[Path]:
    out = []
    for root, _, names in os.walk("/usr/share/doc"):
        if KEPT_OUT.search(root + "/"):
            continue
        for name in names:
            stem, suffix = os.path.splitext(name)
            if suffix in (".txt", ".md", ".rst") or (not suffix and stem.lower() in TEXT_NAMES):
                out.append(Path(root) / name)
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=80, help="man pages to render (default 80)")
    ap.add_argument("--smoke", action="store_true", help="seconds: two man pages and twenty text files")
    args = ap.parse_args()
    if shutil.which("man") is None:
        sys.exit("man is not installed: apt-get install man-db")
    pages = man_pages(2 if args.smoke else args.pages)
    texts = []
    for f in doc_texts()[:20 if args.smoke else None]:
        try:
            texts.append((f, read_text(f, 2_000_000)[0].split("\n")))
        except (OSError, ValueError):
            continue
    print(f"{len(pages)} man pages rendered by man; {len(texts)} plain text files of /usr/share/doc")
    for name, rule in RULES.items():
        found = missed = other = 0
        for page in pages:
            lines = page.read_text(encoding="utf-8").split("\n")
            full = [i for i, ln in enumerate(lines) if ln.strip()]
            truth, got = {full[0], full[-1]}, rule(lines)
            found, missed, other = found + len(truth & got), missed + len(truth - got), other + len(got - truth)
        taken = [(f, lines[i].strip()) for f, lines in texts for i in sorted(rule(lines))]
        print(f"{name}: heads and feet found {found}, missed {missed}, other lines taken {other}; "
              f"lines taken from /usr/share/doc: {len(taken)}")
        for f, line in taken[:5]:
            print(f"    {f}: {line[:70]}")


if __name__ == "__main__":
    main()
