"""What `adapt` does to E (issue 16): which rows move, how far, and what that does to the sparse vectors.

    # train E with adapt's own loop on the sentences of an index, once per MLM (cached in --out)
    python benchmarks/adapt_mechanism.py --home HOME --mlm shipped=MODEL_DIR --mlm companion=EXPORT_DIR \
        [--steps 500] [--lr 5e-5] [--rows all] [--out DIR] [--variants DIR] [--base DIR]
    python benchmarks/adapt_mechanism.py --smoke    # the tiny adapt model, 3 steps on a tiny index (smoke.py)

HOME is a SPARC_LOCAL_HOME whose index holds the corpus (desk.py's or adapt_e2e.py's home). Each
--mlm names a model folder whose MLM (mlm_head.npz, and mlm_encoder.npz if any) trains E; E itself
is always the shipped model's (the companion export carries the same E). Prints, per MLM:

- the MLM loss (mean of the first / last 20 steps);
- how far E moves: ‖ΔE‖/‖E‖ overall, and per row (median, 90th percentile of ‖Δe_v‖/‖e_v‖) by
  the token's count in the corpus (0: never seen; the special tokens apart), with each bucket's share
  of ‖ΔE‖²;
- the rows that move most, with their corpus counts;
- how coherent the moves are: per bucket, the mean cosine of Δe_v with the bucket's mean move
  (1: every row pushed the same way);
- on a sample of the corpus's paragraphs, the sparse vectors of the base and the adapted model:
  overlap of their top-K token sets, and the share of the weight on tokens the corpus never uses.

With --variants DIR, also writes model folders for the row rules (E0 + ΔE on allowed rows only),
to measure with adapt_e2e.py --eval / desk.py, e.g. `all` and `corpus` (rows of tokens in the corpus).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the machine is shared; before numpy loads BLAS

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the clone's top: sparc_lab/ is not installed

BUCKETS = ((0, 0), (1, 4), (5, 49), (50, None))  # corpus count ranges (inclusive)
TOP = 15
SAMPLE = 400  # paragraphs encoded for the sparse-vector comparison


def corpus_counts(index, tokenizer, vocab: int) -> np.ndarray:
    """How often each token occurs in the index's sentences (no special tokens)."""
    ids = index.live_sentence_ids()
    counts = np.zeros(vocab, np.int64)
    for start in range(0, len(ids), 2000):
        texts = [r.text for r in index.sentences(ids[start:start + 2000])]
        for e in tokenizer.encode_batch(texts, add_special_tokens=False):
            np.add.at(counts, np.asarray(e.ids, np.int64), 1)
    return counts


def train(index, mlm_dir: Path, steps: int, lr: float, rows: str, seed: int = 0) -> tuple[np.ndarray, list[float], float]:
    """E trained by adapt's loop with `mlm_dir`'s MLM; returns (E, losses, seconds)."""
    from sparc_lab.adapt_rules import rows_by_rule
    from sparc_local.adapt.domain import load_reference
    from sparc_local.adapt.model_folder import load_adapt_weights
    from sparc_local.adapt.run import AdaptOptions, corpus_counts, corpus_ids, token_batches
    from sparc_local.adapt.train_embeddings import adapt_embeddings
    from sparc_local.model.info import ModelInfo, load_tokenizer

    info = ModelInfo.load(mlm_dir)
    opts = AdaptOptions(steps=steps, lr=lr, seed=seed)
    cfg, w, _ = load_adapt_weights(info)
    tok = load_tokenizer(info.tokenizer_path)
    ids = corpus_ids(index, opts.min_sentences)
    losses: list[float] = []
    t0 = time.perf_counter()
    batches = token_batches(index, ids, tok, info, opts.batch_size, opts.max_length, seed)
    E = adapt_embeddings(cfg, w, batches, steps=steps, lr=lr, seed=seed, mask_id=tok.token_to_id("[MASK]"),
                         on_step=lambda s, loss: losses.append(loss),
                         rows=rows_by_rule(rows, corpus_counts(index, ids, tok), load_reference(info.path)))
    return E, losses, time.perf_counter() - t0


def sparse_compare(base, adapted, texts: list[str], unseen: np.ndarray, k: int) -> dict:
    """Top-k overlap and the weight share on unseen tokens, base vs adapted model, same paragraphs."""
    from sparc_local.model.encoder import Encoder

    out = {}
    vecs = {}
    for name, info in (("base", base), ("adapted", adapted)):
        vecs[name] = Encoder(info, threads=1).encode(texts, top_k=k)
    jacc, share = [], {"base": [], "adapted": []}
    for i in range(len(texts)):
        rows = {n: v.row(i) for n, v in vecs.items()}
        a, b = set(rows["base"][0].tolist()), set(rows["adapted"][0].tolist())
        jacc.append(len(a & b) / max(1, len(a | b)))
        for n, (tids, wts) in rows.items():
            wts = np.asarray(wts, np.float64)
            share[n].append(float(wts[unseen[np.asarray(tids)]].sum() / max(wts.sum(), 1e-12)))
    out["topk_jaccard_mean"] = float(np.mean(jacc))
    for n, s in share.items():
        out[f"unseen_weight_share_{n}"] = float(np.mean(s))
    return out


def describe(E0: np.ndarray, E: np.ndarray, counts: np.ndarray, special: np.ndarray, vocab_tokens: list[str]) -> dict:
    dE = E - E0
    row = np.linalg.norm(dE, axis=1)
    rel = row / np.maximum(np.linalg.norm(E0, axis=1), 1e-12)
    total = float((row ** 2).sum())
    out = {"rel_frobenius": float(np.linalg.norm(dE) / np.linalg.norm(E0)), "rows_moved": int((row > 0).sum()),
           "buckets": {}}
    for lo, hi in BUCKETS:
        sel = (counts >= lo) & ((counts <= hi) if hi is not None else True) & ~special
        name = f"{lo}" if lo == hi else f"{lo}-{hi}" if hi else f">={lo}"
        if not sel.any():
            continue
        mean_dir = dE[sel].mean(0)
        cos = (dE[sel] @ mean_dir) / np.maximum(row[sel] * np.linalg.norm(mean_dir), 1e-12)
        out["buckets"][name] = {"rows": int(sel.sum()), "rel_median": float(np.median(rel[sel])),
                                "rel_p90": float(np.quantile(rel[sel], 0.9)),
                                "share_of_sq_change": float((row[sel] ** 2).sum() / max(total, 1e-30)),
                                "coherence": float(cos.mean())}
    out["special"] = {vocab_tokens[i]: round(float(rel[i]), 4) for i in np.flatnonzero(special)[:6]}
    top = np.argsort(-rel)[:TOP]
    out["top_rows"] = [(vocab_tokens[i], int(counts[i]), round(float(rel[i]), 4)) for i in top]
    seen = (counts > 0) & ~special
    if seen.sum() > 2:
        lc = np.log1p(counts[seen])
        r = np.argsort(np.argsort(rel[seen]))
        c = np.argsort(np.argsort(lc))
        out["spearman_rel_vs_log_count_seen"] = float(np.corrcoef(r, c)[0, 1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path)
    ap.add_argument("--mlm", action="append", metavar="LABEL=DIR")
    ap.add_argument("--base", type=Path, help="the model whose E is trained (default: the shipped model)")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--rows", default="all", help="the row rule while training (sparc_lab.adapt_rules)")
    ap.add_argument("--out", type=Path, default=Path.home() / ".cache" / "sparc-local-train" / "adapt-mechanism")
    ap.add_argument("--variants", type=Path, help="write model folders of the row rules here")
    ap.add_argument("--sample", type=int, default=SAMPLE, help="paragraphs for the sparse-vector comparison (0: none)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny adapt model, 3 steps on a tiny index, its variants (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        a = smoke.adapt_setup(s, indexed=True)
        args.home, args.base, args.mlm = a.home, a.model, [f"tiny={a.model}"]
        args.steps, args.out, args.variants, args.sample = 3, s.folder / "mechanism", s.folder / "variants", 10
    if not args.home or not args.mlm:
        ap.error("--home and --mlm are required")
    os.environ["SPARC_LOCAL_HOME"] = str(args.home.resolve())

    from sparc_local.adapt.model_folder import write_adapted_model
    from sparc_local.index.store import Index
    from sparc_local.model.info import ModelInfo, load_tokenizer, shipped_model_dir
    from sparc_local.paths import db_path

    base = ModelInfo.load(args.base or shipped_model_dir())
    from sparc_local.model.folder import load_encoder_weights

    _, w0 = load_encoder_weights(base)
    E0 = w0["emb.word"]
    tok = load_tokenizer(base.tokenizer_path)
    vocab_tokens = [tok.id_to_token(i) or "?" for i in range(E0.shape[0])]
    special = np.array([t.startswith("[") and t.endswith("]") for t in vocab_tokens])
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"home": str(args.home), "steps": args.steps, "lr": args.lr, "rows": args.rows, "load": os.getloadavg()[0]}
    with Index(db_path()) as idx:
        counts = corpus_counts(idx, tok, E0.shape[0])
        report["corpus"] = {"sentences": int(idx.stats()["sentences"]), "tokens": int(counts.sum()),
                            "distinct_tokens": int((counts > 0).sum()), "vocab": int(E0.shape[0])}
        rng = np.random.default_rng(0)
        texts = [] if not args.sample else [r.text for r in idx.sentences(np.sort(rng.choice(
            [int(r[0]) for r in idx.conn.execute("SELECT id FROM sentences WHERE file_id IS NOT NULL")],
            size=args.sample, replace=False)))]
        print(json.dumps({k: v for k, v in report.items()}), flush=True)
        for spec in args.mlm:
            label, folder = spec.split("=", 1)
            cache = args.out / f"E-{args.home.name}-{label}-{args.rows}-{args.steps}-{args.lr:g}.npz"
            if cache.exists():
                with np.load(cache) as z:
                    E, losses, secs = z["E"], z["losses"].tolist(), float(z["seconds"])
            else:
                E, losses, secs = train(idx, Path(folder), args.steps, args.lr, args.rows)
                np.savez(cache, E=E, losses=np.asarray(losses), seconds=secs)
            d = describe(E0, E, counts, special, vocab_tokens)
            d["loss_first20"] = float(np.mean(losses[:20]))
            d["loss_last20"] = float(np.mean(losses[-20:]))
            d["train_seconds"] = secs
            d["s_per_step"] = secs / max(1, len(losses))
            if args.variants:
                for rule, allowed in (("all", np.ones(len(E0), bool)), ("corpus", (counts > 0) & ~special)):
                    out = args.variants / f"{args.home.name}-{label}-{args.rows}-{rule}"
                    if not out.exists():
                        Ev = E0.copy()
                        Ev[allowed] = E[allowed]
                        write_adapted_model(base, Ev, out, name=out.name, extra={"adapted_from": None})
                    if rule == "all" and texts:
                        d["sparse"] = sparse_compare(base, ModelInfo.load(out), texts, counts == 0, base.top_k)
            report[label] = d
            print(json.dumps({label: d}), flush=True)


if __name__ == "__main__":
    main()
