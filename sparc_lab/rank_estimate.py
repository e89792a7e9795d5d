"""Could a low-rank estimate of H·Eᵀ pick the projection's candidates? (issue 46)

    python -m sparc_lab.rank_estimate MODEL_DIR [--passages 30] [--ranks 64 96 128 192] [--candidates 1024]

The candidate projection (sparc_local/model/projection.py) estimates every vocabulary row's
max_i H_i·e_v with onnxruntime's integer kernels before scoring its best rows exactly; with a
3-layer encoder that estimate is most of the encoder's time. Issue 46 accepts top-K tokens that
move where answers hold, so the candidates need not be certified, and a cheaper estimate can
choose them: (H·P)(E·P)ᵀ, with P the top r right singular vectors of E's kept rows, costs r/d of
the full one. For each r this prints how much of each sentence's exact top K the candidates it
picks keep (scored exactly, as the graph does), over passages encoded by the model's own weights
in float (torch) through the product's input builder: wikiqa-train's by default, training text,
since r is a setting to choose (never squad-dev nor newsqa-dev).

With --calibrate it also measures bases fitted to the encoder's hidden states on training text
(projection.fitted_bases), and --save writes them for the export:

    python -m sparc_lab.rank_estimate MODEL_DIR --data TECH/pkgs/autoconf --first 200 --passages 60 \
        --ranks 64 96 --calibrate 40 --calibrate-on DATA/wikiqa-train TECH/pkgs/ant ... --save basis.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from sparc_lab.data import DATA_DIR
from sparc_lab.model import TorchEncoder
from sparc_local.evaluation import reqa
from sparc_local.model.folder import load_encoder_weights
from sparc_local.model.info import ModelInfo, load_tokenizer
from sparc_local.model.inputs import pad_batch, paragraph_inputs
from sparc_local.model.projection import fitted_bases, keep_rows


def overlaps(scores: np.ndarray, estimate: np.ndarray, k: int, candidates: int) -> float:
    """Share of the exact top ``k`` (positive scores only, as f drops the rest) that the exact
    top ``k`` among the estimate's best ``candidates`` rows keeps."""
    top = np.argsort(-scores)[:k]
    want = set(top[scores[top] > 0].tolist())
    cand = np.argpartition(-estimate, candidates)[:candidates]
    best = cand[np.argsort(-scores[cand])[:k]]
    got = set(best[scores[best] > 0].tolist())
    return len(want & got) / max(1, len(want))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--data", type=Path, default=DATA_DIR / "wikiqa-train")
    ap.add_argument("--first", type=int, default=0, help="skip this many passages")
    ap.add_argument("--passages", type=int, default=30)
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 96, 128, 192])
    ap.add_argument("--candidates", type=int, default=1024)
    ap.add_argument("--calibrate", type=int, default=0,
                    help="also the bases fitted to the hidden states of this many passages of each --calibrate-on "
                         "folder (default --data, after the passages measured)")
    ap.add_argument("--calibrate-on", type=Path, nargs="+", help="reqa-format folders to fit the bases on")
    ap.add_argument("--save", type=Path, help="with --calibrate: write the first rank's fitted bases here, "
                                              "for python -m sparc_local.model.export --basis")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    info = ModelInfo.load(args.model)
    cfg, w = load_encoder_weights(info)
    model = TorchEncoder(cfg, w).eval()
    paras = reqa.load(args.data).paragraphs()[args.first:args.first + args.passages]
    items = paragraph_inputs(load_tokenizer(info.tokenizer_path), paras, info.inputs)
    E = np.asarray(w["emb.word"], np.float32)[keep_rows(info.vocab_size, info.skip_array())]
    _, s, vt = np.linalg.svd(E, full_matrices=False)
    # each estimate: (H·A)(E·B)ᵀ, A and B (d, r); E's own subspace has A = B = P
    bases = {f"E {r}": (vt[:r].T, vt[:r].T) for r in args.ranks}
    if args.calibrate:
        cal = [p for d in args.calibrate_on or [args.data]
               for p in reqa.load(d).paragraphs()[args.first + args.passages if d == args.data else 0:][:args.calibrate]]
        h_cal = np.concatenate(_hidden_states(model, paragraph_inputs(load_tokenizer(info.tokenizer_path), cal,
                                                                      info.inputs)))
        bases.update({f"H,E {r}": ab for r, ab in ((r, fitted_bases(h_cal, E, r)) for r in args.ranks)})
        if args.save:
            a, e = bases[f"H,E {args.ranks[0]}"]
            np.savez(args.save, h=a, e=e)
            print(f"saved the rank-{args.ranks[0]} bases fitted to {len(h_cal)} hidden states to {args.save}")
    reduced = {name: E @ eb for name, (_, eb) in bases.items()}
    got: dict[str, list[float]] = {name: [] for name in bases}
    for h in _hidden_states(model, items):
        exact = (h @ E.T).max(0)
        for name, (a, _) in bases.items():
            got[name].append(overlaps(exact, ((h @ a) @ reduced[name].T).max(0), info.top_k, args.candidates))
    energy = np.cumsum(s**2) / (s**2).sum()
    print(f"{info.id}: {len(items)} sentences of {len(paras)} {args.data.name} passages, top {info.top_k}, "
          f"{args.candidates} candidates")
    for name, vals in got.items():
        v = np.array(vals)
        r = int(name.split()[-1])
        print(f"{name:>9s} ({energy[r - 1]:.2f} of E's energy): overlap median {np.median(v):.3f}, "
              f"mean {v.mean():.4f}, min {v.min():.3f}")


def _hidden_states(model: TorchEncoder, items: list) -> list[np.ndarray]:
    """Each input's last hidden states at its real positions, (length, d) apiece."""
    out = []
    with torch.no_grad():
        for b in range(0, len(items), 8):
            ids, types, mask = (torch.from_numpy(x) for x in pad_batch(items[b:b + 8]))
            out += [row[m > 0] for row, m in zip(model(ids, types, mask).numpy(), mask.numpy())]
    return out


if __name__ == "__main__":
    main()
