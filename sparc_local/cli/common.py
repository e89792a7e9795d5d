"""What the `ask` command does, shared by the Typer app (app.py) and the fast entry point (entry.py).

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from sparc_local.errors import SparcError, UserError
from sparc_local.query.modes import HYBRID

if TYPE_CHECKING:
    from sparc_local.index.store import Index

DEFAULT_TOP_K = 10
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


def open_index(must_exist: bool = True) -> Index:
    """The index (a store.Index, to use in a `with`; with a Milvus store named, writing to it
    too: ``backend``); UserError when it must exist and does not."""
    from sparc_local import backend, paths

    db = paths.db_path()
    if must_exist and not db.exists():
        demo = paths.demo_dir()
        if (demo / db.name).exists():
            raise UserError("there is no index of your files yet",
                            f"`sparc-local demo` keeps its own index (in {demo}), apart from yours. "
                            "Run `sparc-local index FOLDER` on a folder of your files, then ask again.")
        raise UserError("there is no index yet", "Run `sparc-local index FOLDER` first.")
    return backend.open_index(db)


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


def load_reranker():
    """The reranker `ask` runs (its rerank.json read, its model loading in a thread while the first
    stage runs), or None when the installation has none."""
    from sparc_local.model.info import reranker_dir

    folder = reranker_dir()
    if folder is None:
        return None
    from sparc_local.rerank.model import Reranker

    return Reranker.load(folder).preload()


def filter_options(path: str | None, type_: str | None, since: float | None, before: float | None) -> str:
    """`ask`'s filter options as a command line would give them."""
    import shlex

    given = [("--path", path), ("--type", type_), ("--since", since), ("--before", before)]
    return " ".join(f"{name} {shlex.quote(value if isinstance(value, str) else format_date(value))}"
                    for name, value in given if value is not None)


def run_ask(question: str, top_k: int = DEFAULT_TOP_K, as_json: bool = False, path: str | None = None,
            type_: str | None = None, explain: bool = False, since: float | None = None,
            before: float | None = None, mode: str = HYBRID, fast: bool = False,
            candidates: int | None = None) -> None:
    """`ask`: the answers on stdout (text, or JSON), and a note on stderr when the index is stale.
    When the filters keep no indexed file, one line says so and what the indexed files are: in
    place of "No answer found.", or on stderr beside --json's empty list.  In hybrid mode the
    reranker (``rerank/``), when there is one, orders the first stage's top ``candidates``
    passages; ``fast`` leaves it out, unread."""
    from sparc_local.backend import open_engine
    from sparc_local.model.info import active_model, index_is_stale
    from sparc_local.query.ask import Asker
    from sparc_local.query.pathfilter import PathFilter, no_match

    info = active_model()
    reranker = None if fast or mode != HYBRID else load_reranker()
    if candidates is not None and reranker is None:
        why = "with --fast" if fast else f"in --mode {mode}" if mode != HYBRID else "without a reranker installed"
        raise UserError(f"--candidates sets the passages the reranker reads, and no reranker runs {why}",
                        "Leave out --candidates.")
    phrases = None if as_json else 1  # the terminal shows the top answer's phrase; --json gives every answer's
    ask: dict[str, Any] = {"k": top_k, "path_glob": path, "ext": type_, "explain": explain, "since": since,
                           "before": before, "mode": mode, "phrases": phrases, "reranker": reranker,
                           "candidates": candidates}
    with open_engine(open_index) as searching:  # the local index, or a Milvus store (``backend``)
        answers = Asker(searching.engine, info).ask(question, **ask)
        idx, unmatched = searching.index, None
        stale = idx is not None and index_is_stale(idx, info)
        file_filter = None if answers or idx is None else PathFilter.of(path, type_, since, before)
        if idx is not None and file_filter is not None:
            unmatched = no_match(idx, file_filter)
    if unmatched:
        from sparc_local.cli.render import format_no_match

        line = format_no_match(filter_options(path, type_, since, before), unmatched)
    if as_json:
        import json

        print(json.dumps([a.to_json() for a in answers], ensure_ascii=False, indent=1))
        if unmatched:
            print(line, file=sys.stderr)
        return
    from sparc_local.cli.render import print_answers

    if unmatched:
        print(line)
    else:
        print_answers(answers, explain=explain)
    if stale:
        print("Note: the index was built with another model; run `sparc-local index` to re-encode.",
              file=sys.stderr)
