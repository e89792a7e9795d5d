"""The `sparc-local` console entry point: a plain `ask` answers without building the Typer app.

Importing Typer (and the click it carries) and building the app cost a large share of a cold
`ask` (the cold-ask benchmark measures it).  ``main`` runs an `ask` whose arguments ``plain_ask`` reads in
full, and hands everything else to the Typer app in app.py: help, shell completion, the other
commands, and every argument it does not know or cannot convert, so usage errors read as Typer
writes them.  Both ways run ``run_ask``, and ``report`` prints their errors.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import os
import sys

from sparc_local.cli.common import out_of_memory, parse_date, report, run_ask
from sparc_local.errors import SparcError
from sparc_local.query.modes import MODES

PROG = "sparc-local"
COMPLETE_VAR = "_SPARC_LOCAL_COMPLETE"  # set by the completion scripts Typer writes
OPENBLAS_THREADS = "OPENBLAS_NUM_THREADS"

# `ask`'s options as plain_ask reads them; tests/test_ask_cli.py checks them against the Typer command
ASK_VALUES = {"--top-k": "top_k", "-k": "top_k", "--path": "path", "--type": "type_", "--since": "since",
              "--before": "before", "--mode": "mode", "--candidates": "candidates"}
ASK_FLAGS = {"--json": "as_json", "--explain": "explain", "--fast": "fast"}
_COMPLETION_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def plain_ask(args: list[str]) -> dict | None:
    """``run_ask``'s keyword arguments for `ask ...` arguments read here in full, as Click would
    read them; None for anything else (another command, --help, an unknown or doubtful argument,
    a value that does not convert), which the Typer app then parses."""
    if not args or args[0] != "ask":
        return None
    found: dict = {}
    question = None
    rest = iter(args[1:])
    for arg in rest:
        if not arg.startswith("-"):
            if question is not None:
                return None
            question = arg
            continue
        if arg.startswith("--"):
            name, eq, after = arg.partition("=")
            attached = after if eq else None
        else:
            name, attached = arg[:2], arg[2:] or None
        if name in ASK_FLAGS and attached is None:
            found[ASK_FLAGS[name]] = True
        elif name in ASK_VALUES:
            value = attached if attached is not None else next(rest, None)
            if value is None or value.startswith("-"):
                return None
            found[ASK_VALUES[name]] = value
        else:
            return None
    if question is None or not question.strip():
        return None
    for key in ("top_k", "candidates"):
        if key in found:
            value = found[key]
            if not (value.isascii() and value.isdigit() and int(value) >= 1):
                return None
            found[key] = int(value)
    if "mode" in found:
        if found["mode"].lower() not in MODES:
            return None
        found["mode"] = found["mode"].lower()
    for key in ("since", "before"):
        if key in found:
            try:
                found[key] = parse_date(found[key])
            except ValueError:
                return None
    return {"question": question, **found}


def _run_plain_ask(kwargs: dict) -> int:
    """``run_ask`` ended as the Typer app ends a command: errors reported, Ctrl-C and a closed pipe
    as Click ends them."""
    try:
        run_ask(**kwargs)
    except SparcError as err:
        report(err)
        return 1
    except MemoryError:
        report(out_of_memory())
        return 1
    except KeyboardInterrupt:
        print("\nAborted!", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (`| head -1`): no traceback, and none at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def console() -> None:
    """The `sparc-local` script: ``main``, then an exit without Python's teardown of the modules a
    plain `ask` loaded (numpy's among them: ~25 ms of a cold `ask` on a busy machine), its output
    flushed first.  The Typer app exits by itself."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe
        code = code or 1
    os._exit(code)


def main(args: list[str] | None = None) -> int:
    """`sparc-local`: a plain `ask` here, returning its exit code; anything else through the Typer
    app, which exits (SystemExit) by itself."""
    args = sys.argv[1:] if args is None else list(args)
    instruction = os.environ.get(COMPLETE_VAR)
    if instruction is None:
        kwargs = plain_ask(args)
        if kwargs is not None:
            # `ask` does no linear algebra, and OpenBLAS would start a thread per core as numpy
            # loads (on this 2-core machine under load: ~30 ms of CPU, ~50 ms of wall time)
            os.environ.setdefault(OPENBLAS_THREADS, "1")
            return _run_plain_ask(kwargs)
    else:
        # Click's own order (bash_source, as its documentation writes it) besides Typer's (source_bash)
        shell, _, action = instruction.partition("_")
        if shell in _COMPLETION_SHELLS and action in ("source", "complete"):
            os.environ[COMPLETE_VAR] = f"{action}_{shell}"
    from sparc_local.cli.app import app

    return app(args=args, prog_name=PROG, complete_var=COMPLETE_VAR)
