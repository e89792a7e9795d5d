"""Count the training text's tokens into a model folder, for the gate in front of `adapt`.

    python -m sparc_lab.reference MODEL_DIR [--data ../shared/data/reqa]

The reference is every distinct sentence of the training sets (``SETS``; never the evaluation
sets). It also prints what ``domain.MIN_SHARE`` is chosen from: the distance
(``adapt.domain.distance``) of text of the training domain from the training domain, for
corpora of ``CHUNKS`` sentences (consecutive sentences, so a chunk is about a few topics, as a
user's folder is), each against the reference without it. The smaller the corpus, the more its
topic's words stand out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from sparc_lab.data import DATA_DIR
from sparc_local.adapt import domain
from sparc_local.evaluation import reqa
from sparc_local.model.info import ModelInfo, load_tokenizer

SETS = ("squad-train-head", "du2017-train", "wikiqa-train")
CHUNKS = (300, 1000, 3000, 8000)


def sentence_tokens(data: Path, tokenizer) -> list[np.ndarray]:
    """The token ids of every distinct training sentence (the tokenizer is uncased), in set and passage order."""
    seen: set[str] = set()
    texts = [t for name in SETS for t in reqa.load(data / name).texts if not (t.lower() in seen or seen.add(t.lower()))]
    return [np.asarray(e.ids, np.int64) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--data", type=Path, default=DATA_DIR)
    a = ap.parse_args()
    info = ModelInfo.load(a.model)
    sents = sentence_tokens(a.data, load_tokenizer(info.tokenizer_path))
    total = np.bincount(np.concatenate(sents), minlength=info.vocab_size)
    for size in CHUNKS:
        shares = [domain.distance(c, total - c).share
                  for c in (np.bincount(np.concatenate(sents[i:i + size]), minlength=info.vocab_size)
                            for i in range(0, len(sents) - size + 1, size))]
        print(f"chunks of {size:>5} training sentences against the rest: {len(shares):>3} chunks, share of own "
              f"tokens median {np.median(shares):.3f}, max {max(shares):.3f}")
    path = domain.write_reference(a.model, total, list(SETS))
    print(f"wrote {path} ({int(total.sum()):,} tokens of {', '.join(SETS)})")


if __name__ == "__main__":
    main()
