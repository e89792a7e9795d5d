"""Document structure (issue 32): headings and FAQ questions are context, not answers; table rows
and list items are units; sentence boundaries before a lowercase command; PDF words not glued."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from sparc_local.batch_writer import stored_paragraphs
from sparc_local.index.records import StoredSentence
from sparc_local.ingest.extract import extract
from sparc_local.ingest.sentences import Paragraph, paragraphs, segment
from sparc_local.model.inputs import InputSpec, paragraph_inputs


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


FAQ = """<html><body><h1>Database FAQ</h1>
<ol><li><a href="#q1">How do I create an AUTOINCREMENT field?</a></li>
<li><a href="#q2">What datatypes are supported?</a></li></ol>
<p><b>(1) How do I create an AUTOINCREMENT field?</b></p>
<p>Short answer: declare a column of type INTEGER PRIMARY KEY.</p>
<p>Longer answer: the column then holds the row id.</p>
<p><b>(2) What datatypes are supported?</b></p>
<p>Every column can store any type.</p>
</body></html>"""


def test_faq_question_is_its_answers_context(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path / "faq.html", FAQ))
    sents = segment(blocks)
    texts = [s.text for s in sents]
    assert "(1) How do I create an AUTOINCREMENT field?" not in texts
    assert texts == ["Short answer: declare a column of type INTEGER PRIMARY KEY.",
                     "Longer answer: the column then holds the row id.", "Every column can store any type."]
    paras = paragraphs(sents, blocks)
    assert [p.heading for p in paras] == ["Database FAQ (1) How do I create an AUTOINCREMENT field?"] * 2 + [
        "(2) What datatypes are supported?"]


def test_questions_with_no_answer_of_their_own_stay_sentences(tmp_path: Path) -> None:
    text = "# Contents\n\n1) How do I start?\n\n2) How do I stop?\n\n# Answers\n\nHow do I start? Press it. It hums.\n"
    blocks = extract(write(tmp_path / "faq.md", text))
    sents = segment(blocks)
    assert [s.text for s in sents] == ["How do I start?", "How do I stop?", "Press it.", "It hums."]
    assert blocks[0].text == "Contents How do I start?"  # the title heads the question after it (issue 45)


def test_heading_is_context_of_its_whole_section(tmp_path: Path) -> None:
    md = "# Brewing guide\n\nGreen tea should steep two minutes.\n\nBlack tea steeps four.\n\n# Storage\n\nKeep it dry.\n"
    blocks = extract(write(tmp_path / "tea.md", md))
    sents = segment(blocks)
    assert [(s.text, s.line) for s in sents] == [("Green tea should steep two minutes.", 3),
                                                 ("Black tea steeps four.", 5), ("Keep it dry.", 9)]
    assert [p.heading for p in paragraphs(sents, blocks)] == ["Brewing guide", "Brewing guide", "Storage"]


def test_numbered_title_in_plain_text_is_a_heading(tmp_path: Path) -> None:
    text = "4.3. Good password\nWhen creating a password, use many words.\nNever reuse it.\n"
    blocks = extract(write(tmp_path / "guide.txt", text))
    sents = segment(blocks)
    assert [(s.text, s.line) for s in sents] == [("When creating a password, use many words.", 2),
                                                 ("Never reuse it.", 3)]
    assert paragraphs(sents, blocks)[0].heading == "4.3. Good password"


def test_man_page_section_title_is_a_heading(tmp_path: Path) -> None:
    """`man` rendered to text: a capitalised title at the margin heads the indented text under it
    (a capitalised line with no indented text under it stays prose, in the section before it)."""
    text = ("BUGS\n       In some rare cases, the --best option gives worse compression.\n\n"
            "REPORTING BUGS\n       Report bugs to the list.\n\nNOTE\nThis line is not indented.\n")
    blocks = extract(write(tmp_path / "gzip.txt", text))
    sents = segment(blocks)
    assert [s.text for s in sents] == ["In some rare cases, the --best option gives worse compression.",
                                       "Report bugs to the list.", "NOTE This line is not indented."]
    assert [p.heading for p in paragraphs(sents, blocks)] == ["BUGS", "REPORTING BUGS", "REPORTING BUGS"]


TABLE = """<h2>Password aging</h2>
<table><thead><tr><th>Setting</th><th>Meaning</th></tr></thead>
<tbody><tr><td>PASS_MAX_DAYS</td><td>Maximum number of days a password may be used.</td></tr>
<tr><td>PASS_WARN_AGE</td><td>Days of warning before a password expires.</td></tr></tbody></table>"""


def test_table_row_is_one_unit_with_its_header_as_context(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path / "login.html", TABLE))
    sents = segment(blocks)
    assert [s.text for s in sents] == ["PASS_MAX_DAYS | Maximum number of days a password may be used.",
                                       "PASS_WARN_AGE | Days of warning before a password expires."]
    assert [p.heading for p in paragraphs(sents, blocks)] == ["Password aging Setting | Meaning"] * 2


def test_list_items_are_units(tmp_path: Path) -> None:
    text = "The database is read from:\n• <MIME>/globs lists the patterns.\n• <MIME>/globs2 adds weights.\n"
    sents = segment(extract(write(tmp_path / "spec.txt", text)))
    assert [s.text for s in sents] == ["The database is read from:", "• <MIME>/globs lists the patterns.",
                                       "• <MIME>/globs2 adds weights."]


def _word_tokenizer(words: set[str]) -> Tokenizer:
    vocab = {w: i for i, w in enumerate(["[UNK]", "[CLS]", "[SEP]", *sorted(words)])}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    return tok


def test_heading_is_in_every_sentences_context_and_never_encoded() -> None:
    tok = _word_tokenizer({"Guide", "one.", "two."})
    spec = InputSpec(max_length=32, cls_id=1, sep_id=2)
    items = paragraph_inputs(tok, [Paragraph(["one.", "two."], "Guide")], spec)
    ids = tok.get_vocab()
    assert [a.tolist() for a, _ in items] == [[1, ids["one."], 2, ids["Guide"], ids["two."], 2],
                                              [1, ids["two."], 2, ids["Guide"], ids["one."], 2]]
    assert [a.tolist() for a, _ in paragraph_inputs(tok, [["one.", "two."]], spec)] == [
        [1, ids["one."], 2, ids["two."], 2], [1, ids["two."], 2, ids["one."], 2]]


def test_stored_paragraphs_give_the_encoder_the_same_headings(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path / "faq.html", FAQ + TABLE))
    sents = segment(blocks)
    rows = [StoredSentence(i, s.text, blocks[s.block].text, s.start - blocks[s.block].start, "faq.html",
                           None, None, None, None, 1) for i, s in enumerate(sents)]
    fresh, stored = paragraphs(sents, blocks), stored_paragraphs(rows)
    assert stored == fresh and [p.heading for p in stored] == [p.heading for p in fresh]
    assert any(p.heading for p in fresh)


def test_boundary_before_a_lowercase_command() -> None:
    from sparc_local.ingest.sentences import split_sentences

    def split(text: str) -> list[str]:
        return [text[a:b] for a, b in split_sentences(text)]

    assert split("The log keeps root activity. sudo requires only your password.") == [
        "The log keeps root activity.", "sudo requires only your password."]
    # abbreviations, initials and acronyms before a lowercase word end nothing
    assert len(split("Use a tool, e.g. sudo or doas.")) == 1
    assert len(split("Files, dirs etc. are read.")) == 1
    assert len(split("Made in the U.S. by hand.")) == 1
    assert len(split("Wait... and see.")) == 1


GLUED_PDF = Path(__file__).parent / "pdf" / "glued.pdf"  # written by tests/pdf/make_glued.py


def test_pdf_words_are_not_glued_and_its_title_and_items_are_structure() -> None:
    """The PDF spaces its words by gaps, not space glyphs: PDFium keeps them apart; its numbered
    title is context, and each list item, on a full-width line, is a unit."""
    blocks = extract(GLUED_PDF)
    sents = segment(blocks)
    assert [s.text for s in sents] == [
        "Commands are saved in a history list.",
        "The list holds 500 commands by default, and the shell reads it at startup.",
        "• The first item names the file that the history is kept in.",
        "• The second item names the number of lines that it keeps."]
    assert {s.page for s in sents} == {1}
    assert [p.heading for p in paragraphs(sents, blocks)] == ["4.3. Good password"] * 3


def test_the_glued_pdf_glues_its_words_in_pypdf() -> None:
    """The fixture is the hard case: an extractor that reads only the glyph stream glues it."""
    import pypdf

    from tests.pdf.make_glued import LINES, content, pdf

    text = pypdf.PdfReader(GLUED_PDF).pages[0].extract_text()
    assert "Commandsaresavedinahistorylist." in text
    assert GLUED_PDF.read_bytes() == pdf(content()) and len(LINES) == 5  # the shipped file is the script's


def test_html_list_items_are_units(tmp_path: Path) -> None:
    page = ("<p>The database is read from:</p><ul><li>globs lists the patterns</li>"
            "<li>globs2 adds weights</li></ul>")
    sents = segment(extract(write(tmp_path / "spec.html", page)))
    assert [s.text for s in sents] == ["The database is read from:", "globs lists the patterns", "globs2 adds weights"]


def test_an_equation_number_is_context_not_a_sentence(tmp_path: Path) -> None:
    page = "<p>The force is the gradient of the potential.</p><p>(117)</p><p>It acts on every atom (2).</p>"
    blocks = extract(write(tmp_path / "forces.html", page))
    assert [s.text for s in segment(blocks)] == ["The force is the gradient of the potential.",
                                                 "It acts on every atom (2)."]
    assert "(117)" in [b.text for b in blocks]
