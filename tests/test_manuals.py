"""Real manuals read cleanly (issue 45): a man page rendered by `man` and by groff's HTML output
without its running head and foot, titles as context and never answers, plain-text lists and
records as units under their heading, and groff PDFs with their word spaces. Every file is made
here by the real tools (man, groff, ps2pdf); a test whose tool is missing is skipped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sparc_local.ingest.extract import extract
from sparc_local.ingest.sentences import segment

MAN_PAGE = r""".TH TEAPOT 1 "2026-03-07" "teapot 1.21.23" "Teapot Manual"
.SH NAME
teapot \- brew tea from the command line
.SH SYNOPSIS
.B teapot
[\fB\-\-strength\fR \fILEVEL\fR] \fIleaves\fR
.SH DESCRIPTION
.B teapot
heats the water and steeps the leaves for as long as their kind needs.
Green leaves steep for two minutes, black leaves for four.
.SH OPTIONS
.TP
.B \-\-strength \fILEVEL\fR
Steep longer for a stronger cup; the level runs from one to five.
.TP
.B \-\-warnings
Print every kind of warning the teapot knows, such as a kettle left empty.
.SH "SEE ALSO"
kettle(1)
"""


def _sentences(path: Path) -> list[str]:
    return [s.text for s in segment(extract(path))]


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (apt-get install man-db groff ghostscript)")


def _need_groff(device: str) -> None:
    """groff with this output device: Debian's groff-base has the terminal ones, not html."""
    _need("groff")
    if subprocess.run(["groff", f"-T{device}"], input="", capture_output=True).returncode:
        pytest.skip(f"groff has no {device} device (apt-get install groff)")


@pytest.fixture
def man_source(tmp_path: Path) -> Path:
    path = tmp_path / "teapot.1"
    path.write_text(MAN_PAGE)
    return path


def test_a_man_page_rendered_by_man_has_no_head_or_foot(man_source: Path, tmp_path: Path):
    """`man` puts the page's head (`TEAPOT(1)  Teapot Manual  TEAPOT(1)`) on its first line and its
    foot (`teapot 1.21.23  2026-03-07  TEAPOT(1)`) on its last: neither is a sentence; section
    titles head their text."""
    _need("man")
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    done = subprocess.run(["man", "-E", "UTF-8", "-P", "cat", "-l", str(man_source)], capture_output=True,
                          text=True, env=env, check=True)
    text = re.sub(r".\x08", "", done.stdout)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[0].split() == ["TEAPOT(1)", "Teapot", "Manual", "TEAPOT(1)"]
    assert lines[-1].split() == ["teapot", "1.21.23", "2026-03-07", "TEAPOT(1)"]
    path = tmp_path / "teapot.txt"
    path.write_text(text)
    sentences = _sentences(path)
    assert not [s for s in sentences if "TEAPOT(1)" in s or "Teapot Manual" in s]
    assert "--warnings Print every kind of warning the teapot knows, such as a kettle left empty." in sentences
    assert not {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SEE ALSO"} & set(sentences)


def test_a_man_page_rendered_by_groff_to_html_has_no_title_sentence(man_source: Path, tmp_path: Path):
    """groff's HTML: its <title> and the headings are context, its table of contents is dropped."""
    _need_groff("html")
    done = subprocess.run(["groff", "-man", "-Thtml", str(man_source)], capture_output=True, text=True, check=True,
                          cwd=tmp_path)  # grohtml writes its images into the current folder
    assert "<title>TEAPOT</title>" in done.stdout
    path = tmp_path / "teapot.html"
    path.write_text(done.stdout)
    sentences = _sentences(path)
    assert not [s for s in sentences if s.upper() in ("TEAPOT", "NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS")]
    assert "Green leaves steep for two minutes, black leaves for four." in sentences
    assert sentences[0] == "teapot - brew tea from the command line"


def test_a_man_page_paginated_by_nroff_loses_every_head_and_foot(tmp_path: Path):
    """Paginated (form feeds between pages, as `nroff` without continuous rendering writes it),
    a head and a foot recur on every page, the foot with its page number: all go."""
    cups = ["green", "black", "oolong", "white", "herbal"]
    chunks = ["NAME\n       teapot - brew tea", *("\n".join(f"       The {c} cup {w} is poured." for w in cups)
                                                  for c in cups)]
    path = tmp_path / "paged.txt"
    path.write_text("\f".join(f"TEAPOT(1)          Teapot Manual          TEAPOT(1)\n\n{chunk}\n\n"
                              f"teapot 1.21.23          {n}          TEAPOT(1)\n" for n, chunk in enumerate(chunks, 1)))
    assert _sentences(path) == ["teapot - brew tea", *(f"The {c} cup {w} is poured." for c in cups for w in cups)]


def test_a_readme_with_records_gives_a_unit_per_field(tmp_path: Path):
    """`What: ... Status: ... Description: ...` stanzas: each field is a unit, headed by the
    stanza's first field; a line indented under a field continues it."""
    path = tmp_path / "README.features"
    path.write_text("Features of teapot\n==================\n\n"
                    "What: teapot --warnings\nStatus: done\nDescription: prints every kind of warning the\n"
                    "  teapot knows, such as a kettle left empty.\n\n"
                    "What: teapot --timer\nStatus: planned\nDescription: rings when the tea is ready.\n")
    blocks = extract(path.rename(tmp_path / "README"))
    heads = [b.text[:b.heads[-1]] for b in blocks]
    assert [(h, b.text[len(h) + 1:]) for h, b in zip(heads, blocks)] == [
        ("Features of teapot What: teapot --warnings", "Status: done"),
        ("Features of teapot What: teapot --warnings",
         "Description: prints every kind of warning the teapot knows, such as a kettle left empty."),
        ("What: teapot --timer", "Status: planned"),
        ("What: teapot --timer", "Description: rings when the tea is ready."),
    ]
    assert "Features of teapot" not in _sentences(tmp_path / "README")


def test_a_spec_file_with_bullets_gives_a_unit_per_item(tmp_path: Path):
    """`*`, `-`, `+` and numbered items are units of their own, headed by the line that leads the
    list in ("Fields:"), whether a blank line sets them apart or not."""
    path = tmp_path / "build-flags.txt"
    path.write_text("Build flags\n-----------\n\nThe flags a package build can set.\n\nFields:\n"
                    "  * CFLAGS holds the C compiler's options,\n    set by the build driver\n"
                    "  * LDFLAGS holds the linker's options\n  + CPPFLAGS holds the preprocessor's\n\n"
                    "Steps\n\n  1. Read the flags\n  2) Build the package\n")
    blocks = extract(path)
    assert [(b.text[:b.heads[-1]] if b.heads else "", b.text) for b in blocks][1:] == [
        ("Fields:", "Fields: CFLAGS holds the C compiler's options, set by the build driver"),
        ("Fields:", "Fields: LDFLAGS holds the linker's options"),
        ("Fields:", "Fields: CPPFLAGS holds the preprocessor's"),
        ("Steps", "Steps Read the flags"),
        ("Steps", "Steps Build the package"),
    ]
    assert _sentences(path) == ["The flags a package build can set.",
                                "CFLAGS holds the C compiler's options, set by the build driver",
                                "LDFLAGS holds the linker's options", "CPPFLAGS holds the preprocessor's",
                                "Read the flags", "Build the package"]


TIGHT_MS = """.ss 6
.RP no
.TL
The Teapot Handbook
.AU
Ada Steeper
.AB no
.AE
.SH
Brewing
.PP
The teapot reads the startup files and keeps any existing history entries before it heats the water.
If necessary, the kettle is filled to contain no more than one litre, and no new entries are written while it boils.
.SH
Serving
.PP
Pour the tea through a strainer into warm cups, and serve it with milk or lemon as the guest prefers.
"""


def test_a_groff_pdf_with_tight_word_spaces_reads_as_pdftotext_spaces_it(tmp_path: Path):
    """groff's PostScript through ps2pdf draws narrow word spaces (`.ss 6`) as gaps PDFium's text
    runs together ("anyexisting", "no newentries"): the characters' boxes put them back. The cover
    page (title, author, date) and the section titles are context, never answers."""
    _need("ps2pdf")
    _need_groff("ps")
    ps = subprocess.run(["groff", "-ms", "-Tps"], input=TIGHT_MS, capture_output=True, text=True, check=True).stdout
    path = tmp_path / "handbook.pdf"
    subprocess.run(["ps2pdf", "-", str(path)], input=ps.encode(), capture_output=True, check=True)
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(path)
    raw = doc[1].get_textpage().get_text_bounded()
    doc.close()
    assert "anyexisting" in raw  # what PDFium alone gives
    assert _sentences(path) == [
        "The teapot reads the startup files and keeps any existing history entries before it heats the water.",
        "If necessary, the kettle is filled to contain no more than one litre, and no new entries are written "
        "while it boils.",
        "Pour the tea through a strainer into warm cups, and serve it with milk or lemon as the guest prefers."]
    blocks = extract(path)
    assert blocks[0].text.startswith("The Teapot Handbook Ada Steeper ")  # the cover page heads page 2


MDOC_PAGE = """.Dd March 7, 2026
.Dt TEAPOT 1
.Os
.Sh NAME
.Nm teapot
.Nd brew tea
.Sh DESCRIPTION
Green leaves steep for two minutes, black leaves for four.
"""


def test_an_mdoc_page_in_groff_html_has_no_head_foot_or_title_sentence(tmp_path: Path):
    """groff's HTML of an mdoc page keeps the page's head (`TEAPOT(1) General Commands Manual
    TEAPOT(1)`) and foot as paragraphs, and sets section titles as paragraphs all in bold."""
    _need_groff("html")
    done = subprocess.run(["groff", "-mdoc", "-Thtml"], input=MDOC_PAGE, capture_output=True, text=True, check=True,
                          cwd=tmp_path)
    assert "<b>DESCRIPTION</b>" in done.stdout and "TEAPOT(1)" in done.stdout
    path = tmp_path / "teapot.html"
    path.write_text(done.stdout)
    assert _sentences(path) == ["teapot — brew tea", "Green leaves steep for two minutes, black leaves for four."]
