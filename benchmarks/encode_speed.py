"""Encoder speed of model folders on the same paragraphs, paired in one run (issue #13).

    python benchmarks/encode_speed.py MODEL [MODEL ...] [--paragraphs 60] [--rounds 3] [--threads 2]
    python benchmarks/encode_speed.py --smoke     # the tiny model, fp32 against int8 (smoke.py)

Only `Encoder.encode` is timed (input builder, onnxruntime, top-K rows), on squad-dev's first
passages: the encoder's share of `index`, which benchmarks/index_speed.py times whole. Models
run in turn within each round (A B C, A B C, ...), so the VM's drifting speed hits them alike;
printed are each model's median sentences/s and the median of its per-round ratio to the first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from sparc_local.evaluation import reqa
from sparc_local.model.encoder import Encoder
from sparc_local.model.info import ModelInfo

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa" / "squad-dev"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", type=Path)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--paragraphs", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="a few seconds on the tiny test model (benchmarks/smoke.py)")
    args = p.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.models, args.data, args.rounds, args.threads = [s.model, s.model_int8], s.data, 1, 1
    if not args.models:
        p.error("give at least one MODEL folder")
    paras = reqa.load(args.data).paragraphs()[: args.paragraphs]
    n = sum(map(len, paras))
    encoders = [Encoder(ModelInfo.load(m), threads=args.threads, memo_sentences=0) for m in args.models]
    for enc in encoders:
        enc.encode(paras[:3])  # first-run allocations out of the timing
    rates: list[list[float]] = [[] for _ in encoders]
    for _ in range(args.rounds):
        for enc, got in zip(encoders, rates):
            t0 = time.perf_counter()
            enc.encode(paras)
            got.append(n / (time.perf_counter() - t0))
    print(f"{n} sentences of {len(paras)} {args.data.name} passages, {args.threads} threads, {args.rounds} rounds")
    for m, got in zip(args.models, rates):
        ratio = statistics.median(a / b for a, b in zip(got, rates[0]))
        print(f"{str(m):60s} {statistics.median(got):7.1f} sentences/s  x{ratio:.2f}")


if __name__ == "__main__":
    main()
