"""What each onnxruntime release writes into a fresh HOME, with and without our switch (issue 33).

    python benchmarks/ort_telemetry.py 1.19.2 1.32.0 ...   # releases to check (default: the pin's range)
    python benchmarks/ort_telemetry.py --smoke             # the onnxruntime installed here, no pip

Each release is installed (no deps) into ~/.cache/sparc-local-bench/ort/VERSION and run in a child
process with a fresh HOME and XDG dirs and no CI variables (onnxruntime collects nothing when it
sees one, so a check under CI would prove nothing): import, load a one-node graph, run it. It
prints the files that appear, once as onnxruntime ships and once as sparc-local runs it
(`sparc_local.model.runtime.onnxruntime()`, which sets ORT_DISABLE_TELEMETRY=1 before the import).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sparc_local.model.runtime import CI_VARIABLES, TELEMETRY_SWITCH

CACHE = Path.home() / ".cache" / "sparc-local-bench" / "ort"
# every release pyproject.toml's pin allows (onnxruntime>=1.19.2,<1.33)
DEFAULT = ("1.19.2", "1.20.0", "1.20.1", "1.21.0", "1.21.1", "1.22.0", "1.22.1", "1.23.0", "1.23.1", "1.23.2",
           "1.24.1", "1.24.2", "1.24.3", "1.24.4", "1.25.0", "1.25.1", "1.26.0", "1.27.0", "1.28.0", "1.29.0",
           "1.30.0", "1.31.0", "1.31.1", "1.32.0")
CHILD = """
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper
import onnxruntime as ort
node = helper.make_node("Relu", ["x"], ["y"])
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
s.run(None, {"x": np.array([-1.0, 1.0], dtype=np.float32)})
print(ort.__version__)
"""


def install(version: str) -> Path:
    target = CACHE / version
    if not (target / "onnxruntime").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        f"onnxruntime=={version}"], check=True)
    return target


def installed() -> tuple[str, Path]:
    """The onnxruntime installed beside sparc-local: its version and the folder that holds it (not imported)."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        sys.exit("onnxruntime is not installed")
    return importlib.metadata.version("onnxruntime"), Path(spec.origin).parent.parent


def written(target: Path, switch: bool, folder: Path = CACHE) -> tuple[str, list[str]]:
    """The files a child process leaves under its fresh HOME and temp dir (made in folder)."""
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        home, tmp = Path(scratch, "home"), Path(scratch, "tmp")
        home.mkdir()
        tmp.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES and not k.startswith("XDG_")}
        env.pop(TELEMETRY_SWITCH, None)
        env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=str(target))
        if switch:
            env[TELEMETRY_SWITCH] = "1"
        run = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
        version = run.stdout.strip() or f"failed: {run.stderr.strip().splitlines()[-1:]}"
        files = sorted(str(p.relative_to(scratch)) for p in Path(scratch).rglob("*") if p.is_file())
        return version, files


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("versions", nargs="*", default=DEFAULT)
    p.add_argument("--smoke", action="store_true",
                   help="seconds: only the onnxruntime installed here (no pip install), scratch in smoke.py's folder")
    args = p.parse_args()
    folder, targets = CACHE, {}
    if args.smoke:
        import smoke

        version, where = installed()
        folder, targets = smoke.setup().folder, {version: where}
    else:
        CACHE.mkdir(parents=True, exist_ok=True)
    for version in targets or args.versions:
        target = targets.get(version) or install(version)
        for switch in (False, True):
            ran, files = written(target, switch, folder)
            label = f"{TELEMETRY_SWITCH}=1" if switch else "as shipped"
            print(f"{version}  {label:<24} ran {ran:<8} wrote {len(files)}: {', '.join(files) or '-'}", flush=True)


if __name__ == "__main__":
    main()
