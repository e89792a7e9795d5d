"""The files and counts of issue 45's structure classes (structure.py --manuals): man pages rendered
three ways, and plain text files with lists and records.

Man pages of this machine (coreutils, tar, findutils, openssh, curl, make, git, systemd: none of
the packages kept out of tuning, nor the software desk's), each rendered with `man` to text
(MANWIDTH=80, as benchmarks/desk.py does), with groff to HTML (`groff -man -Thtml`) and to PDF
through PostScript (`groff -man -Tps | ps2pdf`, whose narrow word gaps PDFium glued), into
~/.cache/sparc-local-bench/manuals. Plain text files: git's release notes (`*` lists), the TODO
files of gzip, zip and unzip, valgrind's README, xz's THANKS (lists without blank lines) and
gnupg's AUTHORS (a `Key: value` stanza), read where Debian installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path.home() / ".cache/sparc-local-bench/manuals"
MAN_PAGES = ["ls", "sort", "tar", "find", "xargs", "ssh", "curl", "make", "git-log", "systemctl"]
TEXTS = ["/usr/share/doc/git/RelNotes/2.38.0.txt", "/usr/share/doc/git/RelNotes/2.30.0.txt",
         "/usr/share/doc/git/RelNotes/2.20.0.txt", "/usr/share/doc/gzip/TODO", "/usr/share/doc/dirmngr/AUTHORS",
         "/usr/share/doc/libksba8/AUTHORS", "/usr/share/doc/libmpfr6/BUGS", "/usr/share/doc/zip/TODO",
         "/usr/share/doc/unzip/ToDo", "/usr/share/doc/valgrind/README", "/usr/share/doc/xz-utils/THANKS",
         "/usr/share/doc/util-linux/release-schedule.txt", "/usr/share/doc/cscope/contrib/webcscope/INSTALL"]
SMOKE_PAGE = """.TH TEAPOT 1 "2026-03-07" "teapot 1.0" "Teapot Manual"
.SH NAME
teapot \\- brew tea
.SH DESCRIPTION
Green leaves steep for two minutes.
"""
_HEAD_WORD = re.compile(r"^(\S+\(\w+\))\s")  # a man page's running head opens with NAME(SECTION)
_SECTION = re.compile(r"^[A-Z][A-Z0-9 /&-]{1,38}[A-Z0-9]$")
_ITEM = re.compile(r"^\s*(?:[*+-]|\d{1,3}[.)])\s+(\S.*)$")
_FIELD = re.compile(r"^([A-Z][\w-]*(?: [\w-]+){0,2}):\s+\S")
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Page:
    text: Path
    html: Path
    pdf: Path
    head: str  # the running head's word, "TAR(1)"
    sections: frozenset[str]  # its section titles


@dataclass(frozen=True)
class Files:
    pages: list[Page]
    texts: list[Path]

    def pdfs(self) -> list[Path]:
        return [p.pdf for p in self.pages]

    def all(self) -> list[Path]:
        return [f for p in self.pages for f in (p.text, p.html, p.pdf)] + self.texts


def _render(name: str, source: Path, out: Path) -> Page:
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    text = out / f"{name}.txt"
    if not text.exists():
        done = subprocess.run(["man", "-E", "UTF-8", "-P", "cat", "-l", str(source)], capture_output=True, text=True,
                              env=env, check=True)
        text.write_text(re.sub(r".\x08", "", done.stdout), encoding="utf-8")
    roff = subprocess.run(["zcat", "-f", str(source)], capture_output=True, check=True).stdout
    html, pdf = out / f"{name}.html", out / f"{name}.pdf"
    if not html.exists():
        html.write_bytes(subprocess.run(["groff", "-t", "-man", "-Thtml"], input=roff, capture_output=True,
                                        cwd=html.parent).stdout)
    if not pdf.exists():
        ps = subprocess.run(["groff", "-t", "-man", "-Tps"], input=roff, capture_output=True).stdout
        subprocess.run(["ps2pdf", "-", str(pdf)], input=ps, capture_output=True, check=True)
    lines = [ln for ln in text.read_text(encoding="utf-8").splitlines() if ln.strip()]
    m = _HEAD_WORD.match(lines[0]) if lines else None
    return Page(text, html, pdf, m.group(1) if m else "", frozenset(ln for ln in lines if _SECTION.match(ln)))


def build(smoke: bool = False) -> Files | None:
    """The files (rendered once, kept under OUT); None when man, groff or ps2pdf is missing."""
    if any(shutil.which(tool) is None for tool in ("man", "groff", "ps2pdf")):
        return None
    out = OUT / ("smoke" if smoke else "pages")
    out.mkdir(parents=True, exist_ok=True)
    if smoke:
        source = out / "teapot.1"
        source.write_text(SMOKE_PAGE)
        return Files([_render("teapot", source, out)], [])
    pages = []
    for name in MAN_PAGES:
        found = sorted(Path("/usr/share/man/man1").glob(f"{name}.1*"))
        if found:
            pages.append(_render(name, found[0], out))
    texts = [Path(t) for t in TEXTS if Path(t).exists()]
    if not pages or not texts:
        sys.exit("no man pages or text files: see manuals.py's docstring")
    return Files(pages, texts)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[^\W_]+", text.lower()))


def _titles(page: Page) -> set[str]:
    """A man page's titles in every rendering: its sections, its HTML headings and <title>, its
    PDF bookmarks."""
    import pypdfium2 as pdfium

    html = page.html.read_text(encoding="utf-8", errors="replace")
    found = set(page.sections) | set(re.findall(r"<(?:h[1-6]|title)[^>]*>(.*?)</(?:h[1-6]|title)>", html, re.S | re.I))
    doc = pdfium.PdfDocument(page.pdf)
    try:
        found |= {item.title for item in doc.get_toc()}
    finally:
        doc.close()
    return {_norm(_TAG.sub(" ", t)) for t in found} - {""}


def _groups(path: Path) -> tuple[list[list[str]], set[str]]:
    """A plain text file's lists (each item's first words) and stanzas (each field's key), and its
    titles (lines underlined with = or -, lines that lead a list in)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    groups: list[list[str]] = []
    titles: set[str] = set()
    current: list[str] = []
    kind = ""
    for i, line in enumerate(lines):
        item, field = _ITEM.match(line), _FIELD.match(line)
        if item:
            if kind != "item":
                current, kind = [], "item"
                groups.append(current)
            current.append(" ".join(item.group(1).split()[:4]))
        elif field and (kind == "field" or (i + 1 < len(lines) and _FIELD.match(lines[i + 1]))):
            if kind != "field" or not current:
                current, kind = [], "field"
                groups.append(current)
            current.append(field.group(1) + ":")
        elif re.match(r"^\s*([=-])\1{2,}\s*$", line) and i and lines[i - 1].strip():
            titles.add(_norm(lines[i - 1]))
        elif not line.strip() and kind == "field":
            kind = ""
    return [g for g in groups if len(g) > 1], titles


def counts(files: Files, got: dict[str, list[str]]) -> dict[str, int]:
    """Issue 45's defect counts over what ``got`` (file -> its sentences) holds."""
    head = title = merged = 0
    for page in files.pages:
        titles = _titles(page)
        for f in (page.text, page.html, page.pdf):
            sents = got[str(f)]
            head += sum(bool(page.head) and page.head in s for s in sents)
            title += sum(_norm(s) in titles for s in sents)
    for f in files.texts:
        groups, titles = _groups(f)
        sents = got[str(f)]
        title += sum(_norm(s) in titles for s in sents)
        merged += sum(any(sum(part in s for part in set(g)) > 1 for g in groups) for s in sents)
    return {"header/footer lines indexed": head, "title-only sentences": title,
            "list items and records merged": merged}
