"""Options that several commands take, declared once (Typer ``Annotated`` aliases), and their defaults.

A command gives its own default (``threads: Threads = 0``): the same option may default differently
(`watch` encodes on one thread, `index` on all cores), but it is spelled and explained once.
"""

from __future__ import annotations

from typing import Annotated

import typer

DEFAULT_WAIT = 10.0  # seconds a writing command waits for another writer (`--wait`)

Threads = Annotated[int, typer.Option("--threads", "-t", help="Encoder threads (0: all cores).")]
Wait = Annotated[float, typer.Option("--wait", metavar="SECONDS",
                                     help="Wait this long for another writer before giving up.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print errors only.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
Exclude = Annotated[list[str], typer.Option("--exclude", "-e", metavar="GLOB",
                                            help="Skip matching files (repeatable).")]
Hidden = Annotated[bool, typer.Option("--hidden", help="Include hidden files and folders.")]
NoIgnore = Annotated[bool, typer.Option("--no-ignore", help="Index what .gitignore and .ignore files list, too.")]
NormalPriority = Annotated[bool, typer.Option(
    "--normal-priority",
    help="Run at normal CPU and I/O priority (default: low, so the programs you use stay responsive).")]
