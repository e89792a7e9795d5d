"""Training examples: a question, its answer sentence, and two hard negatives (SPARC §6.2).

Hard negatives per question: another sentence of the answer's passage, and a sentence drawn
from the BM25 top-100 of the question over the same set that is not an answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Container
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sparc_lab.pseudoq import as_question
from sparc_lab.techdata import PACKAGES_DIR, SPLIT_FILE
from sparc_local.evaluation.reqa import ReqaSet, load, read_jsonl
from sparc_local.query.bm25 import BM25

# the ReQA sets beside a clone (../shared/data/reqa), the default --data of every lab command
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa"
TRAIN_SETS = ("squad-train-head", "du2017-train", "wikiqa-train")  # never squad-dev or newsqa-dev
# du2017 articles a00-a11 repeat squad-train-head's questions (lowercased): drop that copy.
DU_DUPLICATE_ARTICLES = {f"a{i:02d}" for i in range(12)}
# du2017's last two articles are held out as our own validation split (never an eval set).
DU_VALIDATION_ARTICLES = {"a42", "a43"}


@dataclass
class Example:
    question: str
    answers: list[int]  # global sentence indices
    passage_negs: list[int]
    bm25_negs: list[int]


@dataclass
class Pool:
    """All training sentences, indexed globally across sets, and their passages (the paragraphs
    the input builder draws contexts from; concatenated, they are `texts`)."""

    texts: list[str]
    paragraphs: list[list[str]]
    train: list[Example]
    valid: list[Example]


def _article(passage: str) -> str:
    return passage.split("_")[0]


def _examples(ds: ReqaSet, offset: int, keep_passage, rng: random.Random,
              bm25_depth: int = 100) -> list[tuple[str, Example]]:
    index = {sid: i for i, sid in enumerate(ds.ids)}
    members: dict[str, list[int]] = {}
    for i, p in enumerate(ds.passages):
        members.setdefault(p, []).append(i)
    bm25 = BM25(ds.texts)
    answer_texts_cache: dict[int, str] = {}
    out = []
    for _qid, question, answers in ds.queries:
        ans = [index[a] for a in answers if a in index]
        if not ans:
            continue
        passage = ds.passages[ans[0]]
        if not keep_passage(passage):
            continue
        ans_set = set(ans)
        ans_texts = {answer_texts_cache.setdefault(a, ds.texts[a].strip().lower()) for a in ans}
        pneg = [j for j in members[passage] if j not in ans_set]
        scores = bm25.scores(question)
        top = np.argsort(-scores)[:bm25_depth]
        # a BM25 negative must not be an answer, nor a copy of one's text
        bneg = [int(j) for j in top if int(j) not in ans_set and ds.texts[j].strip().lower() not in ans_texts
                and scores[j] > 0]
        ex = Example(question, [a + offset for a in ans], [j + offset for j in pneg], [j + offset for j in bneg])
        out.append((passage, ex))
    rng.shuffle(out)
    return out


# the kinds of technical pair whose question an author wrote as a question (sparc_lab/techdata.py)
NATURAL_KINDS = frozenset({"faq", "howto"})


def build_pool(data_dir: Path, seed: int = 13, tech_dir: Path | None = None, tech_share: float = 0.5,
               rewrite: float = 0.0, vocab: Container[str] = frozenset(), natural_first: bool = False) -> Pool:
    rng = random.Random(seed)
    texts: list[str] = []
    paragraphs: list[list[str]] = []
    train: list[Example] = []
    valid: list[Example] = []
    for name in TRAIN_SETS:
        ds = load(data_dir / name)
        offset = len(texts)
        texts += ds.texts
        paragraphs += ds.paragraphs()
        if name == "du2017-train":
            keep = lambda p: _article(p) not in DU_DUPLICATE_ARTICLES
        else:
            keep = lambda p: True
        for passage, ex in _examples(ds, offset, keep, rng):
            if name == "du2017-train" and _article(passage) in DU_VALIDATION_ARTICLES:
                valid.append(ex)
            else:
                train.append(ex)
    if tech_dir is not None:
        train += _tech_examples(tech_dir, texts, paragraphs, len(train), tech_share, rng, rewrite, vocab,
                                natural_first)
    return Pool(texts, paragraphs, train, valid)


def _tech_examples(tech_dir: Path, texts: list[str], paragraphs: list[list[str]], n_home: int, share: float,
                   rng: random.Random, rewrite: float = 0.0, vocab: Container[str] = frozenset(),
                   natural_first: bool = False) -> list[Example]:
    """The train packages of a technical set (sparc_lab/techdata.py: SPLIT_FILE, PACKAGES_DIR/PKG), each package
    its own set, so a BM25 negative is a sentence of the same package; sampled so that they make
    ``share`` of the training examples beside the ``n_home`` Wikipedia ones. A ``rewrite`` share of
    the headings, terms and options is put in question form (sparc_lab/pseudoq.py). With
    ``natural_first`` every FAQ and HOWTO question joins the sample before any mechanical pair: they
    are the few a person wrote as a question, as a user asks."""
    if not 0 <= share < 1:
        raise ValueError("--tech-share must be in [0, 1)")
    split = json.loads((tech_dir / SPLIT_FILE).read_text())
    found: list[Example] = []
    natural: list[Example] = []
    for pkg in split["train"]:
        folder = tech_dir / PACKAGES_DIR / pkg
        ds = load(folder)
        kinds = {q["id"]: q.get("kind", "") for q in read_jsonl(folder / "queries.jsonl.gz")}
        if rewrite:
            ds = _rewritten(ds, kinds, rewrite, vocab, rng)
        offset = len(texts)
        texts += ds.texts
        paragraphs += ds.paragraphs()
        wrote = {q[1] for q in ds.queries if kinds.get(q[0]) in NATURAL_KINDS} if natural_first else set()
        for _, ex in _examples(ds, offset, lambda p: True, rng):
            (natural if ex.question in wrote else found).append(ex)
    want = round(n_home * share / (1 - share))
    natural = natural if want >= len(natural) else rng.sample(natural, want)
    rest = want - len(natural)
    return natural + (found if rest >= len(found) else rng.sample(found, rest))


def _rewritten(ds: ReqaSet, kinds: dict[str, str], share: float, vocab: Container[str],
               rng: random.Random) -> ReqaSet:
    """``ds`` with ``share`` of its questions, drawn at random, in pseudoq's question form."""
    queries = [(qid, as_question(text, kinds.get(qid, ""), vocab) if rng.random() < share else text, answers)
               for qid, text, answers in ds.queries]
    return replace(ds, queries=queries)


def sample_batch(pool: Pool, examples: list[Example], rng: random.Random) -> tuple[list[str], list[int], list[set[int]]]:
    """Questions, the candidate sentence indices (3 per question), and each question's answer set.

    Candidate layout: [pos_0..pos_B-1, passage_neg_0.., bm25_neg_0..]; a missing hard negative is
    replaced by a random sentence so every batch has the same shape.
    """
    questions, pos, pneg, bneg, answer_sets = [], [], [], [], []
    for ex in examples:
        questions.append(ex.question)
        pos.append(rng.choice(ex.answers))
        pneg.append(rng.choice(ex.passage_negs) if ex.passage_negs else rng.randrange(len(pool.texts)))
        bneg.append(rng.choice(ex.bm25_negs) if ex.bm25_negs else rng.randrange(len(pool.texts)))
        answer_sets.append(set(ex.answers))
    return questions, pos + pneg + bneg, answer_sets
