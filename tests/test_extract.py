"""Extraction and file walking, on real files written to tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest

from sparc_local.ingest.extract import Block, ExtractError, document_text, extract, iter_files
from sparc_local.ingest.sentences import paragraphs, segment

# ------------------------------------------------------------------------------------ helpers


def pdf_bytes(pages: list[list[str]], encoding: str = "/WinAnsiEncoding") -> bytes:
    """A minimal valid PDF: one Helvetica text line per string, '' leaves a gap."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    n = len(pages)
    font = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objs: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
        font: f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding {encoding} >>".encode(),
    }
    for i, lines in enumerate(pages):
        ops = ["BT", "/F1 11 Tf", "72 720 Td"]
        for line in lines:
            if line:
                ops.append(f"({esc(line)}) Tj")
            ops.append("0 -14 Td")
        stream = "\n".join(ops + ["ET"]).encode("cp1252") if lines else b"0 0 m 10 10 l S"
        objs[3 + 2 * i] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {4 + 2 * i} 0 R >>"
        ).encode()
        objs[4 + 2 * i] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for k in sorted(objs):
        offsets[k] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (k, objs[k])
    xref, size = len(out), max(objs) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    out += b"".join(b"%010d 00000 n \n" % offsets[k] for k in range(1, size))
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


TEA = [
    "Green tea should steep for two to three min-",
    "utes at 80 degrees.",
    "Black tea needs freshly boiled water and takes",
    "four to five minutes to brew properly.",
]


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def texts(blocks: list[Block]) -> list[str]:
    return [b.text for b in blocks]


# ------------------------------------------------------------------------------------ PDF


def test_pdf_text_layer_paragraphs_and_dehyphenation(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path / "tea.pdf", pdf_bytes([TEA])))
    assert texts(blocks) == [
        "Green tea should steep for two to three minutes at 80 degrees.",
        "Black tea needs freshly boiled water and takes four to five minutes to brew properly.",
    ]
    assert all(b.page == 1 and b.line is None for b in blocks)
    doc = document_text(blocks)
    assert all(doc[b.start : b.start + len(b.text)] == b.text for b in blocks)


def test_pdf_ligatures_become_their_letters(tmp_path: Path) -> None:
    """A font whose codes 1-3 are the fi, fl and ffi ligature glyphs, as typeset PDFs have."""
    ligatures = "<< /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [1 /fi /fl /ffi] >>"
    pdf = pdf_bytes([["The \x01eld is \x02at and e\x03cient."]], encoding=ligatures)
    assert texts(extract(write(tmp_path / "lig.pdf", pdf))) == ["The field is flat and efficient."]


def test_pdf_multipage_records_pages(tmp_path: Path) -> None:
    pages = [
        ["Page one talks about kettles."],
        ["Page two talks about tea."],
        ["Page three: bread."],
    ]
    blocks = extract(write(tmp_path / "multi.pdf", pdf_bytes(pages)))
    assert [(b.page, b.text) for b in blocks] == [
        (1, "Page one talks about kettles."),
        (2, "Page two talks about tea."),
        (3, "Page three: bread."),
    ]


def test_pdf_corrupt_and_truncated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    garbage = write(tmp_path / "garbage.pdf", os.urandom(2000))
    with pytest.raises(ExtractError, match="not a valid PDF"):
        extract(garbage)
    good = pdf_bytes([TEA])
    for cut in (len(good) // 2, len(good) - 30):
        with pytest.raises(ExtractError, match="not a valid PDF") as err:
            extract(write(tmp_path / "cut.pdf", good[:cut]))
        assert "\n" not in str(err.value)
    with pytest.raises(ExtractError, match="not a valid PDF"):
        extract(write(tmp_path / "empty.pdf", b""))
    assert not [r for r in caplog.records if r.name.startswith("pypdf")]  # pypdf kept quiet


def test_pdf_encrypted(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = write(tmp_path / "plain.pdf", pdf_bytes([TEA]))
    locked = PdfWriter(clone_from=PdfReader(plain))
    locked.encrypt(user_password="secret", owner_password="owner")
    locked.write(tmp_path / "locked.pdf")
    with pytest.raises(ExtractError, match="^encrypted PDF$"):
        extract(tmp_path / "locked.pdf")

    open_ = PdfWriter(clone_from=PdfReader(plain))  # owner-only password: opens without one
    open_.encrypt(user_password="", owner_password="owner")
    open_.write(tmp_path / "open.pdf")
    assert texts(extract(tmp_path / "open.pdf")) == texts(extract(plain))


def test_pdf_without_text_layer(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match=r"no text layer \(scanned PDF\?\)"):
        extract(write(tmp_path / "scan.pdf", pdf_bytes([[], []])))


# ------------------------------------------------------------------------------------ DOCX


def test_docx_paragraphs_and_table(tmp_path: Path) -> None:
    import docx

    doc = docx.Document()
    doc.add_heading("Kettle care", level=1)
    doc.add_paragraph("Descale the kettle once a month.")
    doc.add_paragraph("")
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Water", "Interval"
    table.cell(1, 0).text, table.cell(1, 1).text = "Hard", "Monthly"
    doc.add_paragraph("Keep the receipt.")
    doc.save(tmp_path / "care.docx")
    blocks = extract(tmp_path / "care.docx")
    assert texts(blocks) == [  # a heading style heads its section; a row is one unit
        "Kettle care Descale the kettle once a month.",
        "Kettle care Water | Interval",
        "Kettle care Hard | Monthly",
        "Kettle care Keep the receipt.",
    ]
    assert [s.text for s in segment(blocks)] == ["Descale the kettle once a month.", "Water | Interval",
                                                  "Hard | Monthly", "Keep the receipt."]


def test_docx_zip_bomb_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open("word/document.xml", "w") as f:
            for _ in range(20):  # 20 MB of zeros, ~20 KB on disk
                f.write(bytes(1 << 20))
    assert bomb.stat().st_size < 100_000
    with pytest.raises(ExtractError, match=r"DOCX too large when unpacked \(possible zip bomb\)"):
        extract(bomb)
    with pytest.raises(ExtractError, match="zip bomb"):  # and the total-size cap
        extract(bomb, max_unpacked=1_000_000)


def test_docx_not_a_zip(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match="not a valid DOCX"):
        extract(write(tmp_path / "fake.docx", b"this is not a zip file at all"))
    with zipfile.ZipFile(tmp_path / "other.docx", "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ExtractError, match="not a valid DOCX"):
        extract(tmp_path / "other.docx")


# ------------------------------------------------------------------------------------ HTML


def test_html_drops_script_style_and_splits_blocks(tmp_path: Path) -> None:
    html = """<!doctype html>
<html><head><title>Tea</title>
<style>p { color: red; }</style>
<script>var x = "<p>not text</p>";</script></head>
<body><h1>Tea</h1>
<p>Green tea&nbsp;steeps for two minutes.<br>Black tea &amp; milk.</p>
<noscript>Enable JavaScript</noscript>
<div>Caf&eacute; <b>notes</b>
   on several lines</div>
<table><tr><td>A</td><td>B</td></tr></table>
</body></html>"""
    blocks = extract(write(tmp_path / "page.html", html))
    assert texts(blocks) == [
        "Tea Green tea steeps for two minutes.",  # &nbsp; is whitespace too; the heading heads its section
        "Tea Black tea & milk.",
        "Tea Café notes on several lines",
        "Tea A | B",  # a table row is one unit
    ]
    assert [b.line for b in blocks[:3]] == [6, 6, 8]  # a block's line is its own text's
    assert [(s.text, s.line) for s in segment(blocks)[:3]] == [
        ("Green tea steeps for two minutes.", 6), ("Black tea & milk.", 6), ("Café notes on several lines", 8)]


def test_html_title_is_context_unless_repeated(tmp_path: Path) -> None:
    """<title> heads the page (context, never an answer), unless a heading of the page says it."""
    html = "<title>Packing list</title><h1>Trip</h1><p>Bring shoes.</p>"
    blocks = extract(write(tmp_path / "p.html", html))
    assert texts(blocks) == ["Packing list Trip Bring shoes."]
    assert [s.text for s in segment(blocks)] == ["Bring shoes."]
    html = "<title>Sandbox — Jinja Documentation (3.1.x)</title><h1>Sandbox</h1><p>It runs templates.</p>"
    assert texts(extract(write(tmp_path / "sandbox.html", html))) == ["Sandbox It runs templates."]


def test_html_meta_charset(tmp_path: Path) -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>Café “naïve”</p></body></html>'
    blocks = extract(write(tmp_path / "legacy.htm", html.encode("cp1252")))
    assert texts(blocks) == ["Café “naïve”"]


# ------------------------------------------------------------------------------------ text


def test_text_paragraphs_and_lines(tmp_path: Path) -> None:
    text = "First para line one\n  line two.\n\n\n\nSecond   para.\r\nStill second.\n"
    blocks = extract(write(tmp_path / "a.txt", text))
    assert texts(blocks) == ["First para line one line two.", "Second para. Still second."]
    assert [b.line for b in blocks] == [1, 6]
    assert [b.start for b in blocks] == [0, len(blocks[0].text) + 2]


def test_markdown_markup_stripped(tmp_path: Path) -> None:
    md = (
        "# Title\nIntro with **bold** and a [link](http://x).\n\n"
        "- item one\n- item two\n\n```\ncode stays\n```\n"
    )
    blocks = extract(write(tmp_path / "n.md", md))
    assert texts(blocks) == [  # the heading is the context of its section's blocks
        "Title Intro with bold and a link.",
        "Title item one",
        "Title item two",
        "Title code stays",
    ]
    assert [b.line for b in blocks] == [2, 4, 5, 8]
    assert [(s.text, s.line) for s in segment(blocks)[:2]] == [("Intro with bold and a link.", 2), ("item one", 4)]


def test_rst_adornments_and_bullets(tmp_path: Path) -> None:
    rst = "Sourdough\n=========\n\n- 500 g flour\n- 10 g salt\n\nMix it all.\nThen wait.\n"
    blocks = extract(write(tmp_path / "r.rst", rst))
    assert texts(blocks) == ["Sourdough 500 g flour", "Sourdough 10 g salt", "Sourdough Mix it all. Then wait."]
    assert [b.line for b in blocks] == [4, 5, 7]
    assert [(s.text, s.line) for s in segment(blocks)[:2]] == [("500 g flour", 4), ("10 g salt", 5)]


def test_markup_lines_are_not_sentences(tmp_path: Path) -> None:
    """Markdown link definitions and rst directives, targets and substitutions are markup, not
    prose (as pip's documentation ships them); an admonition's argument is prose and stays."""
    md = ("See the [index][pypi] for packages.[^1]\n\n[pypi]: https://pypi.org/ \"PyPI\"\n  [Other]: <https://x.org>\n"
          "[^1]: A footnote is prose.\n")
    assert texts(extract(write(tmp_path / "l.md", md))) == ["See the [index][pypi] for packages.[^1]",
                                                           "A footnote is prose."]
    rst = (".. _install:\n\nInstall it first.\n\n.. tab:: Unix/macOS\n\n   .. code-block:: console\n\n"
           "      python -m pip install x\n\n.. |logo| image:: logo.png\n\n"
           ".. note:: Mind the gap.\n   It is wide.\n\n.. warning::\n\n   Do not run as root.\n")
    assert texts(extract(write(tmp_path / "d.rst", rst))) == [
        "Install it first.", "python -m pip install x", "Mind the gap. It is wide.", "Do not run as root."]
    # the same lines in plain text are text
    assert texts(extract(write(tmp_path / "d.txt", ".. note:: Mind the gap.\n"))) == [".. note:: Mind the gap."]


def test_legacy_encodings(tmp_path: Path) -> None:
    cp = write(tmp_path / "cp.txt", "café naïve – “quoted” 5 €".encode("cp1252"))
    assert texts(extract(cp)) == ["café naïve – “quoted” 5 €"]
    latin = write(tmp_path / "latin.txt", "Ölförråd på ön".encode("latin-1"))
    assert texts(extract(latin)) == ["Ölförråd på ön"]
    u16 = write(tmp_path / "u16.txt", "Grüße\n\nzweiter Absatz".encode("utf-16"))
    assert texts(extract(u16)) == ["Grüße", "zweiter Absatz"]
    bom8 = write(tmp_path / "bom.md", "\ufeffhello".encode("utf-8"))
    assert texts(extract(bom8)) == ["hello"]
    stray = write(tmp_path / "stray.txt", "déjà vu, naïve café".encode() + b" \x92")
    assert texts(extract(stray)) == ["déjà vu, naïve café \ufffd"]  # mostly UTF-8 stays UTF-8


def test_non_western_legacy_text_with_detector(tmp_path: Path) -> None:
    pytest.importorskip("charset_normalizer")
    ru = "Привет, мир! Это тестовый файл на русском языке, в кодировке Windows."
    assert texts(extract(write(tmp_path / "ru.txt", ru.encode("cp1251")))) == [ru]


def test_binary_renamed_txt(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8
    with pytest.raises(ExtractError, match="^binary file, not text$"):
        extract(write(tmp_path / "image.txt", png))


def test_read_is_bounded(tmp_path: Path) -> None:
    big = write(tmp_path / "big.txt", ("é" * 99 + "\n") * 20_000)  # ~4 MB
    blocks = extract(big, max_chars=1000)
    assert sum(len(b.text) for b in blocks) <= 1000
    assert blocks[0].text.startswith("é")


# ------------------------------------------------------------------------------------ errors


def test_missing_directory_and_unsupported(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match="^file vanished while reading$"):
        extract(tmp_path / "gone.txt")
    (tmp_path / "folder.txt").mkdir()
    with pytest.raises(ExtractError, match="is a folder"):
        extract(tmp_path / "folder.txt")
    with pytest.raises(ExtractError, match="unsupported file type"):
        extract(write(tmp_path / "x.xyz", "hi"))
    os.mkfifo(tmp_path / "pipe.txt")  # opening it would block forever
    with pytest.raises(ExtractError, match="not a regular file"):
        extract(tmp_path / "pipe.txt")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_and_folder(tmp_path: Path) -> None:
    secret = write(tmp_path / "docs" / "secret.txt", "hidden")
    locked = tmp_path / "docs" / "locked"
    write(locked / "inside.txt", "x")
    secret.chmod(0)
    locked.chmod(0)
    try:
        with pytest.raises(ExtractError, match="^permission denied$"):
            extract(secret)
        errors: list[tuple[Path, str]] = []
        assert list(
            iter_files([tmp_path / "docs"], on_error=lambda p, r: errors.append((p, r)))
        ) == [secret]
        assert errors == [(locked, "permission denied")]
    finally:
        locked.chmod(0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="only needed when running as root")
def test_unreadable_as_unprivileged_user_when_root() -> None:
    """As root chmod 000 is no barrier: fork, drop to 'nobody' and check the real error path."""
    base = Path(tempfile.mkdtemp(prefix="sparc-perm-"))  # tmp_path is not reachable by nobody
    try:
        base.chmod(0o755)
        secret = write(base / "secret.txt", "hidden")
        write(base / "locked" / "inside.txt", "x")
        secret.chmod(0)
        (base / "locked").chmod(0)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                result: dict[str, object] = {}
                try:
                    extract(secret)
                except ExtractError as e:
                    result["extract"] = str(e)
                errors: list[list[str]] = []
                files = iter_files([base], on_error=lambda p, r: errors.append([p.name, r]))
                result["files"] = [p.name for p in files]
                result["errors"] = errors
                os.write(write_fd, json.dumps(result).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as f:
            result = json.loads(f.read() or b"{}")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert result == {
            "extract": "permission denied",
            "files": ["secret.txt"],
            "errors": [["locked", "permission denied"]],
        }
    finally:
        (base / "locked").chmod(0o755)
        shutil.rmtree(base)


# ------------------------------------------------------------------------------------ walking


def make_tree(root: Path) -> None:
    for rel in [
        "a.txt",
        "b.md",
        "notes.log",
        "image.png",
        ".hidden.txt",
        ".git/config.txt",
        "build/out.html",
        "sub/c.pdf",
        "sub/deep/d.docx",
        "sub/deep/e.rst",
        "sub/Z.HTM",
    ]:
        write(root / rel, "x")


def rels(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def test_iter_files_filters_and_order(tmp_path: Path) -> None:
    make_tree(tmp_path)
    found = rels(list(iter_files([tmp_path])), tmp_path)
    assert found == [
        "a.txt",
        "b.md",
        "build/out.html",
        "sub/Z.HTM",
        "sub/c.pdf",
        "sub/deep/d.docx",
        "sub/deep/e.rst",
    ]
    assert found == rels(list(iter_files([tmp_path])), tmp_path)  # deterministic
    hidden = rels(list(iter_files([tmp_path], include_hidden=True)), tmp_path)
    assert {".hidden.txt", ".git/config.txt"} <= set(hidden)


def test_iter_files_exclude_globs(tmp_path: Path) -> None:
    make_tree(tmp_path)
    found = rels(list(iter_files([tmp_path], exclude=["*.md", "build/*", "deep"])), tmp_path)
    assert found == ["a.txt", "sub/Z.HTM", "sub/c.pdf"]
    found = rels(list(iter_files([tmp_path], exclude=["sub/deep/*.rst"])), tmp_path)
    assert "sub/deep/e.rst" not in found and "sub/deep/d.docx" in found


def test_iter_files_single_file_and_missing_root(tmp_path: Path) -> None:
    one = write(tmp_path / "one.txt", "x")
    assert list(iter_files([one])) == [one]
    errors: list[tuple[Path, str]] = []
    odd = write(tmp_path / "one.log", "x")
    assert list(iter_files([odd], on_error=lambda p, r: errors.append((p, r)))) == []
    assert errors and "unsupported" in errors[0][1]
    with pytest.raises(ExtractError, match="no such file"):
        iter_files([tmp_path / "nope"])


def test_iter_files_symlink_loop_and_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "sub" / "a.txt", "x")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)  # points to its ancestor
    (root / "alias").symlink_to(root / "sub", target_is_directory=True)
    (root / "sub" / "dangling.txt").symlink_to(tmp_path / "missing.txt")
    outside = write(tmp_path / "elsewhere" / "b.txt", "x")
    (root / "link_out").symlink_to(outside.parent, target_is_directory=True)
    errors: list[tuple[Path, str]] = []
    found = list(iter_files([root, root / "sub"], on_error=lambda p, r: errors.append((p, r))))
    assert rels(found, root) == ["alias/a.txt", "link_out/b.txt"]  # each real file once
    assert errors == [(root / "alias" / "dangling.txt", "broken symlink")]


# ------------------------------------------------------------------------------------ sample


def test_bundled_sample_corpus() -> None:
    from sparc_local.ingest.sentences import segment

    sample = Path(__file__).resolve().parents[1] / "sparc_local" / "sample"
    from sparc_local.sample import sample_questions

    questions = sample_questions()
    assert questions[0] == "How long should green tea steep?" and len(questions) == 3
    files = list(iter_files([sample]))
    assert {p.suffix for p in files} >= {".md", ".txt", ".html"}
    sentences = [s.text for p in files for s in segment(extract(p))]
    assert len(sentences) > 30
    assert sum("green tea should steep" in s.lower() for s in sentences) == 1


# ------------------------------------------------------------------------ worth indexing (issue 17)


def test_pdf_running_heads_footers_and_page_numbers_dropped(tmp_path: Path) -> None:
    pages = [
        ["Tea Handbook", "Chapter 1: Green 1", "Green tea steeps two minutes.", "", "1"],
        ["Tea Handbook", "Chapter 1: Green 2", "Sencha is a green tea.", "", "2"],
        ["Tea Handbook", "Chapter 2: Black 3", "Black tea steeps four minutes.", "", "3"],
        ["Tea Handbook", "Chapter 2: Black 4", "Assam is a black tea.", "", "4"],
    ]
    blocks = extract(write(tmp_path / "book.pdf", pdf_bytes(pages)))
    assert [(b.page, b.text) for b in blocks] == [
        (1, "Green tea steeps two minutes."),
        (2, "Sencha is a green tea."),
        (3, "Black tea steeps four minutes."),
        (4, "Assam is a black tea."),
    ]


def test_pdf_line_on_two_pages_only_is_kept(tmp_path: Path) -> None:
    pages = [["Tea Handbook", "Green tea steeps two minutes."], ["Tea Handbook", "Black tea steeps longer."],
             ["Oolong sits in between."]]
    blocks = extract(write(tmp_path / "short.pdf", pdf_bytes(pages)))
    assert [b.text for b in blocks] == ["Tea Handbook Green tea steeps two minutes.",
                                       "Tea Handbook Black tea steeps longer.", "Oolong sits in between."]


def test_sentence_without_word_character_is_not_indexed(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path / "rules.txt", "| --- |\n\nTea is good. Really.\n\n»\n\n_\n"))
    assert texts(blocks) == ["| --- |", "Tea is good. Really.", "»", "_"]
    assert [(s.text, s.block, s.position) for s in segment(blocks)] == [
        ("Tea is good.", 1, 0), ("Really.", 1, 1), ("_", 3, 0)]  # "_" is a word character


def test_heading_and_following_paragraph_are_one_paragraph(tmp_path: Path) -> None:
    md = "# Brewing\n\n## Green tea\n\nUse water at 80 degrees. Steep two minutes.\n\nServe hot.\n"
    blocks = extract(write(tmp_path / "tea.md", md))
    assert texts(blocks) == ["Brewing Green tea Use water at 80 degrees. Steep two minutes.",
                             "Brewing Green tea Serve hot."]
    assert [b.heads for b in blocks] == [(17,), (17,)]
    sents = segment(blocks)
    assert [(s.text, s.line, s.block) for s in sents] == [
        ("Use water at 80 degrees.", 5, 0), ("Steep two minutes.", 5, 0), ("Serve hot.", 7, 1)]
    paras = paragraphs(sents, blocks)
    assert paras == [["Use water at 80 degrees.", "Steep two minutes."], ["Serve hot."]]
    assert [p.heading for p in paras] == ["Brewing Green tea", "Brewing Green tea"]


def test_numbered_html_heading_is_one_sentence_and_heads_its_section(tmp_path: Path) -> None:
    html = "<h2>2. Preparing your program</h2>\n<p>Compile with -g. Use -O0.</p><h3>Last</h3>"
    blocks = extract(write(tmp_path / "guide.html", html))
    assert [(s.text, s.block) for s in segment(blocks)] == [("Compile with -g.", 0), ("Use -O0.", 0)]
    assert [b.heads for b in blocks] == [(25,)]  # a heading at the end heads nothing: a title, never an answer
