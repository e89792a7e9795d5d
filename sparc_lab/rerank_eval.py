"""The reranker on DEV data: the first stage's top N passages reordered, paired with the first stage (issue 44).

    python -m sparc_lab.rerank_eval --run ~/.cache/sparc-local-train/rerank-r1 [--weights step-800.npz] \
        --tech TECH_BUILD [--n 30] [--mode hybrid] [--threads 1] [--onnx EXPORTED_FOLDER] [--alpha A]

The set: the natural (FAQ/HOWTO) questions of the tech build's DEV units over their whole
documents (sparc_lab/naturalset.py), written as files (one per document, a passage a paragraph)
and indexed by `run_index` into EVAL/home once (EVAL: --eval-dir, by default beside the build's
name under ~/.cache/sparc-local-train/rerank-eval/). Every question is asked of the whole index, as
a user's desk; its top --n passages (`Asker.ask`, --mode) are cached in EVAL/candidates-MODE-N.json.
A passage is a hit when it holds an answer sentence. Prints hit@1 and MRR@10 of the first stage,
the reranker alone and the fusion logit + alpha * score/max(score) for several alphas, each paired
with the first stage (95% bootstrap interval of the MRR difference). Never run it on a test split.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from sparc_lab.naturalset import natural_set
from sparc_lab.rerank_data import Corpus, FirstStage, index_folder
from sparc_lab.rerank_train import CrossEncoder, encode_pairs, forward_chunks, load_tokenizer
from sparc_lab.techpkgs import CACHE
from sparc_local.evaluation.metrics import paired_bootstrap, reciprocal
from sparc_local.evaluation.reqa import read_jsonl
from sparc_local.model.weights import load_canonical
from sparc_local.rerank.inputs import rerank_text

ALPHAS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
DEPTHS = (5, 10, 15, 20, 30)
RECALL = 0.95  # right top answers a likely threshold keeps (benchmarks/no_answer.py's RECALL)  # ask's N, the passages reranked (at most --n)


def _document(sentence_id: str) -> str:
    return sentence_id.rsplit("-", 2)[0]


def prepare(tech: Path, eval_dir: Path, mode: str, n: int, split: str, threads: int) -> tuple[list[dict], Corpus]:
    """The questions with their first-stage candidates (cached) and the written corpus."""
    if split == "test":
        raise SystemExit("Error: rerank_eval is for choosing on dev data; test is read once, elsewhere")
    os.environ["SPARC_LOCAL_HOME"] = str(eval_dir / "home")
    ds = eval_dir / "set"
    if not (ds / "queries.jsonl.gz").exists():
        print(json.dumps(natural_set(tech, ds, split)), flush=True)
    corpus = Corpus()
    by_doc: dict[str, list[dict]] = {}
    for r in read_jsonl(ds / "corpus.jsonl.gz"):
        by_doc.setdefault(_document(r["id"]), []).append(r)
    for doc, rows in sorted(by_doc.items()):
        unit, d = doc.split(":", 1)
        corpus.add(f"{split}/{unit}/{d}.txt", rows)
    root = (eval_dir / "files").resolve()
    if not (eval_dir / "home" / "indexed.json").exists():
        t0 = time.time()
        n_sent = corpus.write(root)
        report = index_folder(eval_dir / "home", root, encode=mode != "bm25", threads=threads)
        (eval_dir / "home" / "indexed.json").write_text(json.dumps({**report, "written": n_sent}) + "\n")
        print(f"indexed {report} in {time.time() - t0:.0f}s", flush=True)
    cache = eval_dir / f"candidates-{mode}-{n}.json"
    if cache.exists():
        return json.loads(cache.read_text()), corpus
    stage = FirstStage(eval_dir / "home" / "index.db", corpus, root)
    questions = []
    try:
        for q in read_jsonl(ds / "queries.jsonl.gz"):
            answers = set(q["answers"])
            cands = []
            for doc, p, best, score in stage.top(q["question"], None, n, mode):
                sents = corpus.docs[doc][p]
                cands.append({"doc": doc, "p": p, "best": best, "score": score,
                              "hit": any(sid in answers for sid, _ in sents)})
            questions.append({"id": q["id"], "q": q["question"], "kind": q.get("kind", ""), "cands": cands})
    finally:
        stage.close()
    cache.write_text(json.dumps(questions) + "\n")
    return questions, corpus


def first_hit(hits: list[bool], order: list[int], depth: int = 10) -> int:
    return next((r + 1 for r, i in enumerate(order[:depth]) if hits[i]), 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a rerank_train run folder")
    ap.add_argument("--weights", help="a .npz of the run (default: latest.npz)")
    ap.add_argument("--tech", default=str(CACHE / "tech"), help="the techdata build whose dev units are read")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--eval-dir", help="where the set, its index and the candidates are kept")
    ap.add_argument("--n", type=int, default=30, help="first-stage passages reranked")
    ap.add_argument("--mode", default="hybrid", choices=("hybrid", "bm25", "sparc"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (a quick check)")
    ap.add_argument("--onnx", help="score with this exported reranker folder (the product's Reranker) instead of torch")
    ap.add_argument("--alpha", type=float, default=2.0, help="the fusion whose likely threshold is calibrated")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tech = Path(a.tech).expanduser()
    eval_dir = Path(a.eval_dir).expanduser() if a.eval_dir else CACHE / "rerank-eval" / f"{tech.name}-{a.split}"
    eval_dir.mkdir(parents=True, exist_ok=True)
    questions, corpus = prepare(tech, eval_dir, a.mode, a.n, a.split, a.threads)
    if a.limit:
        questions = questions[: a.limit]
    run = Path(a.run).expanduser()
    weights = run / (a.weights or "latest.npz")
    meta = json.loads((run / "rerank.json").read_text())
    if a.onnx:
        from sparc_local.rerank.model import Reranker

        onnx = Reranker.load(Path(a.onnx).expanduser(), threads=a.threads)
        weights = Path(a.onnx).expanduser()

        def score(question: str, texts: list[str]) -> np.ndarray:
            return onnx.score(question, texts)
    else:
        cfg, w = load_canonical(weights)
        model = CrossEncoder(cfg, w).eval()
        tok = load_tokenizer(run / "tokenizer.json", meta["max_length"])

        def score(question: str, texts: list[str]) -> np.ndarray:
            with torch.no_grad():
                return forward_chunks(model, encode_pairs(tok, [(question, t) for t in texts]), 16).numpy()
    t0 = time.time()
    base: list = []
    reranked: list = []
    fused: dict[float, list] = {alpha: [] for alpha in ALPHAS}
    in_top = 0
    tops: list[tuple[float, bool]] = []  # the --alpha fusion's top score, and whether that answer is right
    by_depth: dict[int, list[int]] = {depth: [] for depth in DEPTHS}
    for q in questions:
        cands = q["cands"]
        hits = [c["hit"] for c in cands]
        in_top += any(hits)
        base.append(first_hit(hits, list(range(len(cands)))))
        if not cands:
            for depth in DEPTHS:
                by_depth[depth].append(0)
            reranked.append(0)
            for alpha in ALPHAS:
                fused[alpha].append(0)
            continue
        texts = [rerank_text([t for _, t in corpus.docs[c["doc"]][c["p"]]], c["best"], "") for c in cands]
        logits = score(q["q"], texts)
        reranked.append(first_hit(hits, list(np.argsort(-logits, kind="stable"))))
        scores = np.array([c["score"] for c in cands], dtype=np.float64)
        norm = scores / scores.max() if scores.max() > 0 else scores
        for alpha in ALPHAS:
            fused[alpha].append(first_hit(hits, list(np.argsort(-(logits + alpha * norm), kind="stable"))))
        final = logits + a.alpha * norm
        tops.append((float(final.max()), bool(hits[int(np.argmax(final))])))
        for depth in DEPTHS:  # ask's N: only the first N reranked (the fusion over their best), the rest after them
            head = scores[:depth]
            part = logits[:depth] + a.alpha * (head / head.max() if head.max() > 0 else head)
            by_depth[depth].append(first_hit(hits, [*np.argsort(-part, kind="stable").tolist(),
                                                    *range(depth, len(cands))]))
    seconds = time.time() - t0

    def line(name: str, ranks: list[int]) -> str:
        r = np.asarray(ranks)
        out = f"{name:<22} hit@1 {np.mean(r == 1):.4f}  MRR@10 {reciprocal(r).mean():.4f}"
        if ranks is not base:
            p = paired_bootstrap(base, ranks)
            out += f"  vs first stage {p.mean:+.4f} [{p.low:+.4f}, {p.high:+.4f}] ({p.better} better, {p.worse} worse)"
        return out

    print(f"{len(questions)} questions of {eval_dir.name}, {a.mode} top {a.n}; answer passage in the top {a.n}: "
          f"{in_top / max(1, len(questions)):.4f}; weights {weights.name} (step {meta.get('step')}); "
          f"{seconds / max(1, len(questions)):.2f}s/question at {a.threads} thread(s)")
    print(line(f"first stage ({a.mode})", base))
    print(line("reranked", reranked))
    for alpha in ALPHAS[1:]:
        print(line(f"fused alpha={alpha}", fused[alpha]))
    for depth in DEPTHS:
        print(line(f"alpha={a.alpha} N={depth}", by_depth[depth]))
    print(likely_line(tops, a.alpha))


def likely_line(tops: list[tuple[float, bool]], alpha: float) -> str:
    """The likely threshold on the fused top score that makes the most right calls (a right top answer
    at or above it, a wrong one below), and what it keeps."""
    if not tops:
        return "no questions"
    scores = sorted({s for s, _ in tops})
    cuts = [scores[0] - 1.0, *((lo + hi) / 2 for lo, hi in zip(scores, scores[1:])), scores[-1] + 1.0]
    calls = [sum((s >= t) == right for s, right in tops) for t in cuts]
    best = cuts[int(np.argmax(calls))]
    right = [s for s, r in tops if r]
    wrong = [s for s, r in tops if not r]
    kept = float(np.quantile(right, 1 - RECALL, method="lower")) if right else 0.0
    return (f"likely threshold (alpha={alpha}): {best:.3f}, {max(calls)}/{len(tops)} right calls; right top answers "
            f"kept {sum(s >= best for s in right)}/{len(right)}, wrong ones flagged {sum(s < best for s in wrong)}/"
            f"{len(wrong)}; keeping {RECALL:.0%} of right top answers (benchmarks/no_answer.py's rule): {kept:.3f}, "
            f"wrong ones flagged {sum(s < kept for s in wrong)}/{len(wrong)}")


if __name__ == "__main__":
    main()
