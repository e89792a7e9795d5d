"""ODT, PPTX, EPUB and e-mail (.eml, .mbox): real files written to tmp_path by independent
writers where one exists (python-pptx, the email and mailbox packages), else assembled with
zipfile as their specifications lay them out (ODF 1.3, EPUB 3)."""

from __future__ import annotations

import io
import json
import mailbox
import random
import time
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.ingest.extract import ExtractError, extract
from tests.test_extract import texts, write

# ------------------------------------------------------------------------------------ builders

ODT_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
    'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"'
)
BILLION_LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
    + "]>"
)


def odt_bytes(body: str, *, automatic_styles: str = "", styles: str = "", page_count: int | None = None,
              doctype: str = "", encrypted: bool = False,
              mimetype: str = "application/vnd.oasis.opendocument.text") -> bytes:
    """An ODT package: mimetype stored first, content.xml around `body` (office:text children)."""
    content = (f'<?xml version="1.0" encoding="UTF-8"?>{doctype}<office:document-content {ODT_NS} '
               f'office:version="1.3"><office:automatic-styles>{automatic_styles}</office:automatic-styles>'
               f"<office:body><office:text>{body}</office:text></office:body></office:document-content>")
    stats = f'<meta:document-statistic meta:page-count="{page_count}"/>' if page_count else ""
    entry = ('<manifest:encryption-data manifest:checksum-type="SHA1/1K" manifest:checksum="x">'
             '<manifest:algorithm manifest:algorithm-name="Blowfish CFB" manifest:initialisation-vector="x"/>'
             "</manifest:encryption-data>") if encrypted else ""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), mimetype)  # stored, uncompressed
        zf.writestr("content.xml", random.Random(0).randbytes(300) if encrypted else content)
        zf.writestr("styles.xml", f'<office:document-styles {ODT_NS}><office:styles>{styles}'
                                  f"</office:styles></office:document-styles>")
        zf.writestr("meta.xml", f"<office:document-meta {ODT_NS}><office:meta>{stats}</office:meta>"
                                f"</office:document-meta>")
        zf.writestr("META-INF/manifest.xml", f'<manifest:manifest {ODT_NS}>'
                    f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/>'
                    f'<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
                    f"{entry}</manifest:file-entry></manifest:manifest>")
    return buf.getvalue()


def p(text: str, style: str = "") -> str:
    return f'<text:p text:style-name="{style}">{text}</text:p>' if style else f"<text:p>{text}</text:p>"


def xhtml(title: str, body: str, encoding: str = "utf-8") -> str:
    return (f'<?xml version="1.0" encoding="{encoding}"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title></head>\n'
            f"<body>{body}</body></html>")


def epub_bytes(docs: list[tuple[str, bytes | str]], *, spine: list[str] | None = None, opf_doctype: str = "",
               encryption: str | None = None, media_types: dict[str, str] | None = None) -> bytes:
    """An EPUB 3 package with its OPF in OEBPS/; docs are (href, content) in manifest order;
    spine lists hrefs in reading order (default: manifest order)."""
    media_types = media_types or {}
    ids = {href: f"item{i}" for i, (href, _) in enumerate(docs)}
    manifest = "".join(f'<item id="{ids[h]}" href="{h}" media-type="{media_types.get(h, "application/xhtml+xml")}"/>'
                       for h, _ in docs)
    refs = "".join(f'<itemref idref="{ids[h]}"/>' for h in (spine if spine is not None else [h for h, _ in docs]))
    opf = (f'<?xml version="1.0" encoding="UTF-8"?>{opf_doctype}<package xmlns="http://www.idpf.org/2007/opf" '
           f'version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f'<dc:identifier id="id">test</dc:identifier><dc:title>Book</dc:title></metadata>'
           f"<manifest>{manifest}</manifest><spine>{refs}</spine></package>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        zf.writestr("META-INF/container.xml",
                    '<?xml version="1.0"?><container version="1.0" '
                    'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                    '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                    "</rootfiles></container>")
        if encryption is not None:
            zf.writestr("META-INF/encryption.xml", encryption)
        zf.writestr("OEBPS/content.opf", opf)
        for href, content in docs:
            zf.writestr("OEBPS/" + href.replace("%20", " "), content)
    return buf.getvalue()


def drm(*names: str, algorithm: str = "http://www.w3.org/2001/04/xmlenc#aes128-cbc") -> str:
    """META-INF/encryption.xml listing names (paths in the zip) as encrypted with algorithm."""
    items = "".join(
        f'<enc:EncryptedData><enc:EncryptionMethod Algorithm="{algorithm}"/><enc:CipherData>'
        f'<enc:CipherReference URI="{n}"/></enc:CipherData></enc:EncryptedData>' for n in names)
    return (f'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
            f'xmlns:enc="http://www.w3.org/2001/04/xmlenc#">{items}</encryption>')


def pptx_file(path: Path, slides: list[tuple[str, str, str]]) -> Path:
    """A deck written by python-pptx: (title, body, speaker notes) per slide."""
    from pptx import Presentation

    prs = Presentation()
    for title, body, notes in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    prs.save(path)
    return path


def message(subject: str, body: str, *, html: str | None = None, charset: str = "utf-8",
            sender: str = "Anna <anna@example.org>") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = "ben@example.org"
    msg["Subject"] = subject
    if body:
        msg.set_content(body, charset=charset)
    if html is not None:
        if body:
            msg.add_alternative(html, subtype="html")
        else:
            msg.set_content(html, subtype="html")
    return msg


def mbox_file(path: Path, messages: list[EmailMessage]) -> Path:
    """An mbox written by the standard library's mailbox (it escapes body lines that start 'From ')."""
    box = mailbox.mbox(path)
    box.lock()
    try:
        for msg in messages:
            box.add(msg)
        box.flush()
    finally:
        box.unlock()
        box.close()
    return path


def pages(blocks) -> list[tuple[int | None, str]]:
    return [(b.page, b.text) for b in blocks]


# ------------------------------------------------------------------------------------ ODT


def test_odt_paragraphs_lists_tables_and_notes(tmp_path: Path) -> None:
    body = (
        '<text:tracked-changes><text:changed-region text:id="c1"><text:deletion>'
        + p("Deleted text is not the document.") + "</text:deletion></text:changed-region></text:tracked-changes>"
        '<text:table-of-content><text:index-body>' + p("Kettle care 1") + "</text:index-body></text:table-of-content>"
        '<text:h text:outline-level="1">Kettle care</text:h>'
        + p('Descale the <text:span>kettle</text:span><text:s text:c="3"/>once a month.'
            '<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>'
            "<text:note-body>" + p("Vinegar works too.") + "</text:note-body></text:note>"
            "<office:annotation><dc:creator>Ann</dc:creator>" + p("a comment") + "</office:annotation>"
            "<text:line-break/>Rinse<text:tab/>twice.")
        + "<text:list><text:list-item>" + p("Hard water: monthly") + "</text:list-item>"
        + "<text:list-item>" + p("Soft water: yearly") + "</text:list-item></text:list>"
        + "<table:table><table:table-row><table:table-cell>" + p("Water") + "</table:table-cell>"
        + "<table:table-cell>" + p("Interval") + p("(months)") + "</table:table-cell></table:table-row>"
        + "<table:table-row><table:table-cell>" + p("Hard") + "</table:table-cell><table:covered-table-cell/>"
        + "</table:table-row></table:table>"
        + p('<draw:frame><svg:title>logo</svg:title><draw:text-box>' + p("Boxed tip.")
            + "</draw:text-box></draw:frame>Keep the receipt.")
    )
    blocks = extract(write(tmp_path / "care.odt", odt_bytes(body)))
    assert texts(blocks) == [
        "Kettle care",
        "Descale the kettle once a month. Rinse twice.",
        "Vinegar works too.",
        "Hard water: monthly",
        "Soft water: yearly",
        "Water | Interval (months)",
        "Hard",
        "Keep the receipt.",
        "Boxed tip.",
    ]
    assert {(b.page, b.line) for b in blocks} == {(None, None)}  # no saved layout: no page numbers


ODT_BREAK_STYLES = ('<style:style style:name="P1" style:family="paragraph" style:parent-style-name="Chapter"/>'
                    '<style:style style:name="P2" style:family="paragraph">'
                    '<style:paragraph-properties fo:break-after="page"/></style:style>')
CHAPTER_STYLE = ('<style:style style:name="Chapter" style:family="paragraph">'
                 '<style:paragraph-properties fo:break-before="page"/></style:style>')
ODT_PAGED = (
    p("Title page.", "P1")  # a break before the first content adds no page
    + p("First page text.") + "<text:soft-page-break/>" + p("Second page text.")
    + p("Chapter two starts a page.", "P1")  # named style, through P1's parent
    + p("Spans <text:soft-page-break/>two pages.")  # cited where it starts
    + p("Ends its page.", "P2") + p("Last page.")
    + "<table:table><table:table-row><table:table-cell>" + p("cell") + "</table:table-cell></table:table-row>"
    + "<text:soft-page-break/><table:table-row><table:table-cell>" + p("next page cell")
    + "</table:table-cell></table:table-row></table:table>"
)


def test_odt_pages_from_the_saved_layout(tmp_path: Path) -> None:
    path = write(tmp_path / "paged.odt", odt_bytes(ODT_PAGED, automatic_styles=ODT_BREAK_STYLES,
                                                   styles=CHAPTER_STYLE, page_count=6))
    assert pages(extract(path)) == [
        (1, "Title page."), (1, "First page text."), (2, "Second page text."),
        (3, "Chapter two starts a page."), (3, "Spans two pages."), (4, "Ends its page."),
        (5, "Last page."), (5, "cell"), (6, "next page cell"),
    ]
    # a count that does not end at meta.xml's page-count is not trusted: no page rather than a wrong one
    for count in (5, 7, None):
        other = write(tmp_path / f"other{count}.odt", odt_bytes(ODT_PAGED, automatic_styles=ODT_BREAK_STYLES,
                                                                 styles=CHAPTER_STYLE, page_count=count))
        assert {b.page for b in extract(other)} == {None}


def test_odt_bad_packages(tmp_path: Path) -> None:
    cases = {
        "encrypted.odt": (odt_bytes(p("secret"), encrypted=True), "^encrypted ODT \\(password-protected\\)$"),
        "sheet.odt": (odt_bytes(p("x"), mimetype="application/vnd.oasis.opendocument.spreadsheet"),
                      "^not a valid ODT \\(its mimetype is 'application/vnd.oasis.opendocument.spreadsheet'\\)$"),
        "laughs.odt": (odt_bytes(p("&lol9;"), doctype=BILLION_LAUGHS),
                       "^ODT refused: content.xml declares XML entities \\(possible entity bomb\\)$"),
        "broken.odt": (odt_bytes("<text:p>unclosed"), "^not a valid ODT \\(content.xml: mismatched tag: line 1, "),
        "empty.odt": (b"", "^not a valid ODT \\(not a zip file\\)$"),
    }
    good = odt_bytes(p("The museum ticket costs ten euros."))
    cases["cut.odt"] = (good[: len(good) // 2], "^not a valid ODT \\(truncated or damaged zip file\\)$")
    for name, (data, reason) in cases.items():
        with pytest.raises(ExtractError, match=reason):
            extract(write(tmp_path / name, data))
    with zipfile.ZipFile(tmp_path / "nocontent.odt", "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ExtractError, match="^not a valid ODT \\(no content.xml\\)$"):
        extract(tmp_path / "nocontent.odt")


def test_odt_zip_bomb_and_budget(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.odt"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        with zf.open("content.xml", "w") as f:
            for _ in range(20):  # 20 MB of zeros, ~20 KB on disk
                f.write(bytes(1 << 20))
    with pytest.raises(ExtractError, match="^ODT too large when unpacked \\(possible zip bomb\\)$"):
        extract(bomb)
    big = write(tmp_path / "big.odt", odt_bytes(p("word " * 100_000)))  # 500 KB of text
    with pytest.raises(ExtractError, match="zip bomb"):  # the max_unpacked budget
        extract(big, max_unpacked=100_000)
    blocks = extract(big, max_chars=1000)  # and max_chars
    assert sum(len(b.text) for b in blocks) <= 1000 and blocks[-1].truncated


def test_odt_deep_nesting_and_long_body_stay_bounded(tmp_path: Path) -> None:
    deep = p("<text:span>" * 50_000 + "deep" + "</text:span>" * 50_000)  # no recursion limit to hit
    assert texts(extract(write(tmp_path / "deep.odt", odt_bytes(deep)))) == ["deep"]
    many = "".join(p(f"Paragraph {i}.") for i in range(100_000))
    blocks = extract(write(tmp_path / "many.odt", odt_bytes(many)))
    assert len(blocks) == 100_000 and blocks[-1].text == "Paragraph 99999."


def zip_encrypted(data: bytes, name: str) -> bytes:
    """The package with `name` flagged as zip-encrypted (bit 0 of its central directory entry),
    as a zip tool's password protection marks it; the standard library cannot write one."""
    out = bytearray(data)
    pos = out.find(b"PK\x01\x02")  # the first central directory entry
    while pos != -1:
        name_len = int.from_bytes(out[pos + 28: pos + 30], "little")
        if out[pos + 46: pos + 46 + name_len] == name.encode():
            out[pos + 8] |= 1
            return bytes(out)
        pos = out.find(b"PK\x01\x02", pos + 46)
    raise AssertionError(f"{name} not in the package")


def test_zip_level_password_and_fuzzed_packages(tmp_path: Path) -> None:
    """Damaged packages only ever give an ExtractError: 150 random cuts, flips and insertions of
    each format, deflated and stored, and of the XML inside them."""
    locked = zip_encrypted(odt_bytes(p("secret")), "content.xml")
    with pytest.raises(ExtractError, match="^encrypted ODT \\(password-protected zip\\)$"):
        extract(write(tmp_path / "zip-locked.odt", locked))
    samples = {
        "odt": odt_bytes(ODT_PAGED, automatic_styles=ODT_BREAK_STYLES, styles=CHAPTER_STYLE, page_count=6),
        "pptx": pptx_file(tmp_path / "deck.pptx", [("A", "B", "C"), ("D", "E", "")]).read_bytes(),
        "epub": epub_bytes([("a.xhtml", xhtml("A", "<p>One.</p>")), ("b.xhtml", xhtml("B", "<p>Two.</p>"))]),
    }
    rng = random.Random(0)
    tokens = [b"<", b">", b"&", b"</text:p>", b"</a:p>", b"]]>", b"\x00", b"&#0;", b"<!DOCTYPE x SYSTEM 'file:///etc/passwd'>"]
    reasons = set()
    for ext, data in samples.items():
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            parts = {i.filename: zf.read(i) for i in zf.infolist()}
        for n in range(150):
            if n % 2:  # the zip's bytes
                raw = bytearray(data)
                i = rng.randrange(len(raw))
                raw[i: i + rng.randint(0, 40)] = rng.randbytes(rng.randint(0, 40))
                mutated = bytes(raw)
            else:  # the XML inside, re-zipped with good checksums
                target = rng.choice(sorted(parts))
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w", rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])) as zf:
                    for name, body in parts.items():
                        if name == target:
                            i = rng.randrange(len(body) + 1)
                            body = body[:i] + rng.choice(tokens) + body[i + rng.randint(0, 20):]
                        zf.writestr(name, body)
                mutated = buf.getvalue()
            try:
                extract(write(tmp_path / f"fuzz.{ext}", mutated))
            except ExtractError as e:
                assert "\n" not in e.reason
                reasons.add(e.reason.split(" (")[0])
    assert {"not a valid ODT", "not a valid PPTX", "not a valid EPUB"} <= reasons


def test_one_damaged_slide_or_chapter_leaves_the_others(tmp_path: Path) -> None:
    deck = pptx_file(tmp_path / "deck.pptx", [("One", "First.", ""), ("Two", "Second.", ""), ("Three", "Third.", "")])
    damaged = tmp_path / "damaged.pptx"
    with zipfile.ZipFile(deck) as src, zipfile.ZipFile(damaged, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, b"<p:sld><unclosed" if info.filename == "ppt/slides/slide2.xml" else src.read(info))
    assert pages(extract(damaged)) == [(1, "One"), (1, "First."), (3, "Three"), (3, "Third.")]
    book = epub_bytes([("a.xhtml", xhtml("A", "<p>One.</p>")), ("b.xhtml", xhtml("B", "<p>Two.</p>"))])
    assert pages(extract(write(tmp_path / "book.epub", zip_encrypted(book, "OEBPS/a.xhtml")))) == [(2, "Two.")]


# ------------------------------------------------------------------------------------ PPTX


def test_pptx_slides_notes_tables_and_groups_in_slide_order(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = pptx_file(tmp_path / "deck.pptx", [
        ("Kettles", "Descale once a month.", "Mention the vinegar trick."),
        ("Tea", "Green tea steeps for two minutes.", ""),
        ("Bread", "Bake at 220 degrees.", ""),
    ])
    prs = Presentation(deck)
    table = prs.slides[1].shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Tea", "Minutes"
    table.cell(1, 0).text, table.cell(1, 1).text = "Green", "2"
    group = prs.slides[2].shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(5), Inches(2), Inches(1)).text_frame.text = "Grouped note."
    ids = prs.slides._sldIdLst  # the order PowerPoint shows: move the last slide first
    ids.insert(0, ids[-1])
    prs.save(deck)
    assert pages(extract(deck)) == [
        (1, "Bread"), (1, "Bake at 220 degrees."), (1, "Grouped note."),
        (2, "Kettles"), (2, "Descale once a month."), (2, "Mention the vinegar trick."),
        (3, "Tea"), (3, "Green tea steeps for two minutes."), (3, "Tea | Minutes"), (3, "Green | 2"),
    ]


def test_pptx_reads_only_the_text_parts(tmp_path: Path) -> None:
    """A deck with 3 MB of video: only its slides' XML is inflated and charged to max_unpacked."""
    deck = pptx_file(tmp_path / "deck.pptx", [("Video", "The river bridge at night.", "")])
    with zipfile.ZipFile(deck, "a") as zf:
        zf.writestr("ppt/media/media1.mp4", random.Random(0).randbytes(3_000_000))
    assert texts(extract(deck, max_unpacked=1_000_000)) == ["Video", "The river bridge at night."]


def test_pptx_bad_packages(tmp_path: Path) -> None:
    import docx

    deck = pptx_file(tmp_path / "deck.pptx", [("Title", "Body", "")]).read_bytes()
    cases = {
        "cut.pptx": (deck[: len(deck) // 2], "^not a valid PPTX \\(truncated or damaged zip file\\)$"),
        "ole.pptx": (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
                     "^not a valid PPTX \\(password-protected, or the older binary format\\)$"),
        "empty.pptx": (b"", "^not a valid PPTX \\(not a zip file\\)$"),
    }
    for name, (data, reason) in cases.items():
        with pytest.raises(ExtractError, match=reason):
            extract(write(tmp_path / name, data))
    docx.Document().save(tmp_path / "word.pptx")  # a DOCX renamed
    with pytest.raises(ExtractError, match="^not a valid PPTX \\(word/document.xml is not a presentation\\)$"):
        extract(tmp_path / "word.pptx")
    with zipfile.ZipFile(tmp_path / "other.pptx", "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ExtractError, match="^not a valid PPTX \\(no ppt/presentation.xml\\)$"):
        extract(tmp_path / "other.pptx")
    laughs = tmp_path / "laughs.pptx"
    with zipfile.ZipFile(tmp_path / "deck.pptx") as src, zipfile.ZipFile(laughs, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "ppt/slides/slide1.xml":
                data = data.replace(b"?>", b"?>" + BILLION_LAUGHS.encode(), 1)
            dst.writestr(info, data)
    with pytest.raises(ExtractError, match="^PPTX refused: ppt/slides/slide1.xml declares XML entities"):
        extract(laughs)


# ------------------------------------------------------------------------------------ EPUB


def test_epub_spine_order_chapters_and_encodings(tmp_path: Path) -> None:
    book = epub_bytes([
        ("nav.xhtml", xhtml("Book", "<nav><ol><li>Tea</li></ol></nav>")),
        ("chapter%201.xhtml", xhtml("Book", "<h1>Tea</h1><p>Green tea steeps two minutes.</p>")),
        ("cover.xhtml", xhtml("Book", '<img src="cover.png" alt=""/>')),
        ("ch2.xhtml", xhtml("Book", "<h1>Café</h1><p>Crème brûlée.</p>", "windows-1252").encode("cp1252")),
        ("style.css", "p { margin: 0 }"),
    ], spine=["cover.xhtml", "chapter%201.xhtml", "style.css", "ch2.xhtml", "nav.xhtml"],
        media_types={"style.css": "text/css"})
    assert pages(extract(write(tmp_path / "book.epub", book))) == [
        (2, "Tea Green tea steeps two minutes."), (4, "Café Crème brûlée."), (5, "Tea"),  # nav-only: read whole
    ]


def test_epub_drm_fonts_and_entities(tmp_path: Path) -> None:
    docs = [("a.xhtml", xhtml("A", "<p>One.</p>")), ("b.xhtml", xhtml("B", "<p>Two.</p>"))]
    locked = epub_bytes(docs, encryption=drm("OEBPS/a.xhtml", "OEBPS/b.xhtml"))
    with pytest.raises(ExtractError, match="^encrypted EPUB \\(DRM\\)$"):
        extract(write(tmp_path / "locked.epub", locked))
    half = epub_bytes(docs, encryption=drm("OEBPS/a.xhtml"))
    assert pages(extract(write(tmp_path / "half.epub", half))) == [(2, "Two.")]
    fonts = epub_bytes(docs, encryption=drm("OEBPS/a.xhtml", algorithm="http://www.idpf.org/2008/embedding"))
    assert texts(extract(write(tmp_path / "fonts.epub", fonts))) == ["One.", "Two."]  # obfuscated fonts only
    with pytest.raises(ExtractError, match="^EPUB refused: OEBPS/content.opf declares XML entities"):
        extract(write(tmp_path / "laughs.epub", epub_bytes(docs, opf_doctype=BILLION_LAUGHS)))
    # a chapter is HTML to the reader: its DTD's entities are never expanded
    start = time.perf_counter()
    chapter = BILLION_LAUGHS.replace("lolz", "html") + "<html><body><p>Safe &lol9; text.</p></body></html>"
    blocks = extract(write(tmp_path / "chapter.epub", epub_bytes([("c.xhtml", chapter)])))
    assert "Safe &lol9; text." in texts(blocks) and time.perf_counter() - start < 5


def test_epub_bad_packages(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "plain.epub", "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ExtractError, match="^not a valid EPUB \\(no META-INF/container.xml\\)$"):
        extract(tmp_path / "plain.epub")
    empty_spine = epub_bytes([("a.xhtml", xhtml("A", "<p>One.</p>"))], spine=[])
    with pytest.raises(ExtractError, match="^not a valid EPUB \\(no readable document in its spine\\)$"):
        extract(write(tmp_path / "nospine.epub", empty_spine))
    with pytest.raises(ExtractError, match="^not a valid EPUB \\(not a zip file\\)$"):
        extract(write(tmp_path / "text.epub", "just text"))


# ------------------------------------------------------------------------------------ e-mail


def test_eml_subject_then_plain_body(tmp_path: Path) -> None:
    msg = message("Réunion: the museum ticket", "The ticket costs ten euros.\n\nBring cash.\n",
                  html="<p>The <b>HTML</b> copy is not read twice.</p>")
    blocks = extract(write(tmp_path / "note.eml", bytes(msg)))
    assert pages(blocks) == [(1, "Réunion: the museum ticket"), (1, "The ticket costs ten euros."),
                             (1, "Bring cash.")]
    assert {b.line for b in blocks} == {None}


def test_eml_html_only_and_attachments(tmp_path: Path) -> None:
    html = message("Offer", "", html="<html><head><title>Newsletter template</title><style>p{}</style></head>"
                                     "<body><p>Green tea, half price.</p><script>x()</script></body></html>")
    assert texts(extract(write(tmp_path / "html.eml", bytes(html)))) == ["Offer", "Green tea, half price."]
    mixed = message("Report", "See the attached file.\n")
    mixed.add_attachment("Attached text is another file's.", filename="notes.txt")
    mixed.add_attachment(bytes(range(256)), maintype="application", subtype="octet-stream", filename="x.bin")
    assert texts(extract(write(tmp_path / "mixed.eml", bytes(mixed)))) == ["Report", "See the attached file."]


def test_mail_charsets(tmp_path: Path) -> None:
    ru = "Привет, это письмо в кодировке KOI8-R."
    cases = [
        (bytes(message("Crème", "Déjà vu, naïve café.\n", charset="iso-8859-1")), ["Crème", "Déjà vu, naïve café."]),
        (bytes(message("Письмо", ru + "\n", charset="koi8-r")), ["Письмо", ru]),
        # a charset no codec knows: the bytes are decoded as a text file's would be
        ((b"Subject: =?x-unknown?q?caf=E9?=\nContent-Type: text/plain; charset=x-unknown\n"
          b"Content-Transfer-Encoding: 8bit\n\nThe caf\xe9 is open.\n"), ["café", "The café is open."]),
        # raw 8-bit header bytes (not allowed, sent all the same)
        ("Subject: Café menu\nContent-Type: text/plain\n\nGreen tea.\n".encode("cp1252"), ["Café menu", "Green tea."]),
        ("Subject: Grüße\nContent-Type: text/plain; charset=utf-8\n\nÜber.\n".encode(), ["Grüße", "Über."]),
        # an encoded word that is not base64 is kept as written
        (b"Subject: =?utf-8?b?>q)ZU%x7)?= tea\n\nBody.\n", ["=?utf-8?b?>q)ZU%x7)?= tea", "Body."]),
        # encoded words beside plain words, folded over two lines
        (b"Subject: Re: =?utf-8?q?caf=C3=A9?=\n =?iso-8859-1?b?bWVu+g==?= today\n\nBody.\n", ["Re: cafémenú today", "Body."]),
    ]
    for i, (data, expected) in enumerate(cases):
        assert texts(extract(write(tmp_path / f"m{i}.eml", data))) == expected, i


def test_eml_wrong_type_and_empty(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match="^binary file, not an e-mail message$"):
        extract(write(tmp_path / "image.eml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8))
    with pytest.raises(ExtractError, match="^not an e-mail message \\(no headers\\)$"):
        extract(write(tmp_path / "text.eml", "Just a note, no headers at all.\n"))
    assert extract(write(tmp_path / "empty.eml", b"")) == []
    envelope = b"From anna@example.org Mon Jan  1 00:00:00 2024\n" + bytes(message("Tea", "Boil water.\n"))
    assert texts(extract(write(tmp_path / "saved.eml", envelope))) == ["Tea", "Boil water."]


def test_mbox_messages_numbered_in_order(tmp_path: Path) -> None:
    box = mbox_file(tmp_path / "inbox.mbox", [
        message("Kettle", "From now on, descale monthly.\n"),  # escaped as >From by mailbox
        message("Tea", "Green tea steeps two minutes.\n"),
        message("Bread", "", html="<p>Bake at 220 degrees.</p>"),
    ])
    assert pages(extract(box)) == [
        (1, "Kettle"), (1, ">From now on, descale monthly."),
        (2, "Tea"), (2, "Green tea steeps two minutes."),
        (3, "Bread"), (3, "Bake at 220 degrees."),
    ]


def test_mbox_wrong_type_and_empty(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match="^not an mbox file \\(it does not start with a 'From ' line\\)$"):
        extract(write(tmp_path / "notes.mbox", "Dear diary,\nFrom today on I drink tea.\n"))
    assert extract(write(tmp_path / "empty.mbox", b"")) == []


def big_mbox(path: Path, n: int, special: dict[int, str] | None = None) -> Path:
    """n messages 'Note i' / 'Message number i is here.' (or special[i]), from one the email
    package wrote."""
    special = special or {}
    msg = message("Note NUMBER", "BODY\n")
    msg.set_unixfrom("From anna@example.org Mon Jan  1 00:00:00 2024")
    template = msg.as_bytes(unixfrom=True) + b"\n"
    with open(path, "wb") as f:
        for i in range(1, n + 1):
            body = special.get(i, f"Message number {i} is here.").encode()
            f.write(template.replace(b"NUMBER", b"%d" % i).replace(b"BODY", body))
    return path


def test_mbox_of_10000_messages_is_streamed_and_capped(tmp_path: Path) -> None:
    box = big_mbox(tmp_path / "big.mbox", 10_000)
    start = time.perf_counter()
    blocks = extract(box)
    assert time.perf_counter() - start < 30
    assert len(blocks) == 20_000
    assert pages(blocks[-2:]) == [(10_000, "Note 10000"), (10_000, "Message number 10000 is here.")]
    capped = extract(box, max_chars=2_000)  # stops reading once max_chars is reached
    assert capped[-1].truncated and capped[-1].page < 200
    assert sum(len(b.text) for b in capped) <= 2_000


def test_mbox_message_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A message past MAX_MESSAGE_BYTES is read up to the cap: its text first, not the attachment."""
    from sparc_local.ingest import mail

    monkeypatch.setattr(mail, "MAX_MESSAGE_BYTES", 50_000)
    msg = message("Photos", "The photos are attached.\n")
    msg.add_attachment(random.Random(0).randbytes(300_000), maintype="image", subtype="jpeg", filename="a.jpg")
    box = mbox_file(tmp_path / "a.mbox", [msg, message("Next", "Second message.\n")])
    assert pages(extract(box)) == [(1, "Photos"), (1, "The photos are attached."), (2, "Next"),
                                   (2, "Second message.")]


# ------------------------------------------------------------------------------------ locations in `ask`


@pytest.mark.usefixtures("active_tiny")
def test_ask_names_the_slide_chapter_page_and_message(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    pptx_file(root / "deck.pptx", [("Intro", "Welcome.", ""), ("Travel", "The train station is near.", ""),
                                   ("Music", "The piano school opens at nine.", "")])
    write(root / "book.epub", epub_bytes([("a.xhtml", xhtml("Book", "<p>The king and queen.</p>")),
                                          ("b.xhtml", xhtml("Book", "<p>The river bridge was built.</p>"))]))
    write(root / "paged.odt", odt_bytes(p("Cover.") + "<text:soft-page-break/>" + p("Bake the bread in the oven."),
                                        page_count=2))
    mbox_file(root / "inbox.mbox", [message("Hello", "Hi.\n"), message("Phone", "The phone battery charge lasts hours.\n")])
    write(root / "note.eml", bytes(message("Museum", "The museum ticket costs ten euros.\n")))
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(root), "-q"], catch_exceptions=False)
    assert (result.exit_code, result.output) == (0, "")

    def top(question: str) -> tuple[str, int | None, int | None, str]:
        out = runner.invoke(app, ["ask", question, "--json", "-k", "1"], catch_exceptions=False).output
        a = json.loads(out)[0]
        return Path(a["path"]).name, a["page"], a["line"], a["sentence"]

    assert top("piano school") == ("deck.pptx", 3, None, "The piano school opens at nine.")
    assert top("river bridge built") == ("book.epub", 2, None, "The river bridge was built.")
    assert top("bake bread oven") == ("paged.odt", 2, None, "Bake the bread in the oven.")
    assert top("phone battery charge") == ("inbox.mbox", 2, None, "The phone battery charge lasts hours.")
    assert top("museum ticket") == ("note.eml", 1, None, "The museum ticket costs ten euros.")
    human = runner.invoke(app, ["ask", "piano school", "-k", "1"], catch_exceptions=False).output
    assert human.splitlines()[0].startswith(f"1. {root / 'deck.pptx'} (slide 3)  score ")
