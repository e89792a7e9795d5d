"""`ask` at the command line: its filters (--path as text or a glob relative to the indexed folders,
--type with its aliases, --since/--before), its output piped and on a terminal, usage lines, shell
completion, and the console entry point, which answers a plain `ask` without the Typer app and must
read arguments exactly as the app does.  Real files, a real SQLite index, the tiny model."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from sparc_local.cli.app import app
from sparc_local.cli.common import run_ask
from sparc_local.cli.entry import ASK_FLAGS, ASK_VALUES, plain_ask
from sparc_local.cli.render import NO_LIKELY_ANSWER, _Style, format_answers
from sparc_local.query import ask as ask_module
from sparc_local.query.ask import Answer, collapse

pytestmark = pytest.mark.usefixtures("active_tiny")

runner = CliRunner()
QUESTION = "the tea tower train river museum"
REPO = Path(__file__).resolve().parent.parent


def _shown(a: dict) -> str:
    """An answer's context as `ask` shows it: its heading set apart from its text."""
    if not a["heading"]:
        return a["context"]
    return a["heading"] + " — " + a["context"][len(a["heading"]):].lstrip()


def _when(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@pytest.fixture
def dated_docs(tmp_path: Path) -> Path:
    """Four files in three folders, with known modification times, indexed."""
    root = tmp_path / "docs"
    files = {
        "tea.md": ("# Tea\n\nGreen tea should steep for three minutes. Then drink it.\n", "2026-01-10T00:00"),
        "library/history.txt": ("The king built the tower in one year.\n", "2025-06-01T12:00"),
        "library/trip.htm": ("<html><body><p>The train station is by the river.</p></body></html>",
                             "2025-12-31T23:59"),
        "notes/museum.html": ("<html><body><p>The museum ticket was for the history of music.</p></body></html>",
                              "2026-02-01T08:30"),
    }
    for rel, (text, when) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (_when(when), _when(when)))
    result = runner.invoke(app, ["index", str(root), "-q"])
    assert (result.exit_code, result.output) == (0, "")
    return root


def kept(dated_docs: Path, *args: str) -> list[str]:
    """The files (relative to dated_docs) of every answer `ask QUESTION --json ARGS` gives."""
    result = runner.invoke(app, ["ask", QUESTION, "--json", "-k", "50", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return sorted({str(Path(a["path"]).relative_to(dated_docs)) for a in json.loads(result.stdout)})


ALL = ["library/history.txt", "library/trip.htm", "notes/museum.html", "tea.md"]


# ------------------------------------------------------------------------------------ filters


def test_every_file_answers_unfiltered(dated_docs: Path):
    assert kept(dated_docs) == ALL


def test_path_is_text_or_a_glob_relative_to_the_indexed_folder(dated_docs: Path):
    assert kept(dated_docs, "--path", "library") == ["library/history.txt", "library/trip.htm"]
    assert kept(dated_docs, "--path", "library/h") == ["library/history.txt"]
    assert kept(dated_docs, "--path", "library/*") == ["library/history.txt", "library/trip.htm"]
    assert kept(dated_docs, "--path", "tr*") == ["library/trip.htm"]  # a name, at any depth
    assert kept(dated_docs, "--path", "*.htm*") == ["library/trip.htm", "notes/museum.html"]
    # absolute: a glob as before, and a text keeps what lies at or below it
    assert kept(dated_docs, "--path", "*/library/*") == ["library/history.txt", "library/trip.htm"]
    assert kept(dated_docs, "--path", f"{dated_docs}/*.md") == ["tea.md"]
    assert kept(dated_docs, "--path", str(dated_docs / "notes")) == ["notes/museum.html"]
    assert kept(dated_docs, "--path", str(dated_docs / "note")) == []  # a whole folder name, not a prefix of one
    # the indexed folder's own path is not part of the relative path
    nothing = runner.invoke(app, ["ask", QUESTION, "--path", dated_docs.name])
    assert (nothing.exit_code, nothing.output) == (0, f"No indexed file matches --path docs{INDEXED}")


INDEXED = "; the index holds 4 files (.htm, .html, .md, .txt) modified 2025-06-01 to 2026-02-01.\n"


@pytest.mark.parametrize("args, said", [
    (["--type", "docx"], "--type docx"),
    (["--since", "2030-01-01"], "--since 2030-01-01"),
    (["--before", "2025-06-01T12:00", "--path", "my notes"], "--path 'my notes' --before 2025-06-01T12:00"),
    (["--type", "md", "--before", "2026-01-01"], "--type md --before 2026-01-01"),  # each keeps some, not both
])
def test_filters_that_keep_no_indexed_file_say_so(dated_docs: Path, args: list[str], said: str):
    line = f"No indexed file matches {said}{INDEXED}"
    result = runner.invoke(app, ["ask", QUESTION, *args])
    assert (result.exit_code, result.output) == (0, line)
    result = runner.invoke(app, ["ask", QUESTION, "--json", *args])  # stdout stays valid JSON
    assert (result.exit_code, result.stdout, result.stderr) == (0, "[]\n", line)


def test_filters_that_keep_a_file_without_an_answer_say_no_answer(dated_docs: Path):
    result = runner.invoke(app, ["ask", "tower", "--type", "md", "--mode", "bm25"])
    assert (result.exit_code, result.output) == (0, "No answer found.\n")


def test_type_keeps_the_extension_and_its_aliases(dated_docs: Path):
    html = ["library/trip.htm", "notes/museum.html"]
    for ext in ("htm", "html", ".HTML", "Htm"):
        assert kept(dated_docs, "--type", ext) == html, ext
    assert kept(dated_docs, "--type", "markdown") == kept(dated_docs, "--type", "md") == ["tea.md"]
    assert kept(dated_docs, "--type", "text") == kept(dated_docs, "--type", ".txt") == ["library/history.txt"]
    assert kept(dated_docs, "--type", "pdf") == []
    assert kept(dated_docs, "--type", "htm", "--path", "library") == ["library/trip.htm"]


def test_since_and_before_bound_the_modification_time(dated_docs: Path):
    assert kept(dated_docs, "--since", "2026-01-10") == ["notes/museum.html", "tea.md"]  # from its midnight on
    assert kept(dated_docs, "--before", "2026-01-10") == ["library/history.txt", "library/trip.htm"]
    assert kept(dated_docs, "--since", "2025-12-31T23:59", "--before", "2026-01-10") == ["library/trip.htm"]
    assert kept(dated_docs, "--since", "2025-12-31 23:59:01") == ["notes/museum.html", "tea.md"]
    assert kept(dated_docs, "--since", "2026-01-01", "--type", "md") == ["tea.md"]
    assert kept(dated_docs, "--before", "2025-01-01") == []


def test_filters_rank_inside_the_kept_files(dated_docs: Path):
    """A mask inside scoring: -k 1 is the best answer of the kept files, not a filtered top 1."""
    best = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "1"]).output)
    assert Path(best[0]["path"]).name == "tea.md"
    for args in (["--path", "library"], ["--type", "html"], ["--before", "2026-01-10"]):
        ranked = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "50", *args]).output)
        top = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "1", *args]).output)
        assert top == ranked[:1] and top[0]["path"] != best[0]["path"], args


@pytest.mark.parametrize("option", ["--since", "--before"])
@pytest.mark.parametrize("value", ["2026-13-01", "yesterday", "01/02/2026", ""])
def test_a_bad_date_is_a_usage_error(option: str, value: str):
    result = runner.invoke(app, ["ask", "tea", option, value], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr == ("Usage: root ask [OPTIONS] QUESTION\nTry 'root ask --help' for help.\n\n"
                             f"Error: Invalid value for '{option}': \"{value}\" is not a date: "
                             "use YYYY-MM-DD or YYYY-MM-DDTHH:MM\n")


# ------------------------------------------------------------------------------------ output


def test_piped_output_is_plain_text(dated_docs: Path):
    answers = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "2"]).output)
    result = runner.invoke(app, ["ask", "green tea steep", "-k", "2"])
    assert result.exit_code == 0
    assert answers[0]["sentence"] == "Green tea should steep for three minutes."
    assert answers[0]["phrase"] == {"text": "Green tea", "start": 0, "end": 9}  # every answer has one in JSON
    assert result.output == "".join(f"{a['rank']}. {a['path']}:{a['line']}  score {a['score']:.2f}\n"
                                    f"   {_shown(a)}\n"
                                    + (f"   phrase: {a['phrase']['text']}\n" if a["phrase"] and a["rank"] == 1 else "")
                                    + (f"   +{len(a['collapsed'])} more from this passage\n"
                                       if a["collapsed"] else "") for a in answers)
    assert "**" not in result.output and "\x1b" not in result.output


def _answer(sentence: str, before: str = "", after: str = "", **kw) -> Answer:
    return Answer(1, 12.5, "/d/tea.md", None, 3, sentence, before + sentence + after, len(before), **kw)


def test_terminal_output_wraps_between_words_with_a_hanging_indent():
    a = _answer("Green tea should steep for three minutes with a decorator.", "Before. ", " Then drink it.",
                contributions={"tea": 2.5, "green": 1.25, "steep": 0.5})
    assert format_answers([a], explain=True, style=_Style(True), width=30) == (
        "\x1b[1m1.\x1b[0m /d/tea.md:3  \x1b[2mscore 12.50\x1b[0m\n"
        "   Before. \x1b[1;33mGreen tea should\x1b[0m\n"
        "   \x1b[1;33msteep for three minutes\x1b[0m\n"
        "   \x1b[1;33mwith a decorator.\x1b[0m Then\n"
        "   drink it.\n"
        "   \x1b[2m= tea 2.50 + green 1.25\x1b[0m\n"
        "   \x1b[2m+ steep 0.50\x1b[0m\n")
    # NO_COLOR keeps bold and dim, as rich does; a word wider than a line is cut; wide characters
    # take two columns
    b = _answer("Tea:", after=" supercalifragilisticexpialidocious 東京の緑茶はおいしい")
    assert format_answers([b], style=_Style(True, colour=False), width=20) == (
        "\x1b[1m1.\x1b[0m /d/tea.md:3  \x1b[2mscore 12.50\x1b[0m\n"
        "   \x1b[1mTea:\x1b[0m\n"
        "   supercalifragilis\n"
        "   ticexpialidocious\n"
        "   東京の緑茶はおい\n"
        "   しい\n")
    # wide enough: one line each, as piped, with the emphasis
    assert format_answers([a], style=_Style(True), width=200) == (
        "\x1b[1m1.\x1b[0m /d/tea.md:3  \x1b[2mscore 12.50\x1b[0m\n"
        "   Before. \x1b[1;33mGreen tea should steep for three minutes with a decorator.\x1b[0m Then drink it.\n")
    assert format_answers([a], style=_Style(False), width=None) == (
        "1. /d/tea.md:3  score 12.50\n"
        "   Before. Green tea should steep for three minutes with a decorator. Then drink it.\n")


def test_styles_follow_the_terminal_and_its_conventions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    with open(tmp_path / "out", "w") as f:
        assert not _Style.of(f).on
    assert (_Style.of(Tty()).on, _Style.of(Tty()).colour) == (True, True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert (_Style.of(Tty()).on, _Style.of(Tty()).colour) == (True, False)
    monkeypatch.setenv("TERM", "dumb")
    assert not _Style.of(Tty()).on


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_ask_in_a_terminal_of_40_columns(dated_docs: Path):
    """The real command on a pseudo-terminal: styled, and wrapped between words at its width."""
    import fcntl
    import pty
    import struct
    import termios

    score = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "1"]).output)[0]["score"]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    proc = subprocess.Popen([sys.executable, "-m", "sparc_local", "ask", "green tea steep", "-k", "1"],
                            stdout=slave, stderr=slave, env={**env, "TERM": "xterm"}, cwd=REPO)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the command ended and closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait() == 0
    assert out.decode().replace("\r\n", "\n") == (
        f"\x1b[1m1.\x1b[0m {dated_docs / 'tea.md'}:3  \x1b[2mscore {score:.2f}\x1b[0m\n"
        # the heading leads its paragraph, set apart; the phrase is underlined in the sentence
        "   \x1b[1mTea\x1b[0m — \x1b[1;4;33mGreen tea\x1b[0m \x1b[1;33mshould steep for\x1b[0m\n"
        "   \x1b[1;33mthree minutes.\x1b[0m Then drink it.\n")


# ------------------------------------------------------------------------------------ passages, no answer


def test_sentences_of_one_passage_collapse_into_one_result(dated_docs: Path, monkeypatch: pytest.MonkeyPatch):
    """The tea paragraph's two sentences (its heading "Tea" is context) take one result, its best; the next passage comes
    second, fetched even when the first fetch holds a single passage."""
    monkeypatch.setattr(ask_module, "FETCH_FACTOR", 1)  # -k 2 fetches 2 sentences first: both tea's
    answers = json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "2"]).output)
    first, second = answers
    assert [a["rank"] for a in answers] == [1, 2]
    assert (first["path"], first["sentence"]) == (str(dated_docs / "tea.md"), "Green tea should steep for three minutes.")
    assert second["path"] != first["path"] and second["collapsed"] == []
    # each collapsed sentence keeps its own score, between the passage's best and the next passage's
    assert sorted((c["sentence"], c["page"], c["line"]) for c in first["collapsed"]) == [("Then drink it.", None, 3)]
    scores = [c["score"] for c in first["collapsed"]]
    assert first["score"] >= scores[0] >= second["score"]
    result = runner.invoke(app, ["ask", "green tea steep", "-k", "2"])
    assert (result.exit_code, result.output) == (0, (
        f"1. {dated_docs / 'tea.md'}:3  score {first['score']:.2f}\n"
        "   Tea — Green tea should steep for three minutes. Then drink it.\n"
        "   phrase: Green tea\n"
        "   +1 more from this passage\n"
        f"2. {second['path']}:{second['line']}  score {second['score']:.2f}\n"
        f"   {second['context']}\n"))
    # -k 1: only what ranks above the last passage shown is collapsed (none here)
    assert json.loads(runner.invoke(app, ["ask", "green tea steep", "--json", "-k", "1"]).output)[0]["collapsed"] \
        == [c for c in first["collapsed"] if c["score"] >= first["score"]]


def test_collapse_keeps_what_ranks_above_the_last_passage_shown():
    def a(score: float, file_id: int, context: str) -> Answer:
        return Answer(0, score, f"/d/{file_id}", None, 1, f"s{score}", context, file_id=file_id)

    ranked = [a(9, 1, "p"), a(8, 1, "p"), a(7, 2, "p"), a(6, 1, "q"), a(5, 1, "p"), a(4, 3, "r")]
    shown = collapse(ranked, 3)
    assert [(x.rank, x.score, [c.score for c in x.collapsed]) for x in shown] == [(1, 9, [8]), (2, 7, []), (3, 6, [])]
    # fewer passages than k: every sentence fetched is collapsed under its passage
    shown = collapse([a(9, 1, "p"), a(8, 1, "p"), a(1, 1, "p")], 3)
    assert [(x.rank, x.score, [c.score for c in x.collapsed]) for x in shown] == [(1, 9, [8, 1])]


def test_repeats_fold_into_the_first_passage_that_says_them():
    """A passage whose best sentence repeats a better one's (the same passage text, or the same
    long sentence anywhere) is listed under it, not given a slot; short sentences alike in
    different passages ("Examples.") stay apart."""
    def a(score: float, file_id: int, sentence: str, context: str) -> Answer:
        return Answer(0, score, f"/d/{file_id}", None, 1, sentence, context, file_id=file_id)

    footer = "Report a bug in this manual."
    long_s = "The daemon rereads its configuration file when it receives a hangup signal."
    def ranked() -> list[Answer]:
        return [a(9, 1, footer, "Next " + footer), a(8, 2, footer, "next  " + footer.upper()),  # same passage text
                a(7, 3, long_s, "A. " + long_s), a(6, 4, long_s, long_s + " B."),  # a long sentence, other contexts
                a(5, 5, "Examples.", "Examples. x"), a(4, 6, "Examples.", "Examples. y"),  # short: kept apart
                a(3, 2, "Next", "next  " + footer.upper())]  # another sentence of a folded passage: dropped

    shown = collapse(ranked(), 10)
    assert [(x.rank, x.score, [e.path for e in x.elsewhere], x.collapsed) for x in shown] == [
        (1, 9, ["/d/2"], []), (2, 7, ["/d/4"], []), (3, 5, [], []), (4, 4, [], [])]
    assert ask_module.n_shown(ranked()) == 4
    assert shown[0].to_json()["elsewhere"] == [{"score": 8, "path": "/d/2", "page": None, "line": 1}]
    # what ranks below the last passage shown is not listed
    assert [[e.score for e in x.elsewhere] for x in collapse(ranked(), 2)] == [[8], []]
    assert [[e.score for e in x.elsewhere] for x in collapse(ranked()[2:4] + [a(5, 8, "z", "z")], 2)] == [[6], []]
    assert [[e.score for e in x.elsewhere] for x in collapse(ranked()[2:3] + [a(6.5, 8, "z", "z")] + ranked()[3:4], 2)] \
        == [[], []]


def test_a_file_copied_twice_is_one_answer_with_its_other_place(dated_docs: Path):
    copy = dated_docs / "notes" / "museum copy.html"
    shutil.copy(dated_docs / "notes" / "museum.html", copy)
    assert runner.invoke(app, ["index", str(dated_docs), "-q"]).exit_code == 0
    answers = json.loads(runner.invoke(app, ["ask", "museum ticket", "--json", "-k", "2"]).output)
    first = answers[0]
    assert first["sentence"] == "The museum ticket was for the history of music."
    assert [e["path"] for e in first["elsewhere"]] == [str(copy)] or (
        first["path"] == str(copy) and [e["path"] for e in first["elsewhere"]] == [str(dated_docs / "notes" / "museum.html")])
    assert all(a["sentence"] != first["sentence"] for a in answers[1:])
    result = runner.invoke(app, ["ask", "museum ticket", "-k", "1"])
    other = first["elsewhere"][0]
    assert (result.exit_code, result.output) == (0, (
        f"1. {first['path']}:1  score {first['score']:.2f}\n"
        "   The museum ticket was for the history of music.\n"
        f"   phrase: {first['phrase']['text']}\n"
        f"   also in {other['path']}:1\n"))


def test_a_nonsense_question_has_no_likely_answer(dated_docs: Path):
    """Hybrid mode says when even the best answer is unlikely (ask.LIKELY_SCORE, calibrated by
    benchmarks/no_answer.py); the sparc and bm25 modes keep raw scores and say nothing."""
    answers = json.loads(runner.invoke(app, ["ask", "zzzzqqq", "--json", "-k", "2"]).output)
    assert [a["likely"] for a in answers] == [False, False]
    result = runner.invoke(app, ["ask", "zzzzqqq", "-k", "2"])
    assert (result.exit_code, result.output) == (0, NO_LIKELY_ANSWER + "\n" + "".join(
        f"{a['rank']}. {a['path']}:{a['line']}  score {a['score']:.2f}\n   {_shown(a)}\n"
        + (f"   +{len(a['collapsed'])} more from this passage\n" if a["collapsed"] else "") for a in answers))
    assert result.output.startswith("No likely answer; the closest:\n1. ")
    for mode in ("sparc", "bm25"):
        raw = runner.invoke(app, ["ask", "zzzzqqq", "-k", "2", "--mode", mode])
        assert raw.exit_code == 0 and not raw.output.startswith(NO_LIKELY_ANSWER), mode
        raw_answers = json.loads(runner.invoke(app, ["ask", "zzzzqqq", "--json", "--mode", mode]).output)
        assert all(a["likely"] is None for a in raw_answers), mode
    assert json.loads(runner.invoke(app, ["ask", "zzzzqqq", "--json", "--mode", "sparc"]).output)  # raw: answers
    real = json.loads(runner.invoke(app, ["ask", "museum ticket", "--json", "-k", "2"]).output)
    assert real[0]["sentence"] == "The museum ticket was for the history of music." and real[0]["likely"] is True
    assert not runner.invoke(app, ["ask", "museum ticket", "-k", "2"]).output.startswith(NO_LIKELY_ANSWER)


def test_a_passage_that_holds_little_of_the_question_is_no_likely_answer(dated_docs: Path, monkeypatch):
    """Beside the score, a likely answer's passage holds MIN_COVERAGE of the question's idf
    (issue 32: an off-topic question answered with confidence from a manual). With the score
    threshold out of the way, the museum passage answers "museum ticket" but not a recipe
    question that only shares its word "museum"."""
    monkeypatch.setattr(ask_module, "LIKELY_SCORE", 0.0)
    museum = ["--json", "-k", "1", "--path", "museum"]
    real = json.loads(runner.invoke(app, ["ask", "museum ticket", *museum]).output)
    off = json.loads(runner.invoke(app, ["ask", "museum banana bread recipe flour oven sugar butter", *museum]).output)
    assert real[0]["sentence"] == off[0]["sentence"] == "The museum ticket was for the history of music."
    assert (real[0]["likely"], off[0]["likely"]) == (True, False)


# ------------------------------------------------------------------------------------ usage lines


def test_usage_lines_read_as_command_lines():
    def usage(*args: str) -> str:
        return runner.invoke(app, [*args, "--help"], prog_name="sparc-local").output.splitlines()[0]

    assert usage("ask") == "Usage: sparc-local ask [OPTIONS] QUESTION"
    assert usage("forget") == "Usage: sparc-local forget [OPTIONS] PATH"
    assert usage("index") == "Usage: sparc-local index [OPTIONS] [PATHS]..."
    assert usage("eval") == "Usage: sparc-local eval [OPTIONS] DATASET_DIR"
    result = runner.invoke(app, ["service", "--help"], prog_name="sparc-local", terminal_width=100)
    assert result.output == (
        "Usage: sparc-local service [OPTIONS] ACTION\n\n"
        "  Run `watch` at login as a systemd user service (Linux) or a launchd agent (macOS).\n\n"
        "Arguments:\n"
        "  ACTION  install (write the service file) or uninstall (remove it).  [required]\n\n"
        "Options:\n"
        "  --help  Show this message and exit.\n")
    wrong = runner.invoke(app, ["service", "start"], prog_name="sparc-local")
    assert (wrong.exit_code, wrong.stderr) == (2, (
        "Usage: sparc-local service [OPTIONS] ACTION\nTry 'sparc-local service --help' for help.\n\n"
        "Error: Invalid value for 'ACTION': 'start' is not one of 'install', 'uninstall'.\n"))


# ------------------------------------------------------------------------------------ completion


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparc_local", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=REPO)


BASH_SCRIPT = """\
_sparc_local_completion() {
    local IFS=$'
'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \\
                   COMP_CWORD=$COMP_CWORD \\
                   _SPARC_LOCAL_COMPLETE=complete_bash $1 ) )
    return 0
}

complete -o default -F _sparc_local_completion sparc-local"""


def test_completion_script_for_bash():
    """Click's spelling of the instruction (bash_source) works as well as Typer's (source_bash)."""
    for instruction in ("bash_source", "source_bash"):
        done = _cli(_SPARC_LOCAL_COMPLETE=instruction)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"\n{BASH_SCRIPT}\n\n", ""), instruction


@pytest.mark.parametrize("line, expected", [
    ("sparc-local as", "ask"),
    ("sparc-local ask --ty", "--type"),
    ("sparc-local ask --type h", "htm\nhtml"),
    ("sparc-local ask --type m", "markdown\nmbox\nmd"),
    ("sparc-local service ", "install\nuninstall"),
    ("sparc-local --ins", "--install-completion"),
])
def test_completion_of_commands_options_and_values(line: str, expected: str):
    words = line.split(" ")
    for instruction in ("complete_bash", "bash_complete"):  # the script's, and Click's spelling
        done = _cli(_SPARC_LOCAL_COMPLETE=instruction, COMP_WORDS=line, COMP_CWORD=str(len(words) - 1))
        assert (done.returncode, done.stdout, done.stderr) == (0, expected + "\n", ""), instruction


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_install_completion(tmp_path: Path):
    """Run from bash, as a user would: Typer finds the shell among the command's parents."""
    # not the script's last command, so bash stays its parent instead of exec'ing it: pytest's own
    # parents may hold no shell at all (a job started in the background)
    cmd = f"{shlex.quote(sys.executable)} -m sparc_local --install-completion; exit $?"
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "HOME": str(tmp_path)})
    script = tmp_path / ".bash_completions" / "sparc-local.sh"
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"bash completion installed in {script}\n"
                           "Completion will take effect once you restart the terminal\n")
    assert script.read_text() == BASH_SCRIPT
    assert (tmp_path / ".bashrc").read_text() == f"\nsource '{script}'\n"


# ------------------------------------------------------------------------------------ the entry point


def _click_params(args: list[str]) -> dict:
    group = typer.main.get_command(app)
    ctx = group.make_context("sparc-local", list(args))
    command = group.get_command(ctx, args[0])
    return command.make_context(args[0], list(args[1:]), parent=ctx).params


PLAIN = [
    ["ask", "green tea"],
    ["ask", "green tea", "-k", "3", "--json"],
    ["ask", "-k3", "--explain", "green tea"],
    ["ask", "--top-k=7", "green tea", "--path", "library", "--type=htm"],
    ["ask", "green tea", "--path", "a", "--path", "b*"],  # the last one counts
    ["ask", "green tea", "--since", "2026-01-10", "--before=2026-02-01T08:30"],
    ["ask", "green tea", "--path="],
    ["ask", "green tea", "--mode", "SPARC"], ["ask", "--mode=bm25", "green tea"],
    ["ask", "--fast", "green tea"], ["ask", "green tea", "--candidates", "20"], ["ask", "--candidates=5", "tea"],
]
NOT_PLAIN = [  # left to the Typer app
    ["ask"], ["ask", ""], ["ask", "  "], ["ask", "a", "b"], ["ask", "--help"], ["ask", "-h", "tea"],
    ["ask", "tea", "-k", "0"], ["ask", "tea", "-k", "x"], ["ask", "tea", "-k=3"], ["ask", "tea", "-k"],
    ["ask", "tea", "--json=1"], ["ask", "tea", "--since", "2026-13-01"], ["ask", "tea", "--top"],
    ["ask", "tea", "--path", "-x"], ["ask", "--", "-5 degrees"], ["ask", "-"], ["status"], ["--version"],
    ["--help"], [], ["ask", "tea", "--mode", "dense"], ["ask", "tea", "--candidates", "0"],
    ["ask", "tea", "--fast=1"],
]


def test_plain_ask_reads_arguments_as_the_typer_app_does():
    defaults = dict(question=None, top_k=10, as_json=False, path=None, type_=None, explain=False, since=None,
                    before=None, mode="hybrid", fast=False, candidates=None)
    for args in PLAIN:
        assert {**defaults, **plain_ask(args)} == _click_params(args), args
    for args in NOT_PLAIN:
        assert plain_ask(args) is None, args
    # the option names are the Typer command's
    ask = typer.main.get_command(app).commands["ask"]
    opts = {o: p.is_flag for p in ask.params if isinstance(p, typer.core.TyperOption) for o in p.opts}
    opts.pop("--help", None)
    assert opts == {**{o: False for o in ASK_VALUES}, **{o: True for o in ASK_FLAGS}}
    assert set(ASK_VALUES.values()) | set(ASK_FLAGS.values()) | {"question"} == set(defaults)
    import inspect

    assert list(inspect.signature(run_ask).parameters) == list(defaults)


def test_ask_modes_are_the_apps_choices():
    """entry.py's parser and the Typer app accept the same --mode names (``query.modes``)."""
    from sparc_local.cli.entry import plain_ask
    from sparc_local.query.modes import MODES

    mode = next(p for p in typer.main.get_command(app).commands["ask"].params if p.name == "mode")
    assert list(mode.type.choices) == list(MODES) == ["hybrid", "sparc", "bm25"]
    assert [plain_ask(["ask", "q", "--mode", m.upper()])["mode"] for m in MODES] == list(MODES)


@pytest.mark.parametrize("args", [
    ["ask", "green tea steep", "-k", "2"], ["ask", "green tea", "--json", "-k", "1", "--type", "md"],
    ["ask", "green tea", "--path", "*.pdf"], ["ask", ""], ["ask", "tea", "--since", "2026-13-01"],
    ["ask", "tea", "-k", "0"], ["ask", "tea", "--nope"], ["ask", "?!"],
], ids=str)
def test_the_entry_point_answers_as_the_typer_app(dated_docs: Path, args: list[str]):
    """The console script (`python -m sparc_local`, entry.main) and the Typer app print the same,
    and exit the same, whether the entry point answers itself or hands over."""
    typer_run = runner.invoke(app, args, prog_name="sparc-local")
    done = _cli(*args)
    assert (done.returncode, done.stdout, done.stderr) == (typer_run.exit_code, typer_run.stdout,
                                                           typer_run.stderr)


def test_no_answers_without_an_index_through_the_entry_point():
    done = _cli("ask", "green tea")
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", "Error: there is no index yet\nRun `sparc-local index FOLDER` first.\n")


def test_plain_ask_imports_no_cli_library(dated_docs: Path):
    """Nor the encoder, the readers (extract imports them all), scipy (eval's BM25 baseline) or, for an
    ASCII question, tokenizers."""
    code = ("import sys; from sparc_local.cli.entry import main; assert main(['ask', 'green tea']) == 0; "
            "assert main(['ask', 'tea', '--type', 'htm', '--path', 'library', '--since', '2020-01-01']) == 0; "
            "print([m for m in ('typer', 'click', 'rich', 'shellingham', 'onnxruntime', 'onnx', 'torch', "
            "'tokenizers', 'scipy', 'sparc_local.cli.app', 'sparc_local.model.encoder', 'sparc_local.ingest.extract') "
            "if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_no_phrase_is_underlined_when_no_answer_is_likely():
    """`ask zzzzqqq`: "No likely answer", and no word of the closest sentence underlined (on a
    terminal) or named as the phrase (plain text), as if it answered; a likely answer keeps both."""
    from sparc_local.query.phrase import Phrase

    def top(likely: bool) -> Answer:
        return Answer(1, 0.3, "/d/water.txt", None, 4, "Sparkling water is served cold.",
                      "Sparkling water is served cold.", likely=likely, phrase=Phrase("Sparkling", 0, 9))

    assert format_answers([top(False)], style=_Style(True), width=80) == (
        f"{NO_LIKELY_ANSWER}\n\x1b[1m1.\x1b[0m /d/water.txt:4  \x1b[2mscore 0.30\x1b[0m\n"
        "   \x1b[1;33mSparkling water is served cold.\x1b[0m\n")
    assert format_answers([top(False)]) == (
        f"{NO_LIKELY_ANSWER}\n1. /d/water.txt:4  score 0.30\n   Sparkling water is served cold.\n")
    assert format_answers([top(True)], style=_Style(True), width=80) == (
        "\x1b[1m1.\x1b[0m /d/water.txt:4  \x1b[2mscore 0.30\x1b[0m\n"
        "   \x1b[1;4;33mSparkling\x1b[0m \x1b[1;33mwater is served cold.\x1b[0m\n")
    assert format_answers([top(True)]) == (
        "1. /d/water.txt:4  score 0.30\n   Sparkling water is served cold.\n   phrase: Sparkling\n")
