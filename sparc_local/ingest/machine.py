"""Text that a program wrote for programs: logs and data dumps are not documents.

A question is answered from what a person wrote. A system log, a CSV export or a JSON dump saved
as .txt holds a few words among numbers, ids and times; indexed, it floods the index (one 30 MB
log made most of a home's postings) and its lines answer questions about anything. ``verdict``
reads the start of a text file and says why it looks machine-written, or None. Each rule is a
share of the sample's lines or tokens, set on real logs against real prose: this machine's logs
and the plain text files of /usr/share/doc (benchmarks/machine_text.py prints both sides).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from sparc_local.ingest import plaintext
from sparc_local.ingest.extract import reader_for
from sparc_local.ingest.readers import ExtractError, read_text

SAMPLE_CHARS = 65_536  # the start of the file that is judged
MIN_LINES = 20  # fewer non-empty lines: too little to tell, it is indexed
# a time stamp near the start of a line: ISO dates, syslog's "Jan  2 03:04:05", Apache's
# "[02/Jan/2024:", dmesg's "[  12.345678]", a bare clock or an epoch in seconds
_STAMP = re.compile(
    r"^.{0,32}?(?:\d{4}[-/.]\d\d[-/.]\d\d[T ,_]?\d\d:\d\d"
    r"|\b[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
    r"|\[\d\d/[A-Z][a-z]{2}/\d{4}:"
    r"|^\[\s*\d+\.\d+\]"
    r"|^\d\d:\d\d:\d\d"
    r"|^\d{10}(?:\.\d+)?\b)"
)
_AROUND = "\"'“”‘’()[]{}<>*_`.,;:!?"  # stripped from a token before it is judged a word
_INNER = str.maketrans("", "", "'’-")  # "don't", "e-mail": still words
STAMPED = 0.6  # lines with a time stamp: a log
FIELDS = 0.8  # lines with the same number (2 or more) of the same separator: a table
FIELD_WORDS = 3  # ... whose fields hold this many words or fewer, on average
JSON_LINES = 0.8  # lines that open with { or [: JSON records
WORDS = 0.35  # tokens that read as words, below which it is data (ids, hex, numbers)
_JSON_RECORD = re.compile(r'\s*(?:\{\s*"|\[\s*[\[{"\d-])')  # {"key" or ["x", [1, [{: not "[ ] todo"
LONG_LINE = 1000  # a median line this long with few spaces: minified data
SKIPPED = "looks machine-written"  # how a file's recorded reason begins (``is_skipped``)
REMEDY = "`sparc-local index --logs` indexes it"


def sniff(path: Path) -> str | None:
    """The reason to record for a plain text file (.txt, a README) that looks machine-written,
    else None; other formats are documents by their kind. Reads SAMPLE_CHARS of it; a file it
    cannot read is left to ``extract``, which says why."""
    if reader_for(path.name) is not plaintext.plain_text:
        return None
    try:
        why = verdict(read_text(path, SAMPLE_CHARS)[0])
    except (OSError, ExtractError):
        return None
    return f"{SKIPPED} ({why}); {REMEDY}" if why else None


def is_skipped(reason: str | None) -> bool:
    """Whether a file's recorded reason is ``sniff``'s, not a failure to read it."""
    return reason is not None and reason.startswith(SKIPPED)


def _is_word(token: str) -> bool:
    """Letters of any script, two or more, once punctuation around it is stripped ("(see", "시에")."""
    core = token.strip(_AROUND)
    return len(core) >= 2 and core.translate(_INNER).isalpha()


def verdict(text: str) -> str | None:
    """Why the start of ``text`` looks machine-written (a one-line reason), or None for prose."""
    lines = [line for line in text[:SAMPLE_CHARS].splitlines() if line.strip()]
    if len(text) >= SAMPLE_CHARS:
        lines = lines[:-1]  # cut mid-line
    n = len(lines)
    if n < MIN_LINES:
        return None
    stamped = sum(1 for line in lines if _STAMP.match(line)) / n
    if stamped >= STAMPED:
        return f"a log: {stamped:.0%} of its lines begin with a time"
    jsonish = sum(1 for line in lines if _JSON_RECORD.match(line)) / n
    if jsonish >= JSON_LINES:
        return f"data: {jsonish:.0%} of its lines are JSON records"
    tokens = " ".join(lines).split()
    for sep, name in ((",", "comma"), ("\t", "tab"), (";", "semicolon"), ("|", "bar")):
        counts = Counter(line.strip().count(sep) for line in lines)  # not indentation
        seps, share = counts.most_common(1)[0]
        # short fields: prose has as many commas on each line as a table only by chance, with phrases between
        if seps >= 2 and share / n >= FIELDS and len(tokens) <= FIELD_WORDS * (seps + 1) * n:
            return f"a table: {share / n:.0%} of its lines hold {seps + 1} {name}-separated fields"
    words = sum(1 for t in tokens if _is_word(t)) / max(len(tokens), 1)
    if words < WORDS:
        return f"data: only {words:.0%} of its tokens are words"
    lengths = sorted(len(line) for line in lines)
    median = lengths[n // 2]
    if median >= LONG_LINE and len(tokens) < n * median / 40:
        return f"data: its lines are {median} characters long, with few spaces"
    return None
