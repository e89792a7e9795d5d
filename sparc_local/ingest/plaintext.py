"""Plain text, Markdown and reStructuredText: a text file's lines to raw paragraphs (RawBlock).

Headings (Markdown #, rst underlines, numbered titles such as "4.3. Good password") become the
heading of the block they open, list items are blocks of their own, code fences and rst markup
are dropped. The PDF reader shares the list-item and numbered-title patterns.
"""

from __future__ import annotations

import re
from pathlib import Path

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
    """Paragraphs split at blank lines; markup 'md'/'rst' strips headings, bullets, rules."""
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
    for lineno, raw in enumerate(lines, 1):
        line = raw
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
        clean = norm_text(line)
        if clean:
            para.append((lineno, clean))
        else:
            flush()
    flush()
    return out


# ---------------------------------------------------------------------------------- HTML
