"""Readers for zip-and-XML documents: DOCX, ODT, PPTX and EPUB.

python-docx inflates a whole DOCX, so the whole package is checked against zip bombs first.
ODT, PPTX and EPUB are read with the standard library's zipfile instead of a library such as
python-pptx or ebooklib, which inflate every part of the package into memory on open: only the
parts that hold text are inflated, never images or media, and each one's declared size is
charged to max_unpacked first (check_unpacked), so a 300 MB deck of videos costs its slides'
XML and a zip bomb is refused before it inflates. XML goes through defusedxml, which refuses
entity declarations (billion laughs) and external references, and is streamed, so one huge part
never sits in memory whole.
"""

from __future__ import annotations

import contextlib
import errno
import posixpath
import re
import zipfile
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote

from sparc_local.readers import (
    ExtractError,
    RawBlock,
    Read,
    _detect,
    _norm,
    _one_line,
    declared_charset,
    html_blocks,
)

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a Compound File: what Office wraps encrypted files in


def open_zip(path: Path, kind: str) -> zipfile.ZipFile:
    """The zip container of a DOCX, ODT, PPTX or EPUB, or an ExtractError that says why not."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError, OSError) as e:
        if isinstance(e, OSError) and e.errno != errno.EINVAL:  # EINVAL: a damaged directory's offset
            raise
        with open(path, "rb") as f:
            head = f.read(8)
        if head == _OLE_MAGIC:
            raise ExtractError(f"not a valid {kind} (password-protected, or the older binary format)") from e
        if head.startswith(b"PK\x03\x04"):
            raise ExtractError(f"not a valid {kind} (truncated or damaged zip file)") from e
        raise ExtractError(f"not a valid {kind} (not a zip file)") from e


def check_unpacked(infos: Iterable[zipfile.ZipInfo], kind: str, max_unpacked: int) -> None:
    """Refuse zip bombs before inflating anything. zipfile never inflates an entry past its
    declared size, so checking the declared sizes of the entries that will be read is enough."""
    infos = list(infos)
    total = sum(i.file_size for i in infos)
    absurd = any(
        i.file_size > 10_000_000 and i.file_size > 200 * max(i.compress_size, 1) for i in infos
    )
    if total > max_unpacked or absurd:
        raise ExtractError(f"{kind} too large when unpacked (possible zip bomb)")


class _Package:
    """An open zip container read part by part within the max_unpacked budget."""

    def __init__(self, zf: zipfile.ZipFile, kind: str, max_unpacked: int) -> None:
        self.zf, self.kind, self.left = zf, kind, max_unpacked
        self.names = set(zf.namelist())

    @contextlib.contextmanager
    def _reading(self, name: str) -> Iterator[None]:
        """Turn what zipfile, zlib and the XML parser raise on a damaged part into one line."""
        from xml.etree.ElementTree import ParseError

        from defusedxml import DefusedXmlException

        try:
            yield
        except DefusedXmlException as e:
            raise ExtractError(f"{self.kind} refused: {name} declares XML entities (possible entity bomb)") from e
        except ParseError as e:
            raise ExtractError(f"not a valid {self.kind} ({name}: {_one_line(e)})") from e
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
            raise ExtractError(f"not a valid {self.kind} (damaged zip file: {_one_line(e)})") from e
        except OSError as e:
            if e.errno != errno.EINVAL:  # EINVAL: a seek to a negative offset the zip directory gave
                raise
            raise ExtractError(f"not a valid {self.kind} (damaged zip file: bad entry offset)") from e
        except RuntimeError as e:  # zipfile: "File ... is encrypted, password required" (after
            if "encrypted" not in str(e):  # NotImplementedError, a RuntimeError too)
                raise
            raise ExtractError(f"encrypted {self.kind} (password-protected zip)") from e

    def _open(self, name: str) -> IO[bytes]:
        info = self.zf.getinfo(name)
        check_unpacked([info], self.kind, self.left)
        self.left -= info.file_size
        return self.zf.open(info)

    def read(self, name: str) -> bytes:
        with self._reading(name), self._open(name) as f:
            return f.read()

    def events(self, name: str) -> Iterator[tuple[str, Element]]:
        """('start' | 'end', element) in document order; the caller clears what it is done with."""
        from defusedxml.ElementTree import iterparse

        with self._reading(name), self._open(name) as f:
            yield from iterparse(f, events=("start", "end"))

    def tree(self, name: str) -> Element:
        """A small part (relationships, manifest, OPF) parsed whole."""
        from defusedxml.ElementTree import fromstring

        data = self.read(name)
        with self._reading(name):
            return fromstring(data)

    def optional(self, name: str) -> Element | None:
        """A part that only adds to the text (metadata, styles, a manifest): when it is absent
        or unreadable, the text is read without it."""
        if name not in self.names:
            return None
        try:
            return self.tree(name)
        except ExtractError:
            return None

    def missing(self, what: str) -> ExtractError:
        return ExtractError(f"not a valid {self.kind} (no {what})")


@contextlib.contextmanager
def _package(path: Path, kind: str, max_unpacked: int) -> Iterator[_Package]:
    with open_zip(path, kind) as zf:
        yield _Package(zf, kind, max_unpacked)


# ---------------------------------------------------------------------------------- DOCX


def docx_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    with open_zip(path, "DOCX") as zf:
        infos = zf.infolist()
    check_unpacked(infos, "DOCX", max_unpacked)  # python-docx inflates every part
    if "word/document.xml" not in {i.filename for i in infos}:
        raise ExtractError("not a valid DOCX (no word/document.xml)")

    import docx
    from docx.table import Table

    try:
        doc = docx.Document(str(path))
        out: list[RawBlock] = []
        for item in doc.iter_inner_content():
            if isinstance(item, Table):
                for row in item.rows:
                    cells, seen = [], set()
                    for cell in row.cells:  # merged cells repeat; keep each once
                        if id(cell._tc) not in seen:
                            seen.add(id(cell._tc))
                            cells.append(_norm(cell.text))
                    out.append((" | ".join(c for c in cells if c), None, None, ()))
            else:
                out.append((item.text, None, None, ()))
    except ExtractError:
        raise
    except Exception as e:  # python-docx / lxml on a damaged package
        raise ExtractError(f"not a valid DOCX ({_one_line(e)})") from e
    return out, False


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


def _odt_page_count(pkg: _Package) -> int | None:
    meta = pkg.optional("meta.xml")
    stats = meta.find(f"{_OFFICE}meta/{_META}document-statistic") if meta is not None else None
    count = stats.get(_META + "page-count") if stats is not None else None
    return int(count) if count and count.isdigit() else None


def odt_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    with _package(path, "ODT", max_unpacked) as pkg:
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
        out = [(text, None, None, ()) for text, _, _, _ in out]  # no layout saved, or one we misread
    return out, cut


def _odt_body(pkg: _Package, pages: _OdtPages, max_chars: int) -> tuple[list[RawBlock], bool]:
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
                out.extend((t, page, None, ()) for t in texts)
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
                out.append((line, page, None, ()))
                chars += len(line)
        if parent is not None and len(parent) and parent[-1] is el:
            del parent[-1]  # done with it: memory stays flat however long the document
        if chars > max_chars:
            return out, True
    return out, False


# ---------------------------------------------------------------------------------- PPTX

_PKG_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_REL_OFFICE_DOCUMENT = "/officeDocument"
_REL_NOTES = "/notesSlide"


def _relationships(pkg: _Package, part: str, required: bool = False) -> dict[str, tuple[str, str]]:
    """Relationship id -> (target part name, type) for a part of an OPC package ('' = the
    package). Unless required, damaged relationships read as none."""
    folder, base = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", base + ".rels")
    tree = pkg.tree(rels) if required and rels in pkg.names else pkg.optional(rels)
    out: dict[str, tuple[str, str]] = {}
    for rel in tree.iter(_PKG_RELS) if tree is not None else ():
        target = unquote(rel.get("Target", ""))
        if rel.get("TargetMode") == "External" or not target:
            continue
        name = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
        out[rel.get("Id", "")] = (name, rel.get("Type", ""))
    return out


def _dml_paragraphs(pkg: _Package, part: str) -> Iterator[str]:
    """The text paragraphs of a slide or notes part, a table row to a line. Fields (slide
    numbers, dates) are left out; of mc:AlternateContent only the first choice is read."""
    cell: list[str] | None = None
    row: list[str] | None = None
    fallback = 0
    for event, el in pkg.events(part):
        tag = el.tag
        if event == "start":
            if tag == _MC_FALLBACK:
                fallback += 1
            elif tag == _A + "tr":
                row = []
            elif tag == _A + "tc":
                cell = []
            continue
        if tag == _MC_FALLBACK:
            fallback -= 1
        elif fallback:
            pass
        elif tag == _A + "p":
            parts = []
            for child in el:
                if child.tag == _A + "r":
                    parts.append(child.findtext(_A + "t") or "")
                elif child.tag == _A + "br":
                    parts.append(" ")
            text = "".join(parts)
            if cell is not None:
                cell.append(text)
            else:
                yield text
            el.clear()
        elif tag == _A + "tc" and cell is not None:
            if row is not None:
                row.append(" ".join(cell).strip())
            cell = None
        elif tag == _A + "tr" and row is not None:
            yield " | ".join(c for c in row if c)
            row = None


def pptx_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    """Each slide's text, then its speaker notes, with page = the slide's number."""
    with _package(path, "PPTX", max_unpacked) as pkg:
        main = next((name for name, kind in _relationships(pkg, "").values()
                     if kind.endswith(_REL_OFFICE_DOCUMENT)), "ppt/presentation.xml")
        if main not in pkg.names:
            raise pkg.missing(main)
        presentation = pkg.tree(main)
        if presentation.tag != _P + "presentation":
            raise ExtractError(f"not a valid PPTX ({main} is not a presentation)")
        rels = _relationships(pkg, main, required=True)
        slides = [rels.get(s.get(_R_ID, ""), ("", ""))[0] for s in presentation.iter(_P + "sldId")]
        out: list[RawBlock] = []
        errors: list[ExtractError] = []
        chars = 0
        for number, slide in enumerate(slides, 1):
            if slide not in pkg.names:
                continue  # a dangling reference: PowerPoint skips it too
            parts = [slide] + [name for name, kind in _relationships(pkg, slide).values()
                               if kind.endswith(_REL_NOTES) and name in pkg.names]
            try:
                for part in parts:
                    for text in _dml_paragraphs(pkg, part):
                        out.append((text, number, None, ()))
                        chars += len(text)
            except ExtractError as e:  # one damaged slide: the others are still read
                errors.append(e)
            if chars > max_chars:
                return out, True
    if errors and not out:
        raise errors[0]
    return out, False


# ---------------------------------------------------------------------------------- EPUB

_CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
_ROOTFILE = "{urn:oasis:names:tc:opendocument:xmlns:container}rootfile"
_OPF = "{http://www.idpf.org/2007/opf}"
_XMLENC = "{http://www.w3.org/2001/04/xmlenc#}"
# font obfuscation (IDPF, Adobe): fonts only, the text stays readable
_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_XHTML_TYPES = frozenset({"application/xhtml+xml", "text/html"})
_XML_ENCODING = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9_.:-]+)")


def _encrypted(pkg: _Package) -> set[str]:
    """Parts under DRM (META-INF/encryption.xml), by their name in the zip."""
    encryption = pkg.optional(_ENCRYPTION)
    out: set[str] = set()
    for data in encryption.iter(_XMLENC + "EncryptedData") if encryption is not None else ():
        method = data.find(_XMLENC + "EncryptionMethod")
        ref = data.find(f"{_XMLENC}CipherData/{_XMLENC}CipherReference")
        if ref is not None and (method is None or method.get("Algorithm") not in _FONT_OBFUSCATION):
            out.add(posixpath.normpath(unquote(ref.get("URI", ""))))
    return out


def epub_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    """The documents of the spine in reading order, with page = the document's place in it
    (chapter by chapter in most books)."""
    with _package(path, "EPUB", max_unpacked) as pkg:
        if _CONTAINER not in pkg.names:
            raise pkg.missing(_CONTAINER)
        rootfile = pkg.tree(_CONTAINER).find(f".//{_ROOTFILE}")
        opf = posixpath.normpath(unquote(rootfile.get("full-path", ""))) if rootfile is not None else ""
        if opf not in pkg.names:
            raise pkg.missing("package document (OPF)")
        package = pkg.tree(opf)
        folder = posixpath.dirname(opf)
        items = {
            item.get("id"): (posixpath.normpath(posixpath.join(folder, unquote(item.get("href", "")))),
                             item.get("media-type", ""))
            for item in package.iter(_OPF + "item")
        }
        spine = [items.get(ref.get("idref"), ("", "")) for ref in package.iter(_OPF + "itemref")]
        drm = _encrypted(pkg)
        out: list[RawBlock] = []
        errors: list[ExtractError] = []
        chars = locked = readable = 0
        for number, (name, media_type) in enumerate(spine, 1):
            if media_type not in _XHTML_TYPES or name not in pkg.names:
                continue
            if name in drm:
                locked += 1
                continue
            readable += 1
            try:
                data = pkg.read(name)
            except ExtractError as e:  # one damaged chapter: the others are still read
                errors.append(e)
                continue
            declared = _XML_ENCODING.search(data[:1024])
            try:
                text = data.decode(_detect(data, False, declared_charset(declared and declared.group(1))),
                                   errors="replace")
            except ExtractError:
                continue  # binary data in a spine document: nothing to read
            del data
            for para, _, _, _ in html_blocks(text, keep_title=False):
                out.append((para, number, None, ()))
                chars += len(para)
            if chars > max_chars:
                return out, True
    if locked and not readable:
        raise ExtractError("encrypted EPUB (DRM)")
    if errors and not out:
        raise errors[0]
    if not readable:
        raise ExtractError("not a valid EPUB (no readable document in its spine)")
    return out, False
