"""A ReQA set of a thousand questions nobody here wrote: the FAQs Debian packages ship (issue 16).

    python benchmarks/faq_set.py [--out DIR]     # default ~/.cache/sparc-local-bench/faq
    python benchmarks/faq_set.py --only perlfaq  # one source: ~/.cache/sparc-local-bench/faq-perlfaq
    python benchmarks/faq_set.py --smoke         # tiny pages of each format (smoke.py), in a scratch folder

adapt's effect far from the training text is about the paper's size (≤ 0.5 MRR points, SPARC
Table 1), below what a desk of a few hundred hand-written questions can tell from zero. The FAQs of
documentation packages hold about a thousand questions, each written by the FAQ's authors above its
answer. This turns them into a ReQA folder for `sparc-local eval` and benchmarks/adapt_e2e.py:

- the corpus is the answers only: every question heading is left out, so a question never matches
  its own text, and adapt trains on the answers alone;
- one passage per answer (its sentences, split by the product's segmenter), and a question's answer
  sentences are all its answer's sentences: MRR@10 is the rank of the first sentence of the right
  answer;
- code (POD verbatim paragraphs, HTML <pre>) is left out: the segmenter is for prose;
- sources (SOURCES): perl-doc's perlfaq1–9 (POD =head2), debian-faq (text), R's R-FAQ (r-doc-html),
  fetchmail's FAQ, the Zsh FAQ (zsh-doc) and gitfaq (git-doc) (HTML headings, or <dt>, that hold a
  "?"). None of them is in the model's training text or in an evaluation set.

The files are the packages', never shipped here; a missing package stops the run with the
apt-get line that installs it.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from sparc_local.ingest.sentences import split_sentences

OUT = Path.home() / ".cache" / "sparc-local-bench" / "faq"
ROOT = Path("/")  # SOURCES' paths are read below it
SMOKE_SOURCES = ("perlfaq", "debian-faq", "gitfaq")  # --smoke: one source per parser
PERLFAQ = "/usr/share/perl/5.36.0/pod/perlfaq{}.pod"
SOURCES = {  # name: (package, paths, parser)
    "perlfaq": ("perl-doc", [PERLFAQ.format(n) for n in range(1, 10)], "pod"),
    "debian-faq": ("debian-faq", ["/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"], "text"),
    "curl-faq": ("libcurl4-doc", ["/usr/share/doc/libcurl4/FAQ.gz"], "text"),
    "sed-faq": ("sed", ["/usr/share/doc/sed/sedfaq.txt.gz"], "text"),
    "procmail-faq": ("procmail", ["/usr/share/doc/procmail/FAQ"], "text"),
    "screen-faq": ("screen", ["/usr/share/doc/screen/FAQ.gz"], "text"),
    "cvs-faq": ("cvs", ["/usr/share/doc/cvs/FAQ.gz"], "text"),
    "sudo-troubleshooting": ("sudo", ["/usr/share/doc/sudo/TROUBLESHOOTING.md.gz"], "text"),
    "ffmpeg-faq": ("ffmpeg-doc", ["/usr/share/doc/ffmpeg/manual/faq.html"], "html"),
    "r-faq": ("r-doc-html", ["/usr/share/doc/r-doc-html/manual/R-FAQ.html"], "html"),
    "fetchmail-faq": ("fetchmail", ["/usr/share/doc/fetchmail/fetchmail-FAQ.html"], "html"),
    "zsh-faq": ("zsh-doc", [f"/usr/share/doc/zsh-common/html/FAQ0{n}.html" for n in range(1, 7)], "html"),
    "gitfaq": ("git-doc", ["/usr/share/doc/git-doc/gitfaq.html"], "html"),
}
ANY_HEADING = {"sudo-troubleshooting", "screen-faq"}  # questions without a "?"
MIN_WORDS = 3  # an answer needs a sentence of at least this many words
_NUMBER = re.compile(r"^\s*(?:[A-Z]?\d+(?:\.\d+)*[.:)]?|Q:)\s+")  # "2.1 ", "C8. ", "3.1: ", "Q: "
_ANCHOR = re.compile(r"\s*(?:# TOC|¶)\s*$")  # ffmpeg's heading links
_WS = re.compile(r"\s+")

QA = tuple[str, list[str]]  # a question and its answer's prose paragraphs


def clean(text: str) -> str:
    return _WS.sub(" ", text.replace("\u00a0", " ")).strip()


def question_text(heading: str) -> str:
    return _ANCHOR.sub("", clean(_NUMBER.sub("", clean(heading))))


# --- POD ------------------------------------------------------------------------------------------

_POD_DOUBLE = re.compile(r"[A-Z]<<+\s+(.*?)\s+>>+", re.S)
_POD_CODE = re.compile(r"([A-Z])<([^<>]*)>")
_POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def pod_inline(text: str) -> str:
    def code(m: re.Match) -> str:
        kind, body = m.group(1), m.group(2)
        if kind in "XZ":
            return ""
        if kind == "E":
            return _POD_ESCAPES.get(body, html.unescape(f"&{body};"))
        if kind == "L":
            body = body.split("|", 1)[0] if "|" in body else body
            return body.replace('/"', " ").replace('"', "")
        return body

    text = _POD_DOUBLE.sub(lambda m: m.group(1), text)
    for _ in range(5):  # nested codes, innermost first
        text, n = _POD_CODE.subn(code, text)
        if not n:
            break
    return clean(text)


def pod_pairs(path: Path, source: str) -> Iterator[QA]:
    question, answer = None, []
    for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        if para.startswith("="):
            cmd, _, rest = para.partition(" ")
            if cmd in ("=head1", "=head2", "=head3"):
                if question is not None:
                    yield question, answer
                question, answer = (pod_inline(rest) if cmd == "=head2" else None), []
            elif cmd == "=item" and question is not None and pod_inline(rest):
                answer.append(pod_inline(rest))
        elif para[:1] in (" ", "\t"):
            continue  # verbatim: code
        elif question is not None:
            answer.append(pod_inline(para))
    if question is not None:
        yield question, answer


# --- plain text and Markdown --------------------------------------------------------------------

_TEXT = {  # source: (a heading line, a line to drop)
    "debian-faq": (r"^\d+(?:\.\d+)*\.\s", None),
    "curl-faq": (r"^ {1,2}\d+(?:\.\d+)*\.?\s+\S", None),
    "sed-faq": (r"^\d+(?:\.\d+)*\.\s", None),
    "procmail-faq": (r"^\d+\.\s", r"^\s*\*+\s*$"),
    "screen-faq": (r"^Q:\s", None),
    "cvs-faq": (r"^ {4}\d+\.\s+\S|^ {2}Category:", r"^\s*(Last modified:|\" .* \"$)"),
    "sudo-troubleshooting": (r"^#{2,6}\s", None),
}
_ANSWER_MARK = re.compile(r"^\s*(?:A:|>)\s?")


def text_pairs(path: Path, source: str) -> Iterator[QA]:
    """Headings by the source's pattern; a heading runs on to the first blank line. The body starts
    at the last occurrence of the first heading (a table of contents repeats the headings first)."""
    heading_re, drop_re = (re.compile(r) if r else None for r in _TEXT[source])
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        lines = f.read().replace("\u00a0", " ").splitlines()
    first = next(line for line in lines if heading_re.match(line))
    body = max(i for i, line in enumerate(lines) if line == first)
    question, answer, para, heading = None, [], [], False
    for line in lines[body:] + [""]:
        if heading_re.match(line):
            if question is not None:
                yield question, answer
            question, answer, para, heading = line.lstrip("#"), [], [], True
        elif drop_re and drop_re.match(line):
            continue
        elif heading:
            if line.strip():
                question += " " + line
            else:
                heading = False
        elif line.strip():
            para.append(_ANSWER_MARK.sub("", line))
        elif para:
            answer.append(clean(" ".join(para)))
            para = []
    if question is not None:
        yield question, answer


# --- HTML ----------------------------------------------------------------------------------------

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6", "dt"}
_BLOCKS = _HEADINGS | {"p", "li", "dd", "div", "pre", "blockquote", "table", "tr", "td", "th", "ul", "ol",
                       "dl", "br", "hr", "body"}


class _Blocks(HTMLParser):
    """The page as (kind, text) blocks: kind is "heading", "code" or "text"."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self.stack: list[str] = []
        self.buf: list[str] = []
        self.skip = 0

    def flush(self) -> None:
        text = clean("".join(self.buf))
        if text:
            kind = next((("heading" if t in _HEADINGS else "code") for t in reversed(self.stack)
                         if t in _HEADINGS or t == "pre"), "text")
            self.blocks.append((kind, text))
        self.buf = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style", "head"):
            self.skip += 1
        if tag in _BLOCKS:
            self.flush()
            if tag not in ("br", "hr"):
                self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head"):
            self.skip = max(0, self.skip - 1)
        if tag in _BLOCKS:
            self.flush()
            if tag in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(tag):]

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.buf.append(data)


def html_pairs(path: Path, source: str) -> Iterator[QA]:
    parser = _Blocks()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    parser.flush()
    question, answer = None, []
    for kind, text in parser.blocks:
        if kind == "heading":
            if question is not None:
                yield question, answer
            question, answer = text, []
        elif kind == "text" and question is not None:
            answer.append(text)
    if question is not None:
        yield question, answer


PARSERS = {"pod": pod_pairs, "text": text_pairs, "html": html_pairs}


def under(root: Path, path: str) -> Path:
    """A source's installed path, read below root (ROOT by default: the installed file itself)."""
    return root / Path(path).relative_to(ROOT)


def build(out: Path, only: list[str] | None = None, root: Path = ROOT) -> dict:
    sources = {name: spec for name, spec in SOURCES.items() if not only or name in only}
    missing = [pkg for pkg, paths, _ in sources.values() if not all(under(root, p).exists() for p in paths)]
    if missing:
        sys.exit(f"missing packages: apt-get install --no-install-recommends {' '.join(sorted(set(missing)))}")
    corpus, queries, seen, counts = [], [], set(), {}
    for name, (_pkg, paths, kind) in sources.items():
        kept = 0
        for path in paths:
            for heading, answer in PARSERS[kind](under(root, path), name):
                question = question_text(heading)
                if ("?" not in question and name not in ANY_HEADING) or question.lower() in seen:
                    continue
                sentences = [clean(para[a:b]) for para in answer for a, b in split_sentences(para)]
                sentences = [s for s in sentences if s]
                if not any(len(s.split()) >= MIN_WORDS for s in sentences):
                    continue
                seen.add(question.lower())
                passage = f"{name}-{kept:04d}"
                ids = [f"{passage}-{i}" for i in range(len(sentences))]
                corpus += [{"id": sid, "text": s, "passage": passage, "position": i}
                           for i, (sid, s) in enumerate(zip(ids, sentences))]
                queries.append({"id": passage, "question": question, "answers": ids})
                kept += 1
        counts[name] = kept
    out.mkdir(parents=True, exist_ok=True)
    for file, rows in (("corpus.jsonl.gz", corpus), ("queries.jsonl.gz", queries)):
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
        with gzip.GzipFile(out / file, "wb", mtime=0) as f:  # the same bytes each run: eval caches by them
            f.write(data)
    meta = {"name": out.name, "source": "FAQs shipped by Debian packages (benchmarks/faq_set.py)",
            "sentences": len(corpus), "passages": len(queries), "queries": len(queries), "per_source": counts,
            "notes": "answers only (no question heading is indexed); a question's answers are every sentence of "
                     "its answer; code left out"}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help=f"default {OUT}, or {OUT}-NAME with --only NAME")
    ap.add_argument("--only", nargs="+", choices=list(SOURCES), metavar="NAME", help="only these sources")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help=f"read the sources' files below this folder (default {ROOT}: the installed ones)")
    ap.add_argument("--smoke", action="store_true",
                    help=f"seconds: tiny pages (smoke.py) as {', '.join(SMOKE_SOURCES)}, in a scratch folder")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        pages = {path: smoke.FAQ_PAGES[kind].format(n=n) for name in SMOKE_SOURCES
                 for n, path in enumerate(SOURCES[name][1], 1) for kind in [SOURCES[name][2]]}
        args.root, args.only, args.out = smoke.write_tree(s.folder / "root", pages), list(SMOKE_SOURCES), s.folder / "faq"
    out = args.out or (OUT.with_name(f"{OUT.name}-{'-'.join(args.only)}") if args.only else OUT)
    print(json.dumps(build(out, args.only, args.root)))


if __name__ == "__main__":
    main()
