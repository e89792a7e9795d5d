"""The CLI end to end on real files, a real SQLite index and the tiny model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparc_local import __version__
from sparc_local.cli.app import app

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("active_tiny", "bad_pdf")


@pytest.fixture
def bad_pdf(docs: Path) -> Path:
    """Beside conftest's docs, a file `index` must skip and report."""
    path = docs / "bad.pdf"
    path.write_bytes(b"this is not a pdf")
    return path


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_version():
    result = run("--version")
    assert result.exit_code == 0
    assert result.output == f"sparc-local {__version__}\n"


def test_ask_without_index_is_a_clear_error():
    result = run("ask", "anything")
    assert result.exit_code == 1
    assert result.output == "Error: there is no index yet\nRun `sparc-local index FOLDER` first.\n"


def test_index_missing_path():
    result = run("index", "/no/such/folder")
    assert result.exit_code == 1
    assert result.output == "Error: /no/such/folder: no such file or folder\nCheck the path and try again.\n"


def test_index_then_ask_json(docs: Path):
    result = run("index", str(docs), "-q")
    assert result.exit_code == 0, result.output
    assert result.output == f"skipped {docs / 'bad.pdf'}: " + result.output.split(": ", 1)[1]
    assert result.output.count("\n") == 1  # -q: only the bad file's one-line reason

    result = run("ask", "green tea steep", "--json", "-k", "3")
    assert result.exit_code == 0
    answers = json.loads(result.output)
    assert [a["rank"] for a in answers] == [1, 2, 3]
    assert set(answers[0]) == {"rank", "score", "path", "page", "line", "sentence", "context", "heading", "likely",
                               "collapsed", "phrase", "elsewhere"}
    assert answers[0]["sentence"] == "Green tea should steep for three minutes."
    assert answers[0]["path"] == str(docs / "tea.md")
    assert answers[0]["line"] == 3 and answers[0]["page"] is None
    assert answers[0]["context"] == "Tea Green tea should steep for three minutes. Then drink it."  # heading leads
    assert answers[0]["heading"] == "Tea"  # ... and is its own field
    assert [a["heading"] for a in answers[1:] if a["path"].endswith(".txt")] == [None] * sum(
        a["path"].endswith(".txt") for a in answers[1:])  # a text paragraph without a title has none
    assert answers[0]["score"] >= answers[1]["score"] >= answers[2]["score"]


def test_ask_filters_and_explain(docs: Path):
    run("index", str(docs), "-q")
    only_txt = json.loads(run("ask", "green tea", "--json", "--type", "txt").output)
    assert only_txt and all(a["path"].endswith(".txt") for a in only_txt)
    globbed = json.loads(run("ask", "green tea", "--json", "--path", "*/tea.md").output)
    assert globbed and all(a["path"].endswith("tea.md") for a in globbed)
    # the filter is applied inside the top k, not to the unfiltered top k
    assert json.loads(run("ask", "green tea", "--json", "-k", "1").output)[0]["path"] == str(docs / "tea.md")
    # the same passage first; -k 1 collapses only what ranks above it (ask.collapse)
    drop = lambda a: {key: v for key, v in a.items() if key != "collapsed"}
    top_txt = json.loads(run("ask", "green tea", "--json", "-k", "1", "--type", ".TXT").output)
    assert [drop(a) for a in top_txt] == [drop(a) for a in only_txt[:1]]
    nothing = run("ask", "green tea", "--path", "*.pdf")  # bad.pdf is indexed as unreadable: no text
    days = sorted({datetime.fromtimestamp((docs / f).stat().st_mtime).strftime("%Y-%m-%d")
                   for f in ("tea.md", "city.txt")})
    assert (nothing.exit_code, nothing.output) == (
        0, f"No indexed file matches --path '*.pdf'; the index holds 2 files (.md, .txt) modified "
           f"{' to '.join(days)}.\n")
    words = {"green", "tea", "steep"}
    for mode, names in (("sparc", words), ("hybrid", words | {f"{w} (bm25)" for w in words}
                                           | {f"{w} (bm25, context)" for w in words})):
        result = run("ask", "green tea steep", "--explain", "-k", "1", "--mode", mode)
        lines = result.output.splitlines()
        assert lines[0].startswith(f"1. {docs / 'tea.md'}:3  score ")
        assert lines[1] == "   Tea — Green tea should steep for three minutes. Then drink it."  # piped: plain text
        assert lines[2] == "   phrase: Green tea"  # piped: the phrase on a line of its own
        # the explanation is the score itself, split by question token (SPARC Eq. 2) and, in the
        # hybrid, by BM25 field (fusion.py)
        score = float(lines[0].rsplit("score ", 1)[1])
        parts = dict(p.rsplit(" ", 1) for p in lines[3].removeprefix("   = ").split(" + "))
        assert "tea" in parts and set(parts) <= names, mode
        assert abs(sum(float(v) for v in parts.values()) - score) < 0.02
    assert "tea (bm25)" in parts  # the sentence says "tea"


def test_incremental_reindex(docs: Path):
    first = run("index", str(docs))
    assert first.exit_code == 0
    assert re.fullmatch(rf"skipped {re.escape(str(docs / 'bad.pdf'))}: not a valid PDF \(no %PDF header\)\n"
                        r"Indexed 2 files \(5 sentences\), 0 unchanged, 0 removed, 1 unreadable in \d+\.\ds\.\n",
                        first.output)
    again = run("index")  # bare: refreshes the remembered roots
    # bad.pdf is not read again (unchanged), and still counts as unreadable, as `status` says
    assert re.fullmatch(r"Indexed 0 files \(0 sentences\), 2 unchanged, 0 removed, 1 unreadable in \d+\.\ds\.\n",
                        again.output)
    assert len(json.loads(run("status", "--json").output)["errors"]) == 1
    (docs / "city.txt").write_text("Rome is the capital of Italy.\n")
    os.utime(docs / "city.txt", (1, 1))
    (docs / "tea.md").unlink()
    changed = run("index")
    assert "Indexed 1 files (1 sentences), 0 unchanged, 1 removed, 1 unreadable" in changed.output
    answers = json.loads(run("ask", "capital", "--json").output)
    assert [a["sentence"] for a in answers] == ["Rome is the capital of Italy."]


def test_touch_without_change_is_not_reencoded(docs: Path):
    run("index", str(docs), "-q")
    os.utime(docs / "city.txt", (5, 5))
    result = run("index")
    assert "Indexed 0 files (0 sentences), 2 unchanged, 0 removed, 1 unreadable" in result.output


def test_status_json(docs: Path):
    run("index", str(docs), "-q")
    st = json.loads(run("status", "--json").output)
    assert st["files"] == 2 and st["sentences"] == 5  # bad.pdf is not indexed: it is counted in errors; "# Tea" is context
    assert st["postings"] > 0 and st["db_bytes"] > 0
    assert st["model"].startswith("tiny-bert@")
    assert st["errors"] == [{"path": str(docs / "bad.pdf"), "reason": st["errors"][0]["reason"]}]
    human = run("status").output
    assert "Files:        2" in human and "Errors:       1" in human


def test_forget_says_what_it_removed(docs: Path):
    """Exact messages: an unknown path is an error that changes nothing; counts are of indexed
    files, unreadable ones apart, in the singular for one; the suggested command brings the file
    back without making it a root."""
    run("index", str(docs), "-q")
    result = run("forget", str(docs / "nothere.txt"))
    assert result.exit_code == 1
    assert result.output == f"Error: {docs / 'nothere.txt'} is not in the index\n`sparc-local status` lists the indexed folders.\n"
    result = run("forget", str(docs / "city.txt"))
    assert result.exit_code == 0
    assert result.output == (f"Forgot 1 file under {docs / 'city.txt'}; "
                             f"`sparc-local index {docs / 'city.txt'}` brings it back.\n")
    again = run("forget", str(docs / "city.txt"))
    assert again.exit_code == 1 and again.output.startswith(f"Error: {docs / 'city.txt'} is not in the index\n")
    assert run("index", str(docs / "city.txt"), "-q").exit_code == 0
    st = json.loads(run("status", "--json").output)
    assert st["roots"] == [str(docs)] and st["files"] == 2
    result = run("forget", str(docs))
    assert result.exit_code == 0
    assert result.output == (f"Forgot 2 files and 1 unreadable file under {docs}; "
                             f"`sparc-local index {docs}` brings it back.\n")
    st = json.loads(run("status", "--json").output)
    assert (st["roots"], st["files"], st["sentences"], st["errors"]) == ([], 0, 0, [])


def test_database_is_private(docs: Path, sparc_home: Path):
    run("index", str(docs), "-q")
    assert (sparc_home / "index.db").stat().st_mode & 0o777 == 0o600
    assert sparc_home.stat().st_mode & 0o077 == 0 or os.environ.get("CI_LOOSE_TMP")


def test_ask_never_imports_onnxruntime(docs: Path, sparc_home: Path):
    run("index", str(docs), "-q")
    code = ("import sys; from typer.testing import CliRunner; from sparc_local.cli.app import app; "
            "r = CliRunner().invoke(app, ['ask', 'green tea']); assert r.exit_code == 0, r.output; "
            "bad = [m for m in ('onnxruntime', 'onnx', 'torch', 'sparc_local.model.encoder') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "SPARC_LOCAL_HOME": str(sparc_home)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_cli_reference_is_up_to_date():
    from sparc_local.cli.doc import render

    path = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    assert path.read_text() == render(), "docs/cli.md is stale: run `python -m sparc_local.cli.doc > docs/cli.md`"


def test_index_real_formats_and_bad_files(tmp_path: Path):
    """PDF (with page), DOCX, HTML and cp1252 text are answerable; bad files are one-line errors."""
    import docx

    from tests.test_extract import pdf_bytes

    root = tmp_path / "mixed"
    root.mkdir()
    (root / "report.pdf").write_bytes(pdf_bytes([["Cover page."], ["The river bridge was built in 1890."]]))
    d = docx.Document()
    d.add_paragraph("The museum ticket costs ten euros.")
    d.save(str(root / "trip.docx"))
    (root / "page.html").write_text("<html><script>var x=1;</script><p>The train station is near the river.</p></html>")
    (root / "legacy.txt").write_bytes("The café serves green tea.".encode("cp1252"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage")
    (root / "binary.txt").write_bytes(bytes(range(256)) * 20)
    result = run("index", str(root))
    assert result.exit_code == 0
    skipped = sorted(line.split(":")[0] for line in result.output.splitlines() if line.startswith("skipped "))
    assert skipped == [f"skipped {root / 'binary.txt'}", f"skipped {root / 'broken.pdf'}"]
    assert "Indexed 4 files" in result.output

    def top(question: str) -> dict:
        return json.loads(run("ask", question, "--json", "-k", "1").output)[0]

    bridge = top("river bridge built")
    assert bridge["path"].endswith("report.pdf") and bridge["page"] == 2
    assert top("museum ticket")["path"].endswith("trip.docx")
    assert top("train station")["sentence"] == "The train station is near the river."
    assert top("café green tea")["sentence"] == "The café serves green tea."


def test_status_without_an_index(sparc_home: Path, active_tiny: Path):
    """A data dir without an index reads as an empty index, and status creates none."""
    from sparc_local.model.info import ModelInfo

    model = ModelInfo.load(active_tiny).id
    result = run("status")
    assert result.exit_code == 0
    assert result.output == (f"Index:        {sparc_home / 'index.db'}\nRoots:        (none)\nFiles:        0\n"
                             "Sentences:    0\nPostings:     0\nSize:         0 B\nModel:        (none)\n"
                             f"Active model: {model}\nLast update:  never\nWatcher:      not running\n"
                             "Errors:       0\n")
    st = json.loads(run("status", "--json").output)
    assert list(st) == ["files", "sentences", "encoded", "postings", "db_bytes", "model", "last_update", "errors", "roots",
                        "database", "watch", "active_model", "store", "machine_written"]
    assert (st["files"], st["model"], st["last_update"], st["errors"], st["roots"], st["store"]) == (
        0, None, None, [], [], None)
    assert (st["database"], st["active_model"], st["watch"]["running"]) == (str(sparc_home / "index.db"), model,
                                                                             False)
    assert not (sparc_home / "index.db").exists()


@pytest.mark.parametrize("command", ["index", "watch"])
def test_index_and_watch_refuse_the_same_roots(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One rule for both commands: no root at all, or a path given that does not exist (named as
    typed), is an error before anything runs."""
    result = run(command)
    assert result.exit_code == 1
    assert result.output == f"Error: no folder to {command}\nRun `sparc-local {command} FOLDER`.\n"
    monkeypatch.chdir(tmp_path)
    result = run(command, "gone", "--daemon") if command == "watch" else run(command, "gone")
    assert result.exit_code == 1
    assert result.output == "Error: gone: no such file or folder\nCheck the path and try again.\n"


def test_roots_given_else_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Given paths win and are made absolute; remembered ones are read only without them, and may
    be missing only where the command waits for them (the watcher)."""
    from sparc_local.errors import UserError
    from sparc_local.roots import resolve

    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()

    def never() -> list[str]:
        raise AssertionError("the remembered roots were read although paths were given")

    assert resolve(["here"], never, "index") == [str(tmp_path / "here")]
    gone = str(tmp_path / "gone")
    assert resolve([], lambda: [gone], "watch", missing_ok=True) == [gone]
    with pytest.raises(UserError, match="gone: no such file or folder"):
        resolve([], lambda: [gone], "index")
    with pytest.raises(UserError, match="^gone: no such file or folder$"):
        resolve(["gone"], never, "watch", missing_ok=True)


def test_demo_keeps_its_index_apart(sparc_home: Path, active_tiny: Path):
    """`demo` indexes the samples (not their question list) in its own data dir, and leaves the
    user's data dir and the environment as they were; run again, it finds every file unchanged."""
    from sparc_local.sample import sample_dir, sample_questions

    demo_home = sparc_home / "demo"
    demo_home.mkdir()
    (demo_home / "active-model").write_text(str(active_tiny))  # the tiny model, not the shipped one
    from sparc_local.model.runtime import TELEMETRY_SWITCH

    env = dict(os.environ)
    result = run("demo")
    assert result.exit_code == 0, result.output
    head, ask = result.output.split("\n\n", 1)
    assert re.fullmatch(rf"Indexing the sample files in {re.escape(str(sample_dir()))} \.\.\.\n"
                        r"Indexed 4 files \(\d+ sentences\), 0 unchanged, 0 removed, 0 unreadable in \d+\.\ds\.", head)
    assert ask.startswith(f'$ sparc-local ask "{sample_questions()[0]}" -k 3\n\n1. {sample_dir()}')
    assert result.output.endswith(
        f"\n\nThe demo keeps its own index (in {demo_home}); `sparc-local ask` searches yours.\n"
        "Next: index a folder of your own files, then ask it:\n"
        "  sparc-local index ~/Documents\n"
        '  sparc-local ask "your question"\n')
    # the encoder's import switches onnxruntime's telemetry off (model/runtime.py): nothing else changes
    assert {k: v for k, v in os.environ.items() if k != TELEMETRY_SWITCH} == {
        k: v for k, v in env.items() if k != TELEMETRY_SWITCH}
    assert not (sparc_home / "index.db").exists() and (demo_home / "index.db").exists()
    again = run("demo")
    assert "Indexed 0 files (0 sentences), 4 unchanged, 0 removed, 0 unreadable" in again.output
    after = run("ask", "green tea")  # what a newcomer types next
    assert (after.exit_code, after.output) == (
        1, "Error: there is no index of your files yet\n"
           f"`sparc-local demo` keeps its own index (in {demo_home}), apart from yours. "
           "Run `sparc-local index FOLDER` on a folder of your files, then ask again.\n")


def test_the_sample_folder_holds_documents_only():
    """Indexed on its own (`sparc-local index` of the installed sample folder), the sample folder
    gives its documents' sentences: no list of the demo's questions to outrank their answers."""
    from sparc_local.ingest.extract import extract, iter_files
    from sparc_local.ingest.sentences import segment
    from sparc_local.sample import sample_dir, sample_questions

    files = list(iter_files([sample_dir()]))
    assert sorted(p.name for p in files) == ["kettle_manual.txt", "sourdough.rst", "tea_notes.md",
                                             "weekend_in_lisbon.html"]
    sentences = [s.text for p in files for s in segment(extract(p))]
    assert not any(q in s for q in sample_questions() for s in sentences)


def test_shared_options_are_declared_once():
    """An option that several commands take has the same flags, help and type in each (its
    default may differ)."""
    import typer.main

    seen: dict[str, tuple] = {}
    shared = set()
    # `ask --top-k` counts answers, `eval --top-k` the postings kept per sentence (the model's K)
    homonyms = {"--top-k"}
    for name, command in typer.main.get_command(app).commands.items():
        for param in command.params:
            if param.param_type_name != "option" or param.name == "help" or param.opts[0] in homonyms:
                continue
            spec = (tuple(param.opts), param.help, param.metavar, param.type.name, param.multiple)
            flag = max(param.opts, key=len)
            if flag in seen:
                shared.add(flag)
                assert seen[flag][1] == spec, f"{flag} of `{name}` differs from `{seen[flag][0]}`'s"
            else:
                seen[flag] = (name, spec)
    assert {"--threads", "--wait", "--quiet", "--exclude", "--json", "--hidden", "--no-ignore",
            "--normal-priority"} <= shared


def test_index_max_sentences_default_is_the_pipelines():
    import typer.main

    from sparc_local.index_options import MAX_SENTENCES

    index = typer.main.get_command(app).commands["index"]
    assert next(p.default for p in index.params if p.name == "max_sentences") == MAX_SENTENCES
