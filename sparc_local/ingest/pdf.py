"""The PDF reader: PDFium's text per page (pypdfium2), running heads, footers and page numbers dropped, lines
joined into paragraphs. Every failure is an ExtractError with a one-line reason."""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path

from sparc_local.ingest.plaintext import BULLET, ITEM, NUMBERED_TITLE
from sparc_local.ingest.readers import ExtractError, RawBlock, Read, norm_text, one_line

# Typographic ligatures as their letters: a PDF's text layer gives a ligature glyph's own code
# point (U+FB01 for "fi"), which the tokenizer keeps as one piece, so "ﬁeld" never matches the
# "field" a question types (NFKC would map them, and much else besides).
LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                           "\ufb05": "st", "\ufb06": "st"})
_SENTENCE_END = re.compile(r"[.!?:;][\"'”’)\]]*$")
_HYPHEN_END = re.compile(r"(?<=[^\W\d_])-$")


def _join_lines(lines: list[str]) -> str:
    """Unwrap lines, undoing end-of-line hyphenation ("exam-" + "ple")."""
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if out and _HYPHEN_END.search(out) and line[0].islower():
            out = out[:-1] + line
        else:
            out = f"{out} {line}" if out else line
    return out


def _pdf_paragraphs(text: str) -> list[tuple[str, bool]]:
    """Paragraphs of one page, and whether each is a numbered title ("4.3. Good password"): at
    blank lines, else where a short line ends a sentence/heading; a list item ("• ...") and a
    numbered title always start their own."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if re.search(r"\n[ \t]*\n", text):
        return [p for c in re.split(r"\n[ \t]*\n", text) for p in _units(c.split("\n"))]
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if not lines:
        return []
    lengths = sorted(len(ln) for ln in lines)
    typical = lengths[int(0.9 * (len(lengths) - 1))]
    paras: list[list[str]] = [[]]
    for i, line in enumerate(lines):
        paras[-1].append(line)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        short = len(line) < 0.75 * typical
        if nxt and short and (_SENTENCE_END.search(line) or nxt[0].isupper() or BULLET.match(nxt)):
            paras.append([])
    return [p for lines in paras for p in _units(lines)]


def _units(lines: list[str]) -> list[tuple[str, bool]]:
    """Lines of one paragraph cut before each list item and around each numbered title."""
    out: list[tuple[str, bool]] = []
    run: list[str] = []
    for line in lines:
        title = NUMBERED_TITLE.match(line) is not None
        if run and (title or ITEM.match(line)):
            out.append((_join_lines(run), False))
            run = []
        if title:
            out.append((line.strip(), True))
        elif line.strip():
            run.append(line)
    if run:
        out.append((_join_lines(run), False))
    return out


RUNNING_EDGE = 2  # lines at the top and at the bottom of a page where running heads and page numbers sit
RUNNING_PAGES = 3  # pages a running head must recur on to be recognised as one
_DIGITS = re.compile(r"\d+")
_EDGE_NUMBER = re.compile(r"^(\d{1,5})\b|\b(\d{1,5})$")


def _edge_number(line: str) -> int | None:
    m = _EDGE_NUMBER.search(line)
    return int(m.group(1) or m.group(2)) if m else None


def _drop_running_lines(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Pages without their running heads, footers and page numbers. A line among the first or last
    RUNNING_EDGE lines of a page goes when it recurs there on RUNNING_PAGES pages or more, its
    numbers aside ("Shared MIME-info Database"), or when it starts or ends with the printed page
    number, i.e. the page's number plus an offset that RUNNING_PAGES pages share ("Chapter 3:
    Utilities 7" on the 9th page of a book whose page 1 is its 3rd)."""
    split = [[ln.strip() for ln in text.replace("\r", "\n").split("\n") if ln.strip()] for _, text in pages]

    def edge(lines: list[str]) -> list[tuple[str, str]]:
        return [("top", ln) for ln in lines[:RUNNING_EDGE]] + [("bottom", ln) for ln in lines[-RUNNING_EDGE:]]

    recurring: Counter[tuple[str, str]] = Counter()
    offsets: Counter[int] = Counter()
    for (number, _), lines in zip(pages, split):
        recurring.update({(where, _DIGITS.sub("#", ln)) for where, ln in edge(lines)})
        offsets.update({n - number for _, ln in edge(lines) if (n := _edge_number(ln)) is not None})
    running = {key for key, count in recurring.items() if count >= RUNNING_PAGES}
    page_offsets = {off for off, count in offsets.items() if count >= RUNNING_PAGES}

    def furniture(where: str, line: str, number: int) -> bool:
        n = _edge_number(line)
        return (where, _DIGITS.sub("#", line)) in running or (n is not None and n - number in page_offsets)

    out = []
    for (number, text), lines in zip(pages, split):
        first, last = 0, len(lines)
        while first < min(RUNNING_EDGE, last) and furniture("top", lines[first], number):
            first += 1
        while last > max(first, len(lines) - RUNNING_EDGE) and furniture("bottom", lines[last - 1], number):
            last -= 1
        raw = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        full = [i for i, ln in enumerate(raw) if ln.strip()]  # raw index of each line in `lines`
        gone = {full[i] for i in range(first)} | {full[i] for i in range(last, len(lines))}
        out.append((number, "\n".join(ln for i, ln in enumerate(raw) if i not in gone)))
    return out


_PDFIUM_LOCK = threading.Lock()  # PDFium is not thread-safe (the watcher and `index` may share a process)
# PDFium joins a line that ends in a hyphen it judges soft to the next, the hyphen as U+0002 (or
# U+FFFE): the line break comes back, for the paragraph rules, and _join_lines undoes the hyphen
_SOFT_HYPHENS = str.maketrans({"\x02": "-\n", "\ufffe": "-\n"})
_PDFIUM_ERROR = re.compile(r"PDFium: ([^)]+)")


def _page_texts(path: Path, max_chars: int) -> tuple[list[tuple[int, str]], list[Exception]]:
    """(1-based page number, text) per page, by PDFium (pypdfium2), up to about max_chars.

    PDFium places words by their glyph positions, so it keeps the spaces that LaTeX's PDFs draw
    as gaps: 4.5 words per 1,000 unknown to both the vocabulary and pdftotext on five Debian
    manuals, against 26.8 for pypdf (which glued "inahistory", "defaultsto") and 14.5 for
    pdfminer.six, and 18 times faster than pypdf (`benchmarks/pdf_text.py`)."""
    import pypdfium2 as pdfium

    with _PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(path)
        except pdfium.PdfiumError as e:
            if "password" in str(e).lower():
                raise ExtractError("encrypted PDF") from e
            m = _PDFIUM_ERROR.search(str(e))
            raise ExtractError(f"not a valid PDF ({m.group(1) if m else one_line(e)})") from e
        try:
            n = len(doc)
            if n == 0:
                raise ExtractError("PDF has no pages")
            texts: list[tuple[int, str]] = []
            errors: list[Exception] = []
            total = 0
            for i in range(n):
                try:
                    page = doc[i]
                    text = page.get_textpage().get_text_bounded()
                except pdfium.PdfiumError as e:
                    errors.append(e)
                    continue
                texts.append((i + 1, text.translate(LIGATURES).translate(_SOFT_HYPHENS)))
                total += len(text)
                if total > max_chars:
                    break
            return texts, errors
        finally:
            doc.close()


def pdf_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    with open(path, "rb") as fh:
        if b"%PDF-" not in fh.read(1024):
            raise ExtractError("not a valid PDF (no %PDF header)")
    texts, errors = _page_texts(path, max_chars)
    out: list[RawBlock] = []
    for number, text in _drop_running_lines(texts):
        out.extend(RawBlock(p, number, None, (), title) for p, title in _pdf_paragraphs(text))
    if not any(norm_text(b[0]) for b in out):
        if errors:
            raise ExtractError(f"not a valid PDF ({one_line(errors[0])})")
        raise ExtractError("no text layer (scanned PDF?)")
    return out, False
