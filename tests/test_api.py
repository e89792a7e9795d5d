"""The Python API (docs/api.md): its documented examples run, it answers as the CLI does, and
it can be called from several threads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local.cli.app import app

REPO = Path(__file__).resolve().parent.parent
API_DOC = REPO / "docs" / "api.md"
pytestmark = pytest.mark.usefixtures("active_tiny")


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture
def documents(tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """~/Documents (HOME a temp folder) holding the two test files."""
    monkeypatch.setenv("HOME", str(tmp_path))
    docs.rename(tmp_path / "Documents")
    return tmp_path / "Documents"


def test_the_documented_examples_run(documents: Path, capsys: pytest.CaptureFixture[str]):
    blocks = code_blocks(API_DOC.read_text())
    assert len(blocks) >= 5
    scope: dict = {}
    for block in blocks:
        exec(compile(block, str(API_DOC), "exec"), scope)
    out = capsys.readouterr().out
    assert "2 files indexed" in out and "tea.md" in out
    assert f"forgot 1 file under {documents / 'city.txt'}" in out
    assert f"Error: {documents / 'not-indexed.txt'} is not in the index" in out


def test_the_api_answers_as_the_cli(docs: Path):
    from sparc_local import Library

    runner = CliRunner()
    assert runner.invoke(app, ["index", str(docs), "-q"]).exit_code == 0
    cli = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "3"]).output)
    with Library() as lib:
        assert lib.ask("green tea steep", k=3).to_json() == cli
        assert lib.ask("green tea steep", k=3, mode="bm25", path="tea").to_json() == json.loads(
            runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "3", "--mode", "bm25",
                                "--path", "tea"]).output)
        assert lib.status().to_json() == json.loads(runner.invoke(app, ["status", "--json"]).output)


def test_errors_are_sparc_errors_with_their_remedies(tmp_path: Path):
    from sparc_local import Library
    from sparc_local.errors import UserError

    lib = Library()
    with pytest.raises(UserError) as err:
        lib.ask("green tea")
    assert (str(err.value), err.value.remedy) == ("there is no index yet", "Run `sparc-local index FOLDER` first.")
    with pytest.raises(UserError, match="unknown mode 'dense'"):
        lib.ask("green tea", mode="dense")
    with pytest.raises(UserError, match="not a date"):
        lib.ask("green tea", since="yesterday")
    with pytest.raises(UserError, match="no such file or folder"):
        lib.index(tmp_path / "nothere")


def test_a_library_of_its_own_home_and_threads(tmp_path: Path, docs: Path, sparc_home: Path, tiny_model_dir: Path):
    """Library(home=...) keeps its index there, the default data dir untouched; several threads
    ask while one indexes."""
    from sparc_local import Library

    home = tmp_path / "other"
    home.mkdir()
    (home / "active-model").write_text(str(tiny_model_dir))
    lib = Library(home=home)
    assert lib.index(docs).indexed == 2
    assert (home / "index.db").exists() and not (sparc_home / "index.db").exists()
    more = tmp_path / "more"
    more.mkdir()
    for i in range(5):
        (more / f"n{i}.txt").write_text(f"Note {i}: the river bridge was painted green in spring.\n")
    errors: list[BaseException] = []
    found: list[int] = []

    def asking() -> None:
        try:
            for _ in range(5):
                found.append(len(lib.ask("green tea steep", k=2)))
        except BaseException as err:  # a failure in a thread is the test's
            errors.append(err)
        finally:
            lib.close()

    threads = [threading.Thread(target=asking) for _ in range(3)]
    for t in threads:
        t.start()
    during: list[int] = []

    def progress(p) -> None:  # a question from another thread is answered while this one indexes
        if not during:
            t = threading.Thread(target=lambda: during.append(len(lib.ask("green tea steep", k=2))))
            t.start()
            t.join(60)
            assert during == [2]

    lib.index(docs, more, progress=progress)
    for t in threads:
        t.join(60)
    assert errors == [] and found == [2] * 15 and during == [2]
    assert lib.status().files == 7


def test_importing_the_package_loads_nothing():
    code = ("import sys, sparc_local; assert sparc_local.__version__; "
            "print(sorted(m for m in sys.modules if m.startswith('sparc_local')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['sparc_local']"
