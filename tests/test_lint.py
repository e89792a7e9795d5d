"""The linter and the type checker, run by the test suite so that CI runs them.

ruff (import order, pyflakes, pyupgrade) checks the package, the lab, the tests and the benchmarks;
mypy checks the package and the lab. Both read their settings from pyproject.toml ([tool.ruff], [tool.mypy]); the
`test` extra installs them, and a check is skipped, saying why, only where its tool is missing.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ("sparc_local", "sparc_lab", "tests", "benchmarks")
# a suppression must say why: text after the code(s), on the same line
SUPPRESSION = re.compile(r"#\s*(?:noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(?:\[[^\]]*\])?)(.*)$")


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]' installs it)")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff():
    done = _run("ruff", "check", "--no-cache", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy():
    done = _run("mypy", "--cache-dir", str(Path.home() / ".cache" / "sparc-local-mypy"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_suppression_gives_its_reason():
    bare = []
    for folder in LINTED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = SUPPRESSION.search(line)
                if m and not re.search(r"\w", m.group(1)):
                    bare.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bare, "a # noqa or # type: ignore without its reason:\n" + "\n".join(bare)
