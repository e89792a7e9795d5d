"""Page furniture (running heads, footers, page numbers), told by the document's own repetition.

One rule for every paged text: a PDF's pages (PDFium's lines), a plain text file's (pages at form
feeds; a man page that `man` renders is one page, its head on the first line and its foot on the
last) and an HTML page's blocks (groff's HTML of a man page keeps its head and foot). Only lines at a page's edge can be furniture, and only when the document repeats them:
at the same edge of several pages, with the page's number, or, in a text laid out in columns, as a
column another edge line holds too (`TAR(1)   GNU TAR Manual   TAR(1)` ... `TAR   July 13, 2020
TAR(1)`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

RUNNING_EDGE = 2  # lines at the top and at the bottom of a page where running heads and page numbers sit
RUNNING_PAGES = 3  # pages a running head must recur on to be recognised as one
_DIGITS = re.compile(r"\d+")
_EDGE_NUMBER = re.compile(r"^(\d{1,5})\b|\b(\d{1,5})$")
_NAME = re.compile(r"[^\W_]")  # a column without a letter or digit (ASCII art) names nothing
_PROSE_END = re.compile(r"[.!?]$")  # "Helped with portability.": prose with two spaces, never a running head
_GAP = re.compile(r"\s{2,}")  # between the columns of a line laid out with spaces (a man page's head)


def _edge_number(line: str) -> int | None:
    m = _EDGE_NUMBER.search(line)
    return int(m.group(1) or m.group(2)) if m else None


def _key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()))


def _columns(line: str) -> list[str]:
    """The columns of a line laid out with runs of 2+ spaces (or pushed right by them, as a man
    page's foot with nothing on its left; a line that opens and ends with the same word has it
    twice), those that can be furniture (words that end no sentence); [] for a line of one column
    at the margin."""
    parts = [p for p in _GAP.split(line.rstrip()) if p]
    words = line.split()
    if len(parts) < 2 and len(words) >= 3 and words[0] == words[-1]:
        parts = [words[0], words[-1]]  # "SSH(1) BSD General Commands Manual SSH(1)", its spaces collapsed (HTML)
    elif len(parts) < 2 and not _GAP.match(line):
        return []
    return [p for p in parts if _NAME.search(p) and not _PROSE_END.search(p)]


def running_lines(pages: Sequence[tuple[int, Sequence[str]]]) -> list[tuple[int, int]]:
    """Per page (its number and its non-blank lines), the range [first, last) of its lines that
    are not furniture. A line among the first or last RUNNING_EDGE lines of a page goes when it
    recurs there on RUNNING_PAGES pages or more, its numbers aside ("Shared MIME-info Database");
    when it starts or ends with the printed page number, i.e. the page's number plus an offset
    that RUNNING_PAGES pages share ("Chapter 3: Utilities 7" on the 9th page of a book whose
    page 1 is its 3rd); or when it is laid out in columns and one of them is a column of the
    same or another edge line of the document (a man page's head repeats its title, its foot
    the head's). Lines go from the edge inwards, so text between two kept lines always stays."""

    def edge(lines: Sequence[str]) -> list[tuple[str, str]]:
        return [("top", ln) for ln in lines[:RUNNING_EDGE]] + [("bottom", ln) for ln in lines[-RUNNING_EDGE:]]

    recurring: Counter[tuple[str, str]] = Counter()
    offsets: Counter[int] = Counter()
    column_lines: Counter[str] = Counter()  # how many edge lines hold each column (a line's twice: once)
    seen_edges: set[tuple[int, int]] = set()
    for p, (number, lines) in enumerate(pages):
        recurring.update({(where, _key(ln)) for where, ln in edge(lines)})
        offsets.update({n - number for _, ln in edge(lines) if (n := _edge_number(ln)) is not None})
        for i in [*range(min(RUNNING_EDGE, len(lines))), *range(max(0, len(lines) - RUNNING_EDGE), len(lines))]:
            if (p, i) not in seen_edges:
                seen_edges.add((p, i))
                cols = _columns(lines[i])
                column_lines.update(set(cols))
                column_lines.update(c for c, n in Counter(cols).items() if n > 1)  # repeated within the line
    running = {key for key, count in recurring.items() if count >= RUNNING_PAGES}
    page_offsets = {off for off, count in offsets.items() if count >= RUNNING_PAGES}

    def furniture(where: str, line: str, number: int) -> bool:
        n = _edge_number(line)
        return ((where, _key(line)) in running or (n is not None and n - number in page_offsets)
                or any(column_lines[c] > 1 for c in _columns(line)))

    out = []
    for number, lines in pages:
        first, last = 0, len(lines)
        while first < min(RUNNING_EDGE, last) and furniture("top", lines[first], number):
            first += 1
        while last > max(first, len(lines) - RUNNING_EDGE) and furniture("bottom", lines[last - 1], number):
            last -= 1
        out.append((first, last))
    return out


def text_furniture(lines: Sequence[str]) -> set[int]:
    """Indexes of a text file's lines that are furniture (``running_lines``), its pages split at
    form feeds."""
    pages: list[tuple[int, list[int]]] = [(1, [])]
    for i, line in enumerate(lines):
        if "\f" in line:
            pages.append((len(pages) + 1, []))
        if line.replace("\f", "").strip():
            pages[-1][1].append(i)
    if all(not found for _, found in pages):
        return set()
    kept = running_lines([(n, [lines[i].replace("\f", "") for i in found]) for n, found in pages])
    return {i for (_, found), (first, last) in zip(pages, kept) for i in found[:first] + found[last:]}
