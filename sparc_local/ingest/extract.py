"""Find the user's documents and turn them into paragraphs (blocks) with page/line for citations.

Every failure on a single file surfaces as ExtractError with a one-line reason, so the indexer can
report "skipped: <file>: <reason>" and go on instead of dying on one bad file among thousands.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sparc_local.ingest import mail, odt, pdf, plaintext, readers, zipdocs
from sparc_local.ingest.readers import ExtractError, RawBlock, Read, norm_text, one_line

if TYPE_CHECKING:
    from sparc_local.ingest.ignore import Rules

# The one place a file type is tied to its reader: (path, max_chars, max_unpacked) -> Read.
READERS: dict[str, Callable[[Path, int, int], Read]] = {
    ".txt": plaintext.plain_text,
    ".md": partial(plaintext.plain_text, markup="md"),
    ".rst": partial(plaintext.plain_text, markup="rst"),
    ".html": readers.html_file,
    ".htm": readers.html_file,
    ".pdf": pdf.pdf_blocks,
    ".docx": zipdocs.docx_blocks,
    ".odt": odt.odt_blocks,
    ".pptx": zipdocs.pptx_blocks,
    ".epub": zipdocs.epub_blocks,
    ".eml": mail.eml_blocks,
    ".mbox": mail.mbox_blocks,
}
SUPPORTED = frozenset(READERS)
# Text files known by name, without an extension: a project's README, NEWS, INSTALL... (any case)
TEXT_NAMES = frozenset("""readme news changelog changes history install todo authors thanks faq notes bugs
    hacking contributing""".split())
MAX_UNPACKED = 200_000_000  # bytes a DOCX, ODT, PPTX or EPUB may unpack to; real documents are far below this
MAX_CHARS = 20_000_000  # characters read from one file: bounds memory whatever its size
# A paragraph (the context its sentences are encoded and BM25-scored with) holds at most this many
# characters: what a sentence costs the index and the encoder is then bounded, whatever the file
# (a log without blank lines was one paragraph of 20 M characters). Above the 99.9th percentile of
# real documentation's paragraphs (benchmarks/paragraph_size.py); a longer one is cut at lines.
MAX_PARAGRAPH_CHARS = 2000
VANISHED = "file vanished while reading"

OnError = Callable[[Path, str], None]


def path_key(path: str | os.PathLike) -> str:
    """The text a path is stored and shown as: a name that is not valid UTF-8 (bytes decoded with
    surrogateescape) gets each stray byte as `\\xNN`, like `ls -b`, since SQLite text and the
    terminal need valid UTF-8."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)
        text = text.encode("utf-8", "replace").decode("utf-8")  # any other lone surrogate
    return text


@dataclass(frozen=True)
class Block:
    """A paragraph. `start` is its offset in document_text(blocks) (blocks joined by blank lines).

    page is the 1-based location a reader can name: the page (PDF, and ODT when its layout is
    saved), the slide (PPTX), the spine document (EPUB, chapter by chapter) or the message (mbox;
    1 for .eml). line is the 1-based line where the paragraph starts (text and HTML).
    line_starts holds, for text files, the offset in `text` where each following source line
    begins, so a sentence can be cited by its own line. truncated marks the last block of a
    document that was cut at max_chars. heads holds the end offsets of the context that opens
    the block (its section's headings, its table's header cells): context of the block's
    sentences and never a sentence (sentences.segment); a heading that heads nothing is a block
    of its own whose head ends at its end, one sentence.
    """

    text: str
    page: int | None
    line: int | None
    start: int = 0
    line_starts: tuple[int, ...] = field(default=(), repr=False)
    truncated: bool = field(default=False, repr=False)
    heads: tuple[int, ...] = field(default=(), repr=False)


def document_text(blocks: Iterable[Block]) -> str:
    """The text that Block.start and Sentence.start/end index into."""
    return "\n\n".join(b.text for b in blocks)


def reader_for(name: str) -> Callable[[Path, int, int], Read] | None:
    """The reader of a file name: by its extension, or a text file known by name (TEXT_NAMES)."""
    stem, suffix = os.path.splitext(name)
    if suffix:
        return READERS.get(suffix.lower())
    return plaintext.plain_text if stem.lower() in TEXT_NAMES else None


def supported(path: str | os.PathLike) -> bool:
    """Whether `index` reads this file (``reader_for``): the one test for the walk and the watcher."""
    return reader_for(os.path.basename(os.fspath(path))) is not None


# ---------------------------------------------------------------------------------- walking


def identity(path: Path | os.DirEntry[str]) -> tuple[int, int] | None:
    """The real file behind a path (symlinks followed), to visit each folder and file once."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def iter_files(
    roots: list[Path],
    exclude: Iterable[str] = (),
    include_hidden: bool = False,
    on_error: OnError | None = None,
    *,
    ignore_files: bool = True,
    rules: Rules | None = None,
    base: Path | None = None,
) -> Iterator[Path]:
    """Supported files under roots, sorted, each real file once, never looping on symlinks.

    What is skipped is ``ignore.Rules.skips``'s decision (``rules``, else one made of exclude,
    include_hidden and ignore_files): hidden names, exclude's fnmatch globs tried on the name and
    on the path relative to its root ("*.log", "build/*"), and what .gitignore/.ignore files
    list; a skipped folder is not entered. A root the user named is never skipped by an ignore
    file. ``base``: walk the roots (folders inside it) with the rules of that root, as a walk of
    it would (the watcher rescanning one folder). Unreadable folders, broken links and explicit
    files of unsupported type are skipped and reported to on_error(path, reason).
    Raises ExtractError at once if a root does not exist.
    """
    from sparc_local.ingest.ignore import Rules

    roots = [Path(r).expanduser() for r in roots]
    for root in roots:
        if not root.exists():
            raise ExtractError(f"{root}: no such file or folder")
    rules = rules or Rules(exclude, include_hidden, ignore_files)
    return _walk(roots, rules, on_error or (lambda p, r: None), base)


def _walk(roots: list[Path], rules: Rules, on_error: OnError, base: Path | None) -> Iterator[Path]:
    seen: set[tuple[int, int] | None] = set()  # real files yielded
    seen_dirs: set[tuple[int, int] | None] = set()  # real folders entered
    for root in roots:
        if not root.is_dir():
            ident = identity(root)
            if not supported(root):
                on_error(root, f"unsupported file type '{root.suffix}'")
            elif ident not in seen and not rules.excluded(root.name, root.name):
                seen.add(ident)
                yield root
            continue
        if identity(root) in seen_dirs:
            continue
        seen_dirs.add(identity(root))
        top = os.fspath(base or root)
        stack: list[Path] = [root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except PermissionError:
                on_error(folder, "permission denied")
                continue
            except OSError as e:
                on_error(folder, e.strerror or type(e).__name__)
                continue
            subdirs: list[Path] = []
            where = os.fspath(folder)
            for entry in entries:
                path = Path(entry.path)
                try:
                    is_dir = entry.is_dir()  # follows symlinks
                    is_file = not is_dir and entry.is_file()
                except OSError as err:
                    if err.errno == errno.ELOOP:
                        if not rules.skips(top, where, entry.name, False):
                            on_error(path, "symlink loop")
                        continue
                    is_dir = is_file = False
                if (is_file and not supported(entry.name)) or rules.skips(top, where, entry.name, is_dir):
                    continue
                if is_dir:
                    ident = identity(entry)
                    if ident is not None and ident not in seen_dirs:
                        seen_dirs.add(ident)
                        subdirs.append(path)
                elif is_file:
                    ident = identity(entry)
                    if ident is not None and ident not in seen:
                        seen.add(ident)
                        yield path
                elif entry.is_symlink():
                    on_error(path, "broken symlink")
                elif supported(entry.name):
                    on_error(path, "not a regular file")  # a FIFO or device: reading could block
            stack.extend(reversed(subdirs))


# ---------------------------------------------------------------------------------- dispatch


# A paragraph that is one question ("(1) How do I create a field?", "Q: Why?", "2.3. How...?"):
# in an FAQ it heads its answer, as a title does.
_ENUMERATION = re.compile(r"^(?:\(?\d+(?:\.\d+)*[.):]?|\(?[A-Za-z][.)]|Q\d*[.:)]?)\s+")
_QUESTION_END = re.compile(r"\?[\"'”’)\]]*$")
_INNER_END = re.compile(r"[.!?][\"'”’)\]]*\s")
QUESTION_CHARS = 300  # longer, it is prose that ends with a question, not an FAQ's question line


def is_question(text: str) -> bool:
    """One sentence that asks (after an enumeration such as "(1)" or "Q:")."""
    if len(text) > QUESTION_CHARS or not _QUESTION_END.search(text):
        return False
    return not _INNER_END.search(_ENUMERATION.sub("", text, count=1))


_Part = tuple[str, "int | None", "int | None", tuple[int, ...]]  # text, page, line, line_starts
_Joined = tuple[str, "int | None", "int | None", tuple[int, ...], tuple[int, ...]]  # ... and heads


def _prefixed(context: str, block: _Joined) -> _Joined:
    """A block with context-only text in front (its section's headings, its table's header): its
    end is the block's heads; line and line_starts stay those of the block's own text."""
    if not context:
        return block
    text, page, line, starts, heads = block
    n = len(context) + 1
    return (f"{context} {text}", page, line, tuple(n + s for s in starts),
            (len(context), *(n + h for h in heads)))


def _join_headings(raw: Iterable[RawBlock]) -> Iterator[_Joined]:
    """Normalised non-empty blocks, the headings made their section's context (issue 32): a
    heading (a title, or an FAQ's question line) is joined to the block it heads, and carried in
    front of the following blocks of its section (until the next heading, on the same page);
    its end is in heads, and sentences.segment makes no sentence of it. Headings in a row head
    the next block together, across a page break too (a title page heads the first page of
    text): a title is context, never an answer (issue 45). A question heads only a block that is
    no heading or question (a list of questions is a table of contents): followed by another, it
    stands alone, a sentence, headed by the titles before it. Titles that head nothing at the end
    of a document are dropped, unless the document holds nothing else.
    (text, page, line, line_starts, heads)."""
    pending: list[tuple[_Part, bool]] = []  # headings waiting for their block; is it a question
    section = ""  # the heading text of the current section
    section_page: int | None = None
    any_block = False

    def questions() -> Iterator[_Joined]:
        """The pending questions, each a sentence headed by the titles before it; the titles
        after the last question stay pending."""
        nonlocal pending
        titles: list[str] = []
        last = max((i for i, (_, question) in enumerate(pending) if question), default=-1)
        for (text, page, line, starts), question in pending[:last + 1]:
            if question:  # a sentence: after its titles (their end in heads), else the whole block
                yield _prefixed(" ".join(titles), (text, page, line, starts, () if titles else (len(text),)))
                titles = []
            else:
                titles.append(text)
        pending = pending[last + 1:]

    for item in raw:
        text, page, line, line_starts = norm_text(item[0]), item[1], item[2], tuple(item[3])
        if not text:
            continue
        heading = len(item) > 4 and bool(item[4])
        context = norm_text(item[5]) if len(item) > 5 else ""
        question = not heading and not context and is_question(text)
        if section_page != page:
            section = ""
        if heading or question:
            if pending and pending[-1][1]:
                section = ""
                for block in questions():
                    any_block = True
                    yield block
            pending.append(((text, page, line, line_starts), question))
            continue
        if pending:
            section, section_page = " ".join(p[0] for p, _ in pending), page
            pending.clear()
        any_block = True
        yield _prefixed(" ".join(filter(None, (section, context))), (text, page, line, line_starts, ()))
    for block in questions():
        any_block = True
        yield block
    if not any_block:  # a document of titles only: they are all it says
        for (text, page, line, starts), _ in pending:
            yield text, page, line, starts, (len(text),)


_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*\s+")
_HEAD_KEPT = 200  # a heading this long or shorter is carried in front of each piece of a cut paragraph


def _cut_at(text: str, start: int, limit: int, line_starts: tuple[int, ...]) -> int:
    """Where the piece that starts at ``start`` ends: the last line start that keeps it within
    ``limit`` (and not under a quarter of it), else the last sentence end, else the last space."""
    lo, hi = start + limit // 4, start + limit
    i = bisect_right(line_starts, hi) - 1
    if i >= 0 and line_starts[i] > lo:
        return line_starts[i]
    ends = [m.end() for m in _SENTENCE_END.finditer(text, lo, hi)]
    if ends:
        return ends[-1]
    space = text.rfind(" ", lo, hi)
    return space + 1 if space > lo else hi


def _bounded(block: _Joined, limit: int = MAX_PARAGRAPH_CHARS) -> Iterator[_Joined]:
    """A block of at most ``limit`` characters, or its pieces: lines kept whole where they can be
    (a log, a list without blank lines), each piece headed by the block's heading when it is short
    (a longer one heads the first piece alone)."""
    text, page, line, starts, heads = block
    if len(text) <= limit:
        yield block
        return
    head = text[:heads[-1]] if heads and heads[-1] < len(text) else ""
    if len(head) > limit // 2:
        head, heads = "", ()  # not a heading: text to cut like the rest
    carried = head if len(head) <= _HEAD_KEPT else ""
    pos = len(head) + 1 if head else 0
    lead, lead_heads = text[:pos], heads if head else ()
    while pos < len(text):
        room = limit - len(lead)
        end = len(text) if len(text) - pos <= room else _cut_at(text, pos, room, starts)
        piece = text[pos:end].rstrip()
        if piece:
            own_starts = tuple(s - pos + len(lead) for s in starts if pos < s < pos + len(piece))
            yield lead + piece, page, None if line is None else line + bisect_right(starts, pos), own_starts, lead_heads
        lead, lead_heads = (carried + " ", (len(carried),)) if carried else ("", ())
        pos = end
        while pos < len(text) and text[pos] == " ":
            pos += 1


def _finish(raw: Iterable[RawBlock], max_chars: int, cut: bool = False) -> list[Block]:
    """Normalise, drop empty blocks, join headings to what they head, assign offsets, stop at
    max_chars. cut: the reader already stopped early (the last block is marked truncated either
    way)."""
    blocks: list[Block] = []
    pos = 0
    for text, page, line, line_starts, heads in (p for b in _join_headings(raw) for p in _bounded(b)):
        room = max_chars - pos
        if room <= 0:
            cut = True
            break
        if len(text) > room:
            text = text[:room].rstrip()
            line_starts = tuple(s for s in line_starts if s < len(text))
            heads = tuple(h for h in heads if h < len(text))
            cut = True
        blocks.append(Block(text, page, line, pos, line_starts, heads=heads))
        pos += len(text) + 2
    if cut and blocks:
        last = blocks[-1]
        blocks[-1] = Block(last.text, last.page, last.line, last.start, last.line_starts, truncated=True,
                           heads=last.heads)
    return blocks


def extract(
    path: Path, max_chars: int = MAX_CHARS, max_unpacked: int = MAX_UNPACKED
) -> list[Block]:
    """Paragraphs of a supported file (see Block); raises ExtractError with a one-line reason."""
    path = Path(path)
    reader = reader_for(path.name)
    if reader is None:
        raise ExtractError(f"unsupported file type '{path.suffix}'")
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise ExtractError("is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise ExtractError("not a regular file")  # a FIFO would block forever
        raw, cut = reader(path, max_chars, max_unpacked)
    except PermissionError as e:
        raise ExtractError("permission denied") from e
    except FileNotFoundError as e:
        raise ExtractError(VANISHED) from e
    except IsADirectoryError as e:
        raise ExtractError("is a folder, not a file") from e
    except OSError as e:
        raise ExtractError(f"read error ({e.strerror or one_line(e)})") from e
    except MemoryError as e:
        raise ExtractError("file too large to extract") from e
    return _finish(raw, max_chars, cut)
