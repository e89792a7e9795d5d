"""The PDF reader: PDFium's text per page (pypdfium2), running heads, footers and page numbers dropped, lines
joined into paragraphs. Every failure is an ExtractError with a one-line reason."""

from __future__ import annotations

import ctypes
import re
import threading
from pathlib import Path

from sparc_local.ingest.furniture import running_lines
from sparc_local.ingest.plaintext import BULLET, ITEM, MAN_SECTION, NUMBERED_TITLE
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
    """Paragraphs of one page, and whether each is a title (``_units``, ``_short_titles``): at
    blank lines, else where a short line ends a sentence/heading, or before a short line that ends
    none between a sentence's end and a capital (a title); a list item ("• ...") and a numbered
    title always start their own."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if re.search(r"\n[ \t]*\n", text):
        return _short_titles([p for c in re.split(r"\n[ \t]*\n", text) for p in _units(c.split("\n"))])
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
        after = lines[i + 2] if i + 2 < len(lines) else ""
        title_next = (_SENTENCE_END.search(line) and len(nxt) < 0.75 * typical and not _SENTENCE_END.search(nxt)
                      and after[:1].isupper())  # "...boils." / "Serving" / "Pour the tea...": a title between
        if nxt and ((short and (_SENTENCE_END.search(line) or nxt[0].isupper() or BULLET.match(nxt))) or title_next):
            paras.append([])
    return _short_titles([p for lines in paras for p in _units(lines)])


SHORT_TITLE_WORDS = 8  # a paragraph of at most this many words, no sentence, before prose: a heading
_HAS_SENTENCE = re.compile(r"[.!?][\"'”’)\]]*(?:\s|$)")


def _short_titles(units: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Units with the short ones that head prose marked as titles ("Serving" above "Pour the
    tea..."): a capitalised paragraph of a few words that ends no sentence, followed by one that
    holds a sentence. Context of that prose, never an answer (issue 45)."""
    out = list(units)
    for i, ((text, title), (after, after_title)) in enumerate(zip(units, units[1:])):
        if (not title and not after_title and text[:1].isupper() and len(text.split()) <= SHORT_TITLE_WORDS
                and not _HAS_SENTENCE.search(text) and _HAS_SENTENCE.search(after)):
            out[i] = (text, True)
    return out


TITLE_PAGE_LINES = 8  # a page of at most this many lines, none of which ends a sentence, is a title page
_ENDS_SENTENCE = re.compile(r"[.!?][\"'”’)\]]*$")


def _title_page(text: str) -> bool:
    """A title page (the title, subtitle, version, authors): a few lines and no sentence. Its lines
    are titles, the context of what follows, never an answer."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    return 0 < len(lines) <= TITLE_PAGE_LINES and not any(_ENDS_SENTENCE.search(ln) for ln in lines)


def _units(lines: list[str]) -> list[tuple[str, bool]]:
    """Lines of one paragraph cut before each list item and around each title: numbered ("4.3.
    Good password"), or a man page's section ("SYNOPSIS")."""
    out: list[tuple[str, bool]] = []
    run: list[str] = []
    for line in lines:
        title = NUMBERED_TITLE.match(line) is not None or MAN_SECTION.match(line.strip()) is not None
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


def _drop_running_lines(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Pages without their running heads, footers and page numbers (``furniture.running_lines``)."""
    raws = [text.replace("\r\n", "\n").replace("\r", "\n").split("\n") for _, text in pages]
    fulls = [[i for i, ln in enumerate(raw) if ln.strip()] for raw in raws]  # raw index of each non-blank line
    kept = running_lines([(number, [raw[i].strip() for i in full]) for (number, _), raw, full in zip(pages, raws, fulls)])
    out = []
    for (number, _), raw, full, (first, last) in zip(pages, raws, fulls, kept):
        gone = set(full[:first]) | set(full[last:])
        out.append((number, "\n".join(ln for i, ln in enumerate(raw) if i not in gone)))
    return out


_PDFIUM_LOCK = threading.Lock()  # PDFium is not thread-safe (the watcher and `index` may share a process)
# PDFium joins a line that ends in a hyphen it judges soft to the next, the hyphen as U+0002 (or
# U+FFFE): the line break comes back, for the paragraph rules, and _join_lines undoes the hyphen
_SOFT_HYPHENS = str.maketrans({"\x02": "-\n", "\ufffe": "-\n"})
_PDFIUM_ERROR = re.compile(r"PDFium: ([^)]+)")


# Two characters of a line farther apart than this share of the line's height (a glyph's loose box:
# its font's ascent to descent) are two words: groff draws narrow word spaces as gaps that PDFium
# does not take for spaces ("anyexisting"), pdftotext does (benchmarks/pdf_text.py).
WORD_GAP = 0.1
_BREAKS = frozenset("\x02\ufffe")


def _spaced_text(textpage, bounds: tuple[float, float, float, float]) -> str:  # noqa: ANN001  (a PdfTextPage)
    """A page's text as PDFium's bounded text gives it (the characters on the page, ``bounds``:
    left, bottom, right, top; a line break where a line's characters resume after a break), with
    a space wherever two characters of one line stand a word gap apart (WORD_GAP) with none
    between them."""
    import pypdfium2.raw as pdfium_c

    x0, y0, x1, y1 = bounds
    text = textpage.get_text_range()
    out: list[str] = []
    rect = pdfium_c.FS_RECTF()
    x, y = ctypes.c_double(), ctypes.c_double()
    line_y: float | None = None  # where the current line's first character sits
    after_char = after_break = False  # the last character was kept; one was left out since
    prev: tuple[float, float, float] | None = None  # the previous kept character's right, bottom, top
    for k, c in enumerate(text):
        found = pdfium_c.FPDFText_GetLooseCharBox(textpage, k, rect)
        left, right, bottom, top = rect.left, rect.right, rect.bottom, rect.top
        if found and left < x1 and right > x0 and bottom < y1 and top > y0 and left < right and bottom < top \
                and c not in "\r\n":
            if after_break and not after_char:
                pdfium_c.FPDFText_GetCharOrigin(textpage, k, x, y)
                if line_y != y.value:
                    line_y = y.value
                    if out:
                        out.append("\r\n")
                        prev = None
            if c.isspace() or c in _BREAKS:
                prev = None
            else:
                if (prev is not None and bottom < prev[2] and prev[1] < top
                        and left - prev[0] > WORD_GAP * (top - bottom)):
                    out.append(" ")
                prev = (right, bottom, top)
            after_char, after_break = True, False
            out.append(c)
        elif c == " ":
            if after_char:
                out.append(" ")
                after_char = after_break = False
            prev = None
        else:
            after_char, after_break, prev = False, True, None
    return "".join(out)


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
                    text = _spaced_text(page.get_textpage(), page.get_bbox())
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
        cover = _title_page(text)
        out.extend(RawBlock(p, number, None, (), title or cover) for p, title in _pdf_paragraphs(text))
    if not any(norm_text(b[0]) for b in out):
        if errors:
            raise ExtractError(f"not a valid PDF ({one_line(errors[0])})")
        raise ExtractError("no text layer (scanned PDF?)")
    return out, False
