"""Where an adapted model's weight goes, and a random control of the same size (issue 16).

    # the sparse vectors of a ReQA set's sentences, base against adapted, by the token's corpus count
    python benchmarks/adapt_shift.py --data ~/.cache/sparc-local-bench/faq-perlfaq --adapted DIR
    # and write the control: E0 + ΔE with each row of ΔE turned to a random direction (same norm)
    python benchmarks/adapt_shift.py --data … --adapted DIR --control OUT_DIR
    # then: python benchmarks/adapt_e2e.py --data … --eval-only DIR OUT_DIR --paired
    python benchmarks/adapt_shift.py --smoke    # the tiny adapt model after 3 steps of adapt, and its control

Prints, per bucket of corpus count (how often the set's sentences use the token), the summed weight
and the postings of the top-K vectors before and after, and the tokens whose summed weight rose and
fell most, with their corpus counts and in how many questions they are. The vectors are eval's
(its cache, so after adapt_e2e.py --eval they are not encoded again). The control asks whether
adapt's direction or only the size of its change moves MRR: a random change of the same size per row.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

BUCKETS = ((1, 4), (5, 49), (50, None))  # corpus counts, inclusive
TOP = 12


def summed(vectors, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each token's summed weight and its postings over the sentences' vectors."""
    ids = vectors.token_ids.astype(np.int64)
    return (np.bincount(ids, weights=vectors.weights, minlength=vocab_size),
            np.bincount(ids, minlength=vocab_size))


def write_control(base, adapted, out: Path, seed: int = 0) -> None:
    from sparc_local.adapt.model_folder import write_adapted_model
    from sparc_local.model.folder import load_encoder_weights

    E0 = load_encoder_weights(base)[1]["emb.word"].astype(np.float64)
    dE = load_encoder_weights(adapted)[1]["emb.word"].astype(np.float64) - E0
    norms = np.linalg.norm(dE, axis=1, keepdims=True)
    g = np.random.default_rng(seed).standard_normal(dE.shape)
    random = g / np.linalg.norm(g, axis=1, keepdims=True) * norms
    write_adapted_model(base, (E0 + random).astype(np.float32), out, name=out.name,
                        extra={"adapted_from": None, "control": f"random directions of {adapted.id}'s row norms"})
    print(f"control {out}: {int((norms > 0).sum())} rows moved, |ΔE|/|E| {np.linalg.norm(dE) / np.linalg.norm(E0):.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="a ReQA folder")
    ap.add_argument("--adapted", type=Path, help="an adapted model folder")
    ap.add_argument("--base", type=Path, help="the model it was adapted from (default: the shipped model)")
    ap.add_argument("--control", type=Path, metavar="OUT_DIR", help="write the random control model here")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny adapt model after 3 steps of adapt on a tiny set, and its control (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        a = smoke.adapt_setup(s, indexed=True)
        args.data, args.base, args.adapted, args.control = a.data, a.model, smoke.adapted_model(a), s.folder / "control"
    if not args.data or not args.adapted:
        ap.error("--data and --adapted are required")

    from sparc_local.evaluation import reqa
    from sparc_local.evaluation.evaluate import encode_corpus
    from sparc_local.model.info import ModelInfo, load_tokenizer, shipped_model_dir
    from sparc_local.query.tokens import query_token_ids

    base, adapted = ModelInfo.load(args.base or shipped_model_dir()), ModelInfo.load(args.adapted)
    if args.control:
        write_control(base, adapted, args.control)
    ds = reqa.load(args.data)
    tok = load_tokenizer(base.tokenizer_path)
    counts = np.zeros(base.vocab_size, np.int64)
    for e in tok.encode_batch(ds.texts, add_special_tokens=False):
        np.add.at(counts, e.ids, 1)
    in_questions = Counter(t for _, q, _ in ds.queries for t in set(query_token_ids(tok, q, base.skip_array()).tolist()))
    (wb, pb), (wa, pa) = (summed(encode_corpus(ds, args.data, info, args.threads).head(info.top_k), base.vocab_size)
                          for info in (base, adapted))
    print(f"{len(ds.texts)} sentences, top-{base.top_k} vectors: weight {wb.sum():.0f} → {wa.sum():.0f}")
    for lo, hi in ((0, 0),) + BUCKETS:
        m = (counts >= lo) & (counts <= (hi if hi is not None else counts.max()))
        print(f"tokens the corpus uses {lo}{'+' if hi is None else '' if hi == lo else f'–{hi}'} times ({int(m.sum())}): "
              f"weight {wb[m].sum():.0f} → {wa[m].sum():.0f} ({wa[m].sum() / max(wb[m].sum(), 1e-9) - 1:+.1%}), "
              f"postings {int(pb[m].sum())} → {int(pa[m].sum())}")
    d = wa - wb
    for label, order in (("rose most", np.argsort(-d)[:TOP]), ("fell most", np.argsort(d)[:TOP])):
        print(f"{label} (token, corpus count, weight change, questions with it): " + ", ".join(
            f"{tok.id_to_token(int(t))} {int(counts[t])} {d[t]:+.0f} {in_questions.get(int(t), 0)}" for t in order))


if __name__ == "__main__":
    main()
