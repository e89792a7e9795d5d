"""Where model v2 loses to v1 (issue 13), on the held-out training split (du2017 articles a42-a43).

    python benchmarks/v2_gap.py --run ~/.cache/sparc-local-train/v2c MODEL_DIR [MODEL_DIR ...] [--threads 1]

The run folder's pool.pkl gives the split (as sparc_lab/validate.py); candidates are every sentence
of the held-out passages, scored as the product scores (query tokens of sparc_local.query.tokens,
g = sum of f over them, top-K vectors from the model's own encoder). Prints MRR@10 per model:

- by question kind: "sentence" questions, more of whose tokens are in the answer sentence than
  only in the rest of its passage, and "context" questions, the others. Own-token pooling (v2)
  can reach a context word only through expansion; v1's window pooled it directly.
- with a paragraph field: g(q,s) + mu * sum over q of max over the passage's sentences of
  f(v,s'), the paragraph's own evidence added at query time with no retraining (the issue's
  "share of the window's pooled signal", done in the index instead of the graph).
- with --swap, which of its weights cost it most against the first model (the reference, v1).
  Each sentence's kept tokens fall in three classes: in the sentence itself ("own"), only in a
  neighbour within 3 sentences ("neighbour"), or in neither ("expansion"). The reference is
  scored without each class, and with each class's entries replaced by the model's own, put on
  the reference's scale first (f' = log(1 + (e^f - 1)·e^(w_ref - w)), SPARC Eq. 4); and the
  model is scored with the reference's neighbour entries added (max): the ceiling of any gate
  that borrows a sentence's neighbours' words as the reference does.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sparc_lab.validate import held_out_paragraphs
from sparc_local.evaluation.metrics import first_hits_by_score, positions, reciprocal
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo
from sparc_local.query.tokens import query_token_ids

MUS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
CLASSES = ("own", "neighbour", "expansion")
NEAR = 3  # sentences on each side that count as a sentence's neighbours


def token_classes(tokenizer, paras: list[list[str]], skip: np.ndarray) -> list[tuple[set[int], set[int]]]:
    """Per sentence: its own token ids, and the ids only in its neighbours within NEAR sentences."""
    out = []
    for p in paras:
        ids = [set(query_token_ids(tokenizer, t, skip).tolist()) for t in p]
        for k, own in enumerate(ids):
            near = set().union(*ids[max(0, k - NEAR):k], *ids[k + 1:k + 1 + NEAR]) - own
            out.append((own, near))
    return out


def classed(vectors, classes, rescale: float = 1.0) -> list[dict[str, dict[int, float]]]:
    """Each sentence's {class: {token: f}}, f put on another exp(w) by ``rescale`` (Eq. 4)."""
    out = []
    for i, (own, near) in enumerate(classes):
        keys, w = vectors.row(i)
        if rescale != 1.0:
            w = np.log1p(np.expm1(w.astype(np.float64)) * rescale)
        row: dict[str, dict[int, float]] = {c: {} for c in CLASSES}
        for t, x in zip(keys.tolist(), w.tolist()):
            row["own" if t in own else "neighbour" if t in near else "expansion"][t] = x
        out.append(row)
    return out


def swap_report(ref, other, queries, gold) -> str:
    """MRR@10 of the reference without / with the other's entries of each class (see --swap)."""
    def mrr(rows: list[dict[int, float]]) -> float:
        scores = [np.array([sum(r.get(t, 0.0) for t in q.tolist()) for r in rows]) for q in queries]
        return reciprocal_ranks(scores, gold).mean()

    def mix(take: set[str], base=ref, donor=other, merge=False) -> list[dict[int, float]]:
        rows = []
        for b, d in zip(base, donor):
            row = {t: x for c in CLASSES if merge or c not in take for t, x in b[c].items()}
            for c in take:
                for t, x in d[c].items():
                    row[t] = max(row.get(t, 0.0), x) if merge else x
            rows.append(row)
        return rows

    parts = [f"reference {mrr(mix(set())):.4f}"]
    parts += [f"without {c} {mrr(mix({c}, donor=[dict.fromkeys(CLASSES, {})] * len(ref))):.4f}" for c in CLASSES]
    parts += [f"with the model's {c} {mrr(mix({c})):.4f}" for c in CLASSES]
    parts.append(f"the model {mrr(mix(set(CLASSES))):.4f}, plus the reference's neighbour entries "
                 f"{mrr(mix({'neighbour'}, base=other, donor=ref, merge=True)):.4f}")
    return "; ".join(parts)


def reciprocal_ranks(scores: list[np.ndarray], gold: list[set[int]], k: int = 10) -> np.ndarray:
    """1/rank of the first gold sentence in each question's top k (0 if none), by metrics.py's tie rule."""
    return reciprocal(first_hits_by_score(scores, gold, k))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a training run folder (its pool.pkl holds the split)")
    ap.add_argument("models", type=Path, nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--swap", action="store_true", help="also weigh each class of the models' weights against the first's")
    args = ap.parse_args()
    pool = pickle.loads((args.run.expanduser() / "pool.pkl").read_bytes())
    valid = pool.valid
    sents = sorted({s for ex in valid for s in ex.answers + ex.passage_negs})
    paras = held_out_paragraphs(pool, sents)
    para_of = np.concatenate([[i] * len(p) for i, p in enumerate(paras)])
    gold = positions(sents, (ex.answers for ex in valid))
    kinds = None
    ref = None
    print(f"{len(valid)} held-out questions, {len(sents)} sentences in {len(paras)} passages")
    for folder in args.models:
        info = ModelInfo.load(folder)
        enc = Encoder(info, threads=args.threads)
        v = enc.encode(paras)
        rows = np.repeat(np.arange(len(v)), np.diff(v.indptr))
        sent = sp.csr_matrix((v.weights, (rows, v.token_ids)), shape=(len(v), info.vocab_size))
        # the paragraph's vector: per token, the max over its sentences (sort by key, weight desc)
        key = para_of[rows].astype(np.int64) * info.vocab_size + v.token_ids
        order = np.lexsort((-v.weights, key))
        first = np.r_[True, key[order][1:] != key[order][:-1]]
        kept = order[first]
        para = sp.csr_matrix((v.weights[kept], (para_of[rows][kept], v.token_ids[kept])),
                             shape=(len(paras), info.vocab_size))
        skip = info.skip_array()
        queries = [np.unique(query_token_ids(enc.tokenizer, ex.question, skip)) for ex in valid]
        if kinds is None:  # by the first model's tokenizer (all share bert-base-uncased's)
            kinds = []
            for ex, q in zip(valid, queries):
                ans = {t for a in ex.answers for t in query_token_ids(enc.tokenizer, pool.texts[a], skip).tolist()}
                ctx = {t for n in ex.passage_negs for t in query_token_ids(enc.tokenizer, pool.texts[n], skip).tolist()}
                qs = set(q.tolist())
                kinds.append("sentence" if len(qs & ans) > len((qs & ctx) - ans) else "context")
            kinds = np.array(kinds)
        g_sent = [np.asarray(sent[:, q].sum(1)).ravel() for q in queries]
        g_para = [np.asarray(para[:, q].sum(1)).ravel()[para_of] for q in queries]
        rr = reciprocal_ranks(g_sent, gold)
        by_kind = "  ".join(f"{k} ({(kinds == k).sum()} q) {rr[kinds == k].mean():.3f}" for k in ("sentence", "context"))
        print(f"{folder.name}: MRR@10 {rr.mean():.4f}; by kind: {by_kind}")
        field = "  ".join(f"mu={mu:g} {reciprocal_ranks([a + mu * b for a, b in zip(g_sent, g_para)], gold).mean():.4f}"
                          for mu in MUS)
        print(f"{folder.name}: with the paragraph field: {field}", flush=True)
        if args.swap:
            if ref is None:
                classes = token_classes(enc.tokenizer, paras, skip)
                ref, ref_w = classed(v, classes), info.sparsity_w
            else:
                other = classed(v, classes, float(np.exp(ref_w - info.sparsity_w)))
                print(f"{folder.name} against {args.models[0].name}: {swap_report(ref, other, queries, gold)}", flush=True)


if __name__ == "__main__":
    main()
