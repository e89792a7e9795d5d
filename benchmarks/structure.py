"""Document-structure defects in the sentences ingest makes of real files (issue 32), before/after.

    python benchmarks/structure.py                      # this tree
    python benchmarks/structure.py --tree ../main       # another checkout's ingest (before)
    python benchmarks/structure.py --smoke              # tiny PDFs, HTML and Markdown (smoke.py)
    python benchmarks/structure.py --manuals            # also issue 45's classes on man pages and text files

Files: the PDFs of benchmarks/pdf_text.py (~/.cache/sparc-local-bench/pdfs/set), valgrind's
HTML manual (/usr/share/doc/valgrind/html, `apt-get install valgrind`) and libcurl's Markdown notes
(/usr/share/doc/libcurl4/*.md): Debian documentation, none of the packages kept out of tuning. Each tree's `extract` + `segment` runs in a subprocess.
Counts, per defect class:

- glued/split PDF words per 1,000: words unknown to the vocabulary and to pdftotext (pdf_text.py);
- question lines returned as answers: sentences that are one question (after "(1)", "Q:") and are
  followed by more text in the file;
- headings inside sentences: sentences whose words start with an HTML (h1-h6) or Markdown (ATX or
  setext) heading's words and go on, compared on lowercased words so markup does not hide one;
- table cells as sentences: sentences equal to one cell of an HTML table row of 2+ cells;
- list items merged: sentences holding two or more items of one HTML list (or two "•").

With --manuals (issue 45; manuals.py builds the files), on man pages of packages not kept out of
tuning, each rendered three ways (`man` to text, groff to HTML, groff to PostScript and ps2pdf to
PDF, with its narrow word gaps), and on plain text files of /usr/share/doc with lists and records:

- header/footer lines indexed: sentences holding the page's running head word (`TAR(1)`);
- title-only sentences: sentences that are a title and nothing else (a man page's section, an
  HTML heading or <title>, a Markdown or underlined text heading, a PDF bookmark);
- glued/split words per 1,000 on the groff PDFs, as above;
- list items and records merged: sentences holding two or more items of one plain-text list
  (`*`, `-`, `+`, `1.`) or two or more fields of one `Key: value` stanza.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
from pathlib import Path

from pdf_text import DEFAULT_PDFS, defects, reference, vocabulary, words

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = Path("/usr/share/doc/valgrind/html")
MARKDOWN_DIR = Path("/usr/share/doc/libcurl4")
_ATX = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_SETEXT = re.compile(r"^(\S.*)\n(?:=+|-+)\s*$", re.M)
_WORDS = re.compile(r"\w+")
_DUMP = """
import json, sys
from pathlib import Path
from sparc_local.ingest.extract import extract
from sparc_local.ingest.sentences import segment
print(json.dumps({p: [s.text for s in segment(extract(Path(p)))] for p in sys.argv[1:]}))
"""
_TAG = re.compile(r"<[^>]+>")


def _clean(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split()).rstrip("¶ ")


def sentences(tree: Path, files: list[Path]) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", _DUMP, *map(str, files)], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, cwd=tree)
    return json.loads(out.stdout)


def _question(text: str) -> bool:
    from sparc_local.ingest.extract import is_question

    return is_question(text)


def glued_headings(heads: set[str], sents: list[str]) -> int:
    """Sentences whose words begin with a heading's words and go on past them."""
    head_words = {tuple(_WORDS.findall(h.lower())) for h in heads} - {()}
    count = 0
    for s in sents:
        w = tuple(_WORDS.findall(s.lower()))
        count += any(len(w) > len(h) and w[:len(h)] == h for h in head_words)
    return count


def markdown_defects(path: Path, sents: list[str]) -> dict[str, int]:
    text = path.read_text(encoding="utf-8", errors="replace")
    heads = {h.strip() for h in _ATX.findall(text) + _SETEXT.findall(text)}
    return {"headings inside sentences": glued_headings(heads, sents)}


def html_defects(path: Path, sents: list[str]) -> dict[str, int]:
    page = path.read_text(encoding="utf-8", errors="replace")
    heads = {_clean(h) for h in re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", page, re.S | re.I)} - {""}
    cells: set[str] = set()
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S | re.I):
        found = [_clean(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S | re.I)]
        if len([c for c in found if c]) > 1:
            cells.update(c for c in found if c)
    items = [[_clean(i) for i in re.findall(r"<li[^>]*>(.*?)</li>", lst, re.S | re.I)]
             for lst in re.findall(r"<[uo]l[^>]*>(.*?)</[uo]l>", page, re.S | re.I)]
    return {
        "headings inside sentences": glued_headings(heads, sents),
        "table cells as sentences": sum(s in cells for s in sents),
        "list items merged": sum(any(sum(i in s for i in lst if len(i) > 3) > 1 for lst in items) for s in sents),
        "question lines as answers": sum(_question(s) for s in sents[:-1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    ap.add_argument("--html", type=Path, default=HTML_DIR, help=f"a folder of HTML pages (default {HTML_DIR})")
    ap.add_argument("--markdown", type=Path, default=MARKDOWN_DIR,
                    help=f"a folder of Markdown files (default {MARKDOWN_DIR})")
    ap.add_argument("--manuals", action="store_true", help="also issue 45's classes (manuals.py builds the files)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: two tiny hand-written PDFs, a tiny HTML page and Markdown file, the tiny test "
                         "model's vocabulary (smoke.py)")
    args = ap.parse_args()
    model = None
    if args.smoke:
        import smoke

        s = smoke.setup()
        docs = smoke.write_tree(s.folder / "doc", smoke.DOC_FILES)
        args.pdfs, args.html, args.markdown, model = smoke.write_pdfs(s), docs / "teadoc" / "html", docs / "teadoc", s.model
    pdfs = sorted(args.pdfs.glob("*.pdf"))
    pages = sorted(args.html.glob("*.html"))
    notes = sorted(args.markdown.glob("*.md"))
    if not pdfs or not pages or not notes:
        sys.exit("missing files: see this file's docstring")
    got = sentences(args.tree.resolve(), pdfs + pages + notes)
    vocab = vocabulary(model)
    pdftotext = reference(args.smoke)
    n_words = n_bad = 0
    counts: dict[str, int] = {}
    for f in pdfs:
        text = "\n".join(got[str(f)])
        n_words += len(words(text))
        n_bad += len(defects(text, set(words(pdftotext(f))), vocab))
        counts["question lines as answers"] = counts.get("question lines as answers", 0) + sum(
            _question(s) for s in got[str(f)][:-1])
        counts["list items merged"] = counts.get("list items merged", 0) + sum(s.count("•") > 1 for s in got[str(f)])
    for f in pages + notes:
        for k, v in (html_defects if f in pages else markdown_defects)(f, got[str(f)]).items():
            counts[k] = counts.get(k, 0) + v
    n_sents = sum(len(v) for v in got.values())
    print(f"tree {args.tree}: {len(pdfs)} PDFs, {len(pages)} HTML pages, {len(notes)} Markdown files, "
          f"{n_sents} sentences")
    print(f"  glued/split PDF words per 1,000: {1000 * n_bad / max(n_words, 1):.1f} ({n_bad} of {n_words})")
    for k in sorted(counts):
        print(f"  {k}: {counts[k]}")
    if args.manuals or args.smoke:
        import manuals

        files = manuals.build(smoke=args.smoke)
        if files is None:
            print("man, groff or ps2pdf is not installed: issue 45's classes skipped")
            return
        got = sentences(args.tree.resolve(), files.all())
        print(f"issue 45: {len(files.pages)} man pages (text, HTML, PDF), {len(files.texts)} plain text files, "
              f"{sum(len(v) for v in got.values())} sentences")
        n_words = n_bad = 0
        for f in files.pdfs():
            text = "\n".join(got[str(f)])
            n_words += len(words(text))
            n_bad += len(defects(text, set(words(pdftotext(f))), vocab))
        print(f"  glued/split words per 1,000 on groff PDFs: {1000 * n_bad / max(n_words, 1):.1f} ({n_bad} of {n_words})")
        for k, v in manuals.counts(files, got).items():
            print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
