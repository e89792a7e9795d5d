"""Plain text, Markdown and reStructuredText: a text file's lines to raw paragraphs (RawBlock).

Headings (Markdown #, rst underlines, a plain text's underlined title or the line that leads a list
in, numbered titles such as "4.3. Good password") become the heading of the block they open, list
items (`*`, `-`, `+`, `1.`) and a plain text's `Key: value` record fields are blocks of their own
(a stanza's first field heads the others), a page's running head and foot are dropped
(furniture.py), code fences and rst markup are dropped. The PDF reader shares the list-item and
title patterns.
"""

from __future__ import annotations

import re
from pathlib import Path

from sparc_local.ingest.furniture import text_furniture
from sparc_local.ingest.readers import RawBlock, Read, norm_text, read_text

_MD_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s+|$)")
BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
ITEM = re.compile(r"^\s*[•◦▪‣∙·]\s*\S")  # a list item's glyph, which prose never starts a line with
# "4.3. Good password", "2.1 Overview": a section number of two levels or more, then a short title
NUMBERED_TITLE = re.compile(r"^\s*\d{1,3}(?:\.\d{1,3})+\.?\s+[A-Z][^.!?:;,]{0,78}$")
# a man page's section title as `man` renders it to text: "BUGS", "REPORTING BUGS" at the margin,
# its text indented on the next line
MAN_SECTION = re.compile(r"^[A-Z][A-Z0-9 /&-]{1,38}[A-Z0-9]$|^[A-Z]$")
_MD_CLOSING_HASHES = re.compile(r"(^|\s+)#+\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_RULE = re.compile(r"^\s*([=\-~^*#+_`:'\".])\1{2,}\s*$")
_MD_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]^][^\]]*\]:\s*\S")  # [label]: url "title", never prose
_MD_FOOTNOTE = re.compile(r"^\s{0,3}\[\^[^\]]+\]:\s*")  # [^1]: a footnote's prose follows
# `.. name:: argument`, `.. _target: url`, `.. |sub| image:: x`: markup lines. An admonition's
# argument is its first words of prose (`.. note:: Mind the gap.`); other arguments are labels,
# paths or languages (`.. tab:: Unix/macOS`, `.. code-block:: console`).
_RST_MARKUP = re.compile(r"^\s*\.\.\s+(?:(?P<name>[\w.+-]+(?::[\w.+-]+)?)::|_[^:]*:|\|[^|]+\|\s+[\w-]+::)(?P<rest>.*)$")
_RST_ADMONITIONS = frozenset("admonition attention caution danger error hint important note seealso tip warning".split())
_MD_IMAGE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_EMPHASIS = re.compile(r"(\*\*|__|\*|`)(?=\S)(.+?)(?<=\S)\1")


def plain_text(path: Path, max_chars: int, max_unpacked: int, markup: str | None = None) -> Read:
    """A text file; markup 'md'/'rst' (see text_blocks)."""
    text, cut = read_text(path, max_chars)
    return text_blocks(text, markup), cut


def _man_section(line: str, lines: list[str], lineno: int) -> bool:
    """A man page's section title: MAN_SECTION, with the next line's text indented under it."""
    following = lines[lineno] if lineno < len(lines) else ""
    return bool(MAN_SECTION.match(line)) and following[:1] in (" ", "\t") and bool(following.strip())


def text_blocks(text: str, markup: str | None) -> list[RawBlock]:
    """Paragraphs split at blank lines; markup 'md'/'rst' strips headings, bullets, rules; plain text
    (None) makes units of list items and record fields under their heading (issue 45)."""
    lines = text.split("\r") if "\n" not in text and "\r" in text else text.split("\n")
    out: list[RawBlock] = []
    para: list[tuple[int, str]] = []

    def flush(heading: bool = False) -> None:
        if para:
            parts, starts, pos = [], [], 0
            for _, s in para:
                starts.append(pos)
                parts.append(s)
                pos += len(s) + 1
            out.append(RawBlock(" ".join(parts), None, para[0][0], tuple(starts[1:]), heading))
            para.clear()

    in_fence = False
    furniture = text_furniture(lines)
    fields = {} if markup else _record_fields(lines)
    last_text: int | None = None  # the line of the last paragraph when it was one line (a list's lead-in?)
    items: set[int] = set()  # the lines where a plain text's list items start
    for lineno, raw in enumerate(lines, 1):
        line = "" if lineno - 1 in furniture else raw
        if markup == "md" and _MD_FENCE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if markup and not in_fence:
            if _RULE.match(line):  # rst adornment, md rule or setext underline
                # one line right above an underline is a title (rst, setext)
                flush(heading=len(para) == 1 and para[0][0] == lineno - 1)
                continue
            if markup == "md" and _MD_LINK_DEF.match(line):
                flush()
                continue
            if markup == "md" and _MD_FOOTNOTE.match(line):
                flush()
                line = _MD_FOOTNOTE.sub("", line, count=1)
            directive = _RST_MARKUP.match(line) if markup == "rst" else None
            if directive:
                flush()
                if directive["name"] not in _RST_ADMONITIONS:
                    continue
                line = directive["rest"]
            if markup == "md" and _MD_HEADING.match(line):
                flush()
                para.append((lineno, norm_text(_MD_CLOSING_HASHES.sub("", _MD_HEADING.sub("", line)))))
                flush(heading=True)
                continue
            if BULLET.match(line):
                flush()
                line = BULLET.sub("", line, count=1)
            if markup == "md":
                line = _QUOTE.sub("", line)
                line = _MD_EMPHASIS.sub(r"\2", _MD_IMAGE_LINK.sub(r"\1", line))
        elif not in_fence and (ITEM.match(line) or NUMBERED_TITLE.match(line) or _man_section(line, lines, lineno)):
            flush()  # plain text: a list item is a unit of its own, a title heads its text
            if not ITEM.match(line):
                para.append((lineno, norm_text(line)))
                flush(heading=True)
                continue
        elif not markup and _RULE.match(line):  # "Release Notes" over "=====": a title
            flush(heading=len(para) == 1 and para[0][0] == lineno - 1)
            continue
        elif not markup and lineno - 1 in fields:  # "Status: done": a record's field, the first heads the rest
            flush()
            para.append((lineno, norm_text(line)))
            if fields[lineno - 1]:
                flush(heading=True)
            continue
        elif not markup and BULLET.match(line):  # "* item", "- item", "2. item": a unit of its own
            if len(para) == 1 and para[0][0] == lineno - 1 and para[0][0] not in items and _lead_in(para[0][1]):
                flush(heading=True)  # "Options:" right above the list heads its items
            elif (not para and out and out[-1].line == last_text and last_text not in items
                  and not out[-1].heading and _lead_in(out[-1].text)):
                out[-1] = out[-1]._replace(heading=True)
            flush()
            items.add(lineno)
            line = BULLET.sub("", line, count=1)
        clean = norm_text(line)
        if clean:
            para.append((lineno, clean))
        else:
            if para and len(para) == 1:
                last_text = para[0][0]
            elif para:
                last_text = None
            flush()
    flush()
    return out


LEAD_IN_CHARS = 80  # a longer line above a list is prose, not the list's heading
_LEAD_IN_END = re.compile(r"[.!?;,][\"'”’)\]]*$")


def _lead_in(text: str) -> bool:
    """A one-line paragraph that can head the list below it: short, and no sentence ("Options:",
    "UI, Workflows & Features"; not "The changes are these.")."""
    return len(text) <= LEAD_IN_CHARS and not _LEAD_IN_END.search(text)


# "Status: done", "Bug reports: https://...": a field of a record (an RFC 822-like stanza)
_FIELD = re.compile(r"^[A-Z][\w-]*(?: [\w-]+){0,2}:(?:\s+\S|\s*$)")


def _record_fields(lines: list[str]) -> dict[int, bool]:
    """The lines that start a record's field, each with whether it is its stanza's first: a
    paragraph whose first line is a field at the margin and that holds another (a line indented
    under a field continues it)."""
    out: dict[int, bool] = {}
    start = 0
    for end in [*(i for i, ln in enumerate(lines) if not ln.strip()), len(lines)]:
        found = [i for i in range(start, end) if _FIELD.match(lines[i])]
        if len(found) > 1 and found[0] == start:
            out.update((i, i == start) for i in found)
        start = end + 1
    return out


# ---------------------------------------------------------------------------------- HTML
