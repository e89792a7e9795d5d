"""Sentence segmentation: SPARC retrieves sentences, and encodes each with its paragraph as context.

The splitter is a small pure-Python rule set: F1 0.989 on squad-dev's gold boundaries before a
capital or digit, the best of four splitters measured by `benchmarks/segmenter.py`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from sparc_local.ingest.extract import Block

MAX_SENTENCE_CHARS = 1000

# A sentence ends at terminal punctuation, optionally closed by quotes/brackets, then whitespace.
_END = re.compile(r"(?:[.!?]+|…)[\"'”’»)\]]*(?=\s)")
_OPENERS = "\"'“‘«([¿¡"

# Abbreviations that precede a word and practically never end a sentence.
_NEVER_END = frozenset("mr mrs ms messrs mme mlle dr prof e.g i.e cf vs v viz c ca approx".split())
# Abbreviations that precede a number ("No. 5", "Fig. 3") but are also words ("yes or no.").
_BEFORE_NUMBER = frozenset("no nos vol vols p pp fig figs eq eqs ch sec art".split())
# Abbreviations that usually precede a name or number but can also end a sentence
# ("Main St. The house"): they end one only when a common sentence opener follows.
# Capitalised ones count only when capitalised, since "sat", "sun" or "rep" are also words.
_AMBIGUOUS = frozenset(
    "St Mt Ft Jr Sr Gen Col Maj Lt Sgt Capt Cmdr Adm Gov Sen Rep Pres Rev Hon Fr Br "
    "Inc Ltd Co Corp Bros Dept Univ Assn Ave Blvd Rd Hwy "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun "
    "etc al est a.m p.m u.s u.k u.n e.u d.c ph.d b.a m.a b.sc m.sc".split()
)
# Function words that commonly open an English sentence.
_OPENER_WORDS = frozenset(
    "a an the this that these those there here it its he she they we i you his her their our my "
    "your in on at by for from with without during after before since until when while where if "
    "although though because as but and or so yet however also then thus therefore meanwhile "
    "moreover furthermore instead still today later finally first some many most all both each "
    "every several one two three other another such no not neither nor what which who how why "
    "according despite unlike like under over between among about to of into".split()
)
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]\.?$")
_NEXT_WORD = re.compile(r"[\"'“‘«(\[]*([^\s\"'”’»)\],;:.!?]*)")


@dataclass(frozen=True)
class Sentence:
    """A retrievable unit; offsets point into the document text (see extract.document_text)."""

    text: str
    start: int
    end: int
    page: int | None
    line: int | None
    block: int
    position: int


def _word_before(text: str, pos: int) -> str:
    """The token that ends at pos (bounded look-back keeps long paragraphs linear)."""
    lo = max(0, pos - 40)
    i = pos
    while i > lo and not text[i - 1].isspace():
        i -= 1
    return text[i:pos].lstrip("\"'“‘«([")


def _next_word(text: str, pos: int) -> str:
    m = _NEXT_WORD.match(text, pos)
    return m.group(1) if m else ""


def _starts_sentence(text: str, pos: int) -> bool:
    """Does the text at pos look like the start of a sentence (capital, digit, or quoted one)?"""
    i = pos
    while i < len(text) and text[i] in _OPENERS and i - pos < 3:
        i += 1
    return i < len(text) and (text[i].isupper() or text[i].isdigit())


_LOWER_WORD = re.compile(r"[a-z][a-z0-9_-]*\b")
_PLAIN_WORD = re.compile(r"[A-Za-z]{3,}$")


def _lowercase_opener(text: str, punct_start: int, punct_end: int, next_start: int) -> bool:
    """"...log root activity. sudo requires...": a sentence that opens with a command or an
    identifier, after a plain word of 3+ letters (no abbreviation, initial or acronym) and one
    period (issue 32)."""
    if punct_end - punct_start != 1 or text[punct_start] != "." or not _LOWER_WORD.match(text, next_start):
        return False
    token = _word_before(text, punct_start)
    key = token.lower()
    return (_PLAIN_WORD.match(token) is not None and key not in _NEVER_END and key not in _BEFORE_NUMBER
            and key not in _AMBIGUOUS and token.capitalize() not in _AMBIGUOUS)


def _is_boundary(text: str, punct_start: int, punct_end: int, next_start: int) -> bool:
    """Is there a sentence boundary between terminal punctuation and the text at next_start?"""
    if not _starts_sentence(text, next_start):
        return _lowercase_opener(text, punct_start, punct_end, next_start)
    if text.startswith("..", punct_start) or text[punct_start] == "…":
        # "word... Next" ends a sentence; "word ... Next" marks an omission inside one
        attached = punct_start > 0 and (
            text[punct_start - 1].isalnum() or text[punct_start - 1] in ")]"
        )
        closed = text[punct_end - 1] in "\"'”’»)]"
        return text[next_start].isalpha() and (closed or attached)
    if text[punct_start] != ".":
        return True  # ! and ? before a capital
    token = _word_before(text, punct_start)
    if not token:
        return True
    key = token.lower()
    if key in _NEVER_END:
        return False
    initial = len(token) == 1 and token.isupper()  # "J. R. R. Tolkien"
    if key in _BEFORE_NUMBER and not initial:
        return not text[next_start].isdigit()
    ambiguous = (
        initial
        or token in _AMBIGUOUS
        or key in _AMBIGUOUS  # the lowercase entries, in any case
        or (token.isupper() and token.capitalize() in _AMBIGUOUS)  # "INC."
        or _ACRONYM.match(token) is not None  # "U.S.", "a.m.", "Ph.D."
    )
    if ambiguous:
        nxt = _next_word(text, next_start)
        if len(nxt) == 1 and text.startswith(".", next_start + 1):
            return False  # another initial: "J. A. Hobson"
        return nxt.lower() in _OPENER_WORDS
    return True


def _chop(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Cut an over-long span at whitespace so no sentence is unbounded."""
    spans = []
    while end - start > limit:
        cut = text.rfind(" ", start + 1, start + limit + 1)
        if cut <= start:
            cut = start + limit
            spans.append((start, cut))
            start = cut
        else:
            spans.append((start, cut))
            start = cut + 1
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        spans.append((start, end))
    return spans


def split_sentences(text: str, max_chars: int = MAX_SENTENCE_CHARS) -> list[tuple[int, int]]:
    """Char spans [start, end) of the sentences of a paragraph, without surrounding whitespace.

    Spans longer than max_chars are chopped at whitespace (a 50 KB line must not become one
    sentence).
    """
    spans: list[tuple[int, int]] = []
    start = 0
    n = len(text)
    while start < n and text[start].isspace():
        start += 1
    for m in _END.finditer(text):
        if m.end() <= start:
            continue
        nxt = m.end()
        while nxt < n and text[nxt].isspace():
            nxt += 1
        if nxt >= n or not _is_boundary(text, m.start(), m.end(), nxt):
            continue
        spans.extend(_chop(text, start, m.end(), max_chars))
        start = nxt
    end = len(text.rstrip())
    if start < end:
        spans.extend(_chop(text, start, end, max_chars))
    return spans


_WORD = re.compile(r"\w")
# "(117)", "(3.2)": an equation's number, set apart from its MathJax; 4.1% of the scientific desk's
# sentences and no question's answer (benchmarks/units.py), so not indexed (it stays context)
_EQUATION_NUMBER = re.compile(r"\(\d+(?:\.\d+)*\)")


_ASKS = re.compile(r"\?[\"'”’)\]]*$")


def _spans(block: Block, max_chars: int) -> list[tuple[int, int]]:
    """A block's sentence spans. The context in front of it (block.heads) is no sentence, unless
    it is all the block holds: a heading that heads nothing is one sentence (a title has no
    closing punctuation, and its number "2." is not a sentence). A question that opens a block
    of more sentences is its answer's context too ("Why? Because...", "Q: How? A: So.")."""
    text = block.text
    if block.heads and block.heads[-1] >= len(text):
        return _chop(text, 0, len(text), max_chars)
    start = block.heads[-1] + 1 if block.heads else 0
    spans = [(start + s, start + e) for s, e in split_sentences(text[start:], max_chars)]
    if len(spans) > 1 and _ASKS.search(text, spans[0][0], spans[0][1]):
        del spans[0]
    return spans


def segment(blocks: list[Block], max_sentences: int | None = None) -> list[Sentence]:
    """Sentences of all blocks in document order, with offsets, page and line for citations.

    A sentence with no word character ("|", "---", "»") or only an equation's number ("(117)") is
    not indexed: no question is answered by it, yet it takes result slots (issue 17: `ask "the"`
    returned `|`)."""
    out: list[Sentence] = []
    for b, block in enumerate(blocks):
        position = 0
        for s, e in _spans(block, MAX_SENTENCE_CHARS):
            if not _WORD.search(block.text, s, e) or _EQUATION_NUMBER.fullmatch(block.text, s, e):
                continue
            if max_sentences is not None and len(out) >= max_sentences:
                return out
            line = block.line
            if line is not None and block.line_starts:
                line += bisect_right(block.line_starts, s)
            out.append(
                Sentence(
                    text=block.text[s:e],
                    start=block.start + s,
                    end=block.start + e,
                    page=block.page,
                    line=line,
                    block=b,
                    position=position,
                )
            )
            position += 1
    return out


class Paragraph(list):
    """A paragraph's sentence texts, and its heading: text that is context for each of them (a
    section title, an FAQ question, a table's header) and never encoded as a sentence. Where a
    list of sentences is expected (model/inputs.py reads `heading` when it is there)."""

    def __init__(self, sentences: list[str], heading: str = "") -> None:
        super().__init__(sentences)
        self.heading = heading


def paragraphs(sentences: list[Sentence], blocks: list[Block]) -> list[Paragraph]:
    """The sentence texts grouped by paragraph (block), in document order: the encoder's input
    (inputs.paragraph_inputs draws each sentence's SPARC context from its own paragraph). A
    paragraph's heading is its text before its first sentence (see ``heading``)."""
    out: list[Paragraph] = []
    group: list[Sentence] = []
    for s in sentences:
        if group and s.block != group[0].block:
            out.append(_paragraph(group, blocks[group[0].block]))
            group = []
        group.append(s)
    if group:
        out.append(_paragraph(group, blocks[group[0].block]))
    return out


def _paragraph(group: list[Sentence], block: Block) -> Paragraph:
    return Paragraph([s.text for s in group], heading(block.text, group[0].start - block.start))


def heading(context: str, first: int) -> str:
    """A paragraph's context-only text: what its stored context holds before its first sentence
    (at offset `first`). One rule for `index` and for the stored paragraphs encoded again
    (batch_writer.stored_paragraphs), so both give the encoder the same inputs."""
    return context[:first].strip()
