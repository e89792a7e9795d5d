"""Answering a question: tokenizer + index, no neural network (SPARC Eq. 2).

This module is the whole `ask` path. It must never import onnxruntime or the encoder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sparc_local.errors import NoQueryTokens
from sparc_local.index.store import Index
from sparc_local.model.info import ModelInfo
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, SENTENCE_FIELD
from sparc_local.query.engine import Engine
from sparc_local.query.modes import HYBRID
from sparc_local.query.pathfilter import PathFilter
from sparc_local.query.phrase import Phrase, find_phrase
from sparc_local.query.searcher import Searcher
from sparc_local.query.tokens import QueryTokenizer, query_token_ids

_FIELD_LABELS = {SENTENCE_FIELD: " (bm25)", PARAGRAPH_FIELD: " (bm25, context)"}


# A likely answer (hybrid mode) scores LIKELY_SCORE or more (the fused score, in [0, 1.8]), its
# passage holds a word of the question and at least MIN_COVERAGE of the question's idf
# (``Searcher.coverage``). Chosen together on training data only, as the pair with the highest
# precision that keeps 95% of right top answers (du2017-train and 12 technical training packages:
# questions whose answer is indexed, questions whose article is not, another package's or an
# encyclopedia's questions asked of manuals, nonsense); benchmarks/no_answer.py prints the
# figures.  Re-run it when ``fusion.WEIGHTS`` or the model change.  The sparc and bm25 modes keep
# raw scores: no threshold.
LIKELY_SCORE = 0.545
MIN_COVERAGE = 0.125
_WORD = re.compile(r"\w{3,}")  # a question's words that count for shares_word
FETCH_FACTOR = 3  # sentences fetched per passage shown, more while k passages are not filled
# A sentence this long (in words) said verbatim in two passages is one statement shown once; a
# shorter one ("Examples.", "Return value:") is folded only when its whole passage repeats.
SAME_STATEMENT_WORDS = 8


@dataclass
class Answer:
    """One passage's best sentence (its ``rank`` counts passages), with the passage's other
    sentences that outrank the last passage shown (``collapsed``, each with its own score)."""

    rank: int
    score: float
    path: str
    page: int | None
    line: int | None
    sentence: str
    context: str
    offset: int = field(repr=False, default=0)  # the sentence's offset inside context
    sentence_id: int = field(repr=False, default=0)
    contributions: dict[str, float] = field(repr=False, default_factory=dict)
    likely: bool | None = None  # hybrid mode: a likely answer (Asker.ask); None: raw scores, no threshold
    collapsed: list[Answer] = field(default_factory=list)
    file_id: int | None = field(repr=False, default=None)
    elsewhere: list[Answer] = field(default_factory=list)  # the same text in other passages (``collapse``)
    phrase: Phrase | None = None  # the words of the sentence that carry the match (query/phrase.py)
    # with a reranker (``Asker.ask``): whether it ordered this passage (else it came after its N), and
    # the passage's rank, score and the reranker's logit in the first stage's order; None without one
    reranked: bool | None = None
    first_stage_rank: int | None = None
    first_stage_score: float | None = field(repr=False, default=None)
    logit: float | None = field(repr=False, default=None)
    heading: str | None = None  # the passage's heading, the start of its context (a section title); None: none

    @property
    def passage(self) -> tuple[int | None, str]:
        """What sentences of one passage share: their file and their context (a paragraph)."""
        return self.file_id, self.context

    def to_json(self) -> dict:
        d = {name: getattr(self, name) for name in _JSON_FIELDS}
        if self.reranked is not None:  # a reranker ran: which stage placed the answer
            d.update(first_stage_rank=self.first_stage_rank, reranked=self.reranked)
        d["phrase"] = self.phrase.to_json() if self.phrase else None
        d["collapsed"] = [{name: getattr(c, name) for name in _COLLAPSED_FIELDS} for c in self.collapsed]
        d["elsewhere"] = [{name: getattr(c, name) for name in _ELSEWHERE_FIELDS} for c in self.elsewhere]
        return d


_JSON_FIELDS = ("rank", "score", "path", "page", "line", "sentence", "context", "heading", "likely")
_COLLAPSED_FIELDS = ("score", "page", "line", "sentence")
_ELSEWHERE_FIELDS = ("score", "path", "page", "line")


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _repeat_keys(a: Answer) -> list[tuple]:
    """What makes another passage's best sentence a repeat of ``a``: the same sentence in the same
    passage text (boilerplate, a copied file), or the same long sentence anywhere."""
    sentence = _norm(a.sentence)
    keys: list[tuple] = [(sentence, _norm(a.context))]
    if len(sentence.split()) >= SAME_STATEMENT_WORDS:
        keys.append((sentence,))
    return keys


def _passages(answers: list[Answer]) -> dict[tuple[int | None, str], tuple[Answer, Answer]]:
    """Each passage of ``answers`` (ranked) -> (its best sentence, the shown answer it belongs to:
    itself, or an earlier passage whose best sentence it repeats, ``_repeat_keys``)."""
    out: dict[tuple[int | None, str], tuple[Answer, Answer]] = {}
    seen: dict[tuple, Answer] = {}
    for a in answers:
        if a.passage in out:
            continue
        keys = _repeat_keys(a)
        owner = next((seen[key] for key in keys if key in seen), a)
        out[a.passage] = (a, owner)
        for key in keys:
            seen.setdefault(key, owner)
    return out


def n_shown(answers: list[Answer]) -> int:
    """How many answers ``collapse`` can make of ``answers`` (passages, repeats folded)."""
    return sum(best is owner for best, owner in _passages(answers).values())


def shares_word(question: str, context: str) -> bool:
    """Whether a word of the question (3 characters or more, any case) occurs in the passage.
    A nonsense question matches only through subword pieces ("zzzzqqq" through the "zzzz" of
    some option's text), with a score as high as a real question's; a right answer's passage
    nearly always holds a word of its question (benchmarks/no_answer.py: 99.8% of them, none of
    the random strings').  A substring test, so a script written without spaces counts too."""
    text = context.casefold()
    return any(w in text for w in _WORD.findall(question.casefold()))


def collapse(answers: list[Answer], k: int) -> list[Answer]:
    """The best sentence of each of the top ``k`` passages (same file, same context: a
    paragraph), ranked; ``answers`` are ranked by score, and hold every sentence scoring at
    least the k-th passage's best.  A passage keeps in ``collapsed`` its other sentences that
    score that much: the slots they would have taken (all of them when fewer than k passages
    match).  A passage whose best sentence repeats a better passage's (``_repeat_keys``: text
    said verbatim in several files, such as a page footer or a copied document) is listed in
    that answer's ``elsewhere`` instead of taking a slot, with its other sentences."""
    passages = _passages(answers)
    for a in answers:
        best, owner = passages[a.passage]
        if a is not best and owner is best:
            best.collapsed.append(a)
        elif a is best and owner is not best:
            owner.elsewhere.append(a)
    shown = [best for best, owner in passages.values() if best is owner][:k]
    floor = shown[-1].score if len(shown) == k else float("-inf")
    for rank, a in enumerate(shown, 1):
        a.rank = rank
        a.collapsed = [c for c in a.collapsed if c.score >= floor]
        a.elsewhere = [c for c in a.elsewhere if c.score >= floor]
    return shown


class PassageScorer(Protocol):
    """A second stage (``rerank.model.Reranker``): one logit per passage text, and how ``ask`` uses
    them: over the first stage's top ``n`` passages, logit + ``alpha`` · the first stage's score over
    the best of them (``fused``), a
    likely answer from ``likely`` on."""

    @property
    def n(self) -> int: ...

    @property
    def alpha(self) -> float: ...

    @property
    def likely(self) -> float: ...

    def score(self, question: str, texts: list[str]) -> np.ndarray: ...


def fused(logits: np.ndarray, first: np.ndarray, alpha: float) -> np.ndarray:
    """The second stage's score: the reranker's logit plus ``alpha`` times the first stage's score
    over the best of the passages reranked, so that a reranker unsure of itself cannot undo a
    clear first answer (the lab's fusion, sparc_lab/rerank_eval.py, chose alpha on dev)."""
    top = float(first.max()) if len(first) else 0.0
    return logits + alpha * (first / top if top > 0 else first)


def rerank_input(answer: Answer, passage: tuple[list[str], int] | None) -> str:
    """What the reranker reads of an answer: its heading, then its passage's sentences nearest its
    best one (``rerank_text``, as in training); without the passage's sentences (Milvus), its
    context's text before and after the sentence stand for them."""
    from sparc_local.rerank.inputs import rerank_text

    if passage is None or passage[1] < 0:
        start = len(answer.heading or "") if answer.context.startswith(answer.heading or "") else 0
        before, after = answer.context[start:answer.offset], answer.context[answer.offset + len(answer.sentence):]
        parts = [t for t in (before.strip(), answer.sentence, after.strip()) if t]
        passage = (parts, parts.index(answer.sentence))
    return rerank_text(passage[0], passage[1], answer.heading or "")


def rerank(question: str, answers: list[Answer], reranker: PassageScorer, n: int, k: int,
           passages: dict[int, tuple[list[str], int]] | None = None) -> list[Answer]:
    """The top ``k`` of the first stage's ranked passages (``collapse``d) once the reranker has
    ordered the first ``n`` of them by ``fused`` (ties: the first stage's
    order); those after the n-th follow in the first stage's order.  Each keeps in ``collapsed`` and
    ``elsewhere`` what scores at least the lowest first-stage score shown (the first stage's
    scores: the reranker reads a passage, not its other sentences)."""
    head, tail = answers[:n], answers[n:]
    first = {a.sentence_id: a.score for a in answers}
    for a in answers:
        a.first_stage_rank, a.first_stage_score, a.reranked = a.rank, a.score, False
    passages = passages or {}
    logits = reranker.score(question, [rerank_input(a, passages.get(a.sentence_id)) for a in head])
    for a, logit, final in zip(head, logits.tolist(),
                               fused(logits, np.array([a.score for a in head]), reranker.alpha).tolist()):
        a.logit, a.reranked = round(logit, 4), True
        a.score = round(final, 4)
        a.likely = a.score >= reranker.likely
    shown = ([*sorted(head, key=lambda a: -a.score), *tail])[:k]
    floor = min(first[a.sentence_id] for a in shown) if len(shown) == k else float("-inf")
    for rank, a in enumerate(shown, 1):
        a.rank = rank
        a.collapsed = [c for c in a.collapsed if c.score >= floor]
        a.elsewhere = [c for c in a.elsewhere if c.score >= floor]
    return shown


class Asker:
    """Holds the tokenizer and the engine so several questions (tests, benchmarks) pay their
    loads once."""

    def __init__(self, engine: Engine | Index, info: ModelInfo) -> None:
        """``engine``: what ranks the sentences and holds those shown (``backend.open_engine``);
        an ``Index`` is searched by a ``Searcher`` of its own."""
        self.searcher: Engine = Searcher(engine) if isinstance(engine, Index) else engine
        self.info = info
        self.tokenizer = QueryTokenizer(info.tokenizer_path)
        self.skip = info.skip_array()

    def tokens(self, question: str) -> np.ndarray:
        return query_token_ids(self.tokenizer, question, self.skip)

    def ask(self, question: str, k: int = 10, path_glob: str | None = None, ext: str | None = None,
            explain: bool = False, since: float | None = None, before: float | None = None,
            mode: str = HYBRID, phrases: int | None = None, reranker: PassageScorer | None = None,
            candidates: int | None = None) -> list[Answer]:
        """The top ``k`` passages among the files the filters keep (``pathfilter.PathFilter``:
        ``since``/``before`` bound the modification time, in seconds since the epoch), ranked by
        ``mode`` (``modes.MODES``), each as its best sentence (``collapse``).  In hybrid mode
        each says whether it is a likely answer: a score of LIKELY_SCORE or more, a word of the
        question in its passage (``shares_word``) and MIN_COVERAGE of the question's idf.  The first ``phrases`` (None: all) get
        their phrase (``find_phrase``): a sentence with other than ASCII text loads the
        tokenizers library (~40 ms of a cold `ask`), so what is not shown is not computed.

        With a ``reranker`` (hybrid mode), the first stage proposes its top ``candidates`` passages
        (None: the reranker's n) and ``rerank`` orders them; a reranked answer is likely when its
        final score reaches the reranker's threshold."""
        tokens = self.tokens(question)
        if len(tokens) == 0:
            raise NoQueryTokens(f'the question "{question}" has no word to search for',
                                "Ask with words: punctuation, symbols and characters the model does not know "
                                "are ignored.")
        file_filter = PathFilter.of(path_glob, ext, since, before)
        reranker = reranker if mode == HYBRID else None
        n = (candidates or reranker.n) if reranker else 0
        passages = max(k, n)  # the first stage's passages: the reranker's n, or more to show k
        want = passages * FETCH_FACTOR
        while True:
            ids, scores = self.searcher.search(tokens, n=want, file_filter=file_filter, mode=mode)
            found = self._answers(ids, scores)
            if len(ids) < want or n_shown(found) >= passages:
                break
            want *= 4
        answers = collapse(found, passages)
        if answers:
            ends = self.searcher.heading_ends([a.sentence_id for a in answers])
            for a in answers:
                a.heading = a.context[:ends.get(a.sentence_id, 0)].strip() or None
        if reranker and answers:
            answers = rerank(question, answers, reranker, n, k,
                             self.searcher.passage_sentences([a.sentence_id for a in answers[:n]]))
        unscored = [a for a in answers if not a.reranked]  # the first stage's rule: all of them without a reranker
        if mode == HYBRID and unscored:
            cover = self.searcher.coverage(tokens, [a.sentence_id for a in unscored])
            for a, c in zip(unscored, cover.tolist()):
                a.likely = a.score >= LIKELY_SCORE and c >= MIN_COVERAGE and shares_word(question, a.context)
        shown = answers if explain else answers[:phrases]
        if shown:
            shown_ids = [a.sentence_id for a in shown]
            per = self.searcher.explain(tokens, shown_ids, mode=mode)
            blobs = self.searcher.phrase_positions(shown_ids[:phrases])
            for i, (answer, contrib) in enumerate(zip(shown, per)):
                if phrases is None or i < phrases:
                    answer.phrase = find_phrase(answer.sentence, self.tokenizer.spans(answer.sentence), contrib,
                                                blobs.get(answer.sentence_id))
                if explain:
                    answer.contributions = {self._label(int(key)): round(float(v), 3)
                                            for key, v in sorted(contrib.items(), key=lambda kv: -kv[1]) if v > 0}
        return answers

    def _answers(self, ids: np.ndarray, scores: np.ndarray) -> list[Answer]:
        """The sentences of a ranking, one Answer each (rank 0 until collapsed)."""
        rows = {row.id: row for row in self.searcher.sentences(ids)}
        answers: list[Answer] = []
        for i, score in zip(ids.tolist(), scores.tolist()):
            row = rows.get(i)
            if row is None or row.path is None:  # removed since the search (a writer committed)
                continue
            answers.append(Answer(0, round(score, 4), row.path, row.page, row.line, row.text,
                                  row.context, row.offset_in_context, row.id, file_id=row.file_id))
        return answers

    def _label(self, key: int) -> str:
        """How ``--explain`` names a posting key: the token, with the BM25 field it is from."""
        field, token = divmod(key, FIELD_BASE)
        name = self.tokenizer.id_to_token(token)
        assert name is not None  # the key holds a token of the question, of this vocabulary
        return name + _FIELD_LABELS.get(field, "")
