"""Index the squad-dev corpus as real files and time indexing, size and queries.

    python benchmarks/index_squad.py [--data ../shared/data/reqa/squad-dev] [--threads 2] [--limit N]
    python benchmarks/index_squad.py --smoke     # the tiny model on a tiny set (smoke.py), one cold ask

Each passage becomes a .txt file, so the whole product path runs (``app.run.index``, at normal
priority): walk, extract, segment, encode (ONNX), SQLite. Prints indexing throughput with the
thread count, index bytes per sentence, scoring latency p50/p99 over the set's questions (the
query engine alone, ``Searcher.search``), and the wall time of a cold `sparc-local ask` process
(median of 5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sparc_local.evaluation import reqa


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared/data/reqa/squad-dev"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--limit", type=int, default=0, help="index only the first N passages")
    p.add_argument("--model", help="model folder (default: the shipped model)")
    p.add_argument("--cold", type=int, default=5, help="cold `ask` processes timed")
    p.add_argument("--smoke", action="store_true", help="seconds: the tiny test model on a tiny set (smoke.py)")
    args = p.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.data, args.model, args.threads, args.cold = str(s.data), str(s.model), 1, 1

    ds = reqa.load(Path(args.data))
    with tempfile.TemporaryDirectory() as tmp:
        home, docs = Path(tmp) / "home", Path(tmp) / "docs"
        docs.mkdir()
        home.mkdir(mode=0o700)
        os.environ["SPARC_LOCAL_HOME"] = str(home)
        passages: dict[str, list[str]] = {}
        for text, passage in zip(ds.texts, ds.passages):
            passages.setdefault(passage, []).append(text)
        names = sorted(passages)[: args.limit or None]
        for name in names:
            (docs / f"{name}.txt").write_text(" ".join(passages[name]) + "\n")

        from common import use_model

        from sparc_local.app import run
        from sparc_local.app.jobs import IndexRequest
        from sparc_local.index.store import Index
        from sparc_local.model.info import active_model
        from sparc_local.paths import db_path

        if args.model:
            use_model(home, Path(args.model))
        info = active_model()
        t0 = time.perf_counter()
        report = run.index(IndexRequest((str(docs),), threads=args.threads, low_priority=False))
        seconds = time.perf_counter() - t0
        with Index(db_path()) as idx:  # what it stored, and the query engine alone
            stats = idx.stats()
            print(f"model            {info.id} ({info.quantization}, K={info.top_k}, max length {info.max_length})")
            print(f"files            {report.indexed} ({len(names)} passages)")
            print(f"sentences        {report.sentences} (our splitter; the gold set has {len(ds.ids)})")
            print(f"threads          {args.threads}")
            print(f"indexing         {seconds:.1f} s, {report.sentences / seconds:.1f} sentences/s "
                  f"(walk + extract + segment + encode + SQLite)")
            wal = Path(str(db_path()) + "-wal")
            print(f"database         {db_path().stat().st_size} bytes main file, "
                  f"{wal.stat().st_size if wal.exists() else 0} bytes WAL")
            print(f"index size       {stats['db_bytes'] / report.sentences:.0f} bytes/sentence (whole database), "
                  f"{stats['posting_bytes'] / report.sentences:.0f} bytes/sentence postings only, "
                  f"{stats['postings'] / report.sentences:.0f} postings/sentence")

            from sparc_local.query.ask import Asker

            asker = Asker(idx, info)
            questions = [q for _, q, _ in ds.queries]
            lat = []
            for q in questions:
                tokens = asker.tokens(q)
                t = time.perf_counter()
                asker.searcher.search(tokens, n=10)
                lat.append((time.perf_counter() - t) * 1000)
            print(f"query scoring    p50 {np.percentile(lat, 50):.3f} ms, p99 {np.percentile(lat, 99):.3f} ms "
                  f"over {len(lat)} questions (SQLite postings read + scoring + top-10)")

        walls = []
        for q in questions[: args.cold]:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sparc_local", "ask", q, "-k", "10"], check=True,
                           capture_output=True, env=os.environ.copy())
            walls.append(time.perf_counter() - t)
        print(f"cold ask         {statistics.median(walls):.3f} s wall (median of {len(walls)} fresh processes)")


if __name__ == "__main__":
    main()
