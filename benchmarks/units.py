"""What kinds of unit ingest makes of real documentation: code lines, equations, heading-only units (issue 32).

    python benchmarks/units.py                     # this tree, /usr/share/doc
    python benchmarks/units.py --tree OTHER        # another checkout's ingest
    python benchmarks/units.py --show 5            # and 5 examples of each kind
    python benchmarks/units.py --docs DIR          # another documentation tree (packages' folders in DIR)
    python benchmarks/units.py --smoke             # tiny documentation and a tiny desk (smoke.py)

Files: the HTML, Markdown, reST and text files under /usr/share/doc of the packages installed here,
except the packages kept out of training and tuning (issue 32's list; git's whole docs, for its
subtree docs). Each sentence of the tree's `extract` + `segment` counts as:

- code: it lies inside one <pre> block of its HTML page, a fenced block or an indented block (4
  spaces or a tab after a blank line) of its text file;
- LaTeX: it holds MathJax/LaTeX markup (\\( \\[ $$ \\frac \\mathrm \\begin{ ...);
- equation number: it is only a number in brackets, "(117)" or "(3.2)";
- heading-only: a heading that heads no text of its own (followed by another heading, or last),
  which extract keeps as a sentence; the most frequent are listed.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = Path("/usr/share/doc")
KEPT_OUT = re.compile(r"^(python.*|sqlite3.*|bash|bash-doc|debian-reference-.*|rsync|shared-mime-info|libtasn1.*|"
                      r"dpkg|dpkg-dev|git|git-doc)$")
SUFFIXES = (".html", ".htm", ".md", ".rst", ".txt")
_DUMP = """
import json, sys
from pathlib import Path
from sparc_local.ingest.extract import extract, ExtractError
from sparc_local.ingest.sentences import segment
out = {}
for p in sys.argv[1:]:
    try:
        blocks = extract(Path(p))
    except ExtractError:
        continue
    out[p] = [(s.text, bool(blocks[s.block].heads) and blocks[s.block].heads[-1] >= len(blocks[s.block].text))
              for s in segment(blocks)]
print(json.dumps(out))
"""
_PRE = re.compile(r"<pre[^>]*>(.*?)</pre>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
# a LaTeX command, or MathJax's delimiters around text (a Markdown escape "\\[" alone is none)
LATEX = re.compile(r"\\(?:frac|mathrm|mathbf|mathit|begin\{|left|right|sum|int|cdot|times|sqrt|"
                   r"alpha|beta|gamma|delta|sigma|lambda|epsilon|partial|nabla)\b|\\\(.+\\\)|\\\[.+\\\]|\$\$")
SHORT = 20  # a shorter sentence counts as code only when it is a whole code line ("name" is in many)
EQUATION_NUMBER = re.compile(r"^\(\d+(?:\.\d+)*\)$")


def files(docs: Path = DOCS) -> list[Path]:
    return sorted(p for p in docs.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()
                  and not KEPT_OUT.match(p.relative_to(docs).parts[0]))


def _norm(text: str) -> str:
    return " ".join(text.split())


def code_text(path: Path) -> str:
    """The file's code blocks, normalised and joined by a character no sentence holds."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix.lower() in (".html", ".htm"):
        return "\x00".join(_norm(line) for m in _PRE.findall(text) for line in html.unescape(_TAG.sub("", m)).split("\n"))
    blocks, fence, blank = [], False, True
    for line in text.split("\n"):
        if _FENCE.match(line):
            fence = not fence
            continue
        indented = line.startswith(("    ", "\t")) and (blank or (blocks and blocks[-1] is not None))
        if fence or (indented and line.strip()):
            blocks.append(line)
        else:
            blocks.append(None) if line.strip() else None
        blank = not line.strip()
    return "\x00".join(_norm(b) for b in blocks if b)


def is_code(sentence: str, code: str) -> bool:
    if len(sentence) >= SHORT:
        return sentence in code
    return f"\x00{sentence}\x00" in f"\x00{code}\x00"


def sentences(tree: Path, paths: list[Path]) -> dict[str, list[tuple[str, bool]]]:
    out: dict[str, list[tuple[str, bool]]] = {}
    for i in range(0, len(paths), 200):  # argument lists stay short
        chunk = [str(p) for p in paths[i:i + 200]]
        run = subprocess.run([sys.executable, "-c", _DUMP, *chunk], capture_output=True, text=True, check=True,
                             env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, cwd=tree)
        out.update(json.loads(run.stdout))
    return out


def kinds_of(text: str, alone: bool, code: str) -> list[str]:
    t = _norm(text)
    return [k for k, hit in (("code", is_code(t, code)), ("LaTeX", LATEX.search(t) is not None),
                             ("equation number", EQUATION_NUMBER.match(t) is not None), ("heading-only", alone)) if hit]


def answer_kinds(got: dict[str, list[tuple[str, bool]]], codes: dict[str, str]) -> Counter[str]:
    """Per kind, the desk's questions whose answer sentence (in a file it names) is of that kind:
    what dropping that kind would lose for sure."""
    import desk

    out: Counter[str] = Counter()
    for _, names, answer in desk.read_questions():
        want = desk.norm(answer)
        found = {k for n in names.split("|") for text, alone in got.get(str(desk.DESK / n), [])
                 if want in desk.norm(text) for k in kinds_of(text, alone, codes[str(desk.DESK / n)])}
        out.update(found)
        out["questions"] += 1
    return out


def count(tree: Path, base: Path, paths: list[Path], show: int, answers: bool) -> None:
    """Print the kinds of unit the tree's ingest makes of paths (packages' folders in base); with
    ``answers``, the kinds of the selected desk's answer sentences."""
    got = sentences(tree.resolve(), paths)
    codes = {p: code_text(Path(p)) for p in got}
    kinds: dict[str, list[str]] = {"code": [], "LaTeX": [], "equation number": [], "heading-only": []}
    per_package: dict[str, Counter[str]] = {}
    total = 0
    for p, sents in got.items():
        package = Path(p).relative_to(base).parts[0]
        total += len(sents)
        for text, alone in sents:
            for k in kinds_of(text, alone, codes[p]):
                kinds[k].append(_norm(text))
                per_package.setdefault(k, Counter())[package] += 1
    print(f"tree {tree}: {len(got)} files of {len({Path(p).relative_to(base).parts[0] for p in got})} "
          f"packages under {base}, {total} sentences")
    for k, texts in kinds.items():
        top = ", ".join(f"{p} {n}" for p, n in per_package.get(k, Counter()).most_common(4))
        print(f"  {k}: {len(texts)} ({100 * len(texts) / max(total, 1):.1f}%); most in: {top}")
        if k == "heading-only":
            print("    most frequent: " + ", ".join(f"{t!r} {n}" for t, n in Counter(texts).most_common(8)))
        for t in texts[:: max(1, len(texts) // show)][: show] if show else []:
            print(f"    | {t[:110]}")
    if answers:
        found = answer_kinds(got, codes)
        print(f"  answers of the desk's {found.pop('questions')} questions, by kind: "
              + ", ".join(f"{k} {found[k]}" for k in kinds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--show", type=int, default=0, help="examples of each kind")
    ap.add_argument("--desk", help="count a desk's files instead (benchmarks/desk.py --desk), and its answers' kinds")
    ap.add_argument("--docs", type=Path, default=DOCS, help=f"the documentation tree (default {DOCS})")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: tiny documentation, then a tiny desk built here (smoke.py), 2 examples of each kind")
    args = ap.parse_args()
    import desk

    if args.smoke:
        import smoke

        s = smoke.setup()
        docs = smoke.write_tree(s.folder / "doc", smoke.DOC_FILES)
        count(args.tree, docs, files(docs), 2, False)
        rows = smoke.write_desk(s)
        desk.select_desk(rows.name, rows=rows.parent, copies=s.folder / "copy")
        desk.build_desk()
        args.desk = rows.name
    elif args.desk:
        desk.select_desk(args.desk)
    if args.desk:
        count(args.tree, desk.DESK, sorted(p for p in desk.DESK.rglob("*") if p.is_file()), args.show, True)
    else:
        count(args.tree, args.docs, files(args.docs), args.show, False)

if __name__ == "__main__":
    main()
