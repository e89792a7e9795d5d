"""Human-readable output of ask, status and eval (the CLI's printing, kept out of cli.py).

`ask` prints with plain ANSI codes: importing rich costs ~30 ms, a tenth of a cold `ask`, so
rich is imported only by the other commands' printers.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

    from sparc_local.ask import Answer

CONTEXT_CHARS = 200  # context shown on each side of the answering sentence


def _stdout() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def escape(text: str) -> str:
    """rich markup escaping, imported only when a rich printer runs."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _styled(stream: TextIO) -> bool:
    """Colour like rich does: only on a terminal, never with NO_COLOR or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Style:
    """ANSI SGR codes, or nothing when the output is not a terminal."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text


def _where(a: Answer) -> str:
    if a.page is not None:
        return f"{a.path} (page {a.page})"
    if a.line is not None:
        return f"{a.path}:{a.line}"
    return a.path


def _in_context(a: Answer, style: _Style) -> str:
    """The context with the sentence highlighted, trimmed to CONTEXT_CHARS on each side.

    Without a terminal (a pipe, a file) styles vanish, so the sentence is marked with ** instead.
    """
    ctx, start = a.context, a.offset
    end = start + len(a.sentence)
    mark = style(a.sentence, "1;33") if style.on else f"**{a.sentence}**"
    if not ctx or ctx[start:end] != a.sentence:
        return mark
    lo, hi = max(0, start - CONTEXT_CHARS), min(len(ctx), end + CONTEXT_CHARS)
    before = ("…" if lo > 0 else "") + ctx[lo:start]
    after = ctx[end:hi] + ("…" if hi < len(ctx) else "")
    return f"{before}{mark}{after}"


def print_answers(answers: list[Answer], explain: bool = False, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    style = _Style(_styled(out))
    if not answers:
        out.write("No answer found.\n")
        return
    lines = []
    for a in answers:
        lines.append(f"{style(f'{a.rank}.', '1')} {_where(a)}  {style(f'score {a.score:.2f}', '2')}")
        lines.append(f"   {_in_context(a, style)}")
        if explain:
            parts = " + ".join(f"{t} {v:.2f}" for t, v in a.contributions.items())
            lines.append("   " + style(f"= {parts or 'no matching token'}", "2"))
    out.write("\n".join(lines) + "\n")
    out.flush()


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def print_status(st: dict, model: str | None) -> None:
    out = _stdout()
    when = (dt.datetime.fromtimestamp(st["last_update"]).strftime("%Y-%m-%d %H:%M:%S")
            if st.get("last_update") else "never")
    out.print(f"Index:        {escape(st['database'])}")
    out.print(f"Roots:        {escape(', '.join(st['roots'])) or '(none)'}")
    out.print(f"Files:        {st['files']}")
    out.print(f"Sentences:    {st['sentences']}")
    out.print(f"Postings:     {st['postings']}")
    out.print(f"Size:         {_size(st['db_bytes'])}")
    out.print(f"Model:        {escape(model or '(none)')}")
    out.print(f"Active model: {escape(st.get('active_model') or '(missing)')}")
    out.print(f"Last update:  {when}")
    w = st.get("watch") or {}
    if w.get("running"):
        since = dt.datetime.fromtimestamp(w["since"]).strftime("%Y-%m-%d %H:%M") if w.get("since") else "?"
        line = f"running (pid {w['pid']}) since {since}, queue {w['queue']}"
        if w.get("paused"):
            line += f", paused {w['paused']}"
    else:
        line = "not running"
    if w.get("last_error"):
        line += f"; last error: {w['last_error']}"
    out.print(f"Watcher:      {escape(line)}")
    out.print(f"Errors:       {len(st['errors'])}")
    for e in st["errors"]:
        out.print(f"  {escape(e['path'])}: {escape(e['reason'])}")


def print_eval(r: dict, k: int) -> None:
    out = _stdout()
    out.print(f"{r['dataset']}: {r['queries']} questions over {r['sentences']} sentences, model {r['model']}")
    out.print(f"{'':8}{f'MRR@{k}':>9}{'R@1':>8}{f'R@{k}':>8}")
    for name in ("sparc", "bm25"):
        m = r[name]
        out.print(f"{name.upper():8}{m[f'mrr@{k}']:>9.4f}{m['r@1']:>8.4f}{m[f'r@{k}']:>8.4f}")
    s = r["sparc"]
    out.print(f"SPARC: median {s['nnz_median']} postings per sentence; "
              f"query latency p50 {s['latency_ms_p50']:.2f} ms, p99 {s['latency_ms_p99']:.2f} ms")


class AdaptProgress:
    """`adapt`'s progress on stderr: a bar per phase (training with its loss, re-encoding), with ETA.

    `update(phase, done, total, loss)` is the library's on_progress callback.
    """

    _LABELS = {"train": "training", "export": "writing the model", "encode": "re-encoding"}

    def __init__(self, console: Console, enabled: bool = True) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[loss]}"), TimeRemainingColumn(), console=console,
                                 disable=not enabled, transient=True)
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> "AdaptProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, phase: str, done: int, total: int, loss: float | None) -> None:
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(self._LABELS.get(phase, phase), total=total, completed=done,
                                                       loss="")
        self.progress.update(self.tasks[phase], completed=done, total=total,
                             **({"loss": f"loss {loss:.3f}"} if loss is not None else {}))


def print_adapt(result, revert: bool = False) -> None:
    """The outcome of `adapt` (an AdaptResult) or of `adapt --revert` ((model, n) or None)."""
    out = _stdout()
    if revert:
        if result is None:
            out.print("The active model is not an adapted one: nothing to revert.")
            return
        info, n = result
        out.print(f"Reverted to {escape(info.id)}; re-encoded {n} sentences.")
        return
    r = result
    loss = f", MLM loss {r.first_loss:.3f} → {r.last_loss:.3f}" if r.first_loss is not None else ""
    resumed = f" (resumed at step {r.resumed_from})" if r.resumed_from else ""
    out.print(f"Adapted {escape(r.base.name)} to {r.corpus} sentences in {r.steps} steps{resumed}{loss}, "
              f"{r.train_seconds:.0f}s; re-encoded {r.encoded} sentences in {r.encode_seconds:.0f}s.")
    out.print(f"Active model: {escape(r.model.id)} ({escape(str(r.model.path))})")
    out.print("`sparc-local adapt --revert` goes back to the original model.")
