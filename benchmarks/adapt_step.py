"""Seconds per `adapt` training step and peak RSS, numpy on 2 threads, all-MiniLM-L6-v2 shapes.

    python benchmarks/adapt_step.py [--model DIR] [--steps 3] [--lengths 128 64] [--batch 32] [--threads 2]
    python benchmarks/adapt_step.py --smoke     # the tiny model, one step of 4×16 per mode

Product goal (SPARC §5.1 on a laptop): 500 steps in ≤ 10 min (≤ 1.2 s/step) and ≤ 2 GB RSS.
Each (length, mode) runs in a fresh child process so its peak RSS is its own. The encoder is the
model folder's (default: the shipped model), read back from its model.onnx; a random MLM head is
added: the timing does not depend on its values.
"""

from __future__ import annotations

import os

THREADS = os.environ.get("ADAPT_BENCH_THREADS", "2")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = THREADS  # before numpy is imported, or BLAS ignores it

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def run_one(model: Path, length: int, mode: str, batch: int, steps: int) -> dict:
    from sparc_local.adapt import Adam, forward_backward, mask_tokens, prepare
    from sparc_local.model.folder import load_encoder_weights
    from sparc_local.model.info import ModelInfo, load_tokenizer

    info = ModelInfo.load(model)
    cfg, w = load_encoder_weights(info)
    mask_id = load_tokenizer(info.tokenizer_path).token_to_id("[MASK]")
    rng = np.random.default_rng(0)
    d, v = cfg.hidden, cfg.vocab_size
    w.update({"mlm.dense.w": (rng.standard_normal((d, d)) * 0.02).astype(np.float32),
              "mlm.dense.b": np.zeros(d, np.float32), "mlm.ln.w": np.ones(d, np.float32),
              "mlm.ln.b": np.zeros(d, np.float32), "mlm.bias": np.zeros(v, np.float32)})
    E = w["emb.word"].copy()
    fw = prepare(cfg, w)
    opt = Adam(E.shape, lr=5e-5)
    # worst case: every position a real token ([CLS] … [SEP], no padding)
    ids = rng.integers(min(1000, v // 2), v, size=(batch, length))  # past the special and [unused] ids
    ids[:, 0], ids[:, -1] = info.cls_id, info.sep_id
    special = np.zeros(ids.shape, bool)
    special[:, [0, -1]] = True
    types = np.zeros_like(ids)
    attn = np.ones_like(ids)
    fb, ad, cpu = [], [], []
    for i in range(steps + 1):  # step 0 warms up allocator and BLAS
        inputs, labels = mask_tokens(ids, special, rng, v, mask_id=mask_id)
        c0 = time.process_time()
        t0 = time.perf_counter()
        loss, grad = forward_backward(cfg, fw, E, inputs, types, attn, labels, mode=mode)
        t1 = time.perf_counter()
        opt.step(E, grad)
        t2 = time.perf_counter()
        c2 = time.process_time()
        del grad
        if i:
            fb.append(t1 - t0)
            ad.append(t2 - t1)
            cpu.append(c2 - c0)
    return {"length": length, "mode": mode, "batch": batch, "steps": steps, "fwd_bwd": float(np.median(fb)),
            "adam": float(np.median(ad)), "step": float(np.median(np.add(fb, ad))),
            "cpu": float(np.median(cpu)),
            "masked": int((labels != -100).sum()), "loss": loss,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="a model folder (default: the shipped model)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--modes", nargs="+", default=["exact", "output_only"])
    ap.add_argument("--threads", type=int, default=int(THREADS), help="BLAS threads of the timed child processes")
    ap.add_argument("--child", nargs=2, metavar=("LENGTH", "MODE"), help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="seconds: the tiny test model, 1 step of 4×16 (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        args.model, args.steps, args.batch, args.lengths = smoke.setup().model, 1, 4, [16]
    if args.model is None:
        from sparc_local.model.info import shipped_model_dir

        args.model = shipped_model_dir()
    if args.child:
        print(json.dumps(run_one(args.model, int(args.child[0]), args.child[1], args.batch, args.steps)))
        return
    load = os.getloadavg()[0]
    env = {**os.environ, "ADAPT_BENCH_THREADS": str(args.threads)}
    print(f"numpy {np.__version__}, {args.threads} BLAS threads, {os.cpu_count()} cores, "
          f"load avg {load:.2f} at start")
    # cpu = CPU-seconds of this process per step (both BLAS threads); with the machine to itself
    # the wall time would be about cpu/2, which is the figure to hold against the 1.2 s goal
    print(f"{'B×L':>8} {'mode':>12} {'s/step':>7} {'fwd+bwd':>8} {'adam':>6} {'cpu s':>6} {'masked':>6} "
          f"{'500 steps':>9} {'peak RSS':>9}")
    for length in args.lengths:
        for mode in args.modes:
            out = subprocess.run([sys.executable, __file__, "--child", str(length), mode, "--model", str(args.model),
                                  "--steps", str(args.steps),
                                  "--batch", str(args.batch)], capture_output=True, text=True, check=True, env=env)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{args.batch:>3}×{length:<4} {mode:>12} {r['step']:7.2f} {r['fwd_bwd']:8.2f} {r['adam']:6.2f} "
                  f"{r['cpu']:6.2f} {r['masked']:6d} {r['step'] * 500 / 60:7.1f} m {r['peak_rss_mb']:6.0f} MB")
    print(f"load avg {os.getloadavg()[0]:.2f} at end (other processes compete for the 2 cores)")


if __name__ == "__main__":
    main()
