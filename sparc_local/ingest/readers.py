"""Readers for text and HTML (PDF: pdf.py): bytes on disk to raw paragraphs (RawBlock), and what the
readers of the other formats (zipdocs, mail) share.

Every reader takes (path, max_chars, max_unpacked) and returns (raw blocks, whether it stopped
early); extract.READERS maps each extension to one. Every failure is an ExtractError with a
one-line reason. This module imports nothing from extract, so there is no import cycle.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from sparc_local.ingest.furniture import running_lines


class ExtractError(Exception):
    """A file could not be read; str(err) is a one-line reason fit to show the user."""

    def __init__(self, reason: str) -> None:
        reason = " ".join(str(reason).split()) or "unknown error"
        super().__init__(reason)
        self.reason = reason


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_WS = re.compile(r"\s+")


def norm_text(text: str) -> str:
    return _WS.sub(" ", _CONTROL.sub(" ", text)).strip()


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class RawBlock(NamedTuple):
    """A reader's paragraph before normalising. heading: it heads the blocks after it (a title, a
    term before its definition): extract makes it their context, not a sentence. context: text
    that is this block's context only (a table row's header cells)."""

    text: str
    page: int | None
    line: int | None
    line_starts: tuple[int, ...] = ()
    heading: bool = False
    context: str = ""


Read = tuple[Iterable[RawBlock], bool]  # a reader's raw blocks, and whether it stopped early

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _bomless_utf16(sample: bytes) -> str | None:
    """ASCII-heavy UTF-16 without a BOM has a NUL in every other byte."""
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.05 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.05 * len(odd):
        return "utf-16-be"
    return None


_ISO2022_ESCAPE = re.compile(rb"\x1b[$(][@A-Z(]|\x1b\$\)C")  # a 7-bit ISO-2022 designation (JP, KR)
# ISO-2022-KR designates with ESC $ ) C and shifts with SO/SI, control bytes a binary test counts
_ISO2022_CODECS = ((b"\x1b$)C", "iso2022_kr"), (b"", "iso2022_jp_2"), (b"", "iso2022_jp_ext"))


def _iso2022(sample: bytes, truncated: bool) -> str | None:
    """The ISO-2022 codec that decodes a 7-bit text with escape sequences, else None."""
    if not _ISO2022_ESCAPE.search(sample) or any(b > 127 for b in sample):
        return None
    for marker, codec in _ISO2022_CODECS:
        if marker in sample:
            try:
                codecs.getincrementaldecoder(codec)().decode(sample, final=not truncated)
            except UnicodeDecodeError:
                continue
            return codec
    return None


def _is_binary(sample: bytes) -> bool:
    if not sample:
        return False
    nul = sample.count(0)
    ctrl = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27)) + sample.count(127)
    return nul * 100 > len(sample) or ctrl * 10 > len(sample) or (nul > 0 and len(sample) < 512)


def _looks_non_latin(text: str) -> bool:
    """Legacy text decoded as cp1252 that is mostly non-ASCII letters is probably not Western."""
    letters = sum(1 for c in text[:20000] if c.isalpha())
    high = sum(1 for c in text[:20000] if c.isalpha() and ord(c) > 127)
    return high >= 8 and high > 0.3 * letters


def _legacy_encoding(head: bytes) -> str:
    """cp1252 (else latin-1) for legacy Western text; a detector's guess when it looks otherwise."""
    try:
        text, enc = head.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        text, enc = head.decode("latin-1"), "latin-1"
    if _looks_non_latin(text):
        try:  # optional: guesses Cyrillic, CJK... but is unreliable on short Western text
            from charset_normalizer import from_bytes
        except ImportError:
            return enc
        best = from_bytes(head[:1_000_000]).best()
        if best is not None and best.encoding:
            return best.encoding
    return enc


def _detect(head: bytes, truncated: bool, declared: str | None = None) -> str:
    """The encoding of a text file from its first bytes: BOM, UTF-16 without BOM, UTF-8, the
    declared charset, then cp1252/latin-1. Raises ExtractError for binary data."""
    for bom, enc in _BOMS:
        if head.startswith(bom):
            return enc
    sample = head[:8192]
    utf16 = _bomless_utf16(sample)
    if utf16:
        text = head[: len(head) - len(head) % 2].decode(utf16, errors="replace")[:4096]
        if sum(c.isprintable() or c.isspace() for c in text) >= 0.95 * len(text):
            return utf16
    iso2022 = _iso2022(sample, truncated or len(head) > len(sample))
    if iso2022:
        return iso2022
    if _is_binary(sample):
        raise ExtractError("binary file, not text")
    try:
        head.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as e:
        if truncated and e.start >= len(head) - 3:
            try:
                head[: e.start].decode("utf-8")
                return "utf-8"  # only a character cut at the end of the head
            except UnicodeDecodeError:
                pass
    text = head.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if sum(1 for c in text if ord(c) > 127) - bad >= 4 * bad:
        return "utf-8"  # UTF-8 with a few stray bytes
    if declared and codecs.lookup(declared).name != "utf-8":
        return declared
    return _legacy_encoding(head)


HEAD_BYTES = 1 << 20  # bytes the encoding is guessed from
CHUNK_BYTES = 1 << 20


def read_text(path: Path, max_chars: int, html: bool = False) -> tuple[str, bool]:
    """A text file decoded (never failing on bad bytes), at most max_chars characters, and
    whether the file went on. It is streamed in 1 MB chunks, so a 1 GB log costs max_chars of
    memory, not its size."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
        more = len(head) == HEAD_BYTES and f.read(1) != b""
        f.seek(len(head))
        declared = _html_charset(head[:4096]) if html else None
        decoder = codecs.getincrementaldecoder(_detect(head, more, declared))(errors="replace")
        parts = [decoder.decode(head, final=not more)]
        n = len(parts[0])
        while more and n <= max_chars:
            chunk = f.read(CHUNK_BYTES)
            more = bool(chunk)
            parts.append(decoder.decode(chunk, final=not more))
            n += len(parts[-1])
    text = "".join(parts)
    return text[:max_chars], more or len(text) > max_chars


_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg"})
CELL_SEPARATOR = " | "  # between a table row's cells: one unit, and no sentence ends at a cell's end
_CELL = "\x1f"  # a cell boundary in the parser's buffer (a control character: norm_text drops it)
_CELL_TAGS = frozenset({"td", "th"})
_BLOCK_TAGS = frozenset(
    "p div li ul ol dl dt dd h1 h2 h3 h4 h5 h6 br hr tr table thead tbody tfoot caption "
    "section article header footer nav aside main blockquote pre figure figcaption form "
    "address details summary title body html option fieldset legend".split()
)
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.I)


def declared_charset(label: str | bytes | None) -> str | None:
    """The codec for a charset a file declares (HTML meta, MIME), None if unknown or useless."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.decode("ascii") if isinstance(label, bytes) else label).name
    except (LookupError, UnicodeDecodeError):
        return None
    if name in ("latin-1", "iso8859-1", "ascii"):
        return "cp1252"  # what browsers and mail readers do (WHATWG Encoding)
    return None if name.startswith("utf-16") else name


def _html_charset(head: bytes) -> str | None:
    m = _META_CHARSET.search(head)
    return declared_charset(m.group(1)) if m else None


def html_file(path: Path, max_chars: int, max_unpacked: int) -> Read:
    text, cut = read_text(path, max_chars, html=True)
    return html_blocks(text), cut


# a title (the page's <title> too: context, never an answer), or a term before its definition
_HEADING_TAGS = frozenset("title h1 h2 h3 h4 h5 h6 dt".split())
# Page furniture, not content: what sits outside the text on every page of a generated site.
_FURNITURE_TAGS = frozenset({"nav", "aside"})
_PAGE_FRAME_TAGS = frozenset({"header", "footer"})  # furniture outside <main>/<article>, a title inside
_FURNITURE_ROLES = frozenset("navigation banner contentinfo complementary search menu menubar toolbar".split())
# class or id names of furniture in Sphinx, DocBook, gtk-doc, Doxygen, javadoc and Node.js pages
_FURNITURE_NAMES = frozenset(
    "nav navbar navheader navfooter navigation navpath navrow breadcrumb breadcrumbs sidebar "
    "sphinxsidebar sphinxsidebarwrapper related footer toc toctree-wrapper contents headerlink "
    "topnav bottomnav subnav tabs tabs2 skip-link skipnav copy-button gtoc toc-picker".split()
)
# only elements that are always closed may open a skipped region: an unclosed <li> must not
# swallow the rest of the page
_CONTAINER_TAGS = frozenset(
    "div section nav aside header footer ul ol dl table span a button details form menu".split()
)
_MAIN_TAGS = frozenset({"main", "article"})
LINK_DENSE = 0.8  # a block whose letters are mostly link text is a menu or a table of contents
_PILCROW = re.compile(r"\s*\u00b6\s*$")
_PERMALINKS = frozenset({"\u00b6", "#"})  # a link with only this text points at its own heading


def _furniture(tag: str, attrs: list[tuple[str, str | None]], in_main: bool) -> bool:
    if tag in _FURNITURE_TAGS or (tag in _PAGE_FRAME_TAGS and not in_main):
        return True
    if tag not in _CONTAINER_TAGS:
        return False
    for name, value in attrs:
        if not value:
            continue
        if name == "role" and value.lower() in _FURNITURE_ROLES:
            return True
        if name in ("class", "id") and not _FURNITURE_NAMES.isdisjoint(value.lower().split()):
            return True
    return False


def _alnum(text: str) -> int:
    return sum(1 for c in text if c.isalnum())


_BOLD_TAGS = frozenset({"b", "strong"})
BOLD_TITLE_WORDS = 8  # a block all in bold of at most this many words, and no sentence, is a title
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")


def _bold_title(text: str, bold_chars: int) -> bool:
    """A block set all in bold that says no sentence (groff's HTML section titles, `<p><b>NAME</b></p>`;
    an option's term): a title, as h1-h6 are."""
    letters = _alnum(text)
    return (0 < letters <= bold_chars and len(text.split()) <= BOLD_TITLE_WORDS
            and not _SENTENCE_END.search(text.strip()))


def html_blocks(text: str, keep_title: bool = True, main_only: bool = True) -> list[RawBlock]:
    """Paragraphs of an HTML page. keep_title=False drops <title>: an e-book chapter's or an
    e-mail's title is the book's or a template's, not its text.

    main_only keeps the page's main content (issue 17): navigation, sidebars, headers and footers
    of the page frame, tables of contents, Sphinx's headerlinks (the pilcrow) and link-dense
    blocks are dropped. A page left with no block at all, not even a title, is read whole.
    Headings (h1-h6, dt, and <title> unless a heading of the page says it: "Sandbox" in
    "Sandbox — Jinja Documentation") are marked so they join the block they head.
    """
    from html.parser import HTMLParser

    skip_tags = _SKIP_TAGS if keep_title else _SKIP_TAGS | {"title"}

    class Parser(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.out: list[RawBlock] = []
            self.buf: list[str] = []
            self.line: int | None = None
            self.skip = 0
            self.title_index = -1
            self.title_start = -1
            self.heading = 0
            self.main = 0
            self.furniture: str | None = None  # the tag of the furniture being skipped
            self.furniture_depth = 0
            self.link = 0
            self.link_chars = 0
            self.bold = 0
            self.bold_chars = 0  # letters and digits inside <b>/<strong> in the block being read
            self.headers: list[str] = []  # per open table, its header row's text
            self.header_row, self.in_thead = False, 0  # the row being read is all <th>; in <thead>

        def flush(self) -> None:
            if self.buf:
                text = "".join(self.buf).strip(_CELL + " \t\r\n").replace(_CELL, CELL_SEPARATOR)
                heading = self.heading > 0 or _bold_title(text, self.bold_chars)
                if heading:
                    text = _PILCROW.sub("", text)
                dense = main_only and not heading and self.link_chars >= LINK_DENSE * _alnum(text)
                header = self.headers[-1] if self.headers else ""
                if self.header_row and self.headers and not header and norm_text(text):
                    self.headers[-1] = text  # a row of <th> only: the context of the rows below
                elif not dense:
                    self.out.append(RawBlock(text, None, self.line, (), heading, header))
                self.buf, self.line = [], None
            self.link_chars = self.bold_chars = 0
            self.header_row = False

        def table_tag(self, tag: str, start: bool) -> None:
            """A table row is one block, its cells joined; a row of header cells (<th> only, or
            in <thead>) is the context of the table's other rows."""
            if tag == "table":
                self.headers = [*self.headers, ""] if start else self.headers[:-1]
            elif tag == "thead":
                self.in_thead = max(0, self.in_thead + (1 if start else -1))
            elif start and tag in _CELL_TAGS:
                self.header_row = self.header_row and (tag == "th" or self.in_thead > 0)
                self.buf += [_CELL] if self.buf else []
            self.header_row = self.header_row or (start and tag == "tr")

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if self.furniture is not None:
                self.furniture_depth += tag == self.furniture
                return
            if main_only and _furniture(tag, attrs, self.main > 0):
                self.flush()
                self.furniture, self.furniture_depth = tag, 1
                return
            if tag == "title":
                self.flush()
                self.title_start = len(self.out)
            if tag in skip_tags:
                self.skip += 1
            elif tag in _BLOCK_TAGS or tag in _HEADING_TAGS:
                self.flush()
            self.table_tag(tag, True)
            self.heading += tag in _HEADING_TAGS
            self.main += tag in _MAIN_TAGS
            self.link += tag == "a" and any(name == "href" for name, _ in attrs)
            self.bold += tag in _BOLD_TAGS

        def handle_endtag(self, tag: str) -> None:
            if self.furniture is not None:
                if tag == self.furniture:
                    self.furniture_depth -= 1
                    if self.furniture_depth == 0:
                        self.furniture = None
                return
            if tag in skip_tags:
                self.skip = max(0, self.skip - 1)
            elif tag in _BLOCK_TAGS or tag in _HEADING_TAGS:
                self.flush()
            self.table_tag(tag, False)
            if tag in _HEADING_TAGS:
                self.heading = max(0, self.heading - 1)
            if tag in _MAIN_TAGS:
                self.main = max(0, self.main - 1)
            if tag == "a":
                self.link = max(0, self.link - 1)
            if tag in _BOLD_TAGS:
                self.bold = max(0, self.bold - 1)
            if tag == "title" and len(self.out) == self.title_start + 1:
                self.title_index = self.title_start

        def handle_data(self, data: str) -> None:
            if self.skip or self.furniture is not None or not data:
                return
            if main_only and self.link and data.strip() in _PERMALINKS:
                return
            if self.line is None:
                stripped = data.lstrip()
                if not stripped:
                    return
                self.line = self.getpos()[0] + data[: len(data) - len(stripped)].count("\n")
            self.buf.append(data)
            if self.link:
                self.link_chars += _alnum(data)
            if self.bold:
                self.bold_chars += _alnum(data)

    parser = Parser()
    parser.feed(text)
    parser.close()
    parser.flush()
    # groff's head and foot of a man page (the source's line breaks are no layout: spaces collapsed)
    first, last = running_lines([(1, [norm_text(b.text) for b in parser.out])])[0]
    out = parser.out[first:last]
    parser.title_index -= first if parser.title_index >= first else len(parser.out)
    if 0 <= parser.title_index < len(out):  # drop <title> when the page says it again (its <h1>)
        title = norm_text(out[parser.title_index][0])
        folded = title.casefold()
        heads = [h.casefold() for i, b in enumerate(out) if b.heading and i != parser.title_index
                 and (h := norm_text(b[0]))]
        if any(h in folded for h in heads) or any(
                norm_text(b[0]) == title for i, b in enumerate(out) if i != parser.title_index):
            del out[parser.title_index]
    if main_only and not any(norm_text(b.text) for b in out):
        return html_blocks(text, keep_title, main_only=False)
    return out
