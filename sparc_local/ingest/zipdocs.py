"""Readers for zip-and-XML documents: DOCX, PPTX and EPUB, and the plumbing odt.py shares.

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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote

from sparc_local.ingest.readers import (
    CELL_SEPARATOR,
    ExtractError,
    RawBlock,
    Read,
    _detect,
    declared_charset,
    html_blocks,
    norm_text,
    one_line,
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


class Package:
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
            raise ExtractError(f"not a valid {self.kind} ({name}: {one_line(e)})") from e
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
            raise ExtractError(f"not a valid {self.kind} (damaged zip file: {one_line(e)})") from e
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
def open_package(path: Path, kind: str, max_unpacked: int) -> Iterator[Package]:
    with open_zip(path, kind) as zf:
        yield Package(zf, kind, max_unpacked)


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
                header = ""
                for i, row in enumerate(item.rows):
                    cells, seen = [], set()
                    for cell in row.cells:  # merged cells repeat; keep each once
                        if id(cell._tc) not in seen:
                            seen.add(id(cell._tc))
                            cells.append(norm_text(cell.text))
                    text = CELL_SEPARATOR.join(c for c in cells if c)
                    if i == 0 and len(item.rows) > 1 and _repeats_as_header(row):
                        header = text  # "Repeat as header row": the other rows' context
                    else:
                        out.append(RawBlock(text, None, None, (), False, header))
            else:
                style = (item.style.name or "") if item.style is not None else ""
                out.append(RawBlock(item.text, None, None, (), style == "Title" or style.startswith("Heading")))
    except ExtractError:
        raise
    except Exception as e:  # python-docx / lxml on a damaged package
        raise ExtractError(f"not a valid DOCX ({one_line(e)})") from e
    return out, False


def _repeats_as_header(row) -> bool:
    """Word's own mark of a header row (w:tblHeader in the row's properties)."""
    tr_pr = row._tr.trPr
    return tr_pr is not None and any(el.tag.endswith("}tblHeader") for el in tr_pr)


# ---------------------------------------------------------------------------------- PPTX

_PKG_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_REL_OFFICE_DOCUMENT = "/officeDocument"
_REL_NOTES = "/notesSlide"


def _relationships(pkg: Package, part: str, required: bool = False) -> dict[str, tuple[str, str]]:
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


def _dml_paragraphs(pkg: Package, part: str) -> Iterator[str]:
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
    with open_package(path, "PPTX", max_unpacked) as pkg:
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
                        out.append(RawBlock(text, number, None))
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


def _encrypted(pkg: Package) -> set[str]:
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
    with open_package(path, "EPUB", max_unpacked) as pkg:
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
            for block in html_blocks(text, keep_title=False):
                out.append(RawBlock(block.text, number, None, (), block.heading))
                chars += len(block.text)
            if chars > max_chars:
                return out, True
    if locked and not readable:
        raise ExtractError("encrypted EPUB (DRM)")
    if errors and not out:
        raise errors[0]
    if not readable:
        raise ExtractError("not a valid EPUB (no readable document in its spine)")
    return out, False
