"""Milvus Lite beside the local engine (issue 35): the same rankings, and what each costs.

    SPARC_LOCAL_HOME=~/.cache/sparc-local-bench/compare /work/bin/lowprio \\
        python benchmarks/milvus.py equality [--sets squad-dev,newsqa-dev] [--model FOLDER]
    SPARC_BENCH_EVAL_HOME=~/.cache/sparc-local-bench/compare /work/bin/lowprio \\
        python benchmarks/milvus.py cost [--sizes 100k,1M] [--questions 500]
    python benchmarks/milvus.py --smoke   # both on a tiny set and 1k sentences of the tiny model (smoke.py)

``equality``: each set's cached encodings (`sparc-local eval`'s cache in ``SPARC_LOCAL_HOME``;
nothing is encoded: the run stops if the cache is missing) are written through the product's
write path (``evaluate.fill_index``) into a ``MirroredIndex``, so the local index and a Milvus
Lite collection hold the same sentences under the same ids.  Every question is then ranked in
each of ``eval``'s modes by the local ``Searcher`` and by ``MilvusSearcher`` (top 10; ``search_many``,
``BATCH`` questions a call, each certified on its own as ``search`` does it); the table
counts the questions whose top 10 differ (ids and order), the rounds MilvusSearcher needed
(``search.CANDIDATES`` per field, fourfold while the bound does not certify the top 10), and
MRR@10 of both.  Evaluation sets: nothing here is tuned on them.

``cost``: ``scale.py``'s corpus generator (real encoder output, resampled) at each size, written
(already encoded) into the local engine (``Index.write_files`` in ``scale.py``'s batches, compacted)
and into Milvus Lite (``MilvusStore.replace``, the same entities the mirror writes), each in a
child process, one after the other: ingest sentences/s, peak RSS of that process, disk; then
query p50/p99 (top 10, hybrid and sparc) of both, taking turns per question in one process.
Scratch data goes under ``--workdir`` (default ~/.cache/sparc-local-bench/milvus).

``--smoke``: ``equality`` then ``cost`` on scale.py's smoke set (the tiny model, `eval`'s cache
written first), 1k sentences and 10 questions; without pymilvus and milvus-lite it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa"
WORKDIR = Path.home() / ".cache" / "sparc-local-bench" / "milvus"
BATCH = 50  # equality: questions per MilvusSearcher.search_many call (the same rankings as one by one)
QUESTIONS_SET = DATA / "squad-dev"  # cost's questions


def _du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _children_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def equality(sets: list[Path], workdir: Path, model: Path | None, limit: int | None = None,
             progress: int = 0) -> None:
    from sparc_local.evaluation import reqa
    from sparc_local.evaluation.evaluate import cache_file, encode_corpus, fill_index
    from sparc_local.evaluation.metrics import first_hits, summary
    from sparc_local.milvus.mirror import MirroredIndex
    from sparc_local.milvus.search import MilvusSearcher
    from sparc_local.milvus.store import StoreSpec
    from sparc_local.model.info import ModelInfo, active_model, load_tokenizer
    from sparc_local.query.modes import MODES
    from sparc_local.query.searcher import Searcher
    from sparc_local.query.tokens import query_token_ids

    info = ModelInfo.load(model) if model else active_model()
    print(f"model {info.id}, K={info.top_k}")
    print("| set | mode | questions | top 10 differs | rounds > 1 | max candidates | MRR@10 local | MRR@10 Milvus |")
    print("|---|---|---|---|---|---|---|---|")
    for ds_dir in sets:
        name = ds_dir.name
        if not cache_file(ds_dir, info).exists():
            sys.exit(f"{name}: no cached encoding in {cache_file(ds_dir, info)}; set SPARC_LOCAL_HOME to eval's home")
        ds = reqa.load(ds_dir)
        vectors = encode_corpus(ds, ds_dir, info, None).head(info.top_k)
        folder = workdir / f"eq-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        spec = StoreSpec(str(folder / "milvus.db"), "eq")
        with MirroredIndex(folder / "local.db", spec) as index:
            t0 = time.perf_counter()
            to_sid = fill_index(index, ds, vectors, info)
            built = time.perf_counter() - t0
            tokenizer, skip = load_tokenizer(info.tokenizer_path), info.skip_array()
            questions = [query_token_ids(tokenizer, q, skip) for _, q, _ in ds.queries]
            answers = [set(a) for _, _, a in ds.queries]
            local, remote = Searcher(index), MilvusSearcher(index.store)
            ranked = {(m, e): [] for m in MODES for e in ("local", "milvus")}
            differ = dict.fromkeys(MODES, 0)
            retried = dict.fromkeys(MODES, 0)
            most = dict.fromkeys(MODES, 0)
            examples: list[tuple] = []

            def table(done: int) -> None:
                for mode in MODES:
                    mrr = {e: summary(first_hits(ranked[mode, e], answers[:done], 10), 10)["mrr@10"]
                           for e in ("local", "milvus")}
                    print(f"| {name} | {mode} | {done} | {differ[mode]} | {retried[mode]} | {most[mode]} "
                          f"| {mrr['local']:.4f} | {mrr['milvus']:.4f} |", flush=True)

            asked = questions[:limit]
            for at in range(0, len(asked), BATCH):  # a batch in every mode, so a partial run covers them all
                chunk = asked[at:at + BATCH]
                for mode in MODES:
                    st: list[dict] = [{} for _ in chunk]
                    got = remote.search_many(chunk, n=10, mode=mode, stats=st)
                    for j, (toks, (b, _), s) in enumerate(zip(chunk, got, st)):
                        a, _ = local.search(toks, n=10, mode=mode)
                        retried[mode] += s.get("rounds", 1) > 1
                        most[mode] = max(most[mode], s.get("candidates", 0))
                        if a.tolist() != b.tolist():
                            differ[mode] += 1
                            examples.append((mode, at + j, a.tolist(), b.tolist()))
                        ranked[mode, "local"].append([to_sid[int(i)] for i in a])
                        ranked[mode, "milvus"].append([to_sid[int(i)] for i in b])
                done_so_far = at + len(chunk)
                if progress and done_so_far % progress == 0 and done_so_far < len(asked):
                    print(f"  after {done_so_far} questions:", flush=True)
                    table(done_so_far)
            done = len(questions[:limit])
            print(f"  {name}, all {done} questions:", flush=True)
            table(done)
            for ex in examples[:5]:
                print(f"  differs: {ex[0]} question {ex[1]}: local {ex[2]} milvus {ex[3]}", flush=True)
        print(f"  ({name}: {len(ds.ids)} sentences written to both in {built:.0f} s)", flush=True)
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------------------- cost

def _scale():
    """benchmarks/scale.py (benchmarks/ is not a package): its corpus generator and sizes."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scale

    return scale


def _batches(size: int, eval_home: Path, model: Path, batch: int, sets: tuple[Path, ...] | None):
    from sparc_local.model.info import ModelInfo
    from sparc_local.model.lexical import Lexical

    info = ModelInfo.load(model)
    real = _scale().load_real(info, eval_home, *([sets] if sets else []))
    return _scale().batches(real, size, batch, Lexical.of(info))


def build_one(engine: str, size: int, folder: Path, eval_home: Path, model: Path, batch: int,
              sets: tuple[Path, ...] | None = None) -> dict:
    """Child process: write the corpus (of scale.py's sets, or of ``sets``) into one engine; its figures
    as JSON (the corpus is generated before the clock starts)."""
    updates_iter = list(_batches(size, eval_home, model, batch, sets))
    t0 = time.perf_counter()
    n = 0
    if engine == "local":
        from sparc_local.index.store import Index

        with Index(folder / "local.db") as idx:
            for updates in updates_iter:
                idx.write_files(updates)
                n += sum(len(u.sentences) for u in updates)
            idx.compact()
            idx.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        path = folder / "local.db"
    else:
        from sparc_local.index import postings as codec
        from sparc_local.milvus.entities import entities
        from sparc_local.milvus.store import MilvusStore, StoreSpec

        scale_q = codec.scale_for_ceiling()
        with MilvusStore(StoreSpec(str(folder / "milvus.db"), "bench"), create=True) as store:
            for updates in updates_iter:
                ents = []
                for u in updates:
                    # the local engine's ids for the same sentences: AUTOINCREMENT from 1, in write order
                    ids = range(n + 1, n + 1 + len(u.sentences))
                    ents += entities(u.path, u.mtime, u.sentences, ids, u.vectors, u.lexical, scale_q)
                    n += len(u.sentences)
                store.replace([], ents)  # new files: nothing to delete first
            store.seal()  # as a run ends (MirroredIndex.checkpoint)
        path = folder / "milvus.db"
    secs = time.perf_counter() - t0
    return {"engine": engine, "sentences": n, "seconds": secs, "per_s": n / secs, "rss_mb": _rss_mb(),
            "disk_mb": _du(path) / 1e6}


def query_both(folder: Path, model: Path, n_questions: int, questions_set: Path = QUESTIONS_SET) -> dict:
    """Child process: both engines answer the same questions (of questions_set), taking turns; p50/p99 per mode."""
    from sparc_local.evaluation import reqa
    from sparc_local.index.store import Index
    from sparc_local.milvus.search import MilvusSearcher
    from sparc_local.milvus.store import MilvusStore, StoreSpec
    from sparc_local.model.info import ModelInfo, load_tokenizer
    from sparc_local.query.searcher import Searcher
    from sparc_local.query.tokens import query_token_ids

    info = ModelInfo.load(model)
    tok = load_tokenizer(info.tokenizer_path)
    questions = [query_token_ids(tok, q, info.skip_array()) for _, q, _ in reqa.load(questions_set).queries[:n_questions]]
    out: dict = {}
    with Index(folder / "local.db") as idx, MilvusStore(StoreSpec(str(folder / "milvus.db"), "bench")) as store:
        local, remote = Searcher(idx), MilvusSearcher(store)
        rss0 = _rss_mb()
        for mode in ("hybrid", "sparc"):
            t = {"local": [], "milvus": []}
            same = 0
            for i, toks in enumerate(questions):
                order = [("local", local), ("milvus", remote)][:: 1 if i % 2 else -1]
                got = {}
                for key, s in order:
                    t0 = time.perf_counter()
                    got[key] = s.search(toks, n=10, mode=mode)[0].tolist()
                    t[key].append((time.perf_counter() - t0) * 1000)
                same += got["local"] == got["milvus"]
            out[mode] = {k: (float(np.percentile(v, 50)), float(np.percentile(v, 99))) for k, v in t.items()}
            out[mode]["same_top10"] = same
        out["rss_mb"] = _rss_mb()
        out["rss_before_queries_mb"] = rss0
        out["questions"] = len(questions)
    return out


def _child(args: list[str]) -> dict:
    res = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if res.returncode:
        sys.exit(f"child {args} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def cost(sizes: list[int], workdir: Path, eval_home: Path, model: Path, n_questions: int, batch: int,
         sets: tuple[Path, ...] = ()) -> None:
    """``sets``: the corpus's and the questions' ReQA sets (default: scale.py's, squad-dev's questions)."""
    data = [os.pathsep.join(map(str, sets))] if sets else []  # the children's last argument
    print("| sentences | engine | ingest s | sentences/s | peak RSS ingest MB | disk MB |")
    print("|---|---|---|---|---|---|")
    rows = []
    for size in sizes:
        folder = workdir / f"cost-{size}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for engine in ("local", "milvus"):
            r = _child(["_build", engine, str(size), str(folder), str(eval_home), str(model), str(batch), *data])
            print(f"| {size:,} | {engine} | {r['seconds']:.0f} | {r['per_s']:.0f} | {r['rss_mb']:.0f} | {r['disk_mb']:.0f} |",
                  flush=True)
        q = _child(["_query", str(folder), str(model), str(n_questions), *data])
        rows.append((size, q))
    print("\n| sentences | mode | local p50 / p99 ms | Milvus Lite p50 / p99 ms | same top 10 | questions |")
    print("|---|---|---|---|---|---|")
    for size, q in rows:
        for mode in ("hybrid", "sparc"):
            lo, mi = q[mode]["local"], q[mode]["milvus"]
            print(f"| {size:,} | {mode} | {lo[0]:.2f} / {lo[1]:.2f} | {mi[0]:.1f} / {mi[1]:.1f} "
                  f"| {q[mode]['same_top10']} | {q['questions']} |")
        print(f"  ({size:,}: the querying process peaked at {q['rss_mb']:.0f} MB RSS, both engines' clients in it;"
              f" milvus-lite 3 serves from inside the client's process, so the ingest rows are the per-engine memory)")


SMOKE_SIZE = 1000  # sentences of --smoke's cost run


def smoke_run() -> None:
    """equality, then cost at SMOKE_SIZE, on scale.py's smoke set (the tiny model, eval's cache)."""
    import importlib.util

    missing = [m for m in ("pymilvus", "milvus_lite") if importlib.util.find_spec(m) is None]
    if missing:  # the wheel is not built for every platform (e.g. Windows), as tests/test_milvus.py skips
        print(f"skipped: {' and '.join(missing)} not installed for this platform: pip install 'sparc-local[milvus]'")
        return
    s = _scale().smoke_setup()
    home, workdir = Path(os.environ["SPARC_LOCAL_HOME"]), s.folder / "milvus"
    workdir.mkdir()
    equality([s.data], workdir, s.model)
    cost([SMOKE_SIZE], workdir, home, s.model, 10, 256, (s.data,))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_build":
        engine, size, folder, home, model, batch, *data = sys.argv[2:]
        sets = tuple(map(Path, data[0].split(os.pathsep))) if data else None
        print(json.dumps(build_one(engine, int(size), Path(folder), Path(home), Path(model), int(batch), sets)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_query":
        folder, model, nq, *data = sys.argv[2:]
        asked = [Path(data[0].split(os.pathsep)[0])] if data else []
        print(json.dumps(query_both(Path(folder), Path(model), int(nq), *asked)))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="?", choices=["equality", "cost"])
    p.add_argument("--smoke", action="store_true", help="seconds: equality and cost on the tiny model (smoke.py)")
    p.add_argument("--sets", default="squad-dev,newsqa-dev")
    p.add_argument("--sizes", default="100k,1M")
    p.add_argument("--questions", type=int, default=500)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--model", type=Path, help="the model folder whose cached encodings to use (default: the active one)")
    p.add_argument("--limit", type=int, help="equality: the first N questions of each set (default: all)")
    p.add_argument("--progress", type=int, default=0, help="equality: print the table every N questions")
    p.add_argument("--workdir", type=Path, default=WORKDIR)
    p.add_argument("--eval-home", type=Path,
                   default=Path(os.environ.get("SPARC_BENCH_EVAL_HOME") or os.environ.get("SPARC_LOCAL_HOME", ".")))
    a = p.parse_args()
    if a.smoke:
        smoke_run()
        return
    if a.what is None:
        p.error("say what to measure: equality or cost")
    a.workdir.mkdir(parents=True, exist_ok=True)
    if a.what == "equality":
        equality([DATA / name for name in a.sets.split(",")], a.workdir, a.model, a.limit, a.progress)
    else:
        from sparc_local.model.info import shipped_model_dir

        cost([_scale().parse_size(s) for s in a.sizes.split(",")], a.workdir, a.eval_home, a.model or shipped_model_dir(),
             a.questions, a.batch)


if __name__ == "__main__":
    main()
