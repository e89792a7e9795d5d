"""How well does sparc-local answer questions on real documents nobody here wrote? (issue 17)

    python benchmarks/desk.py                 # build the desk, index it from scratch, ask every question
    python benchmarks/desk.py --tree OTHER    # the same with another checkout's code (before/after)
    python benchmarks/desk.py --reuse         # ask again without re-indexing
    python benchmarks/desk.py --check         # check every question's row against the desk, no index
    python benchmarks/desk.py --desk NAME     # another desk: benchmarks/NAME/ (desk-science: issue 16)
    python benchmarks/desk.py --desk NAME --distractors  # plus NAME/distractors.txt: files no question names
    python benchmarks/desk.py --smoke         # a tiny desk on the tiny test model (smoke.py), then --check
    python benchmarks/desk.py --reuse --fast --recall 50 --ranks FAST   # the first stage alone, its top-50 ceiling
    python benchmarks/desk.py --reuse --ranks RERANKED --against FAST   # the default (reranked), paired with it
    python benchmarks/desk.py --compare FAST_A FAST_B --recall 50        # two models' first stages, paired

The desk is documentation that Debian packages ship (benchmarks/desk/sources.txt: HTML from
DocBook, gtk-doc and Node.js's API pages, Markdown and reST from pip, plain text from util-linux,
man pages rendered to text, two PDFs). It is copied from the installed packages into
~/.cache/sparc-local-bench/desk (gzip unpacked, man pages rendered with `man`), never shipped
here: the licenses differ and the files are the packages'. Python's own documentation stays out,
as an independent check. A missing package stops the run with the apt-get line that installs it.

The desk is indexed through the product path, `sparc-local index` with SPARC_LOCAL_HOME set to a
scratch home under ~/.cache/sparc-local-bench (the shipped model), and every question of
benchmarks/desk/questions.tsv is asked with `ask --json -k 10`. A question names its file (or
files, split by "|", where the same text ships twice: the shared-mime-info spec in HTML and PDF)
and a substring of its answer sentence, located by hand. Prints:

- sentence level: hit@1 and MRR@10, where a hit is a result from the right file whose sentence
  contains the answer substring (whitespace normalised); a result is what `ask` shows, one per
  passage (its best sentence), so the rank counts passages; passage level: the same, where the
  answer may also be one of the passage's collapsed sentences ("+N more from this passage");
- the no-answer signal (hybrid mode): how many top answers `ask` calls unlikely, among the hits
  at 1 and among the rest;
- file level: MRR@10 of the first result from the right file;
- the counts behind them, and what the desk's sentences look like (how many, how many with no
  word character, how many occur verbatim in 5 or more files), measured with the same tree's
  extract and segment.

With --distractors the desk also holds the files of benchmarks/NAME/distractors.txt (same format as
sources.txt), from the same domains but named by no question, so that the corpus `adapt` trains on
and the retrieval look like the tracker's check (~800 files, issue 16). That desk and its scratch
home get their own names (suffix -large), and --check also fails a question whose answer lies in
one sentence of a file it does not name: the answer must stay unique.

Before/after (adapt, another tree, another model): --ranks FILE writes each question's
sentence-level and passage-level ranks (0: not in the top 10, or for the passage not in the top
--recall N); --against FILE compares this run with such a file question by question: how many
questions rank better and worse, and the mean difference in reciprocal rank and hit@1 with a 95%
bootstrap interval over questions (the same questions, so the pairing removes their difficulty),
at both levels, and with --recall N the difference in how often the passage is in the top N.
--compare BEFORE AFTER compares two such files without asking anything; the files of desks with
their own questions, joined (cat), pool them for more power than one desk's few hundred.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from common import QUESTIONS_FILE, SOURCES_FILE, TOP_K, paired_line

HERE = Path(__file__).resolve().parent
DEFAULT_DESK = "desk"
DISTRACTORS_FILE = "distractors.txt"
LARGE = "-large"  # the desk and home names with --distractors
DATA = HERE / DEFAULT_DESK
SOURCES = DATA / SOURCES_FILE
QUESTIONS = DATA / QUESTIONS_FILE
DISTRACTORS: Path | None = None  # set by select_desk with --distractors
BENCH = Path.home() / ".cache" / "sparc-local-bench"
DESK = BENCH / DEFAULT_DESK
HOME_PREFIX = "home"  # the default scratch home: BENCH/home, or BENCH/home-NAME for another desk (+ LARGE)
MANY_FILES = 5  # a sentence in this many files or more counts as boilerplate
MAN_WIDTH = "80"
RANK_COLUMNS = ("sentence", "passage")  # a --ranks row: question, then these levels' ranks
# the levels a hit is counted at, and what a hit there is
LEVELS = (("sentence", "the sentence shown"), ("passage", "the sentence shown or one collapsed under it"),
          ("file", ""))
_WS = re.compile(r"\s+")
_PUNCT_GAP = re.compile(r" ?([,;:()\[\]]) ?")


def norm(text: str) -> str:
    """Text as answers are matched: runs of white space as one, and none beside , ; : ( ) [ ],
    where PDF text layers differ between versions ("[r,R]" in one, "[r, R]" in another)."""
    return _PUNCT_GAP.sub(r"\1", _WS.sub(" ", text).strip())


def read_sources() -> list[tuple[str, Path, str]]:
    rows = []
    for listing in (SOURCES, DISTRACTORS) if DISTRACTORS else (SOURCES,):
        for line in listing.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                package, source, name = line.split("\t")
                rows.append((package, Path(source), name))
    return rows


def package_versions(packages: list[str]) -> dict[str, str]:
    out = {}
    for p in sorted(set(packages)):
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", p], capture_output=True, text=True)
        out[p] = done.stdout.strip() if done.returncode == 0 else "?"
    return out


def build_desk() -> dict[str, str]:
    """Copy the desk from the installed packages; return each package's version."""
    sources = read_sources()
    missing = sorted({p for p, src, _ in sources if not src.exists()})
    if missing:
        sys.exit(f"missing desk files; install their packages: apt-get install {' '.join(missing)}")
    if DESK.exists():
        shutil.rmtree(DESK)
    for _, src, name in sources:
        dest = DESK / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if "/man/man" in str(src):
            env = dict(os.environ, MANWIDTH=MAN_WIDTH, MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
            done = subprocess.run(["man", "-E", "UTF-8", "-P", "cat", str(src)], capture_output=True, text=True,
                                  env=env)
            if done.returncode != 0:
                sys.exit(f"man {src} failed: {done.stderr.strip()}")
            dest.write_text(re.sub(r".\x08", "", done.stdout), encoding="utf-8")  # no overstrike
        elif src.suffix == ".gz":
            dest.write_bytes(gzip.decompress(src.read_bytes()))
        else:
            shutil.copyfile(src, dest)
    return package_versions([p for p, _, _ in sources])


def desk_sentences(tree: Path) -> dict[str, list[str]]:
    """Each desk file's sentences as the given tree's extract and segment see them."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from sparc_local.ingest.extract import extract\n"
        "from sparc_local.ingest.sentences import segment\n"
        "out = {}\n"
        "for p in sorted(Path(sys.argv[1]).rglob('*')):\n"
        "    if p.is_file():\n"
        "        out[str(p)] = [s.text for s in segment(extract(p))]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(DESK)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(tree)), cwd=tree)
    if done.returncode != 0:
        sys.exit(f"reading the desk failed:\n{done.stderr}")
    return json.loads(done.stdout)


def desk_shape(files: dict[str, list[str]]) -> dict[str, int]:
    """What the desk's sentences look like."""
    in_files = Counter(t for texts in files.values() for t in set(texts))
    sentences = [t for texts in files.values() for t in texts]
    return {
        "files": len(files),
        "sentences": len(sentences),
        "no word character": sum(1 for t in sentences if not re.search(r"\w", t)),
        f"in >= {MANY_FILES} files": sum(1 for t in sentences if in_files[t] >= MANY_FILES),
        "with a pilcrow": sum(1 for t in sentences if "\u00b6" in t),
    }


def shape_line(files: dict[str, list[str]]) -> str:
    return "desk: " + ", ".join(f"{v} {k}" for k, v in desk_shape(files).items())


def read_questions() -> list[tuple[str, str, str]]:
    rows = []
    for line in QUESTIONS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            question, name, answer = line.split("\t")
            rows.append((question, name, answer))
    return rows


def check_questions(questions: list[tuple[str, str, str]], files: dict[str, list[str]]) -> list[str]:
    """Why rows cannot be scored: a repeated question, a file not on the desk, or an answer
    substring that lies inside no one sentence of a named file (as the tree segments it)."""
    failures = []
    for question, count in Counter(q for q, _, _ in questions).items():
        if count > 1:
            failures.append(f"asked {count} times: {question}")
    for question, name, answer in questions:
        want = norm(answer)
        for n in name.split("|"):
            texts = files.get(str(DESK / n))
            if texts is None:
                failures.append(f"not on the desk: {n} ({question})")
            elif not any(want in norm(t) for t in texts):
                failures.append(f"answer in no one sentence of {n}: {answer!r} ({question})")
    return failures


def check_unique(questions: list[tuple[str, str, str]], files: dict[str, list[str]]) -> list[str]:
    """Rows whose answer substring also lies inside one sentence of a desk file the row does not
    name: such a hit would count as a miss, so a distractor that holds an answer is dropped."""
    joined = {path: "\n".join(norm(t) for t in texts) for path, texts in files.items()}  # norm leaves no \n
    failures = []
    for question, name, answer in questions:
        want = norm(answer)
        named = {str(DESK / n) for n in name.split("|")}
        for path, text in joined.items():
            if path not in named and want in text:
                failures.append(f"answer also in {Path(path).relative_to(DESK)}: {answer!r} ({question})")
    return failures


def read_ranks(path: Path) -> dict[str, dict[str, int]]:
    """A --ranks file's ranks per level it holds (files written before the passage column hold the
    sentence's only); a question twice (two desks that share questions.tsv joined) would pair wrongly."""
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line]
    levels = RANK_COLUMNS[: min((len(row) - 1 for row in rows), default=1)]
    ranks = {level: {row[0]: int(row[1 + i]) for row in rows} for i, level in enumerate(levels)}
    if len(ranks["sentence"]) != len(rows):
        sys.exit(f"{path}: {len(rows) - len(ranks['sentence'])} questions appear twice; "
                 "join only desks with their own questions")
    return ranks


def paired_lines(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], recall: int = 0) -> list[str]:
    """A paired line per level both runs hold; the passage level's with the share in the top
    ``recall`` (both runs must have asked for that many answers)."""
    return [paired_line(before[level], after[level], level=level, recall=recall if level == "passage" else 0)
            for level in RANK_COLUMNS if level in before and level in after]


def select_desk(name: str, distractors: bool = False, rows: Path = HERE, copies: Path = BENCH) -> None:
    """Point the module's paths at desk NAME: its rows in benchmarks/NAME (ROWS/NAME), its copy in
    BENCH/NAME (COPIES/NAME; NAME-large with its distractors)."""
    global DATA, SOURCES, QUESTIONS, DESK, DISTRACTORS
    DATA = rows / name
    SOURCES = DATA / SOURCES_FILE
    QUESTIONS = DATA / QUESTIONS_FILE
    DISTRACTORS = DATA / DISTRACTORS_FILE if distractors else None
    DESK = copies / (name + LARGE if distractors else name)


def cli(tree: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tree), SPARC_LOCAL_HOME=str(home))
    done = subprocess.run([sys.executable, "-m", "sparc_local", *args], capture_output=True, text=True, env=env,
                          cwd=tree)  # `python -m` puts the working folder first on sys.path
    if done.returncode != 0:
        sys.exit(f"sparc-local {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout of sparc-local to measure")
    ap.add_argument("--reuse", action="store_true", help="ask against the index of the last run")
    ap.add_argument("--misses", action="store_true", help="print each question's top result when it misses")
    ap.add_argument("--mode", default="hybrid", help="ask --mode (hybrid, sparc, bm25; '' for a tree from before --mode)")
    ap.add_argument("--desk", default=DEFAULT_DESK, help="the desk: a folder benchmarks/NAME with "
                    f"{SOURCES_FILE} and {QUESTIONS_FILE}")
    ap.add_argument("--distractors", action="store_true",
                    help=f"add the files of {DISTRACTORS_FILE} to the desk (its copy and home end in {LARGE})")
    ap.add_argument("--home", type=Path, default=None,
                    help=f"the scratch SPARC_LOCAL_HOME (one per concurrent run; default {BENCH}/{HOME_PREFIX}, "
                         f"or {HOME_PREFIX}-NAME for another desk, {HOME_PREFIX}-NAME{LARGE} with --distractors)")
    ap.add_argument("--ranks", type=Path, help="write each question's sentence and passage ranks to this file (0: not found; the "
                         "passage's within the top --recall)")
    ap.add_argument("--against", type=Path, help="compare question by question with an earlier --ranks file")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                    help="only compare two --ranks files question by question (no index)")
    ap.add_argument("--check", action="store_true",
                    help="only check that every question's answer lies in one sentence of its file (no index)")
    ap.add_argument("--model", type=Path, help="the model folder to index with (default: the shipped model)")
    ap.add_argument("--fast", action="store_true", help="ask --fast: the first stage alone, without the reranker")
    ap.add_argument("--recall", type=int, default=0, metavar="N",
                    help="also ask for the top N and print how often the answer's passage is among them "
                         "(the first stage's ceiling, with --fast); with --against or --compare, paired too")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: a tiny desk (smoke.py) on the tiny test model, --ranks and --against itself, "
                         "then its --check")
    args = ap.parse_args()
    if args.compare:
        print(*paired_lines(*(read_ranks(f) for f in args.compare), args.recall), sep="\n")
        return
    if args.smoke:
        import smoke

        s = smoke.setup()
        rows = smoke.write_desk(s)
        select_desk(rows.name, rows=rows.parent, copies=s.folder / "copy")
        args.model, args.home, args.ranks = s.model, s.folder / "desk-home", s.folder / "desk-ranks.tsv"
        args.against = args.ranks  # written before it is read: the run paired with itself
    else:
        select_desk(args.desk, args.distractors)
    tree = args.tree.resolve()
    default_home = BENCH / (HOME_PREFIX if args.desk == DEFAULT_DESK and not args.distractors
                            else f"{HOME_PREFIX}-{args.desk}{LARGE if args.distractors else ''}")
    home = (args.home or default_home).resolve()
    if args.check:
        if not DESK.exists():  # an existing desk stays: a concurrent run may be indexing it
            build_desk()
        questions = read_questions()
        files = desk_sentences(tree)
        failures = check_questions(questions, files)
        if args.distractors:
            failures += check_unique(questions, files)
            print(shape_line(files))
        for failure in failures:
            print(failure)
        print(f"questions: {len(questions)}, failures: {len(failures)}")
        sys.exit(1 if failures else 0)
    if not args.reuse:
        versions = build_desk()
        print("packages:", ", ".join(f"{p} {v}" for p, v in versions.items()))
        if home.exists():
            shutil.rmtree(home)
        home.mkdir(parents=True)
        if args.model:
            from sparc_local.model.info import ACTIVE_POINTER

            (home / ACTIVE_POINTER).write_text(str(args.model.resolve()))
        t0 = time.perf_counter()
        cli(tree, home, "index", str(DESK), "-q")
        print(f"index: {time.perf_counter() - t0:.0f} s")
    files = desk_sentences(tree)
    print(shape_line(files))

    questions = read_questions()
    level_ranks: dict[str, list[int]] = {level: [] for level, _ in LEVELS}  # per question; 0: not in the top
    unlikely = Counter()  # (hit at 1, top answer called unlikely)
    sentence_ranks: dict[str, int] = {}
    passage_ranks: dict[str, int] = {}  # within the top --recall when it asks for more than TOP_K
    recall = 0  # questions whose answer's passage is in the top --recall
    for question, name, answer in questions:
        mode = ["--mode", args.mode] if args.mode else []  # "": the tree's only way (before --mode existed)
        fast = ["--fast"] if args.fast else []
        shown = max(TOP_K, args.recall)
        results = json.loads(cli(tree, home, "ask", "--json", "-k", str(shown), *mode, *fast, question).stdout)
        targets = {str(DESK / n) for n in name.split("|")}
        want = norm(answer)
        deep = [i for i, r in enumerate(results[:shown], 1) if r["path"] in targets and any(
            want in norm(s) for s in [r["sentence"], *(c["sentence"] for c in r.get("collapsed", []))])]
        passage_ranks[question] = deep[0] if deep else 0
        recall += bool(args.recall and deep and deep[0] <= args.recall)
        results = results[:TOP_K]
        ranks: dict[str, int] = {}
        for i, r in enumerate(results, 1):
            if r["path"] in targets:
                ranks.setdefault("file", i)
                if want in norm(r["sentence"]):
                    ranks.setdefault("sentence", i)
        if deep and deep[0] <= TOP_K:
            ranks["passage"] = deep[0]
        for level, got in level_ranks.items():
            got.append(ranks.get(level, 0))
        rank = ranks.get("sentence")
        sentence_ranks[question] = rank or 0
        if results and results[0].get("likely") is not None:
            unlikely[rank == 1, not results[0]["likely"]] += 1
        if args.misses and rank != 1:
            top = results[0] if results else {"path": "-", "sentence": ""}
            print(f"  [{rank or '-'}] {question}\n      top: {Path(top['path']).name}: {top['sentence'][:110]!r}")
    from sparc_local.evaluation.metrics import summary  # numpy: --check runs on any Python

    n = len(questions)
    print(f"questions: {n}")
    for level, note in LEVELS:
        got = level_ranks[level]
        m = summary(got, TOP_K)
        print(f"{level}: hit@1 {m['r@1']:.3f} ({got.count(1)}/{n}), MRR@{TOP_K} {m[f'mrr@{TOP_K}']:.3f} "
              f"(found in top {TOP_K}: {n - got.count(0)}/{n})" + (f"; {note}" if note else ""))
    if args.recall:
        print(f"answer's passage in the top {args.recall}: {recall / max(1, n):.3f} ({recall}/{n})")
    if unlikely:
        print(f"top answer called unlikely: {unlikely[True, True]} of {unlikely[True, True] + unlikely[True, False]} "
              f"hits at 1, {unlikely[False, True]} of {unlikely[False, True] + unlikely[False, False]} others")
    if args.ranks:
        args.ranks.write_text("".join(f"{q}\t{r}\t{passage_ranks[q]}\n" for q, r in sentence_ranks.items()),
                              encoding="utf-8")
    if args.against:
        print(*paired_lines(read_ranks(args.against), {"sentence": sentence_ranks, "passage": passage_ranks},
                            args.recall), sep="\n")
    if args.smoke:
        failures = check_questions(questions, files)
        print(f"--check: questions: {len(questions)}, failures: {len(failures)}", *failures, sep="\n")

if __name__ == "__main__":
    main()
