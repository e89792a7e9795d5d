"""Weight-space interpolation between a base model and its fine-tuned child (issue 31).

θ(α) = (1 − α)·θ_base + α·θ_tuned, tensor by tensor, including SPARC's scale w. Wortsman et al.
(CVPR 2022, "WiSE-FT") show that such an interpolation keeps most of a fine-tune's gain on the new
distribution while losing less on the old one than the fine-tune itself: here, technical
documentation against the Wikipedia QA the shipped model was trained on. α is chosen on dev data.

    python -m sparc_lab.interpolate BASE.npz TUNED.npz OUT.npz --alpha 0.5
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

CONFIG = "__config__"  # the canonical file's JSON config entry, copied from the tuned side


def interpolate(base: dict[str, np.ndarray], tuned: dict[str, np.ndarray], alpha: float) -> dict[str, np.ndarray]:
    """Every floating tensor mixed as (1 − α)·base + α·tuned; anything else taken from tuned."""
    if set(base) != set(tuned):
        raise ValueError(f"the two weight files differ in tensors: {sorted(set(base) ^ set(tuned))[:5]}")
    out = {}
    for name, t in tuned.items():
        b = base[name]
        if t.shape != b.shape:
            raise ValueError(f"{name}: shape {b.shape} against {t.shape}")
        if not np.issubdtype(t.dtype, np.floating):
            out[name] = t
            continue
        out[name] = ((1.0 - alpha) * b.astype(np.float64) + alpha * t.astype(np.float64)).astype(t.dtype)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", type=Path)
    ap.add_argument("tuned", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--alpha", type=float, required=True, help="weight of the tuned model, 0..1")
    a = ap.parse_args()
    if not 0.0 <= a.alpha <= 1.0:
        ap.error("--alpha must lie in [0, 1]")
    with np.load(a.base) as b, np.load(a.tuned) as t:
        mixed = interpolate({k: b[k] for k in b.files}, {k: t[k] for k in t.files}, a.alpha)
    arrays: dict[str, Any] = mixed  # savez's typed keywords (allow_pickle: bool) reject a dict of arrays
    np.savez(a.out, **arrays)
    print(f"wrote {a.out} (alpha {a.alpha})")


if __name__ == "__main__":
    main()
