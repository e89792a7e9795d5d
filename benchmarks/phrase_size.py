"""What the answer phrase costs: stored positions against the index, and its time in `ask`.

    python benchmarks/phrase_size.py [--data ../shared/data/reqa/squad-dev] [--limit 400] [--threads 1]
    python benchmarks/phrase_size.py --smoke     # the tiny model on a tiny set (smoke.py)

Each squad-dev passage becomes a .txt file and the real indexer runs over them with the shipped
model (or --model). Prints:

* bytes per sentence of three ways to store where each of a sentence's K tokens had its max:
  (a) the sentence's token ids (sorted, varint gaps) and a byte per position, in a side table;
  (b) a byte beside each SPARC posting (the posting codec and every merge would carry it);
  (c) what sparc-local stores, a static function from token to position (index/positions.py);
* the index with and without the positions table (both VACUUMed), so (c)'s share of the index;
* the phrase's part of a warm `ask` (explain, positions, spans, find_phrase) for the questions of
  the indexed passages, against the whole `ask`;
* computing positions at ask time instead: a new process that loads onnxruntime and the model and
  encodes the top answer's paragraph, against a cold `ask` process.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sparc_local.evaluation import reqa

REPO = Path(__file__).resolve().parents[1]


def vacuumed(db: Path, drop_positions: bool = False) -> tuple[int, dict[str, int]]:
    """The size of a VACUUMed copy of ``db`` (WAL included), and its bytes per table and index."""
    copy = db.with_name("copy.db")
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with sqlite3.connect(copy) as c:
        c.execute("PRAGMA journal_mode = DELETE")  # VACUUM into the file itself, not a WAL
        if drop_positions:
            c.executescript("DROP TRIGGER positions_die_with_sentence; DROP TABLE positions;")
    with sqlite3.connect(copy) as c:
        c.execute("VACUUM")
        tables = dict(c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    size = copy.stat().st_size
    copy.unlink()
    return size, tables


def _timed(cmd: list[str], env: dict, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared/data/reqa/squad-dev"), help="a ReQA set")
    p.add_argument("--limit", type=int, default=400, help="passages indexed")
    p.add_argument("--threads", type=int, default=1, help="encoder threads")
    p.add_argument("--model", help="model folder (default: the active model)")
    p.add_argument("--smoke", action="store_true", help="seconds: the tiny test model on a tiny set (smoke.py)")
    args = p.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.data, args.model = str(s.data), str(s.model)

    ds = reqa.load(Path(args.data))
    names = list(dict.fromkeys(ds.passages))[: args.limit]  # the passages of ds.paragraphs(), in order
    with tempfile.TemporaryDirectory() as tmp:
        home, docs = Path(tmp) / "home", Path(tmp) / "docs"
        docs.mkdir()
        home.mkdir(mode=0o700)
        os.environ["SPARC_LOCAL_HOME"] = str(home)
        for name, sentences in zip(names, ds.paragraphs()):
            (docs / f"{name}.txt").write_text(" ".join(sentences) + "\n")

        from sparc_local.index import positions
        from sparc_local.index.store import Index
        from sparc_local.index.varint import varint_encode
        from sparc_local.model.encoder import Encoder
        from sparc_local.model.info import ModelInfo, active_model
        from sparc_local.paths import db_path
        from sparc_local.pipeline import run_index
        from sparc_local.query import phrase as phrase_module
        from sparc_local.query.ask import Asker

        info = ModelInfo.load(Path(args.model)) if args.model else active_model()
        seen = []

        class Recording(Encoder):
            def encode(self, paragraphs, top_k=None, progress=None):
                v = super().encode(paragraphs, top_k=top_k, progress=progress)
                seen.append(v)
                return v

        db = db_path()
        with Index(db) as idx:
            report = run_index(idx, [str(docs)], info, lambda: Recording(info, threads=args.threads))
        n = report.sentences
        a = b = c = 0
        for v in seen:
            for i in range(len(v)):
                tok, _ = v.row(i)
                pos = v.row_positions(i)
                order = np.argsort(tok)
                a += len(varint_encode(np.diff(np.concatenate([[0], tok[order].astype(np.int64)])))) + len(tok)
                b += len(tok)
                c += len(positions.encode(tok, pos))
        with sqlite3.connect(db) as con:
            stored, rows = con.execute("SELECT sum(length(blob)), count(*) FROM positions").fetchone()
        (with_pos, tables), (without, _) = vacuumed(db), vacuumed(db, drop_positions=True)
        print("VACUUMed bytes per sentence by table:",
              ", ".join(f"{k} {v / n:.0f}" for k, v in sorted(tables.items(), key=lambda kv: -kv[1])))
        print(f"{n} sentences ({rows} with positions), K = {info.top_k}")
        print(f"(a) token ids + a byte each: {a / n:.1f} B/sentence")
        print(f"(b) a byte per posting:      {b / n:.1f} B/sentence")
        print(f"(c) static function:         {c / n:.1f} B/sentence (stored: {stored / rows:.1f})")
        print(f"index VACUUMed: {with_pos / 1e6:.2f} MB with positions, {without / 1e6:.2f} MB without: "
              f"+{(with_pos - without) / n:.1f} B/sentence, {100 * (with_pos - without) / without:.1f}% of the index")

        # the phrase's part of a warm ask
        kept = set(names)
        passage_of = dict(zip(ds.ids, ds.passages))
        questions = [q for _, q, rel in ds.queries if any(passage_of.get(r) in kept for r in rel)][:200]
        with Index(db) as idx:
            asker = Asker(idx, info)
            whole, part = [], []
            real_find = phrase_module.find_phrase
            spent = [0.0]

            def timed_find(*a, **kw):
                t = time.perf_counter()
                out = real_find(*a, **kw)
                spent[0] += time.perf_counter() - t
                return out

            for q in questions:
                asker.ask(q, k=10)  # warm
                t0 = time.perf_counter()
                answers = asker.ask(q, k=10)
                whole.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                ids = [x.sentence_id for x in answers]
                per = asker.searcher.explain(asker.tokens(q), ids, mode="hybrid")
                blobs = idx.phrase_positions(ids)
                for x, contrib in zip(answers, per):
                    real_find(x.sentence, asker.tokenizer.spans(x.sentence), contrib, blobs.get(x.sentence_id))
                part.append(time.perf_counter() - t0)
            print(f"warm ask, {len(questions)} questions, k=10: whole p50 {1000 * np.median(whole):.2f} ms, "
                  f"of which the phrase p50 {1000 * np.median(part):.2f} ms (p90 {1000 * np.percentile(part, 90):.2f})")
            top = answers[0].context

        # positions computed at ask time instead: onnxruntime and the model in a new process
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        runs = 1 if args.smoke else 5
        ask_ms = _timed([sys.executable, "-m", "sparc_local", "ask", questions[0]], env, runs)
        enc_ms = _timed([sys.executable, "-c",
                         "import sys; from pathlib import Path; from sparc_local.model.encoder import Encoder; "
                         "from sparc_local.model.info import ModelInfo; "
                         f"Encoder(ModelInfo.load(Path({str(info.path)!r})), threads=1).encode([[{top!r}]])"], env, runs)
        print(f"cold ask process: {ask_ms:.0f} ms; a process that loads onnxruntime and the model and encodes "
              f"the top answer's paragraph: {enc_ms:.0f} ms (median of {runs})")


if __name__ == "__main__":
    main()
