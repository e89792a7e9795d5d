"""How far a model's outputs move between CPUs, and between int8 and float compute (issues #12, 46).

    apt-get install qemu-user   # emulates an AVX2-only CPU (no AVX-512, no VNNI) on any x86 host
    python benchmarks/golden_drift.py [MODEL_DIR ...] [--cpu Haswell] [--dynamic] [--eval DATA]
    python benchmarks/golden_drift.py --smoke   # the tiny model, native twice (no qemu), --dynamic (smoke.py)

For each model folder (default: the shipped one), the golden paragraphs of
tests/golden/make_golden.py are encoded natively and under `qemu-x86_64 -cpu Haswell`, so
onnxruntime picks its AVX2 kernels as on an AVX2-only AMD EPYC, and each is held to the golden
checks (`compare`) against the model's weights computed in float, with its own projection
(`make_golden.reference`).
`--dynamic` adds the same weights exported with onnxruntime's int8 kernels (export.QUANT_DYNAMIC).
Printed per sentence: top-K overlap against float compute, largest weight difference, and
whether the golden checks pass. `--eval DATA` (e.g. ../shared/data/reqa/squad-dev) adds the third
check of issue 46: `eval`'s first-stage MRR@10 of each int8-kernel model within 0.003 of float
compute's (through the app layer, as `sparc-local eval --fast` runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.golden.make_golden import compare, export_as, float_twin, reference

EVAL_MARGIN = 0.003  # issue 46: eval's MRR@10, int8 kernels against float compute


def run(model: Path, cpu: str | None) -> dict:
    code = ("import json, sys; from tests.golden.make_golden import golden; "
            "print(json.dumps(golden(__import__('pathlib').Path(sys.argv[1]))))")
    python = os.path.realpath(sys.executable)
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *site])}
    cmd = [python, "-c", code, str(model)]
    if cpu:
        cmd = [shutil.which("qemu-x86_64") or "qemu-x86_64", "-cpu", cpu, *cmd]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def drift(a: dict, b: dict) -> str:
    lines = []
    for i, (ra, rb) in enumerate(zip(a["rows"], b["rows"])):
        wa, wb = dict(ra), dict(rb)
        common = set(wa) & set(wb)
        dw = max(abs(wa[t] - wb[t]) for t in common)
        lines.append(f"  sentence {i}: top-K overlap {len(common)}/{len(wa)}, max |dw| {dw:.5f}")
    problems = compare(a, b)
    lines.append(f"  answer ranks {b['ranks']} (float compute {a['ranks']})")
    lines.append(f"  golden checks: {'pass' if not problems else f'{len(problems)} problems, e.g. {problems[0]}'}")
    return "\n".join(lines)


def eval_mrr(model: Path, data: Path) -> float:
    """`sparc-local eval DATA --model MODEL --fast`'s MRR@10 of the SPARC first stage."""
    from sparc_local.app import run
    from sparc_local.app.jobs import EvalRequest
    from sparc_local.query.modes import SPARC

    request = EvalRequest(str(data), model=str(model), fast=True)
    return float(run.evaluate(request, run.eval_model(request))[SPARC]["mrr@10"])


def main() -> None:
    from sparc_local.model.export import QUANT_DYNAMIC
    from sparc_local.model.info import ModelInfo, shipped_model_dir

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", type=Path)
    p.add_argument("--cpu", default="Haswell", help="qemu CPU model to emulate")
    p.add_argument("--dynamic", action="store_true", help="also the same weights through onnxruntime's int8 kernels")
    p.add_argument("--eval", type=Path, help="a ReQA folder: eval's MRR@10, int8 kernels against float compute")
    p.add_argument("--smoke", action="store_true",
                   help="seconds: the tiny test model (smoke.py), native against native (no qemu), --dynamic")
    args = p.parse_args()
    scratch = None
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.models, args.cpu, args.dynamic, scratch = [s.model], None, True, s.folder
    models = args.models or [shipped_model_dir()]
    other = f"emulated {args.cpu}" if args.cpu else "native again (no qemu)"
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        if args.dynamic:
            models.append(export_as(models[0], Path(tmp) / "dynamic", QUANT_DYNAMIC))
        for model in models:
            info = ModelInfo.load(model)
            expected = reference(model)
            other_run = run(model, args.cpu)
            print(f"{info.id} ({info.quantization}), onnxruntime {expected['onnxruntime']}: "
                  f"native CPU against float compute", flush=True)
            print(drift(expected, run(model, None)), flush=True)
            print(f"  {other} against float compute:", flush=True)
            print(drift(expected, other_run), flush=True)
            if args.eval and info.quantization == QUANT_DYNAMIC:
                twin = float_twin(model, Path(tmp) / f"float-{len(models)}-{models.index(model)}")
                kernels, floats = eval_mrr(model, args.eval), eval_mrr(twin, args.eval)
                verdict = "within" if abs(kernels - floats) <= EVAL_MARGIN else "NOT within"
                print(f"  eval MRR@10 on {args.eval.name}: int8 kernels {kernels:.4f}, float compute {floats:.4f}, "
                      f"difference {kernels - floats:+.4f} ({verdict} {EVAL_MARGIN})", flush=True)


if __name__ == "__main__":
    main()
