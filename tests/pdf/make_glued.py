"""Writes glued.pdf: a one-page PDF whose words are spaced as LaTeX and groff space them, by gaps in
a TJ array rather than space glyphs (issue 32).

    python tests/pdf/make_glued.py

The font declares a wide space (600/1000 em) and the gaps are 250/1000 em: pypdf inserts a space
only for a gap near the space's width, so it glues the words ("Commandsaresaved..."), while PDFium
places the glyphs and sees the gap. The text is written here, in the public domain.
"""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).with_name("glued.pdf")
GAP = 250  # thousandths of an em between two words, under pypdf's 95% of the space width
SPACE_WIDTH, GLYPH_WIDTH = 600, 500
LINES = [  # full-width lines: only the list-item rule cuts the items apart
    "4.3. Good password",
    "Commands are saved in a history list. The list holds 500",
    "commands by default, and the shell reads it at startup.",
    "\x95 The first item names the file that the history is kept in.",
    "\x95 The second item names the number of lines that it keeps.",
]


def _line(text: str) -> bytes:
    """A line as one TJ array: its words, and a gap where each space would be."""
    return b"[" + (b"-%d" % GAP).join(b"(" + w.encode("latin-1") + b")" for w in text.split(" ")) + b"] TJ"


def content() -> bytes:
    ops = [b"BT /F1 12 Tf 16 TL 72 700 Td"]
    ops += [_line(t) + b" T*" for t in LINES]
    return b" ".join(ops) + b" ET"


def pdf(stream: bytes) -> bytes:
    widths = b" ".join([b"%d" % SPACE_WIDTH] + [b"%d" % GLYPH_WIDTH] * 223)
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding "
            b"/FirstChar 32 /LastChar 255 /Widths [" + widths + b"] >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)


if __name__ == "__main__":
    OUT.write_bytes(pdf(content()))
