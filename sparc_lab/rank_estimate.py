"""Could a low-rank estimate of H·Eᵀ pick the projection's candidates? (issue 46)

    python -m sparc_lab.rank_estimate MODEL_DIR [--passages 30] [--ranks 64 96 128 192] [--candidates 1024]

The candidate projection (sparc_local/model/projection.py) estimates every vocabulary row's
max_i H_i·e_v with onnxruntime's integer kernels before scoring its best rows exactly; with a
3-layer encoder that estimate is most of the encoder's time. Issue 46 accepts top-K tokens that
move where answers hold, so the candidates need not be certified, and a cheaper estimate can
choose them: (H·P)(E·P)ᵀ, with P the top r right singular vectors of E's kept rows, costs r/d of
the full one. For each r this prints how much of each sentence's exact top K the candidates it
picks keep (scored exactly, as the graph does), over squad-dev passages encoded by the model's
own weights in float (torch) through the product's input builder: wikiqa-train's, training text,
since r is a setting to choose (never squad-dev nor newsqa-dev).
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
from sparc_local.model.projection import keep_rows


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
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    info = ModelInfo.load(args.model)
    cfg, w = load_encoder_weights(info)
    model = TorchEncoder(cfg, w).eval()
    paras = reqa.load(args.data).paragraphs()[args.first:args.first + args.passages]
    items = paragraph_inputs(load_tokenizer(info.tokenizer_path), paras, info.inputs)
    E = np.asarray(w["emb.word"], np.float32)[keep_rows(info.vocab_size, info.skip_array())]
    _, s, vt = np.linalg.svd(E, full_matrices=False)
    bases = {r: vt[:r].T for r in args.ranks}
    reduced = {r: E @ p for r, p in bases.items()}
    got: dict[int, list[float]] = {r: [] for r in args.ranks}
    with torch.no_grad():
        for b in range(0, len(items), 8):
            ids, types, mask = (torch.from_numpy(x) for x in pad_batch(items[b:b + 8]))
            hidden = model(ids, types, mask).numpy()
            for row, m in zip(hidden, mask.numpy()):
                h = row[m > 0]
                exact = (h @ E.T).max(0)
                for r in args.ranks:
                    got[r].append(overlaps(exact, ((h @ bases[r]) @ reduced[r].T).max(0), info.top_k, args.candidates))
    energy = np.cumsum(s**2) / (s**2).sum()
    print(f"{info.id}: {len(items)} sentences of {len(paras)} {args.data.name} passages, top {info.top_k}, "
          f"{args.candidates} candidates")
    for r in args.ranks:
        v = np.array(got[r])
        print(f"rank {r:4d} ({energy[r - 1]:.2f} of E's energy): overlap median {np.median(v):.3f}, "
              f"mean {v.mean():.4f}, min {v.min():.3f}")


if __name__ == "__main__":
    main()
