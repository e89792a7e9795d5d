"""The answer phrase (issue 17): stored positions (index/positions.py), the phrase of a sentence
(query/phrase.py), and `ask`'s output of it. Real files, a real SQLite index, the tiny model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.cli.render import _Style, format_answers
from sparc_local.index import positions
from sparc_local.index.schema import SCHEMA_VERSION
from sparc_local.model.lexical import FIELD_BASE, SENTENCE_FIELD
from sparc_local.model.sparse import NO_POSITION
from sparc_local.query.ask import Answer
from sparc_local.query.phrase import Phrase, find_phrase

runner = CliRunner()


# ------------------------------------------------------------------------------------ the codec


@pytest.mark.parametrize("k", [0, 1, 2, 7, 48, 128, 1000])
def test_positions_round_trip(k: int):
    rng = np.random.default_rng(k)
    tokens = rng.choice(30522, k, replace=False)
    for top in (3, 40, 254):
        pos = rng.integers(0, top + 1, k)
        pos[rng.random(k) < 0.2] = NO_POSITION
        blob = positions.encode(tokens, pos)
        want = {int(t): int(p) for t, p in zip(tokens, pos) if p != NO_POSITION}
        assert positions.lookup(blob, tokens.tolist()) == want
        # a few bits per position: well under the byte per token a plain array would take
        assert k < 48 or len(blob) < k * (top + 1).bit_length() * 1.3 / 8 + 8


# ------------------------------------------------------------------------------------ the phrase


SENTENCE = "The shutil module contains a copyfile() function."
# the tiny model's tokenizer is not needed here: spans as QueryTokenizer.spans gives them
SPANS = [(1, 0, 3), (2, 4, 10), (3, 11, 17), (4, 18, 26), (5, 27, 28), (6, 29, 33), (7, 33, 37), (8, 37, 38),
         (9, 38, 39), (10, 40, 48), (11, 48, 49)]


def test_sparc_positions_make_the_phrase():
    """A question token counts at the position of its max, not where it is spelled: "copy"
    (token 100, not in the sentence) found its max at "copy" of copyfile, "file" (101) at
    ##file: one whole word. "function" (10) follows it but with "(" and ")" between."""
    blob = positions.encode([100, 101, 10, 1, 102], [5, 6, 9, 0, NO_POSITION])
    contrib = {100: 3.0, 101: 2.0, 10: 0.5, 1: 0.2, 102: 9.0}
    assert find_phrase(SENTENCE, SPANS, contrib, blob) == Phrase("copyfile", 29, 37)
    # weaker words below STRONG of the best stay out; a strong neighbour joins the run
    contrib[10] = 2.0
    assert find_phrase(SENTENCE, SPANS, contrib, blob) == Phrase("copyfile", 29, 37)  # "()" breaks the run
    blob = positions.encode([100, 101, 10], [5, 6, 3])  # "function" had its max at "contains"
    assert find_phrase(SENTENCE, SPANS, {100: 1.0, 101: 1.0, 10: 3.0}, blob) == Phrase("contains", 18, 26)
    assert find_phrase(SENTENCE, SPANS, {10: 3.0, 100: 2.0}, positions.encode([100, 10], [3, 4])) \
        == Phrase("contains a", 18, 28)


def test_bm25_matches_are_literal_and_no_blob_means_no_sparc_part():
    contrib = {2 + SENTENCE_FIELD * FIELD_BASE: 1.0, 3 + 2 * FIELD_BASE: 0.8, 100: 5.0}
    assert find_phrase(SENTENCE, SPANS, contrib, None) == Phrase("shutil module", 4, 17)
    assert find_phrase(SENTENCE, SPANS, {100: 5.0}, None) is None  # an index without positions
    assert find_phrase(SENTENCE, SPANS, {}, positions.encode([], [])) is None
    assert find_phrase(SENTENCE, SPANS, {100: 5.0}, positions.encode([100], [NO_POSITION])) is None  # in the context


def test_the_phrase_is_underlined_in_the_top_sentence_only():
    p = Phrase("three minutes", 27, 40)
    top = Answer(1, 2.0, "/d/tea.md", None, 3, "Green tea should steep for three minutes.",
                 "Green tea should steep for three minutes.", 0, phrase=p)
    other = Answer(2, 1.0, "/d/b.md", None, 1, "Black tea takes longer.", "Black tea takes longer.", 0,
                   phrase=Phrase("Black tea", 0, 9))
    assert format_answers([top, other], style=_Style(True), width=200) == (
        "\x1b[1m1.\x1b[0m /d/tea.md:3  \x1b[2mscore 2.00\x1b[0m\n"
        "   \x1b[1;33mGreen tea should steep for\x1b[0m \x1b[1;4;33mthree minutes\x1b[0m\x1b[1;33m.\x1b[0m\n"
        "\x1b[1m2.\x1b[0m /d/b.md:1  \x1b[2mscore 1.00\x1b[0m\n"
        "   \x1b[1;33mBlack tea takes longer.\x1b[0m\n")
    # NO_COLOR: bold and underline stay
    assert format_answers([top], style=_Style(True, colour=False), width=200).splitlines()[1] == (
        "   \x1b[1mGreen tea should steep for\x1b[0m \x1b[1;4mthree minutes\x1b[0m\x1b[1m.\x1b[0m")
    # no styles: the context as it is, and the phrase on its own line
    assert format_answers([top, other]) == (
        "1. /d/tea.md:3  score 2.00\n"
        "   Green tea should steep for three minutes.\n"
        "   phrase: three minutes\n"
        "2. /d/b.md:1  score 1.00\n"
        "   Black tea takes longer.\n")


# ------------------------------------------------------------------------------------ the command



@pytest.fixture
def indexed_docs(tmp_path: Path, active_tiny: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "tea.md").write_text("# Tea\n\nGreen tea should steep for three minutes. Then drink it.\n")
    (root / "tower.txt").write_text("The king built the tower in one year.\n")
    result = runner.invoke(app, ["index", str(root), "-q"])
    assert (result.exit_code, result.output) == (0, "")
    return root


def _ask(*args: str) -> list[dict]:
    result = runner.invoke(app, ["ask", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "index.db")


def test_ask_shows_the_phrase(indexed_docs: Path, sparc_home: Path):
    top = _ask("green tea steep", "-k", "1", "--mode", "sparc")[0]
    assert top["sentence"] == "Green tea should steep for three minutes."
    assert top["phrase"] == {"text": "Green tea", "start": 0, "end": 9}
    result = runner.invoke(app, ["ask", "green tea steep", "-k", "1", "--mode", "sparc"])
    assert (result.exit_code, result.output) == (0, (
        f"1. {indexed_docs / 'tea.md'}:3  score {top['score']:.2f}\n"
        "   Tea — Green tea should steep for three minutes. Then drink it.\n"
        "   phrase: Green tea\n"))
    # BM25 matches are literal: "--mode bm25" reads no positions and still finds the words
    assert _ask("king tower", "-k", "1", "--mode", "bm25")[0]["phrase"] == {"text": "king", "start": 4, "end": 8}
    with _db(sparc_home) as c:  # one positions row per encoded sentence
        assert c.execute("SELECT count(*) FROM positions").fetchone() == c.execute(
            "SELECT count(*) FROM sentences WHERE encoded = 1").fetchone() == (3,)  # "# Tea" is context, no sentence


def test_an_index_without_positions_answers_and_shows_none(indexed_docs: Path, sparc_home: Path):
    """An index encoded before migration 5 has no positions: SPARC gives no phrase (BM25's
    literal matches still do) until its sentences are encoded again."""
    with _db(sparc_home) as c:
        c.executescript("DROP TRIGGER positions_die_with_sentence; DROP TABLE positions; PRAGMA user_version = 4;")
    before = _ask("green tea steep", "-k", "1", "--mode", "sparc")[0]
    assert before["sentence"] == "Green tea should steep for three minutes." and before["phrase"] is None
    result = runner.invoke(app, ["ask", "green tea steep", "-k", "1", "--mode", "sparc"])
    assert result.exit_code == 0 and "phrase:" not in result.output
    assert _ask("green tea steep", "-k", "1")[0]["phrase"] == {"text": "Green tea", "start": 0, "end": 9}  # BM25's
    with _db(sparc_home) as c:
        assert c.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)  # migrated, 5 and on
        assert c.execute("SELECT count(*) FROM positions").fetchone() == (0,)


def test_positions_die_with_their_sentences(indexed_docs: Path, sparc_home: Path):
    """Re-indexing a changed file and `forget` tombstone sentences; the merge that purges them
    deletes their positions too (the trigger), in its own transaction."""
    (indexed_docs / "tea.md").write_text("# Tea\n\nBlack tea takes longer. Use water below boiling.\n")
    assert runner.invoke(app, ["index", str(indexed_docs), "-q"]).exit_code == 0
    assert runner.invoke(app, ["forget", str(indexed_docs / "tower.txt")]).exit_code == 0
    from sparc_local.index.store import Index

    with Index(sparc_home / "index.db") as idx:
        idx.merge_all()
    with _db(sparc_home) as c:
        assert c.execute("SELECT count(*) FROM sentences").fetchone() == (2,)
        assert c.execute("SELECT count(*) FROM positions p JOIN sentences s ON s.id = p.sentence_id"
                         " WHERE s.file_id IS NOT NULL").fetchone() == (2,)
        assert c.execute("SELECT count(*) FROM positions").fetchone() == (2,)
    top = _ask("black tea", "-k", "1", "--mode", "sparc")[0]
    assert top["sentence"] == "Black tea takes longer." and top["phrase"]["text"].startswith("Black tea")
