"""Regenerate tests/golden/shipped_model.json after replacing the shipped model.

    python tests/golden/make_golden.py
"""

from __future__ import annotations

import json
from pathlib import Path

from sparc_local.encode import Encoder
from sparc_local.modelinfo import ModelInfo, shipped_model_dir

SENTENCES = [
    ("Green tea should steep for two to three minutes.", "Black tea takes longer. Use water below boiling."),
    ("The Eiffel Tower was completed in 1889.", "It stands in Paris. Gustave Eiffel's company built it."),
    ("Descale the kettle every month.", ""),
]


def golden() -> dict:
    info = ModelInfo.load(shipped_model_dir())
    enc = Encoder(info, threads=1)
    vectors = enc.encode([s for s, _ in SENTENCES], [c for _, c in SENTENCES])
    rows = []
    for i in range(len(SENTENCES)):
        tokens, weights = vectors.row(i)
        rows.append({"nnz": int(len(tokens)),
                     "top": [[enc.tokenizer.id_to_token(int(t)), round(float(w), 4)] for t, w in zip(tokens[:12], weights[:12])]})
    return {"model": info.id, "sentences": SENTENCES, "rows": rows}


if __name__ == "__main__":
    out = Path(__file__).with_name("shipped_model.json")
    out.write_text(json.dumps(golden(), indent=1) + "\n")
    print(f"wrote {out}")
