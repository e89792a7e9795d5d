"""Training groups for the reranker, with hard negatives from the product's own first stage (issue 44).

    python -m sparc_lab.rerank_data --tech TECH_BUILD --out ~/.cache/sparc-local-train/rerank-tech \
        [--mechanical 12000] [--max-sentences 900000] --wiki-per-set 0 [--mode bm25]
    python -m sparc_lab.rerank_data --out ~/.cache/sparc-local-train/rerank-wiki --wiki-per-set 4000

The corpora are written as files, one per document (a technical unit's document; a Wikipedia
article, or a group of SQuAD paragraphs), one passage a paragraph, blank lines between, and indexed
by `run_index` into OUT/home, as a user's folder would be. Each training question then asks
`Asker.ask` for its top 50 passages among its unit's documents (a technical unit) or its own
document (Wikipedia), in --mode (bm25 stops the index before its encoding pass, which would take
hours here). A passage holding an answer sentence is a positive, the others are hard negatives.
Technical questions come from the build's TRAIN units only (kept-out and test packages are never
in a build: techpkgs.guard), Wikipedia's from the training sets only (data.TRAIN_SETS).

Writes OUT/passages.jsonl.gz ({"id", "sentences", "heading"}) and OUT/groups.jsonl.gz
({"q", "src", "kind", "unit", "pos": [[passage, best], ...], "neg": [[passage, best], ...],
"pos_rank"}: passages ranked, best the first stage's best sentence in the passage, pos_rank the
first positive's rank among the top 50, -1 when none is there). Input texts: rerank.inputs.rerank_text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Container, Iterable
from pathlib import Path

from sparc_lab.data import DATA_DIR, DU_DUPLICATE_ARTICLES, NATURAL_KINDS
from sparc_lab.pseudoq import as_question
from sparc_lab.techdata import PACKAGES_DIR, SPLIT_FILE
from sparc_lab.techpkgs import CACHE
from sparc_local.evaluation.reqa import read_jsonl

OUT = CACHE / "rerank-data"
DEPTH = 50  # passages asked per question
SQUAD_GROUP = 40  # squad-train-head has no article ids: this many consecutive paragraphs make a document
WIKI_SETS = ("squad-train-head", "du2017-train", "wikiqa-train")


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


class Corpus:
    """Documents to write as files: doc path -> passages, each a list of (sentence id, text)."""

    def __init__(self) -> None:
        self.docs: dict[str, list[list[tuple[str, str]]]] = {}

    def add(self, path: str, rows: Iterable[dict], by_sentence: bool = False) -> None:
        """rows of one document (ReQA corpus rows), grouped by passage in order; by_sentence: each
        sentence its own passage (WikiQA's candidates are sentences of one summary)."""
        passages: dict[str, list[tuple[str, str]]] = {}
        for r in sorted(rows, key=lambda r: (r["passage"], r["position"])):
            key = r["id"] if by_sentence else r["passage"]
            passages.setdefault(key, []).append((r["id"], r["text"]))
        self.docs[path] = list(passages.values())

    def write(self, root: Path) -> int:
        n = 0
        for path, passages in self.docs.items():
            f = root / path
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("\n\n".join(" ".join(" ".join(t.split()) for _, t in p) for p in passages) + "\n")
            n += sum(map(len, passages))
        return n


def index_folder(home: Path, root: Path, encode: bool, threads: int = 2) -> dict:
    """run_index over root into home/index.db, the shipped model; without encode the run stops
    when its encoding pass begins (BM25 postings stored: `ask --mode bm25` answers)."""
    from sparc_local.index.store import Index
    from sparc_local.model.encoder import EncoderFactory
    from sparc_local.model.info import ModelInfo, shipped_model_dir
    from sparc_local.pipeline import IndexPhase, run_index

    info = ModelInfo.load(shipped_model_dir())
    state = {"encoding": False}

    def progress(p) -> None:
        state["encoding"] = state["encoding"] or p.phase == IndexPhase.ENCODING

    t0 = time.time()
    index = Index(home / "index.db")
    try:
        report = run_index(index, [str(root)], info, EncoderFactory(info, threads), on_progress=progress,
                           should_stop=lambda: not encode and state["encoding"])
    finally:
        index.close()
    return {"files": report.indexed, "sentences": report.sentences, "seconds": round(time.time() - t0)}


class FirstStage:
    """The product's `ask` over an index of written corpora: top passages, mapped back to the
    corpus's passages by their text."""

    def __init__(self, db: Path, corpus: Corpus, root: Path) -> None:
        from sparc_local.index.store import Index
        from sparc_local.model.info import ModelInfo, shipped_model_dir
        from sparc_local.query.ask import Asker
        from sparc_local.query.searcher import Searcher

        self.index = Index(db)
        self.searcher = Searcher(self.index)  # its filter masks are emptied now and then (``top``)
        self.asker = Asker(self.searcher, ModelInfo.load(shipped_model_dir()))
        self.root = root
        self.corpus = corpus
        self._by_text: dict[str, dict[str, int]] = {}  # doc -> normalised passage text -> passage number
        self._by_sentence: dict[str, dict[str, int]] = {}

    def _maps(self, doc: str) -> tuple[dict[str, int], dict[str, int]]:
        if doc not in self._by_text:
            passages = self.corpus.docs.get(doc, [])
            self._by_text[doc] = {norm(" ".join(t for _, t in p)): i for i, p in enumerate(passages)}
            self._by_sentence[doc] = {}
            for i, p in enumerate(passages):
                for _, t in p:
                    self._by_sentence[doc].setdefault(norm(t), i)
        return self._by_text[doc], self._by_sentence[doc]

    def top(self, question: str, glob: str | None, k: int = DEPTH, mode: str = "bm25") -> list[tuple[str, int, int, float]]:
        """(doc, passage number, best sentence's position in it, score) of the top k passages."""
        from sparc_local.errors import NoQueryTokens

        try:
            answers = self.asker.ask(question, k=k, path_glob=glob, mode=mode, phrases=0)
        except NoQueryTokens:
            return []
        finally:
            snap = self.searcher._snap
            if snap is not None and len(snap.masks) > 64:
                snap.masks.clear()  # one mask per filter: thousands of filters would hold gigabytes
        out = []
        for a in answers:
            doc = Path(a.path).relative_to(self.root).as_posix() if Path(a.path).is_absolute() else a.path
            by_text, by_sentence = self._maps(doc)
            p = by_text.get(norm(a.context))
            if p is None:
                p = by_sentence.get(norm(a.sentence))
            if p is None:
                continue
            sents = [norm(t) for _, t in self.corpus.docs[doc][p]]
            best = sents.index(norm(a.sentence)) if norm(a.sentence) in sents else 0
            out.append((doc, p, best, a.score))
        return out

    def close(self) -> None:
        self.index.close()


# ------------------------------------------------------------------------------------ questions


def _document(sentence_id: str) -> str:
    return sentence_id.rsplit("-", 2)[0]


def tech_questions(tech: Path, corpus: Corpus, mechanical: int, max_sentences: int, rewrite: float,
                   rng: random.Random, vocab: Container[str], split: str = "train") -> list[dict]:
    """Every natural question of the split's units, then mechanical ones drawn at random, each
    with the documents of its answers written under tech/UNIT/; documents are added while the
    sentences stay under max_sentences (a question whose documents do not fit is skipped)."""
    units = json.loads((tech / SPLIT_FILE).read_text())[split]
    natural: list = []
    found: list = []
    rows_of: dict[str, dict[str, list[dict]]] = {}
    for unit in units:
        folder = tech / PACKAGES_DIR / unit
        for q in read_jsonl(folder / "queries.jsonl.gz"):
            (natural if q.get("kind") in NATURAL_KINDS else found).append((unit, q))
    rng.shuffle(natural)
    rng.shuffle(found)
    chosen: list[dict] = []
    size = 0
    n_mech = 0
    for unit, q in natural + found:
        mech = q.get("kind") not in NATURAL_KINDS
        if mech and n_mech >= mechanical:
            break
        if unit not in rows_of:
            by_doc: dict[str, list[dict]] = defaultdict(list)
            for r in read_jsonl(tech / PACKAGES_DIR / unit / "corpus.jsonl.gz"):
                by_doc[_document(r["id"])].append(r)
            rows_of[unit] = by_doc
        docs = {_document(a) for a in q["answers"]}
        new = [d for d in docs if f"tech/{unit}/{d}.txt" not in corpus.docs]
        extra = sum(len(rows_of[unit][d]) for d in new)
        if size + extra > max_sentences:
            continue
        for d in new:
            corpus.add(f"tech/{unit}/{d}.txt", rows_of[unit][d])
        size += extra
        question = q["question"]
        if mech and rng.random() < rewrite:
            question = as_question(question, q.get("kind", ""), vocab)
        chosen.append({"q": question, "src": "tech", "kind": q.get("kind", ""), "unit": unit,
                       "glob": f"tech/{unit}/*", "answers": set(q["answers"]),
                       "docs": sorted(f"tech/{unit}/{d}.txt" for d in docs)})
        n_mech += mech
    return chosen


def wiki_questions(data: Path, corpus: Corpus, per_set: int, rng: random.Random) -> list[dict]:
    """Questions of the Wikipedia training sets (never squad-dev or newsqa-dev), each searched
    within its own document: a SQuAD paragraph group, a du2017 article (not a00-a11, which repeat
    squad-train-head), a WikiQA summary (its sentences each a passage)."""
    chosen = []
    for name in WIKI_SETS:
        rows = read_jsonl(data / name / "corpus.jsonl.gz")
        if name == "squad-train-head":
            doc_of = lambda p: f"g{int(p[1:]) // SQUAD_GROUP:02d}"
        elif name == "du2017-train":
            doc_of = lambda p: p.split("_")[0]
        else:
            doc_of = lambda p: p
        docs: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            docs[doc_of(r["passage"])].append(r)
        if name == "du2017-train":
            docs = {d: rs for d, rs in docs.items() if d not in DU_DUPLICATE_ARTICLES}
        doc_of_sentence = {r["id"]: doc_of(r["passage"]) for rs in docs.values() for r in rs}
        for d, rs in docs.items():
            corpus.add(f"wiki/{name}/{d}.txt", rs, by_sentence=name == "wikiqa-train")
        queries = [q for q in read_jsonl(data / name / "queries.jsonl.gz")
                   if q["answers"] and all(a in doc_of_sentence for a in q["answers"])]
        rng.shuffle(queries)
        for q in queries[:per_set]:
            d = doc_of_sentence[q["answers"][0]]
            chosen.append({"q": q["question"], "src": name, "kind": "wiki", "unit": f"{name}/{d}",
                           "glob": f"wiki/{name}/{d}.txt", "answers": set(q["answers"]),
                           "docs": [f"wiki/{name}/{d}.txt"]})
    return chosen


# ------------------------------------------------------------------------------------ groups


def make_groups(stage: FirstStage, corpus: Corpus, questions: list[dict], mode: str,
                log: Callable[[str], None] = print) -> tuple[list[dict], dict[tuple[str, int], int]]:
    """Each question's ranked top passages split into positives and negatives, and the table of
    the passages they name (doc, passage number) -> id."""
    pid: dict[tuple[str, int], int] = {}
    groups = []
    t0 = time.time()
    # one filter after another: the searcher's filter mask is computed once per filter
    questions = sorted(questions, key=lambda q: q["glob"])
    for n, q in enumerate(questions, 1):
        top = stage.top(q["q"], q["glob"], DEPTH, mode)
        answer_passages: dict[tuple[str, int], int] = {}
        for doc in q["docs"]:
            for i, p in enumerate(corpus.docs[doc]):
                for j, (sid, _) in enumerate(p):
                    if sid in q["answers"] and (doc, i) not in answer_passages:
                        answer_passages[(doc, i)] = j
        pos, neg, pos_rank = [], [], -1
        pos_texts = {norm(" ".join(t for _, t in corpus.docs[d][i])) for d, i in answer_passages}
        for rank, (doc, i, best, _score) in enumerate(top):
            if (doc, i) in answer_passages:
                pos.append(((doc, i), best))
                pos_rank = rank if pos_rank < 0 else pos_rank
            elif norm(" ".join(t for _, t in corpus.docs[doc][i])) not in pos_texts:
                neg.append(((doc, i), best))
        seen = {key for key, _ in pos}
        pos += [(key, j) for key, j in answer_passages.items() if key not in seen]
        if not pos or not neg:
            continue
        ids = lambda items: [[pid.setdefault(key, len(pid)), best] for key, best in items]
        groups.append({"q": q["q"], "src": q["src"], "kind": q["kind"], "unit": q["unit"], "pos": ids(pos),
                       "neg": ids(neg), "pos_rank": pos_rank})
        if n % 2000 == 0:
            log(f"{n}/{len(questions)} questions asked, {time.time() - t0:.0f}s")
    return groups, pid


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(path)


def build(args: argparse.Namespace) -> dict:
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    log_file = open(out / "build.log", "a")

    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    log(f"args {vars(args)}")
    os.environ["SPARC_LOCAL_HOME"] = str(out / "home")  # the product's data dir: nothing of a user's
    from sparc_local.model.info import load_tokenizer, shipped_model_dir

    vocab = load_tokenizer(shipped_model_dir() / "tokenizer.json").get_vocab()
    rng = random.Random(args.seed)
    corpus = Corpus()
    questions = []
    if args.tech:
        questions = tech_questions(Path(args.tech).expanduser(), corpus, args.mechanical, args.max_sentences,
                                   args.rewrite, rng, vocab)
        log(f"tech: {len(questions)} questions over {len(corpus.docs)} documents")
    if args.wiki_per_set:
        questions += wiki_questions(Path(args.data), corpus, args.wiki_per_set, rng)
    root = (out / "files").resolve()
    if not (out / "home" / "index.db").exists():
        log(f"writing {len(corpus.docs)} documents ({corpus.write(root)} sentences)")
        log(f"index {index_folder(out / 'home', root, encode=args.mode != 'bm25')}")
    stage = FirstStage(out / "home" / "index.db", corpus, root)
    try:
        groups, pid = make_groups(stage, corpus, questions, args.mode, log)
    finally:
        stage.close()
    passages = [{"id": i, "sentences": [t for _, t in corpus.docs[d][p]], "heading": "", "doc": d}
                for (d, p), i in sorted(pid.items(), key=lambda kv: kv[1])]
    write_jsonl(out / "passages.jsonl.gz", passages)
    write_jsonl(out / "groups.jsonl.gz", groups)
    summary: dict = {"groups": len(groups), "passages": len(passages), "mode": args.mode, "by_src": {}}
    for g in groups:
        s = summary["by_src"].setdefault(f"{g['src']}:{g['kind']}", {"groups": 0, "pos_in_top": 0, "top1": 0})
        s["groups"] += 1
        s["pos_in_top"] += g["pos_rank"] >= 0
        s["top1"] += g["pos_rank"] == 0
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    log(f"summary {json.dumps(summary)}")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tech", help="a techdata build (its train units only are read); none: Wikipedia only")
    ap.add_argument("--data", default=str(DATA_DIR), help="the ReQA sets (its training sets only are read)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--mechanical", type=int, default=12000, help="heading/term/option questions, at most")
    ap.add_argument("--max-sentences", type=int, default=900_000, help="technical sentences written, at most")
    ap.add_argument("--rewrite", type=float, default=0.5, help="share of mechanical questions put in question form")
    ap.add_argument("--wiki-per-set", type=int, default=4000, help="questions of each Wikipedia training set")
    ap.add_argument("--mode", default="bm25", choices=("bm25", "hybrid"))
    ap.add_argument("--seed", type=int, default=44)
    print(json.dumps(build(ap.parse_args()), indent=1))


if __name__ == "__main__":
    main()
