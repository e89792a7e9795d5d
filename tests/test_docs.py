"""docs/architecture.md and README.md stay true: the module table names every module of the package, and no other;
CI runs the README's test command, whose CPU torch is the version the test extra pins.

The table's convention is written above it: names relative to ``sparc_local/`` in the first column,
a module (``ingest/extract.py``) or a whole package (``adapt/``); ``__init__.py`` files are not
named, except that a package with no other module is named as a package (``sample/``).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "sparc_local"
ARCHITECTURE = REPO / "docs" / "architecture.md"
TABLE_HEADING = "### Modules"
NAME = re.compile(r"`([\w./]+?(?:\.py|/))`")


def table_names(text: str) -> list[str]:
    """The backticked module and package names in the first column of the table below TABLE_HEADING."""
    lines = text.split(TABLE_HEADING, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    names = []
    for line in lines[start + 2:]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        names += NAME.findall(line.split("|")[1])
    return names


def package_modules(root: Path) -> tuple[set[str], set[str]]:
    """(module paths, package paths ending in "/") relative to ``root``, as the table names them."""
    modules = {p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.name != "__init__.py"}
    packages = {p.parent.relative_to(root).as_posix() + "/" for p in root.rglob("__init__.py") if p.parent != root}
    return modules, packages


def coverage(names: list[str], modules: set[str], packages: set[str]) -> dict[str, list[str]]:
    """What the table misses, names in vain, and names twice (a module also covered by its package)."""
    named_packages = [n for n in names if n.endswith("/")]
    covered: dict[str, list[str]] = {}
    for name in names:
        if name.endswith("/"):
            for module in modules:
                if module.startswith(name):
                    covered.setdefault(module, []).append(name)
        elif name in modules:
            covered.setdefault(name, []).append(name)
    empty = {p for p in packages if not any(m.startswith(p) for m in modules)}  # `sample/`: data only
    return {
        "missing": sorted(set(modules) - set(covered) | (empty - set(named_packages))),
        "extra": sorted({n for n in names if n not in modules and n not in packages}),
        "twice": sorted({m for m, by in covered.items() if len(by) > 1}
                        | {n for n in names if names.count(n) > 1}),
    }


def test_module_table_matches_the_package():
    names = table_names(ARCHITECTURE.read_text())
    modules, packages = package_modules(PACKAGE)
    problems = coverage(names, modules, packages)
    message = "; ".join(f"{kind}: {', '.join(found)}" for kind, found in problems.items() if found)
    assert not message, (f"docs/architecture.md's module table is out of step with sparc_local/ ({message}). "
                         f"Add a row for each missing module, remove the extra names, name each module once.")


def test_the_check_finds_missing_extra_and_twice(tmp_path: Path):
    """The check itself: a module left out, a name that does not exist, a module named twice."""
    root = tmp_path / "pkg"
    for rel in ["a.py", "sub/__init__.py", "sub/b.py", "sub/c.py", "data/__init__.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    modules, packages = package_modules(root)
    assert (modules, packages) == ({"a.py", "sub/b.py", "sub/c.py"}, {"sub/", "data/"})
    assert coverage(["a.py", "sub/", "data/"], modules, packages) == {"missing": [], "extra": [], "twice": []}
    assert coverage(["sub/b.py", "gone.py", "sub/", "sub/c.py"], modules, packages) == {
        "missing": ["a.py", "data/"], "extra": ["gone.py"], "twice": ["sub/b.py", "sub/c.py"]}
    text = f"{TABLE_HEADING}\n\n| module | owns |\n|---|---|\n| `a.py`, `sub/` | x `c.py` |\n| `data/` | y |\n\nz `b.py`\n"
    assert table_names(text) == ["a.py", "sub/", "data/"]


README = REPO / "README.md"
CI_RUN = REPO / ".ci" / "run"
CI_MARK = "# --- the README's test command ---"
TORCH_PIN = re.compile(r"torch==[\w.]+")


def readme_test_command(text: str) -> list[str]:
    """The lines of the first ```sh block after "To run the tests:"."""
    block = text.split("To run the tests:", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def test_ci_runs_the_readme_test_command_and_the_extra_pins_the_torch_it_installs():
    """CI must run what the README tells a user to run, and the CPU torch the README installs first
    must be the version the test extra pins, or pip would replace it with PyPI's CUDA build."""
    import tomllib

    command = readme_test_command(README.read_text())
    assert CI_RUN.read_text().split(CI_MARK, 1)[1].strip().splitlines() == command
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pins = TORCH_PIN.findall(command[0])
    assert len(pins) == 1 and pins == [p for p in extra if p.startswith("torch")]
    assert "--index-url https://download.pytorch.org/whl/cpu" in command[0]


def test_benchmarks_readme_names_every_script():
    """benchmarks/README.md is the index of the benchmarks: a script it does not name is one nobody finds."""
    index = (REPO / "benchmarks" / "README.md").read_text()
    scripts = sorted(p.name for p in (REPO / "benchmarks").glob("*.py"))
    assert scripts and [s for s in scripts if f"`{s}`" not in index] == []


def readme_quickstart(text: str) -> list[str]:
    """The `&&`-joined steps of the ```sh block under "## Quickstart"."""
    block = text.split("## Quickstart", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [step.strip() for step in block.strip().split("&&")]


def test_the_quickstart_installs_into_a_virtual_environment_it_makes():
    """Debian's and Ubuntu's system Python refuse `pip install .` outside a virtual environment
    (PEP 668, `externally-managed-environment`): the quickstart a newcomer copies makes one and
    activates it before pip runs, then runs the demo; pipx is named as the other way."""
    text = README.read_text()
    assert readme_quickstart(text) == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install .",
                                       "sparc-local demo"]
    quickstart = text.split("## Quickstart", 1)[1].split("To run the tests:", 1)[0]
    assert "externally-managed-environment" in quickstart and "pipx install ." in quickstart
