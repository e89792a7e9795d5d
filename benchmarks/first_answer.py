"""How soon `index` answers: the first BM25 answers against an extraction-only pass (issue #14).

    OMP_NUM_THREADS=1 python benchmarks/first_answer.py [--files 300] [--rounds 3]
    python benchmarks/first_answer.py --smoke    # the tiny model, a file of each format from a tiny set (smoke.py)

A folder of mixed formats (.txt, .md, .html, .docx, .pdf; squad-train-head's passages, a
training set) is built under ~/.cache/sparc-local-bench/first-answer. Per round, back to back:

* extraction only: every file through the product's reader and sentence splitter
  (``extract`` + ``segment``), nothing stored;
* `index` (``app.run.index``, the shipped model, a fresh database), timed to the first committed
  batch (the first answerable files) and to the start of the encoding pass (every file
  answerable by BM25, checked by asking a question then); the run stops there unless
  ``--full``, which also times the encoding.

Prints each round and the medians, and the ratio the issue bounds (answers within 2x the
extraction-only time). The VM's speed drifts, so the two are timed in the same round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparc_local.evaluation import reqa

WORK = Path.home() / ".cache" / "sparc-local-bench" / "first-answer"
DATA = ROOT.parent / "shared" / "data" / "reqa" / "squad-train-head"
QUESTION = "Which NFL team represented the AFC?"  # a squad-train-head question
FORMATS = (".txt", ".md", ".html", ".docx", ".pdf")


def build(docs: Path, n: int, data: Path) -> None:
    """n files, the formats in turn, each holding one passage of the ReQA set ``data``."""
    import docx

    from tests.test_extract import pdf_bytes

    ds = reqa.load(data)
    passages: dict[str, list[str]] = {}
    for text, p in zip(ds.texts, ds.passages):
        passages.setdefault(p, []).append(text)
    docs.mkdir(parents=True)
    for i, sentences in enumerate(list(passages.values())[:n]):
        ext, text = FORMATS[i % len(FORMATS)], " ".join(sentences)
        path = docs / f"note{i:03d}{ext}"
        if ext == ".docx":
            d = docx.Document()
            d.add_paragraph(text)
            d.save(path)
        elif ext == ".pdf":  # a base-14 font's text layer: characters cp1252 has
            text = text.encode("cp1252", "replace").decode("cp1252")
            words, lines, line = text.split(), [], ""
            for w in words:  # ~90 characters a line, as a PDF's text layer has them
                if len(line) + len(w) > 90:
                    lines.append(line)
                    line = ""
                line = f"{line} {w}".strip()
            path.write_bytes(pdf_bytes([lines + [line]]))
        elif ext == ".html":
            path.write_text(f"<html><head><title>Note {i}</title></head><body><p>{text}</p></body></html>")
        else:
            path.write_text(text + "\n")


def extraction_only(docs: Path) -> tuple[float, int]:
    from sparc_local.ingest.extract import extract
    from sparc_local.ingest.sentences import segment

    t0, n = time.perf_counter(), 0
    for path in sorted(docs.iterdir()):
        n += len(segment(extract(path)))
    return time.perf_counter() - t0, n


def index_until_answerable(docs: Path, full: bool, question: str) -> dict:
    """`index` of docs into the data dir's index (``app.run.index``, one encoder thread, normal
    priority), asked ``question`` (first stage, k 3) once every file is stored."""
    from sparc_local.app import run
    from sparc_local.app.jobs import IndexRequest
    from sparc_local.app.requests import AskRequest

    marks: dict = {}
    t0 = time.perf_counter()

    def on_progress(p) -> None:
        now = time.perf_counter() - t0
        if p.batches and "first_batch" not in marks:
            marks["first_batch"] = now
        if p.phase == "encoding" and "stored" not in marks:
            marks["stored"] = now
            marks["answers"] = len(run.ask(AskRequest(question, k=3, fast=True)))

    report = run.index(IndexRequest((str(docs),), threads=1, low_priority=False), on_progress=on_progress,
                       should_stop=(lambda: False) if full else (lambda: "stored" in marks))
    marks["total"] = time.perf_counter() - t0
    marks["sentences"] = report.sentences
    return marks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="also time the encoding pass")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny test model, a file of each format from a tiny set (smoke.py)")
    a = ap.parse_args()
    from common import use_model

    from sparc_local.model.info import shipped_model_dir

    work, data, model, question = WORK, DATA, shipped_model_dir(), QUESTION
    if a.smoke:
        import smoke

        s = smoke.setup()
        work, data, model, a.files, a.rounds = s.folder / "first-answer", s.data, s.model, 5, 1
        question = reqa.load(data).queries[0][1]
    home = work / "home"  # the data dir: a fresh index.db each round, with the model
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ["SPARC_LOCAL_HOME"] = str(home)
    use_model(home, model)
    docs = work / f"docs-{a.files}"
    if not docs.exists():
        build(docs, a.files, data)
    extraction_only(docs)  # warm the page cache for both
    rows = []
    for r in range(a.rounds):
        ext_s, n = extraction_only(docs)
        db = home / "index.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        m = index_until_answerable(docs, a.full, question)
        rows.append((ext_s, m))
        enc = f", encoded in {m['total'] - m['stored']:.1f} s" if a.full else ""
        print(f"round {r + 1}: extraction only {ext_s:.2f} s ({n} sentences); index: first batch answerable at "
              f"{m['first_batch']:.2f} s, every file at {m['stored']:.2f} s ({m['answers']} answers to a question "
              f"then){enc}; ratio {m['stored'] / ext_s:.2f}", flush=True)
    ext = statistics.median(r[0] for r in rows)
    first = statistics.median(r[1]["first_batch"] for r in rows)
    stored = statistics.median(r[1]["stored"] for r in rows)
    ratio = statistics.median(r[1]["stored"] / r[0] for r in rows)
    print(f"\n{a.files} files ({', '.join(FORMATS)}), medians of {a.rounds} rounds: extraction only {ext:.2f} s; "
          f"first answers {first:.2f} s; every file answerable {stored:.2f} s = {ratio:.2f}x extraction "
          f"(bound: 2x)")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{home / 'index.db'}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
