"""Sentence splitting, offsets, lines and paragraphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparc_local.ingest.extract import Block, document_text, extract
from sparc_local.ingest.sentences import MAX_SENTENCE_CHARS, Sentence, paragraphs, segment, split_sentences


def sents(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Mr. Smith met Dr. Jones in St. Louis. They talked.",
            ["Mr. Smith met Dr. Jones in St. Louis.", "They talked."],
        ),
        (
            "J. R. R. Tolkien wrote it, e.g. The Hobbit. It sold well.",
            ["J. R. R. Tolkien wrote it, e.g. The Hobbit.", "It sold well."],
        ),
        (
            "The U.S. Army arrived. They moved to the U.S. The war ended at 5 p.m. Then peace.",
            [
                "The U.S. Army arrived.",
                "They moved to the U.S.",
                "The war ended at 5 p.m.",
                "Then peace.",
            ],
        ),
        (
            "It cost $3.50, i.e. cheap. Pi is 3.14159 or so.",
            ["It cost $3.50, i.e. cheap.", "Pi is 3.14159 or so."],
        ),
        (
            "See Fig. 3 and No. 5 first. Is it? Yes! Fine.",
            ["See Fig. 3 and No. 5 first.", "Is it?", "Yes!", "Fine."],
        ),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        (
            "He sat. Mary stood. Meet on Sat. Then go.",
            ["He sat.", "Mary stood.", "Meet on Sat.", "Then go."],
        ),
        ("(This is a note.) Another one.", ["(This is a note.)", "Another one."]),
        ("Prices rose in 2010. 2011 was worse.", ["Prices rose in 2010.", "2011 was worse."]),
        (
            "Wait... Then go. He said it ... Then stopped.",
            ["Wait...", "Then go.", "He said it ... Then stopped."],
        ),
        ("after an abbreviation, approx. five, cf. the rest", ["after an abbreviation, approx. five, cf. the rest"]),
        ("  padded sentence.   Next one.  ", ["padded sentence.", "Next one."]),
        ("", []),
        ("   ", []),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert sents(text) == expected


def test_long_sentences_are_chopped() -> None:
    text = " ".join(["word"] * 12_000)  # ~60 KB, no punctuation
    spans = split_sentences(text)
    assert all(0 < e - s <= MAX_SENTENCE_CHARS for s, e in spans)
    assert " ".join(text[s:e] for s, e in spans) == text
    blob = "x" * 5000  # no whitespace at all: hard cuts
    assert [e - s for s, e in split_sentences(blob)] == [1000] * 5


def test_offsets_round_trip_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_text(
        "Title line\n\nThe kettle boils. It switches\noff by itself. Descale it\nmonthly.\n\n"
        "Green tea steeps two minutes.\n",
        encoding="utf-8",
    )
    blocks = extract(path)
    doc = document_text(blocks)
    sentences = segment(blocks)
    assert all(doc[s.start : s.end] == s.text for s in sentences)
    assert [(s.text, s.line, s.block, s.position) for s in sentences] == [
        ("Title line", 1, 0, 0),
        ("The kettle boils.", 3, 1, 0),
        ("It switches off by itself.", 3, 1, 1),
        ("Descale it monthly.", 4, 1, 2),
        ("Green tea steeps two minutes.", 7, 2, 0),
    ]
    assert segment(blocks, max_sentences=2) == sentences[:2]


def test_page_is_carried() -> None:
    blocks = [Block("One. Two.", 3, None, 0), Block("Three.", 4, None, 11)]
    assert [(s.text, s.page, s.start) for s in segment(blocks)] == [
        ("One.", 3, 0),
        ("Two.", 3, 5),
        ("Three.", 4, 11),
    ]


def _para(n: int, block: int = 0) -> list[Sentence]:
    return [Sentence(f"S{i}.", 0, 0, None, None, block, i) for i in range(n)]


def test_paragraphs_group_sentences_by_block() -> None:
    ss = _para(3) + _para(1, block=1) + _para(2, block=2)
    blocks = [Block("S0. S1. S2.", None, None), Block("S0.", None, None), Block("S0. S1.", None, None)]
    assert paragraphs(ss, blocks) == [["S0.", "S1.", "S2."], ["S0."], ["S0.", "S1."]]
    assert paragraphs([], []) == []
