"""Training pairs from Debian's documentation packages, built mechanically (issue 31).

    python -m sparc_lab.techdata --out ~/.cache/sparc-local-train/tech [--max-doc 300] [--max-man 150] [--doc-from N]
    python -m sparc_lab.techdata --out JOINED --join BUILD BUILD...

Packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` under DEBS (never
installed). Their HTML, text, Markdown, reST, info and man pages become Sections (techparse), and
each titled section a query: its heading, raw, is the question ("faq" when it asks one, else
"heading", "option" or "term"); its answers are every sentence of its prose, split by the
product's segmenter. The corpus is every prose sentence of the unit's documents; no heading is in
it, so a question never matches itself.

The unit is the SOURCE package (all its binaries together, so no text is in two splits): one ReQA
folder per unit under OUT/pkgs/, split.json (by a hash of the name: 80/10/10), and OUT/dev and
OUT/test joined for `sparc-local eval`. KEPT_OUT and TEST_SETS are never read (guard()).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sparc_lab.techparse import (
    KINDS,
    Section,
    html_sections,
    man_sections,
    render_man,
    text_sections,
    xml_sections,
)
from sparc_lab.techpkgs import (
    CACHE,
    KEPT_OUT_PATH,
    available,
    blocked_sources,
    choose,
    fetch,
    guard,
    stable_hash,
)
from sparc_local.errors import SparcError
from sparc_local.evaluation.reqa import read_jsonl
from sparc_local.ingest.readers import norm_text
from sparc_local.ingest.sentences import split_sentences

OUT = CACHE / "tech"
SPLIT_FILE = "split.json"  # {"train": [units], "dev": [...], "test": [...]}
PACKAGES_DIR = "pkgs"  # one ReQA set per unit: PACKAGES_DIR/UNIT

GENERIC_HEADINGS = frozenset(x.strip() for x in """description;options;option;synopsis;see also;parameters;
    parameter;introduction;examples;example;name;author;authors;copyright;license;licence;bugs;
    reporting bugs;files;environment;exit status;return value;return values;returns;notes;note;history;
    overview;contents;table of contents;index;summary;usage;arguments;errors;diagnostics;availability;
    conforming to;standards;colophon;version;versions;acknowledgements;acknowledgments;credits;
    references;footnotes;related;next;previous;prev;home;up;top;navigation;search;preface;foreword;
    appendix;glossary;abstract;general;miscellaneous;misc;other;todo;changelog;changes;news;
    definition;functions;methods;classes;types;constants;variables;macros;properties;signals;members;
    details;detailed description;member function documentation;constructor & destructor documentation;
    public member functions;field documentation;enumerations;typedefs;data structures;includes;
    object hierarchy;implemented interfaces;known implementations;prerequisites;warning;caution;tip;
    important;see also:;synopsis:;description:;options:;commands;command;default;defaults;
    bugs and limitations;feedback;contact;links;resources;table of contents;license and copyright;
    copyright and license;copying;thanks;disclaimer;legal notice;revision history;document history;
    example usage;sample;samples;output;input;result;results;syntax;type;value;values;
    supported platforms;contributing;support;issues;requirements;dependencies;build;building;
    installation;install;download;about;faq;frequently asked questions;questions;answers;
    documentation;docs;manual;user manual;reference;api;api reference;getting started;quick start;
    quickstart;tutorial;exit code;exit codes;return code;security;files and directories;
    environment variables;configuration;config;see also the;author information;maintainer;maintainers""".split(";"))
MAX_ANSWER_SENTENCES = 40
MIN_WORDS = 3  # an answer needs a sentence of at least this many words
MAX_QUESTION_CHARS = 200
# Per unit: bounded so a few big manuals do not make the set (and the build) theirs.
MAX_FILES = 400
MAX_CHARS = 3_000_000
MAX_FILE_BYTES = 2_000_000
SPLIT = (("train", 80), ("dev", 90), ("test", 100))  # hash bucket (mod 100) below the bound


# ------------------------------------------------------------------------------------ documents

_SKIP_FILE = re.compile(r"(?:^|/)(?:changelog|copyright|copying|license|licence|news|authors|thanks|"
                        r"contributors|credits|history|changes|install|todo|release[-_]?notes)[^/]*$", re.I)
_LANG_DIR = re.compile(r"/(?:de|fr|es|it|ja|ru|zh_CN|zh_TW|zh|pt|pt_BR|pl|nl|sv|cs|ko|hu|fi|da|nb|tr|uk|ca|el|"
                       r"ro|sk|sl|sr|vi|id|et|lt|lv|eu|gl|he|ar|fa|bg|hr)(?:[._][\w.-]+)?/")
_ENGLISH = frozenset("the of and to is a in for that you this it with be are or as on by can".split())


def english(text: str) -> bool:
    words = re.findall(r"[a-z]+", text[:20000].lower())
    return len(words) < 30 or sum(w in _ENGLISH for w in words) >= 0.1 * len(words)


def _read(path: Path) -> str:
    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace") if data.count(0) == 0 else ""


def document_kind(rel: str) -> str | None:
    """How a file under a package root is read, None when it is not read."""
    name = rel[:-3] if rel.endswith(".gz") else rel
    base = name.rsplit("/", 1)[-1]
    if re.match(r"usr/share/man/man\d\w*/", name):
        return "man"
    if name.startswith("usr/share/info/") and re.search(r"\.info(?:-\d+)?$", name):
        return "info"
    if name.startswith("usr/share/help/C/") and base.endswith(".page"):
        return "xml"  # GNOME help (Mallard)
    if name.startswith("usr/share/doc/HTML/en/") and base.endswith(".docbook"):
        return "xml"  # KDE handbooks (DocBook)
    if "/_sources/" in name or re.search(r"(?:^|/)index-(?:all|files|\d+)\b|(?:^|/)(?:genindex|search)\.html$", name):
        return None  # Sphinx's copies of the sources, and API indexes
    if not name.startswith("usr/share/doc/") or _SKIP_FILE.search(name) or _LANG_DIR.search(name[14:]):
        return None
    if base.endswith((".html", ".htm", ".xhtml")):
        return "html"
    if base.endswith(".md") or base.endswith(".markdown"):
        return "md"
    if base.endswith(".rst"):
        return "rst"
    if base.endswith(".txt") or re.match(r"(?:README|FAQ|HOWTO|Q&A|QA|TROUBLESHOOTING|USAGE|GUIDE|"
                                         r"TIPS|HINTS|MANUAL|NOTES)[\w.+-]*$", base, re.I) and "." not in base[-5:]:
        return "txt"
    if re.search(r"(?:faq|howto|readme)", base, re.I) and base.endswith((".text", ".txt", ".asc")):
        return "txt"
    return None


def documents(roots: list[Path]) -> Iterator[tuple[str, str, list[Section]]]:
    """(relative path, title, sections) of every readable English document under the roots, in
    path order, within the unit's MAX_FILES and MAX_CHARS."""
    files = []
    for root in roots:
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not path.is_symlink() and document_kind(rel) and not KEPT_OUT_PATH.search(rel):
                files.append((rel, path))
    files.sort(key=lambda f: (document_kind(f[0]) != "man", f[0]))  # FAQs and manuals before man pages
    files.sort(key=lambda f: not re.search(r"faq|howto|q&a", f[0], re.I))
    chars = 0
    for rel, path in files[:MAX_FILES]:
        if path.stat().st_size > MAX_FILE_BYTES or chars > MAX_CHARS:
            continue
        kind = document_kind(rel)
        try:
            raw = path.read_bytes()
            raw = gzip.decompress(raw) if rel.endswith(".gz") else raw
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        if kind == "man":
            if raw.lstrip().startswith(b".so ") or len(raw) < 200:
                continue  # an alias of another page
            text = render_man(raw)
        else:
            text = raw.decode("utf-8", errors="replace") if raw.count(0) == 0 else ""
        if not text or not english(text):
            continue
        chars += len(text)
        sections = (man_sections(text) if kind == "man" else html_sections(text) if kind == "html"
                    else xml_sections(text) if kind == "xml" else text_sections(text, kind))
        title = rel.rsplit("/", 1)[-1].removesuffix(".gz")
        yield rel, title, sections


# ------------------------------------------------------------------------------------ pairs

_NUMBER = re.compile(r"^\s*(?:#+\s*)?(?:(?:Chapter|Section|Appendix)\s+)?(?:[A-Z]?\d+(?:\.\d+)*[.:)]?|[A-Z][.)]|Q\d*[:.)])\s+")


def question_text(heading: str) -> str:
    return norm_text(_NUMBER.sub("", heading)).rstrip(":").strip()


def generic(question: str) -> bool:
    q = question.lower().strip(" .:")
    return q in GENERIC_HEADINGS or not re.search(r"[a-z]{2}", q) or len(question) > MAX_QUESTION_CHARS


def sentences(paragraph: str) -> list[str]:
    return [s for s in (norm_text(paragraph[a:b]) for a, b in split_sentences(paragraph)) if s]


@dataclass
class Unit:
    """One source package's ReQA set."""

    name: str
    packages: list[str]
    corpus: list[dict]
    queries: list[dict]
    dropped: Counter


def build_unit(name: str, packages: list[str], roots: list[Path]) -> Unit:
    corpus: list[dict] = []
    by_question: dict[str, dict] = {}
    dropped: Counter = Counter()
    for d, (rel, title, sections) in enumerate(documents(roots)):
        p = 0
        for section in sections:
            ids = []
            for para in section.paragraphs:
                passage = f"{d:04d}-{p:05d}"
                p += 1
                for i, s in enumerate(sentences(para)):
                    corpus.append({"id": f"{passage}-{i}", "text": s, "passage": passage, "position": i})
                    ids.append((f"{passage}-{i}", s))
            if not section.heading:
                continue
            question = question_text(section.heading)
            if generic(question):
                dropped["generic"] += 1
            elif not any(len(s.split()) >= MIN_WORDS for _, s in ids):
                dropped["no prose answer"] += 1
            elif len(ids) > MAX_ANSWER_SENTENCES:
                dropped["answer over 40 sentences"] += 1
            elif question in by_question:
                by_question[question]["answers"] += [i for i, _ in ids]
                dropped["merged duplicate"] += 1
            else:
                by_question[question] = {"id": f"q{len(by_question):05d}", "question": question,
                                         "answers": [i for i, _ in ids], "kind": section.kind, "doc": rel,
                                         "title": title}
    # A question repeated as text (a table of contents, a summary line) leaves the corpus: the
    # question would match itself.
    asked = {q.lower() for q in by_question}
    gone = {r["id"] for r in corpus if question_text(r["text"]).lower() in asked}
    corpus = [r for r in corpus if r["id"] not in gone]
    queries = []
    for q in by_question.values():
        q["answers"] = [a for a in q["answers"] if a not in gone]
        if q["answers"]:
            queries.append(q)
    return Unit(name, packages, corpus, queries, dropped)


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(data)  # the same bytes each build


def write_set(folder: Path, corpus: list[dict], queries: list[dict], meta: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _write_jsonl(folder / "corpus.jsonl.gz", corpus)
    _write_jsonl(folder / "queries.jsonl.gz", queries)
    passages = len({r["passage"] for r in corpus})
    meta = {"name": folder.name, **meta, "sentences": len(corpus), "passages": passages, "queries": len(queries),
            "per_kind": dict(sorted(Counter(q["kind"] for q in queries).items()))}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def split_of(unit: str) -> str:
    bucket = stable_hash(unit, "split") % 100
    return next(name for name, bound in SPLIT if bucket < bound)


def drop_shared_answers(units: list[Unit]) -> int:
    """Queries whose answer text occurs in more than one unit (licences, shared boilerplate) are
    dropped everywhere: they would put the same pair in two splits."""
    def unit_keys(unit: Unit) -> list[str]:
        texts = {r["id"]: r["text"] for r in unit.corpus}  # once per unit, not once per query
        return [hashlib.sha256("\n".join(texts[i] for i in q["answers"]).encode()).hexdigest() for q in unit.queries]

    keys = {u.name: unit_keys(u) for u in units}
    owners: dict[str, set] = defaultdict(set)
    for u in units:
        for k in keys[u.name]:
            owners[k].add(u.name)
    n = 0
    for u in units:
        kept = [q for q, k in zip(u.queries, keys[u.name]) if len(owners[k]) == 1]
        n += len(u.queries) - len(kept)
        u.dropped["answer shared with another package"] += len(u.queries) - len(kept)
        u.queries = kept
    return n


def build(out: Path, max_doc: int, max_man: int, doc_from: int = 0) -> dict:
    start = time.monotonic()
    pkgs = available()
    chosen = choose(pkgs, max_doc, max_man, doc_from)
    blocked = blocked_sources(pkgs)
    roots = fetch(chosen, blocked)
    by_source: dict[str, list[str]] = defaultdict(list)
    for p in chosen:
        if p.name in roots:
            by_source[p.source].append(p.name)
    units = []
    for source in sorted(by_source):
        names = sorted(by_source[source])
        for name in names:
            guard(name, source, blocked)
        unit = build_unit(source, names, [roots[n] for n in names])
        if unit.queries:
            units.append(unit)
    shared = drop_shared_answers(units)
    split: dict[str, list[str]] = {name: [] for name, _ in SPLIT}
    for u in units:
        if not u.queries:
            continue
        write_set(out / PACKAGES_DIR / u.name, u.corpus, u.queries,
                  {"source": f"Debian packages {', '.join(u.packages)} (sparc_lab.techdata)",
                   "packages": u.packages, "dropped_queries": dict(sorted(u.dropped.items()))})
        split[split_of(u.name)].append(u.name)
    (out / SPLIT_FILE).write_text(json.dumps(split, indent=1) + "\n")
    summary = {"packages_chosen": len(chosen), "packages_fetched": len(roots), "units": sum(map(len, split.values())),
               "dropped_shared": shared, "splits": {}}
    for name in ("dev", "test"):
        corpus, queries = [], []
        for u in units:
            if u.name in split[name]:
                corpus += [{**r, "id": f"{u.name}:{r['id']}", "passage": f"{u.name}:{r['passage']}"} for r in u.corpus]
                queries += [{**q, "id": f"{u.name}:{q['id']}", "answers": [f"{u.name}:{a}" for a in q["answers"]]}
                            for q in u.queries]
        write_set(out / name, corpus, queries, {"source": f"the {name} packages of split.json", "packages": split[name]})
    for name in split:
        members = [u for u in units if u.name in split[name]]
        summary["splits"][name] = {
            "units": len(members), "sentences": sum(len(u.corpus) for u in members),
            "queries": sum(len(u.queries) for u in members),
            "per_kind": dict(sorted(Counter(q["kind"] for u in members for q in u.queries).items()))}
    summary["seconds"] = round(time.monotonic() - start)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def join(out: Path, parts: list[Path]) -> dict:
    """One technical set from several builds (an earlier build and its extension by --doc-from):
    split.json joined, every unit linked under OUT/PACKAGES_DIR. A unit name in two parts keeps the
    first part's. As in drop_shared_answers, a query whose answer text another unit also holds is
    dropped; such a unit is written again rather than linked, and one left without queries is left
    out. No joined dev/test set is written."""
    owners: dict[str, set[str]] = defaultdict(set)
    units: dict[str, tuple[str, Path, list[str]]] = {}  # unit -> (split, folder, answer keys)
    for part in parts:
        for name, members in json.loads((part / SPLIT_FILE).read_text()).items():
            for unit in members:
                if unit in units:
                    continue
                folder = part / PACKAGES_DIR / unit
                texts = {r["id"]: r["text"] for r in read_jsonl(folder / "corpus.jsonl.gz")}
                keys = [hashlib.sha256("\n".join(texts[i] for i in q["answers"]).encode()).hexdigest()
                        for q in read_jsonl(folder / "queries.jsonl.gz")]
                for k in keys:
                    owners[k].add(unit)
                units[unit] = (name, folder, keys)
    (out / PACKAGES_DIR).mkdir(parents=True, exist_ok=True)
    split: dict[str, list[str]] = {name: [] for name, _ in SPLIT}
    dropped = 0
    for unit, (name, folder, keys) in units.items():
        keep = [len(owners[k]) == 1 for k in keys]
        dropped += keep.count(False)
        if not any(keep):
            continue  # as build(): a unit without queries is left out
        split[name].append(unit)
        target = out / PACKAGES_DIR / unit
        if target.exists() or target.is_symlink():
            continue
        if all(keep):
            target.symlink_to(folder.resolve())
            continue
        queries = [q for q, k in zip(read_jsonl(folder / "queries.jsonl.gz"), keep) if k]
        meta = json.loads((folder / "meta.json").read_text())
        kept = {k: meta[k] for k in ("source", "packages", "dropped_queries")}
        write_set(target, read_jsonl(folder / "corpus.jsonl.gz"), queries, kept)
    (out / SPLIT_FILE).write_text(json.dumps(split, indent=1) + "\n")
    summary = {"parts": [str(p) for p in parts], "units": sum(map(len, split.values())), "dropped_shared": dropped}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def samples(out: Path, per_kind: int = 15, seed: int = 0) -> dict[str, list[tuple[str, str, str]]]:
    """per_kind random (unit, question, first answer sentences) of each kind, for reading."""
    rng = random.Random(seed)
    pool: dict[str, list] = defaultdict(list)
    for folder in sorted((out / PACKAGES_DIR).iterdir()):
        with gzip.open(folder / "corpus.jsonl.gz", "rt") as f:
            texts = {r["id"]: r["text"] for r in map(json.loads, f)}
        with gzip.open(folder / "queries.jsonl.gz", "rt") as f:
            for q in map(json.loads, f):
                pool[q["kind"]].append((folder.name, q["question"], " ".join(texts[a] for a in q["answers"][:2])))
    return {k: rng.sample(v, min(per_kind, len(v))) for k, v in sorted(pool.items()) if k in KINDS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--max-doc", type=int, default=300, help="documentation packages to use")
    ap.add_argument("--max-man", type=int, default=150, help="program packages to use for their man pages")
    ap.add_argument("--doc-from", type=int, default=0,
                    help="skip the first documentation packages (those an earlier build with --max-doc N used)")
    ap.add_argument("--join", type=Path, nargs="+", metavar="BUILD", help="join these builds into --out")
    ap.add_argument("--samples", action="store_true", help="print 15 random pairs of each kind from --out")
    args = ap.parse_args()
    if args.samples:
        print(json.dumps(samples(args.out), indent=1, ensure_ascii=False))
        return
    try:
        if args.join:
            print(json.dumps(join(args.out, args.join), indent=1))
            return
        print(json.dumps(build(args.out, args.max_doc, args.max_man, args.doc_from), indent=1))
    except SparcError as e:
        sys.exit(f"Error: {e}\n{e.remedy}")


if __name__ == "__main__":
    main()
