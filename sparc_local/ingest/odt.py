"""The ODT reader (OpenDocument text), on the zip-and-XML plumbing of zipdocs."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_local.ingest.readers import ExtractError, RawBlock, Read
from sparc_local.ingest.zipdocs import Package, open_package

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element


# ---------------------------------------------------------------------------------- ODT

_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"
_META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"
_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"
_SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"

ODT_MIMETYPE = "application/vnd.oasis.opendocument.text"
_ODT_PARAGRAPHS = frozenset({_TEXT + "p", _TEXT + "h"})
_ODT_SPACES = frozenset({_TEXT + "s", _TEXT + "tab", _TEXT + "line-break"})
# paragraphs of their own inside a paragraph: they follow it
_ODT_OWN_PARAGRAPHS = frozenset({_TEXT + "note-body", _DRAW + "text-box"})
# never text of the document: deleted text kept for change tracking, comments, footnote marks,
# image titles, and generated indexes that repeat the headings with page numbers
_ODT_SKIP = frozenset(
    {_TEXT + "tracked-changes", _OFFICE + "annotation", _TEXT + "note-citation", _SVG + "title", _SVG + "desc"}
    | {_TEXT + t for t in ("table-of-content", "alphabetical-index", "illustration-index", "table-index",
                            "object-index", "user-index", "bibliography")}
)


def _odt_text(para: Element, nested: list[Element]) -> str:
    """A paragraph's text in document order, walked without recursion (the file chooses the
    depth); containers of paragraphs of their own go to nested."""
    parts = [para.text or ""]
    stack: list[tuple[Element, bool]] = []
    for child in reversed(para):
        stack += [(child, True), (child, False)]
    while stack:
        el, tail = stack.pop()
        if tail:
            parts.append(el.tail or "")
        elif el.tag in _ODT_SPACES:
            parts.append(" ")
        elif el.tag in _ODT_OWN_PARAGRAPHS:
            nested.append(el)
        elif el.tag not in _ODT_SKIP:
            parts.append(el.text or "")
            for child in reversed(el):
                stack += [(child, True), (child, False)]
    return "".join(parts)


def _odt_paragraph(para: Element) -> list[str]:
    """A paragraph, then the footnotes and text boxes inside it."""
    out: list[str] = []
    todo = deque([para])
    while todo:
        nested: list[Element] = []
        out.append(_odt_text(todo.popleft(), nested))
        stack = [child for container in reversed(nested) for child in reversed(container)]
        while stack:  # the outermost paragraphs inside the containers, in order
            el = stack.pop()
            if el.tag in _ODT_PARAGRAPHS:
                todo.append(el)
            elif el.tag not in _ODT_SKIP:
                stack.extend(reversed(el))
    return out


class _OdtPages:
    """Page numbers from the layout LibreOffice saves: a text:soft-page-break where a page
    filled up, and none where a style forces the break (fo:break-before/after, a new master
    page), so both are counted. Trusted only when the count ends at meta.xml's page-count."""

    def __init__(self) -> None:
        self.before: set[str] = set()  # style names that start a new page
        self.after: set[str] = set()  # style names that end their page
        self.parent: dict[str, str] = {}
        self.page = 1
        self.started = False  # a page break before the first content adds no page
        self.pending_after = False

    def style(self, el: Element, parent: Element | None) -> None:
        """Record a style:style end, or the paragraph/table properties inside one."""
        if el.tag == _STYLE + "style":
            name = el.get(_STYLE + "name", "")
            if el.get(_STYLE + "parent-style-name"):
                self.parent[name] = el.get(_STYLE + "parent-style-name", "")
            if el.get(_STYLE + "master-page-name"):
                self.before.add(name)
        elif parent is not None and parent.tag == _STYLE + "style":
            name = parent.get(_STYLE + "name", "")
            if el.get(_FO + "break-before") == "page":
                self.before.add(name)
            if el.get(_FO + "break-after") == "page":
                self.after.add(name)

    def _has(self, names: set[str], style: str | None) -> bool:
        seen: set[str] = set()
        while style and style not in seen:
            if style in names:
                return True
            seen.add(style)
            style = self.parent.get(style)
        return False

    def begin(self, style: str | None) -> int:
        """A top-level paragraph or table starts: its page."""
        if self.started and (self.pending_after or self._has(self.before, style)):
            self.page += 1
        self.started = True
        self.pending_after = self._has(self.after, style)
        return self.page


def _odt_page_count(pkg: Package) -> int | None:
    meta = pkg.optional("meta.xml")
    stats = meta.find(f"{_OFFICE}meta/{_META}document-statistic") if meta is not None else None
    count = stats.get(_META + "page-count") if stats is not None else None
    return int(count) if count and count.isdigit() else None


def odt_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    with open_package(path, "ODT", max_unpacked) as pkg:
        if "mimetype" in pkg.names:
            mimetype = pkg.read("mimetype").decode("ascii", "replace").strip()
            if mimetype != ODT_MIMETYPE:
                raise ExtractError(f"not a valid ODT (its mimetype is {mimetype[:80]!r})")
        if "content.xml" not in pkg.names:
            raise pkg.missing("content.xml")
        manifest = pkg.optional("META-INF/manifest.xml")
        for entry in manifest.iter(_MANIFEST + "file-entry") if manifest is not None else ():
            if entry.get(_MANIFEST + "full-path") == "content.xml" and len(entry):  # its encryption-data
                raise ExtractError("encrypted ODT (password-protected)")
        pages = _OdtPages()
        styles = pkg.optional("styles.xml")
        for style in styles.iter(_STYLE + "style") if styles is not None else ():
            pages.style(style, None)
            for properties in style:
                pages.style(properties, style)
        out, cut = _odt_body(pkg, pages, max_chars)
        total = _odt_page_count(pkg)
    if total is None or pages.page > total or (pages.page < total and not cut):
        out = [RawBlock(b.text, None, None) for b in out]  # no layout saved, or one we misread
    return out, cut


def _odt_body(pkg: Package, pages: _OdtPages, max_chars: int) -> tuple[list[RawBlock], bool]:
    out: list[RawBlock] = []
    chars = 0
    parents: list[Element] = []
    in_body = depth = skip = 0  # inside office:text / inside a paragraph / inside a skipped part
    cells: list[list[str]] = []  # the open table cells' paragraphs
    rows: list[list[str]] = []  # the open table rows' cells
    page = 1
    for event, el in pkg.events("content.xml"):
        tag = el.tag
        if event == "start":
            parents.append(el)
            if tag == _OFFICE + "text":
                in_body += 1
            elif tag in _ODT_SKIP and not depth:
                skip += 1
            elif not in_body or skip:
                pass
            elif tag == _TEXT + "soft-page-break":
                pages.page += 1
            elif tag in _ODT_PARAGRAPHS:
                if not depth and not cells:
                    page = pages.begin(el.get(_TEXT + "style-name"))
                depth += 1
            elif tag == _TABLE + "table" and not cells and not depth:
                page = pages.begin(el.get(_TABLE + "style-name"))
            elif tag == _TABLE + "table-row" and not depth:
                if not cells:
                    page = pages.page  # a long table's rows go on over page breaks
                rows.append([])
            elif tag in (_TABLE + "table-cell", _TABLE + "covered-table-cell") and not depth:
                cells.append([])
            continue
        parents.pop()
        parent = parents[-1] if parents else None
        if tag == _OFFICE + "text":
            in_body -= 1
        elif tag in _ODT_SKIP and not depth:
            skip -= 1
        elif not in_body:
            pages.style(el, parent)  # office:automatic-styles come before the body
        elif skip:
            pass
        elif tag in _ODT_PARAGRAPHS:
            depth -= 1
            if depth:
                continue  # a paragraph in a paragraph (footnote, text box): its outermost one reads it
            texts = _odt_paragraph(el)
            if cells:
                cells[-1].extend(texts)
            else:
                out.extend(RawBlock(t, page, None) for t in texts)
                chars += sum(len(t) for t in texts)
        elif depth:
            continue  # inside a paragraph: read whole at its end
        elif tag in (_TABLE + "table-cell", _TABLE + "covered-table-cell") and cells:
            text = " ".join(cells.pop())
            if rows:
                rows[-1].append(text)
        elif tag == _TABLE + "table-row" and rows:
            line = " | ".join(c for c in map(str.strip, rows.pop()) if c)
            if cells:  # a table inside a table cell
                cells[-1].append(line)
            else:
                out.append(RawBlock(line, page, None))
                chars += len(line)
        if parent is not None and len(parent) and parent[-1] is el:
            del parent[-1]  # done with it: memory stays flat however long the document
        if chars > max_chars:
            return out, True
    return out, False
