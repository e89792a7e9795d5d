"""What the `ask` command does, shared by the Typer app (app.py) and the fast entry point (entry.py):
both build one ``AskRequest`` (``ask_request``) and print what the app layer answers.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import sys

from sparc_local.app import run
from sparc_local.app.requests import DEFAULT_K, AskRequest
from sparc_local.app.run import open_index as open_index  # every command's, as the app layer opens it
from sparc_local.errors import SparcError
from sparc_local.query.modes import HYBRID

DEFAULT_TOP_K = DEFAULT_K
DATE_FORMS = "YYYY-MM-DD or YYYY-MM-DDTHH:MM"


def report(err: SparcError) -> None:
    """`Error: <message>` and its remedy on stderr: every SparcError a command ends with is printed here."""
    print(f"Error: {err}", file=sys.stderr)
    if err.remedy:
        print(err.remedy, file=sys.stderr)


def out_of_memory() -> SparcError:
    """What a MemoryError tells the user: every committed batch is kept, and what to try."""
    return SparcError("out of memory; everything indexed before this point is kept",
                      "Close other programs and run the command again, or leave the largest files out "
                      "(`--exclude GLOB`, `--max-sentences N`).")


def report_crash(err: Exception) -> None:
    """The line a bug's traceback follows: what happened, and that the index is safe."""
    print(f"Error: unexpected {type(err).__name__}: {err}", file=sys.stderr)
    print("Everything indexed before this point is kept. This is a bug: please report it with the "
          "traceback below.", file=sys.stderr)


def parse_date(text: str) -> float:
    """Seconds since the epoch of an ISO date (its midnight) or date and time, in local time
    unless the text gives an offset; ValueError saying the forms otherwise."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except (ValueError, OverflowError, OSError):  # OverflowError/OSError: beyond the platform's time_t
        raise ValueError(f'"{text}" is not a date: use {DATE_FORMS}') from None


def format_date(seconds: float) -> str:
    """The local date (and time, when not midnight) of a timestamp, in a form ``parse_date`` reads."""
    from datetime import datetime

    when = datetime.fromtimestamp(seconds)
    if when.time() == datetime.min.time():
        return when.strftime("%Y-%m-%d")
    return when.isoformat(timespec="minutes" if when.second == when.microsecond == 0 else "seconds")


def filter_options(path: str | None, type_: str | None, since: float | None, before: float | None) -> str:
    """`ask`'s filter options as a command line would give them."""
    import shlex

    given = [("--path", path), ("--type", type_), ("--since", since), ("--before", before)]
    return " ".join(f"{name} {shlex.quote(value if isinstance(value, str) else format_date(value))}"
                    for name, value in given if value is not None)


def ask_request(question: str, top_k: int = DEFAULT_TOP_K, as_json: bool = False, path: str | None = None,
                type_: str | None = None, explain: bool = False, since: float | None = None,
                before: float | None = None, mode: str = HYBRID, fast: bool = False,
                candidates: int | None = None) -> AskRequest:
    """The request `ask`'s options make, for both parsers (``run_ask``): the terminal shows the top
    answer's phrase, --json every answer's."""
    return AskRequest(question, k=top_k, path=path, type=type_, since=since, before=before, mode=mode,
                      explain=explain, fast=fast, candidates=candidates, phrases=None if as_json else 1)


def run_ask(question: str, top_k: int = DEFAULT_TOP_K, as_json: bool = False, path: str | None = None,
            type_: str | None = None, explain: bool = False, since: float | None = None,
            before: float | None = None, mode: str = HYBRID, fast: bool = False,
            candidates: int | None = None) -> None:
    """`ask`: the answers on stdout (text, or JSON), and a note on stderr when the index is stale.
    When the filters keep no indexed file, one line says so and what the indexed files are: in
    place of "No answer found.", or on stderr beside --json's empty list.  In hybrid mode the
    reranker (``rerank/``), when there is one, orders the first stage's top ``candidates``
    passages; ``fast`` leaves it out, unread."""
    request = ask_request(question, top_k, as_json, path, type_, explain, since, before, mode, fast, candidates)
    result = run.ask(request)
    if result.unmatched:
        from sparc_local.cli.render import format_no_match

        line = format_no_match(filter_options(path, type_, since, before), result.unmatched)
    if as_json:
        import json

        print(json.dumps(result.to_json(), ensure_ascii=False, indent=1))
        if result.unmatched:
            print(line, file=sys.stderr)
        return
    from sparc_local.cli.render import print_answers

    if result.unmatched:
        print(line)
    else:
        print_answers(list(result), explain=explain)
    if result.stale:
        print("Note: the index was built with another model; run `sparc-local index` to re-encode.",
              file=sys.stderr)
