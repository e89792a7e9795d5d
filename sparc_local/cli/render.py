"""Human-readable output of ask, status, eval and adapt (the CLI's printing, kept out of app.py).

`ask` prints with plain ANSI codes and wraps its own lines: importing rich costs ~30 ms, a tenth
of a cold `ask`, so rich is imported only by the other commands' printers.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

    from sparc_local.adapt.domain import Distance
    from sparc_local.app.answers import Answer, Elsewhere
    from sparc_local.milvus.store import StoreStatus
    from sparc_local.pipeline import IndexReport
    from sparc_local.query.pathfilter import NoMatch
    from sparc_local.status import Status

CONTEXT_CHARS = 200  # context shown on each side of the answering sentence
NO_LIKELY_ANSWER = "No likely answer; the closest:"
# what `demo` ends with: its index is not the user's, and what to run next
DEMO_NEXT = ("The demo keeps its own index (in {home}); `sparc-local ask` searches yours.\n"
             "Next: index a folder of your own files, then ask it:\n"
             "  sparc-local index ~/Documents\n"
             '  sparc-local ask "your question"')


def _stdout() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def escape(text: str) -> str:
    """rich markup escaping, imported only when a rich printer runs."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _columns(stream: TextIO) -> int:
    """The terminal's width: $COLUMNS when set, as shutil and rich read it (shutil's own function
    costs its imports, ~1.5 ms of a cold `ask`), else the terminal's, else 80."""
    try:
        return max(int(os.environ["COLUMNS"]), 1)
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80


class _Style:
    """ANSI SGR codes on a terminal, as rich styles: none on TERM=dumb, no colour (bold and dim
    stay) with NO_COLOR; nothing at all when the output is not a terminal (plain text)."""

    def __init__(self, on: bool, colour: bool = True) -> None:
        self.on = on
        self.colour = colour

    @classmethod
    def of(cls, stream: TextIO) -> _Style:
        return cls(_terminal(stream) and os.environ.get("TERM") != "dumb", not os.environ.get("NO_COLOR"))

    def __call__(self, text: str, code: str | None) -> str:
        if not self.on or not code:
            return text
        if not self.colour:
            code = ";".join(c for c in code.split(";") if c in _NO_COLOUR_CODES)
        return f"\x1b[{code}m{text}\x1b[0m" if code else text


_NO_COLOUR_CODES = ("1", "2", "4")  # bold, dim, underline
_SENTENCE, _RANK, _DIM = "1;33", "1", "2"  # the answering sentence: bold yellow
_PHRASE = "1;4;33"  # the top sentence's answer phrase: underlined in it
_HEADING = "1"  # the passage's heading: bold, set apart from its text
HEADING_SEPARATOR = " — "
ELSEWHERE_SHOWN = 3  # places listed under an answer whose text repeats elsewhere; the rest are counted
PHRASE_LABEL = "phrase: "  # where the phrase cannot be underlined (plain text), a line of its own says it
_INDENT = 3  # an answer's text hangs under its rank: "1. " is 3 columns
_WORD = re.compile(r"(\s+)")

Span = tuple[str, "str | None"]  # text and its SGR code (None: unstyled)


# what an answer's `page` counts, by file type (readers store a slide, chapter or message number there)
LOCATION_KINDS = {".pptx": "slide", ".epub": "chapter", ".mbox": "message", ".eml": "message"}


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_NAMES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shown_path(path: str) -> str:
    """A path as one line of output: control characters (a newline in a file name) escaped as
    `ls -b` does (\\n, \\t, \\xNN)."""
    if not _CONTROL.search(path):
        return path
    return _CONTROL.sub(lambda m: _CONTROL_NAMES.get(m[0], f"\\x{ord(m[0]):02x}"), path)


def _where(a: Answer | Elsewhere) -> str:
    path = shown_path(a.path)
    if a.page is not None:
        kind = LOCATION_KINDS.get(Path(a.path).suffix.lower(), "page")
        return f"{path} ({kind} {a.page})"
    if a.line is not None:
        return f"{path}:{a.line}"
    return path


def _sentence(a: Answer, phrase: bool) -> list[Span]:
    """The sentence styled, its phrase (if ``phrase`` and it has one) underlined within it."""
    p = a.phrase if phrase else None
    if p is None:
        return [(a.sentence, _SENTENCE)]
    parts = [(a.sentence[:p.start], _SENTENCE), (a.sentence[p.start:p.end], _PHRASE), (a.sentence[p.end:], _SENTENCE)]
    return [part for part in parts if part[0]]


def _in_context(a: Answer, phrase: bool = False) -> list[Span]:
    """The context with the sentence styled (``_sentence``), trimmed to CONTEXT_CHARS on each side;
    its heading (a section title, the start of the context) apart: "Sandbox — The sandbox ..."."""
    ctx, start = a.context, a.offset
    end = start + len(a.sentence)
    if not ctx or ctx[start:end] != a.sentence:
        return _sentence(a, phrase)
    head: list[Span] = []
    first = 0  # where the text after the heading starts
    if a.heading and ctx.startswith(a.heading) and start >= len(a.heading):
        head = [(a.heading, _HEADING), (HEADING_SEPARATOR, None)]
        first = len(a.heading)
        while first < start and ctx[first].isspace():
            first += 1
    lo, hi = max(first, start - CONTEXT_CHARS), min(len(ctx), end + CONTEXT_CHARS)
    before = ("…" if lo > first else "") + ctx[lo:start]
    after = ctx[end:hi] + ("…" if hi < len(ctx) else "")
    return [*head, (before, None), *_sentence(a, phrase), (after, None)]


def _cells(text: str) -> int:
    """Terminal columns of ``text``: East Asian wide characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def _words(spans: list[Span]) -> list[list[Span]]:
    """The spans cut at whitespace; a word may hold pieces of several spans (``x**y**`` is one word)."""
    words: list[list[Span]] = []
    word: list[Span] = []
    for text, code in spans:
        for part in _WORD.split(text):
            if part.isspace():
                if word:
                    words.append(word)
                word = []
            elif part:
                word.append((part, code))
    if word:
        words.append(word)
    return words


def _cut(word: list[Span], room: int) -> list[list[Span]]:
    """A word wider than a line in pieces of at most ``room`` columns (at least a character each)."""
    pieces: list[list[Span]] = [[]]
    used = 0
    for text, code in word:
        for c in text:
            w = _cells(c)
            if used + w > room and used > 0:
                pieces.append([])
                used = 0
            if pieces[-1] and pieces[-1][-1][1] == code:
                pieces[-1][-1] = (pieces[-1][-1][0] + c, code)
            else:
                pieces[-1].append((c, code))
            used += w
    return pieces


def _wrap(words: list[list[Span]], width: int | None, style: _Style) -> list[str]:
    """Lines indented by _INDENT, broken between words so that none is wider than ``width``
    columns (a word wider than a line is cut); one line when ``width`` is None."""
    lines: list[list[list[Span]]] = [[]]
    used = 0
    room = None if width is None else max(width - _INDENT, 1)
    for word in words:
        w = sum(_cells(t) for t, _ in word)
        if room is not None and lines[-1] and used + 1 + w > room:
            lines.append([])
        if not lines[-1]:
            used = 0
        if room is not None and w > room:
            *whole, word = _cut(word, room)
            for piece in whole:
                lines[-1].append(piece)
                lines.append([])
            w = sum(_cells(t) for t, _ in word)
        used += w + (1 if lines[-1] else 0)
        lines[-1].append(word)
    return [" " * _INDENT + _styled_line(line, style) for line in lines]


def _styled_line(words: list[list[Span]], style: _Style) -> str:
    """Words joined by spaces, one style sequence per run of a style (a space inside it included)."""
    runs: list[list] = []
    for i, word in enumerate(words):
        if i:
            same = runs[-1][1] == word[0][1]
            runs.append([" ", runs[-1][1] if same else None])
        for text, code in word:
            runs.append([text, code])
    merged: list[list] = []
    for run in runs:
        if merged and merged[-1][1] == run[1]:
            merged[-1][0] += run[0]
        else:
            merged.append(run)
    return "".join(style(text, code) for text, code in merged)


def _elsewhere(a: Answer) -> str:
    """Where else the answer's text is said: the first few places, and how many more."""
    places = [_where(c) for c in a.elsewhere]
    more = f" and {len(places) - ELSEWHERE_SHOWN} more" if len(places) > ELSEWHERE_SHOWN else ""
    return "also in " + ", ".join(places[:ELSEWHERE_SHOWN]) + more


def _reranked(a: Answer) -> str:
    """How a reranked answer's score is made (`--explain`); the terms under it make the first stage's."""
    return (f"reranker {a.logit:.2f} + {a.score - (a.logit or 0.0):.2f} from the first stage (rank "
            f"{a.first_stage_rank}); its score {a.first_stage_score:.2f}:")


def format_answers(answers: list[Answer], explain: bool = False, style: _Style | None = None,
                   width: int | None = None) -> str:
    """What `ask` prints.  On a terminal (``width`` columns) the text of an answer wraps between
    words and hangs under its rank; elsewhere each part is one plain line, for grep and the like.
    One answer per passage, with how many of its other sentences ranked as high; a first line
    says when even the best answer is unlikely (hybrid mode, ``Answer.likely``).  The top
    answer's phrase is underlined in its sentence, unless that answer is unlikely (a phrase would
    claim an answer where there is none); without styles (plain text, TERM=dumb) a line
    under the context says it, so the context line stays the file's own text."""
    style = style or _Style(False)
    if not answers:
        return "No answer found.\n"
    unlikely = answers[0].likely is False
    lines = [NO_LIKELY_ANSWER] if unlikely else []
    for i, a in enumerate(answers):
        lines.append(f"{style(f'{a.rank}.', _RANK)} {_where(a)}  {style(f'score {a.score:.2f}', _DIM)}")
        phrase = i == 0 and not unlikely and a.phrase is not None  # no answer is likely: no phrase is one
        spans = _in_context(a, phrase=phrase)
        if width is None:  # the context as it is: one line, its own whitespace kept
            lines.append(" " * _INDENT + "".join(style(t, c) for t, c in spans))
        else:
            lines += _wrap(_words(spans), width, style)
        if phrase and a.phrase is not None and not style.on:
            lines.append(" " * _INDENT + PHRASE_LABEL + a.phrase.text)
        if a.collapsed:
            lines.append(" " * _INDENT + style(f"+{len(a.collapsed)} more from this passage", _DIM))
        if a.elsewhere:
            lines.append(" " * _INDENT + style(_elsewhere(a), _DIM))
        if explain:
            if a.reranked and a.logit is not None and a.first_stage_score is not None:
                lines += _wrap(_words([(_reranked(a), _DIM)]), width, style)
            terms = [f"{t} {v:.2f}" for t, v in a.contributions.items()] or ["no matching token"]
            parts: list[list[Span]] = [[(f"{'=' if i == 0 else '+'} {term}", _DIM)] for i, term in enumerate(terms)]
            lines += _wrap(parts, width, style)
    return "\n".join(lines) + "\n"


SUFFIXES_SHOWN = 6  # extensions a filter that keeps no file names of the indexed files; the rest are counted


def format_no_match(filters: str, m: NoMatch) -> str:
    """The line `ask` prints when its ``filters`` keep no indexed file: what the files are."""
    kinds = ", ".join(m.suffixes[:SUFFIXES_SHOWN])
    if len(m.suffixes) > SUFFIXES_SHOWN:
        kinds += f" and {len(m.suffixes) - SUFFIXES_SHOWN} more"
    first, last = (dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d") for t in (m.oldest, m.newest))
    files = f"{m.files} file" if m.files == 1 else f"{m.files} files"
    return (f"No indexed file matches {filters}; the index holds {files}{f' ({kinds})' if kinds else ''} modified "
            f"{first if first == last else f'{first} to {last}'}.")


def print_answers(answers: list[Answer], explain: bool = False, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    width = _columns(out) if _terminal(out) else None
    out.write(format_answers(answers, explain, _Style.of(out), width))
    out.flush()


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def format_store(store: StoreStatus, encoded: int) -> str:
    """The Milvus store's line of `status`: its sentences, and whether they are the index's."""
    if store.sentences is None:
        return f"{store.store}: cannot be read ({store.error})"
    step = "in step with the index" if store.in_step else \
        f"not in step with the index's {encoded} encoded sentences (docs/milvus.md)"
    return f"{store.store}: {store.sentences} sentences, {step}"


def print_status(st: Status) -> None:
    out = _stdout()
    when = (dt.datetime.fromtimestamp(st.last_update).strftime("%Y-%m-%d %H:%M:%S")
            if st.last_update else "never")
    out.print(f"Index:        {escape(st.database)}")
    if st.store is not None:
        out.print(f"Store:        {escape(format_store(st.store, st.encoded))}")
    out.print(f"Roots:        {escape(', '.join(st.roots)) or '(none)'}")
    out.print(f"Files:        {st.files}")
    pending = f" (encoded {st.encoded} of {st.sentences} sentences)" if st.encoded < st.sentences else ""
    out.print(f"Sentences:    {st.sentences}{pending}")
    out.print(f"Postings:     {st.postings}")
    out.print(f"Size:         {_size(st.db_bytes)}")
    out.print(f"Model:        {escape(st.model or '(none)')}")
    out.print(f"Active model: {escape(st.active_model or '(missing)')}")
    out.print(f"Last update:  {when}")
    w = st.watch
    if w.running:
        since = dt.datetime.fromtimestamp(w.since).strftime("%Y-%m-%d %H:%M") if w.since else "?"
        line = f"running (pid {w.pid}) since {since}, queue {w.queue}"
        if w.paused:
            line += f", paused {w.paused}"
    else:
        line = "not running"
    if w.last_error:
        line += f"; last error: {w.last_error}"
    out.print(f"Watcher:      {escape(line)}")
    if w.running and w.degraded:
        out.print(f"              degraded: {escape(w.degraded)}")
    out.print(f"Errors:       {len(st.errors)}")
    for e in st.errors:
        out.print(f"  {escape(shown_path(e['path']))}: {escape(e['reason'])}")
    if st.machine_written:
        out.print(f"Left out:     {len(st.machine_written)} machine-written (logs, data; `index --logs` indexes them)")
        for e in st.machine_written:
            out.print(f"  {escape(shown_path(e['path']))}")


def index_summary(r: IndexReport) -> str:
    """`index`'s last line: what this run read and encoded, and what the index holds no text of
    (the unreadable count is `status`'s)."""
    encoded = f"; encoded {r.encoded}" if r.encoded != r.sentences else ""
    machine = f", {r.machine_written} machine-written left out (--logs)" if r.machine_written else ""
    return (f"Indexed {r.indexed} files ({r.sentences} sentences{encoded}), {r.unchanged} unchanged, "
            f"{r.removed} removed, {r.unreadable} unreadable{machine} in {r.seconds:.1f}s.")


def print_eval(r: dict, k: int) -> None:
    out = _stdout()
    out.print(f"{r['dataset']}: {r['queries']} questions over {r['sentences']} sentences, model {r['model']}")
    out.print(f"{'':8}{f'MRR@{k}':>9}{'R@1':>8}{f'R@{k}':>8}")
    for name, label in (("hybrid", "HYBRID"), ("sparc", "SPARC"), ("bm25", "BM25"), ("bm25_words", "BM25w")):
        m = r[name]
        out.print(f"{label:8}{m[f'mrr@{k}']:>9.4f}{m['r@1']:>8.4f}{m[f'r@{k}']:>8.4f}")
    if "stages" in r:
        st = r["stages"]
        out.print(f"What `ask` shows to {st['questions']} questions, one answer per passage:")
        for name, label in (("passages", "first stage (--fast)"), ("reranked", "reranked (default)")):
            m = st[name]
            out.print(f"  {label:22}{m[f'mrr@{k}']:>9.4f}{m['r@1']:>8.4f}{m[f'r@{k}']:>8.4f}")
        p, h1 = st["paired"], st["paired_hit1"]
        out.print(f"  reranked - first stage: MRR@{k} {p['mean']:+.4f} [{p['low']:+.4f}, {p['high']:+.4f}], "
                  f"R@1 {h1['mean']:+.4f} [{h1['low']:+.4f}, {h1['high']:+.4f}] (95% paired bootstrap; "
                  f"{p['better']} better, {p['worse']} worse); p50 {st['reranked_latency_ms_p50']:.0f} ms")
    s, h = r["sparc"], r["hybrid"]
    out.print(f"SPARC: median {s['nnz_median']} postings per sentence; query latency p50 {s['latency_ms_p50']:.2f} ms, "
              f"p99 {s['latency_ms_p99']:.2f} ms (hybrid {h['latency_ms_p50']:.2f} / {h['latency_ms_p99']:.2f} ms)")
    out.print("BM25: the index's, over WordPiece tokens of the sentence and its context; "
              "BM25w: words of the sentence alone (the classic baseline)")


def format_distance(d: Distance) -> str:
    """The gate's measure (``adapt.domain``), said before adapt trains."""
    from sparc_local.adapt.domain import percent

    share = f"{percent(d.share, d.threshold)} of their words are their own (adapt needs {d.threshold:.0%})"
    if d.far:
        return f"Your sentences are far from the text the model was trained on: {share}."
    return f"Your sentences are close to the text the model was trained on: {share}; adapting anyway (--force)."


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
