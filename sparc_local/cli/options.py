"""Options that several commands take, declared once (Typer ``Annotated`` aliases), their defaults,
and the checks and completions of option values.

A command gives its own default (``threads: Threads = 0``): the same option may default differently
(`watch` encodes on one thread, `index` on all cores), but it is spelled and explained once.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sparc_local.app.jobs import DEFAULT_WAIT as DEFAULT_WAIT  # `--wait`'s, the app layer's
from sparc_local.cli.common import parse_date
from sparc_local.query.pathfilter import TYPE_ALIASES

# `ask --type`'s help: the extensions that count as one ("htm = html, markdown = md, ...")
TYPE_ALIASES_HELP = ", ".join(" = ".join(sorted(s.lstrip(".") for s in group)) for group in TYPE_ALIASES)

Threads = Annotated[int, typer.Option("--threads", "-t", help="Encoder threads (0: all cores).")]
Wait = Annotated[float, typer.Option("--wait", metavar="SECONDS",
                                     help="Wait this long for another writer before giving up.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print errors only.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
Fast = Annotated[bool, typer.Option("--fast", help="Answer with the first stage alone, without the reranker (faster).")]
Exclude = Annotated[list[str], typer.Option("--exclude", "-e", metavar="GLOB",
                                            help="Skip matching files (repeatable).")]
Hidden = Annotated[bool, typer.Option("--hidden", help="Include hidden files and folders.")]
NoIgnore = Annotated[bool, typer.Option(
    "--no-ignore",
    help="Index what .gitignore and .ignore files list, and tools' folders (node_modules, virtualenvs, build output).")]
Logs = Annotated[bool, typer.Option("--logs", help="Index text files that look machine-written (logs, data dumps) too.")]
NormalPriority = Annotated[bool, typer.Option(
    "--normal-priority",
    help="Run at normal CPU and I/O priority (default: low, so the programs you use stay responsive).")]


def not_empty(value: str) -> str:
    """The question argument's check: an empty question is a usage error, as Click writes them."""
    if not value.strip():
        raise typer.BadParameter("the question is empty")
    return value


def to_timestamp(value: str | None) -> float | None:
    """`--since`/`--before`: a date as seconds since the epoch; a usage error otherwise."""
    if value is None:
        return None
    try:
        return parse_date(value)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None


def complete_type(incomplete: str) -> list[str]:
    """`--type` completes to the extensions `index` reads and their aliases."""
    from sparc_local.ingest.extract import SUPPORTED

    names = sorted({suffix.lstrip(".") for suffix in SUPPORTED.union(*TYPE_ALIASES)})
    return [name for name in names if name.startswith(incomplete.lstrip(".").lower())]


