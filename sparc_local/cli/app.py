"""The `sparc-local` command line. Parses, calls the library, prints.

Exit codes: 0 success (files that could not be read are reported and listed by `status`),
1 error (message on stderr, starting with "Error:"), 2 usage error. Every error a user can fix
derives from ``errors.SparcError``; ``_App.invoke`` has ``common.report`` print them, and nothing
else does.  The console script is ``entry.console``: it answers a plain `ask` without this module.
"""

from __future__ import annotations

import contextlib
import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from sparc_local import __version__
from sparc_local.app.jobs import EvalRequest, ForgetRequest, IndexRequest
from sparc_local.cli.common import DATE_FORMS, DEFAULT_TOP_K, out_of_memory, report, report_crash, run_ask
from sparc_local.cli.common import open_index as _open_index
from sparc_local.cli.options import (
    DEFAULT_WAIT,
    TYPE_ALIASES_HELP,
    AsJson,
    Exclude,
    Fast,
    Hidden,
    Logs,
    NoIgnore,
    NormalPriority,
    Quiet,
    Threads,
    Wait,
    complete_type,
    not_empty,
    to_timestamp,
)
from sparc_local.errors import SparcError, UserError
from sparc_local.index_options import MAX_SENTENCES, IndexOptions
from sparc_local.query.modes import Mode
from sparc_local.watch.config import SETTINGS, WatchConfig, WatchProcess

if TYPE_CHECKING:
    from sparc_local.adapt.run import AdaptResult
    from sparc_local.model.info import ModelInfo


class _App(TyperGroup):
    """The one place a SparcError becomes `Error: <message>`, its remedy, and exit code 1."""

    def invoke(self, ctx: Any) -> object:  # Click's Context (Typer's own module for it is private)
        try:
            return super().invoke(ctx)
        except SparcError as err:
            report(err)
            raise typer.Exit(1) from None
        except MemoryError:
            report(out_of_memory())
            raise typer.Exit(1) from None
        except Exception as err:
            # Typer's and Click's own (usage errors, Exit, Abort) end the command as they always do
            if not isinstance(err, BrokenPipeError) and type(err).__module__.split(".")[0] not in ("typer", "click"):
                report_crash(err)
            raise


class _Command(TyperCommand):
    """Usage lines as command lines write them (`ask [OPTIONS] QUESTION`), not as Typer's
    `{QUESTION}`; an optional argument stays in brackets."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                var = param.make_metavar(ctx)
                pieces.append(var if param.required or var.startswith("[") else f"[{var}]")
            else:
                pieces += param.get_usage_pieces(ctx)
        return pieces


class _Typer(typer.Typer):
    """Every command is a _Command unless it names its class."""

    def command(self, *args, **kwargs):
        kwargs["cls"] = kwargs.get("cls") or _Command
        return super().command(*args, **kwargs)


app = _Typer(cls=_App, no_args_is_help=True, rich_markup_mode=None,
             help="Private question answering over your own files. Nothing leaves this machine.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sparc-local {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Show the version and exit.")) -> None:
    """Private question answering over your own files. Nothing leaves this machine."""


def _console(quiet: bool = False):
    from rich.console import Console

    return Console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)


def _model():
    from sparc_local.model.info import active_model

    return active_model()


@app.command()
def index(
    paths_: list[Path] = typer.Argument(None, metavar="[PATHS]...",
                                        help="Folders or files to index. Default: every folder indexed before."),
    exclude: Exclude = [],
    hidden: Hidden = False,
    no_ignore: NoIgnore = False,
    logs: Logs = False,
    threads: Threads = 0,
    normal_priority: NormalPriority = False,
    quiet: Quiet = False,
    wait: Wait = DEFAULT_WAIT,
    max_sentences: int = typer.Option(MAX_SENTENCES, "--max-sentences", metavar="N", min=1,
                                      help="Index at most N sentences of one file (a huge log is cut there)."),
) -> None:
    """Index folders (or refresh the index): only new and changed files are read again."""
    _index(IndexRequest(tuple(str(p) for p in paths_ or []),
                        IndexOptions(exclude=exclude, include_hidden=hidden, ignore_files=not no_ignore, logs=logs,
                                     max_sentences=max_sentences),
                        threads=threads or None, low_priority=not normal_priority, wait=wait), quiet=quiet)


def _index(request: IndexRequest, quiet: bool) -> None:
    """`index`: progress, skipped and cut files on stderr, the summary on stdout. While the
    watcher runs, it does the same work (and says the same)."""
    from sparc_local.app import run
    from sparc_local.cli.progress import index_progress
    from sparc_local.cli.render import shown_path

    resolved, info = run.resolve_index(request)
    console = _console()

    def skipped(p: str, reason: str) -> None:
        console.print(f"skipped {shown_path(p)}: {reason}", markup=False)

    def capped(p: str, n: int) -> None:
        console.print(f"cut {shown_path(p)}: indexed its first {n} sentences (see --max-sentences)", markup=False)

    with index_progress(console, quiet) as progress:
        report = run.index_roots(resolved, info, on_progress=progress.update, on_skipped=skipped, on_capped=capped)
    if not quiet:
        from sparc_local.cli.render import index_summary

        typer.echo(index_summary(report))


@app.command()
def ask(
    question: str = typer.Argument(..., metavar="QUESTION", callback=not_empty,
                                   help="A question in natural language."),
    top_k: int = typer.Option(DEFAULT_TOP_K, "--top-k", "-k", min=1, help="Number of answers."),
    as_json: AsJson = False,
    path: str | None = typer.Option(
        None, "--path", metavar="TEXT|GLOB",
        help="Only files whose path in the indexed folder contains TEXT or matches GLOB (a GLOB may also "
             "match the file name or the absolute path)."),
    type_: str | None = typer.Option(None, "--type", metavar="EXT", autocompletion=complete_type,
                                        help=f"Only files with this extension ({TYPE_ALIASES_HELP} count as one)."),
    since: str | None = typer.Option(None, "--since", metavar="DATE", callback=to_timestamp,
                                        help=f"Only files modified on or after DATE ({DATE_FORMS}, local time)."),
    before: str | None = typer.Option(None, "--before", metavar="DATE", callback=to_timestamp,
                                         help="Only files modified before DATE."),
    explain: bool = typer.Option(False, "--explain", help="Show each question token's contribution."),
    mode: Mode = typer.Option(
        Mode.hybrid, "--mode", case_sensitive=False,
        help="hybrid: SPARC fused with BM25 over the sentence and its context, then reranked (unless --fast); "
             "sparc or bm25: one alone."),
    fast: Fast = False,
    candidates: int | None = typer.Option(None, "--candidates", metavar="N", min=1,
                                          help="Passages of the first stage the reranker reads (default: the "
                                               "reranker's own)."),
) -> None:
    """Answer a question with the best matching sentences from your files."""
    # since/before: typed as Typer reads them, dates; to_timestamp made them seconds
    run_ask(question, top_k=top_k, as_json=as_json, path=path, type_=type_, explain=explain,
            since=cast("float | None", since), before=cast("float | None", before), mode=mode.value, fast=fast,
            candidates=candidates)


@app.command()
def status(as_json: AsJson = False) -> None:
    """Show what is indexed, with which model, and which files could not be read."""
    from sparc_local.app import run

    st = run.status()
    if as_json:
        typer.echo(json.dumps(st.to_json(), ensure_ascii=False, indent=1))
        return
    from sparc_local.cli.render import print_status

    print_status(st)


@app.command()
def forget(path: Path = typer.Argument(..., metavar="PATH", help="A file or folder to remove from the index.")) -> None:
    """Remove a file or folder and all its sentences, and scrub their text from the database file."""
    from sparc_local.app import run

    done = run.forget(ForgetRequest(str(path), wait=DEFAULT_WAIT))  # while the watcher runs, it forgets it
    unreadable = f" and {_count(done.unreadable, 'unreadable file')}" if done.unreadable else ""
    typer.echo(f"Forgot {_count(done.files, 'file')}{unreadable} under {done.path}; "
               f"`sparc-local index {path}` brings it back.")
    if not done.scrubbed:
        typer.echo("Note: another program was reading the index, so the forgotten text stays in unused space of "
                   "the database file until the next `sparc-local index` or `forget`.", err=True)


@app.command("eval")
def eval_(
    dataset: Path = typer.Argument(..., metavar="DATASET_DIR", help="A ReQA folder (corpus.jsonl.gz, queries.jsonl.gz)."),
    as_json: AsJson = False,
    k: int = typer.Option(10, "--k", min=1, help="Rank cut-off for MRR@k and R@k."),
    top_k: int = typer.Option(0, "--top-k", help="Postings kept per sentence (0: the model's K)."),
    model: Path | None = typer.Option(None, "--model", help="A model folder (default: the active model)."),
    threads: Threads = 0,
    fast: Fast = False,
    sample: int = typer.Option(0, "--sample", min=0,
                               help="Ask the reranker rows of this many questions (a seeded sample; 0: all)."),
) -> None:
    """Measure retrieval quality (MRR, recall) of SPARC and BM25 on a ReQA dataset; with a reranker
    installed, also `ask`'s answers reranked against its first stage alone, paired."""
    from sparc_local.app import run
    from sparc_local.cli.progress import bar

    request = EvalRequest(str(dataset), k=k, top_k=top_k or None, model=str(model) if model else None,
                          threads=threads or None, fast=fast, sample=sample or None)
    info = run.eval_model(request)
    with bar(_console(as_json), "encoding", run.eval_size(request)) as advance:
        result = run.evaluate(request, info, progress=advance)
    if as_json:
        typer.echo(json.dumps(result))
        return
    from sparc_local.cli.render import print_eval

    print_eval(result, k)


@app.command()
def adapt(
    steps: int = typer.Option(500, "--steps", min=1, help="Training steps (batches of sentences)."),
    batch_size: int = typer.Option(32, "--batch-size", min=1, help="Sentences per step."),
    lr: float = typer.Option(5e-5, "--lr", min=0.0, help="Adam learning rate."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sentence order and the masking."),
    max_length: int = typer.Option(64, "--max-length", min=8, help="Tokens per sentence, longer ones are cut."),
    revert: bool = typer.Option(False, "--revert", help="Go back to the model adapt started from."),
    force: bool = typer.Option(False, "--force",
                               help="Adapt even sentences close to the text the model was trained on."),
    threads: Threads = 0,
    wait: Wait = DEFAULT_WAIT,
    quiet: Quiet = False,
) -> None:
    """Adapt the model's word embeddings to your indexed sentences (SPARC §5.1), then re-encode.

    Trains on this machine (numpy, nothing leaves it) into a new model version; the old index and
    model stay in use until the re-encoded index is complete. Interrupted, it resumes on rerun.
    Sentences close to the text the model was trained on are declined (it would not help them)
    unless --force.
    """
    from sparc_local.adapt.run import AdaptOptions
    from sparc_local.adapt.run import adapt as run_adapt
    from sparc_local.adapt.run import revert as run_revert
    from sparc_local.cli.progress import adapt_progress
    from sparc_local.cli.render import format_distance, print_adapt
    from sparc_local.index.lock import WriterLock

    console = _console(quiet)
    done: AdaptResult | tuple[ModelInfo, int] | None
    try:
        if not revert:  # revert also mends a damaged adapted model
            _model()
        with WriterLock("sparc-local adapt").acquire(wait):
            if revert:
                from sparc_local import paths

                with (_open_index() if paths.db_path().exists() else contextlib.nullcontext()) as idx, \
                        adapt_progress(console, quiet) as progress:
                    done = run_revert(idx, threads=threads or None, on_progress=progress.update)
            else:
                opts = AdaptOptions(steps=steps, batch_size=batch_size, lr=lr, seed=seed, max_length=max_length,
                                    threads=threads or None, force=force)
                with _open_index() as idx, adapt_progress(console, quiet) as progress:
                    done = run_adapt(idx, opts, on_progress=progress.update,
                                     on_distance=lambda d: console.print(format_distance(d), markup=False))
    except KeyboardInterrupt:
        raise UserError("interrupted; the index and the active model are unchanged",
                        "Run the same `sparc-local adapt` again to resume from its last checkpoint.") from None
    if not quiet:
        print_adapt(done, revert=revert)


@app.command()
def demo() -> None:
    """Index the bundled sample files (in a separate demo index) and ask a sample question."""
    from sparc_local import paths
    from sparc_local.cli.render import DEMO_NEXT
    from sparc_local.sample import sample_dir, sample_questions

    with paths.using(paths.demo_dir()) as home:
        typer.echo(f"Indexing the sample files in {sample_dir()} ...")
        _index(IndexRequest((str(sample_dir()),)), quiet=False)
        question = sample_questions()[0]
        typer.echo(f'\n$ sparc-local ask "{question}" -k 3\n')
        run_ask(question, top_k=3)
    typer.echo("\n" + DEMO_NEXT.format(home=home))


@app.command()
def watch(
    paths_: list[Path] = typer.Argument(None, metavar="[PATHS]...",
                                        help="Folders or files to watch (they become indexed roots). "
                                             "Default: every folder indexed before."),
    quiet_period: float = typer.Option(WatchConfig.quiet_period, "--quiet-period", metavar="SECONDS", min=0.0,
                                       help="Index a batch of changes once no event came for this long."),
    max_delay: float = typer.Option(WatchConfig.max_delay, "--max-delay", metavar="SECONDS", min=0.0,
                                    help="Index a batch at the latest this long after its first change."),
    exclude: Exclude = [],
    hidden: Hidden = False,
    no_ignore: NoIgnore = False,
    logs: Logs = False,
    threads: Threads = WatchProcess.threads,
    normal_priority: NormalPriority = False,
    on_battery: bool = typer.Option(False, "--on-battery",
                                    help="Keep indexing on battery power (default: pause until on mains power)."),
    poll: bool = typer.Option(False, "--poll", help="Poll the folders instead of using OS events."),
    wait: Wait = WatchProcess.wait,
    daemon_: bool = typer.Option(False, "--daemon", help="Run in the background (log: watch.log in the data dir)."),
    stop: bool = typer.Option(False, "--stop", help="Stop the background watcher."),
    settings: str | None = typer.Option(None, SETTINGS, hidden=True,
                                        help="All of the above as JSON (what `--daemon` hands its process)."),
) -> None:
    """Keep the index up to date as files change (catch up first; Ctrl-C or --stop ends it)."""
    from sparc_local.watch import daemon
    from sparc_local.watch import files as watchfiles

    if stop:
        pid = daemon.stop()
        typer.echo(f"Stopped the watcher (pid {pid})." if pid else "No watcher is running.")
        return
    from sparc_local import roots as roots_

    info = _model()
    with _open_index(must_exist=False) as idx:  # even with PATHS: a damaged index is told here, not in a log
        roots = roots_.resolve(paths_ or [], idx.roots, "watch", missing_ok=True)
    config = WatchConfig(quiet_period=quiet_period, max_delay=max_delay, exclude=exclude, include_hidden=hidden,
                         ignore_files=not no_ignore, logs=logs, polling=poll)
    process = WatchProcess(threads=threads, wait=wait, low_priority=not normal_priority,
                           pause_on_battery=not on_battery)
    if settings is not None:
        from sparc_local.watch.config import from_json

        config, process = from_json(settings)
    if daemon_:
        pid = daemon.spawn(daemon.watch_args(roots if paths_ else [], config, process))
        typer.echo(f"Watching {', '.join(roots)} in the background (pid {pid}); log: {watchfiles.log_path()}\n"
                   "Stop it with `sparc-local watch --stop`.")
        return
    from sparc_local.app import run

    console = _console()
    with (console.status("starting") if console.is_terminal else contextlib.nullcontext()) as live:
        run.watch(roots, info, config, process, on_tick=(lambda st: live.update(daemon.describe(st))) if live else None)


@app.command()
def mcp(allow_changes: bool = typer.Option(False, "--allow-changes",
                                           help="Also offer the index and forget tools (default: search and "
                                                "status only).")) -> None:
    """Serve search over your files to a local AI assistant (Model Context Protocol, on stdin/stdout)."""
    from sparc_local.mcp_server import serve

    serve(allow_changes)


class ServiceAction(str, Enum):
    install = "install"
    uninstall = "uninstall"


@app.command()
def service(action: ServiceAction = typer.Argument(
        ..., metavar="ACTION", help="install (write the service file) or uninstall (remove it).")) -> None:
    """Run `watch` at login as a systemd user service (Linux) or a launchd agent (macOS)."""
    from sparc_local.app import run

    if action is ServiceAction.install:
        done = run.install_service()
        typer.echo(f"Wrote {done.path}\nEnable it with: {done.enable}")
        return
    gone = run.uninstall_service()
    typer.echo(f"Removed {gone.path}\nThen run: {gone.enable}" if gone else "No service was installed.")
