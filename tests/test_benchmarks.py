"""The benchmarks as a maintained tool: every script runs its `--smoke` (a few seconds on the tiny
test model, benchmarks/smoke.py), or benchmarks/README.md's "Without a smoke run" table says why
it has none. A refactor that breaks a script then fails here, not months later."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
HELPERS = {"smoke.py", "manuals.py", "common.py"}  # imported by the scripts, not scripts


def smoke_scripts() -> list[str]:
    """The scripts that declare a --smoke option."""
    return sorted(p.name for p in BENCH.glob("*.py") if p.name not in HELPERS and '"--smoke"' in p.read_text())


def without_smoke() -> dict[str, str]:
    """README's "Without a smoke run" table: script -> why."""
    text = (BENCH / "README.md").read_text()
    section = text.split("## Without a smoke run", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([\w.]+\.py)` \| (.+?) \|$", section, re.M))


def test_every_script_has_a_smoke_run_or_a_reason() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - HELPERS
    smoke, reasons = set(smoke_scripts()), without_smoke()
    assert smoke, "no script has a --smoke"
    assert not smoke & set(reasons), f"listed as without a smoke run, but have one: {sorted(smoke & set(reasons))}"
    assert scripts == smoke | set(reasons), (f"neither a --smoke nor a reason: {sorted(scripts - smoke - set(reasons))}; "
                                             f"named but gone: {sorted(set(reasons) - scripts)}")


SMOKE_WORKERS = 2  # smoke runs at a time: mostly one busy core each, seconds of start-up and waiting


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The selected scripts' smoke runs, started SMOKE_WORKERS at a time when the first test asks,
    each in its own process and data dir: script -> a future of its CompletedProcess."""
    from concurrent.futures import ThreadPoolExecutor

    def run(script: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "SPARC_LOCAL_HOME": str(tmp_path_factory.mktemp("smoke") / "home"),
               "OMP_NUM_THREADS": "1"}
        return subprocess.run([sys.executable, str(BENCH / script), "--smoke"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)

    selected = [item.callspec.params["script"] for item in request.session.items
                if item.originalname == "test_smoke_run" and item.module is request.module]
    pool = ThreadPoolExecutor(SMOKE_WORKERS)
    try:
        yield {script: pool.submit(run, script) for script in selected}
    finally:
        pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize("script", smoke_scripts())
def test_smoke_run(script: str, smoke_runs: dict) -> None:
    done = smoke_runs[script].result()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip(), "a smoke run prints its figures"
