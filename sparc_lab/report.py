"""Summarise a training run's log for the model card: loss per window, exp(w), s/step, validation.

    python -m sparc_lab.report ~/.cache/sparc-local-train/run1 [--window 100]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def summarise(run: Path, window: int = 100) -> list[str]:
    records = [json.loads(line) for line in (run / "train.log.jsonl").read_text().splitlines() if line.strip()]
    steps: dict[int, dict] = {}
    valid: dict[int, dict] = {}
    for r in records:  # a resumed run re-logs steps after its last checkpoint: keep the last
        (valid if "valid" in r else steps)[r["step"]] = r
    out = [f"{'steps':>11} {'mean loss':>9} {'exp(w)':>7} {'s/step':>7}"]
    ordered = [steps[k] for k in sorted(steps)]
    for start in range(0, len(ordered), window):
        chunk = ordered[start:start + window]
        # `elapsed` restarts every 10 steps: the 10th step of each group holds the group's time
        tens = [r["elapsed"] / 10 for r in chunk if r["step"] % 10 == 0]
        mean = sum(r["loss"] for r in chunk) / len(chunk)
        rate = f"{sum(tens) / len(tens):7.2f}" if tens else f"{'':7}"
        out.append(f"{chunk[0]['step']:>5}-{chunk[-1]['step']:<5} {mean:9.3f} {chunk[-1]['exp_w']:7.2f} {rate}")
    for step in sorted(valid):
        out.append(f"validation at step {step}: {valid[step]['valid']}")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--window", type=int, default=100)
    args = p.parse_args()
    print("\n".join(summarise(Path(args.run).expanduser(), args.window)))


if __name__ == "__main__":
    main()
