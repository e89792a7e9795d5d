"""The query engine at scale (issue #6): indexes of 10k, 100k and 1M sentences.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/scale.py [--sizes 10k,100k,1M]
    ... benchmarks/scale.py --paired OTHER_WORKTREE --paired-db INDEX_IT_READS --rounds 8
    python benchmarks/scale.py --smoke    # 1k sentences resampled from the tiny model on a tiny set (smoke.py)

Postings are real encoder output of the shipped model (the eval cache of squad-dev and
newsqa-dev, top-1000 per sentence, cut to the shipped model's K), resampled to reach a size:

* 10k: the first 10k sentences of squad-dev (in passage order), as they are.
* A stored paragraph (the context shown with an answer) is up to 5 consecutive sentences of a
  passage (a NewsQA passage is a whole news story, longer than a paragraph of a document).
* 100k and 1M: all 27,112 real sentences of squad-dev + newsqa-dev, then copies of their
  passages until the size is reached.  In a copy, each sentence's vector is a rank-wise
  crossover of its own real vector A and a random other real vector B: for every rank
  j < 256 the (token, weight) pair at rank j is taken from A or from B with probability 1/2
  (a token picked twice keeps its larger weight).  Every posting is a real (token, weight)
  pair at its real rank, so the per-token document frequencies and weight distributions are
  those of the real model, while co-occurrence is only half kept (no duplicate sentences).
  Texts are the real sentence and paragraph texts, so the database's text share is realistic.
* Lexical postings (BM25 impacts of the sentence and of its paragraph, ``model/lexical.Lexical``)
  are computed from those real texts once per real passage; a copy carries its passage's (the
  same texts, so the same impacts), so df of a lexical key grows with the copies as it would
  with repeated text.

Indexes are built through the product's write path: ``Index.write_files`` (vectors and lexical
postings) in batches of ``--batch`` sentences (one file per passage copy), tiered merges after each batch, ``Index.compact`` and a
WAL checkpoint at the end (as the indexer does).  They are cached under ``--workdir`` (keyed by the
schema version and ``postings.LAYOUT_VERSION``) and reused by later runs.

Questions are squad-dev questions, tokenized with the product's ``query_token_ids`` and the
shipped tokenizer.  Per size, the table reports: build time; bytes per sentence for the
posting blobs alone, for the whole database file, and what the rest is (per table, from
SQLite's dbstat); the open time and max RSS of a fresh ``ask`` process (``Asker`` answering
questions); then per mode (``modes.MODES``: hybrid, sparc, bm25): ``Searcher.search``
latency (top 10, p50/p99, pinned to one core, over ``--rounds`` passes: the pass with the best
p50 is reported and every pass's p50 printed, with the time of a fixed reference kernel before
each pass, a gauge of the VM's drifting speed); postings touched; and the number of questions
whose top 10 differs from exhaustive scoring in that mode (must be 0): every posting of every
key summed, times the integer multipliers ``fusion.multipliers`` gives (``exhaustive``).

Filters (``ask --path``): every question is also timed with each glob of ``FILTERS`` (paths
are ``/bench/<set>/<passage>/<paragraph>#<copy>``) in ``FILTER_MODE``, back to back with its
unfiltered search in each mode (which search goes first turns from one question to the next).  A filter's mask is resolved once
per process (the first filtered question on a fresh ``Index`` is timed).  The table gives each
filter's p50 against the unfiltered p50 of the same round, and the questions whose top 10
differs from exhaustive scoring restricted to the files it keeps (must be 0).
Paired run (issue 15: the figures stay within noise of another commit's): ``--paired TREE
--paired-db DB`` times SPARC-mode search (top 10, every question once) in child processes that
take turns, one on TREE's code (another worktree) and one on this tree's, both on the same data:
DB as TREE's code built it, and for this tree a copy that this tree's ``Index`` migrated.  The
order alternates ABBA so a drift of the VM's speed weighs on both alike; each child's p50/p99 is
printed with the reference kernel measured just before it.

``--eval-home`` (default ``$SPARC_BENCH_EVAL_HOME``, else ``EVAL_HOME``) is the
``SPARC_LOCAL_HOME`` where `sparc-local eval` cached the encoded corpora.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from sparc_local.query.modes import HYBRID

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa"
SETS = (DATA / "squad-dev", DATA / "newsqa-dev")  # the real sentences resampled; questions: the first set's
EVAL_HOME = Path(os.environ.get("SPARC_BENCH_EVAL_HOME") or Path.home() / ".cache" / "sparc-local-train" / "evalhome")
BUILD = 5  # the build procedure (bumped when it changes: 2 = Index.compact at the end, 3 = it reclaims pages,
#             4 = compact merges a first run into one segment, 5 = lexical postings beside the vectors)
PARAGRAPH = 5  # sentences per stored paragraph (a NewsQA passage is a whole story)
# ask --path filters timed against unfiltered search: (label, glob)
FILTERS = [
    ("squad-dev files (in blocks)", "/bench/squad-dev/*"),
    ("passages *[37] (scattered)", "/bench/*/p*[37]/*"),
    ("passages *42 (scattered)", "/bench/*/p*42/*"),
]
FILTER_MODE = HYBRID  # filters are timed in ask's default mode


SMOKE_SIZE = "1k"  # sentences of --smoke's index


def smoke_setup():
    """--smoke's tiny model and set (smoke.py), the set encoded by `eval` (the cache ``load_real`` reads)."""
    import smoke

    from sparc_local.app import run
    from sparc_local.app.jobs import EvalRequest

    s = smoke.setup()
    request = EvalRequest(str(s.data), model=str(s.model), threads=1, fast=True)
    run.evaluate(request, run.eval_model(request))
    return s


def cache_db(workdir: Path, size: int, info) -> Path:
    """The cached index of ``size`` sentences. The key names the schema, the writer's blob layout
    and the model (``info``, a ModelInfo): a stale cache is never reused."""
    from sparc_local.index.postings import LAYOUT_VERSION
    from sparc_local.index.store import SCHEMA_VERSION

    return workdir / (f"scale-{size}-v{SCHEMA_VERSION}-l{LAYOUT_VERSION}-b{BUILD}-{info.id.split('@')[-1]}"
                      f"-k{info.top_k}.db")


def parse_size(s: str) -> int:
    s = s.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "km" else s) * mult)


# --------------------------------------------------------------------------- data


def _paragraph(texts: list[str]) -> tuple[str, list[int]]:
    """A stored paragraph of consecutive sentences: its text and each sentence's offset in it."""
    return " ".join(texts), np.cumsum([0] + [len(t) + 1 for t in texts[:-1]]).tolist()


def load_real(info, eval_home: Path, sets: tuple[Path, ...] = SETS) -> list[dict]:
    """Real passages (paragraphs): [{name, texts, T (n, K) token ids, W (n, K) weights,
    L lexical postings (SparseVectors, a row per sentence)}] for every set."""
    from sparc_local.evaluation import evaluate, reqa
    from sparc_local.model.lexical import Lexical

    K = info.top_k

    os.environ["SPARC_LOCAL_HOME"] = str(eval_home)  # where `eval` cached the encoded corpora
    out = []
    for folder in sets:
        name = folder.name
        ds = reqa.load(folder)
        cache = evaluate.cache_file(folder, info)
        if not cache.exists():
            raise SystemExit(f"no encoded corpus for {name} at {cache}: run `sparc-local eval` once")
        with np.load(cache) as z:
            indptr, toks, ws = z["indptr"], z["token_ids"], z["weights"]
        assert np.all(np.diff(indptr) >= K)
        rows = indptr[:-1, None] + np.arange(K)  # rows are sorted by weight, descending
        T, W = toks[rows].astype(np.int32), ws[rows].astype(np.float32)
        by: dict[str, list[int]] = {}
        for i, p in enumerate(ds.passages):
            by.setdefault(p, []).append(i)
        for p, members in by.items():
            for a in range(0, len(members), PARAGRAPH):
                group = members[a:a + PARAGRAPH]
                out.append(dict(name=f"{name}/{p}/{a}", texts=[ds.texts[i] for i in group],
                                T=T[group], W=W[group]))
    lexical = Lexical.of(info)
    texts = [t for p in out for t in p["texts"]]
    lex = lexical.vectors(texts, [_paragraph(p["texts"])[0] for p in out for _ in p["texts"]])
    at = 0
    for p in out:
        p["L"] = lex.slice(at, at + len(p["texts"]))
        at += len(p["texts"])
    return out


def crossover(rng, TA, WA, TB, WB):
    """Rank-wise crossover of real vectors A and B -> CSR (indptr, tokens, weights), see above."""
    n = len(TA)
    pick = rng.random(TA.shape) < 0.5
    T = np.where(pick, TA, TB).ravel()
    W = np.where(pick, WA, WB).ravel()
    row = np.repeat(np.arange(n), TA.shape[1])
    order = np.lexsort((-W, T, row))
    T, W, row = T[order], W[order], row[order]
    keep = np.ones(len(T), bool)
    keep[1:] = (T[1:] != T[:-1]) | (row[1:] != row[:-1])
    T, W, row = T[keep], W[keep], row[keep]
    order = np.lexsort((-W, row))  # back to weight order within each row
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    return indptr, T[order], W[order]


def batches(passages: list[dict], size: int, batch: int, lexical, seed: int = 0):
    """Yield lists of FileUpdate holding ``size`` sentences in all, ~``batch`` sentences each.
    ``lexical`` (``Lexical``) computes the postings of a passage cut short (its paragraph is shorter)."""
    from sparc_local.index.store import FileUpdate, SentenceRow
    from sparc_local.model.sparse import SparseVectors

    rng = np.random.default_rng(seed)
    allT = np.concatenate([p["T"] for p in passages])
    allW = np.concatenate([p["W"] for p in passages])
    done, copy, pending, n_pending = 0, 0, [], 0
    while done < size:
        for p in passages:
            n = min(len(p["texts"]), size - done)
            if n <= 0:
                break
            if copy == 0:
                T, W = p["T"][:n], p["W"][:n]
                indptr = np.arange(n + 1, dtype=np.int64) * T.shape[1]
                vec = SparseVectors(indptr, T.ravel(), W.ravel())
            else:
                b = rng.integers(0, len(allT), n)
                vec = SparseVectors(*crossover(rng, p["T"][:n], p["W"][:n], allT[b], allW[b]))
            para, offsets = _paragraph(p["texts"][:n])
            rows = [SentenceRow(text=t, context=para, offset_in_context=o) for t, o in zip(p["texts"][:n], offsets)]
            lex = p["L"] if n == len(p["texts"]) else lexical.rows(rows)
            pending.append(FileUpdate(path=f"/bench/{p['name']}#{copy}", size=1, mtime=0.0, hash=str(copy),
                                      sentences=rows, vectors=vec, lexical=lex))
            n_pending += n
            done += n
            if n_pending >= batch:
                yield pending
                pending, n_pending = [], 0
        copy += 1
    if pending:
        yield pending


def build(db: Path, passages: list[dict], size: int, batch: int, info) -> float:
    from sparc_local.index.store import Index
    from sparc_local.model.lexical import Lexical

    tmp = db.with_suffix(".building")
    for suffix in ("", "-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    t0 = time.perf_counter()
    done = 0
    with Index(tmp) as ix:
        ix.set_meta("model", info.id)
        for updates in batches(passages, size, batch, Lexical.of(info)):
            ix.write_files(updates)  # tiered merges after each batch, as the indexer
            done += sum(len(u.sentences) for u in updates)
            print(f"\r  build {done:,}/{size:,} {time.perf_counter() - t0:.0f}s", end="", file=sys.stderr)
        ix.maybe_merge()
        ix.compact()  # as the indexer does at the end of a run
        ix.checkpoint()
        secs = time.perf_counter() - t0
        ix.set_meta("bench_build_seconds", repr(secs))
        ix.checkpoint()
    print(file=sys.stderr)
    tmp.rename(db)
    return secs


# --------------------------------------------------------------------------- measurements


def exhaustive(ix, tokens: np.ndarray, mode: str, k: int = 10,
               allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reference top k in ``mode``: every posting of every key the question reads, times the key's
    integer multiplier (``fusion.multipliers`` from the keys' posting counts and largest stored
    weights; 1 in SPARC mode), summed with no pruning (SPARC Eq. 2; the fused score of
    ``query/fusion.py``); only sentences whose ``allowed[id]`` is True, if given.

    Sums are exact integers (float64 bincount, exact below 2^53): a fused sum reaches ~2^25,
    past float32's exact range, so ``scoring.score``'s float32 accumulator could reorder ties."""
    from sparc_local.index import postings as codec
    from sparc_local.query import fusion

    with ix.read_transaction():
        rows = ix.token_blobs(fusion.keys(sorted(set(np.asarray(tokens).tolist())), mode))
        dead = ix.tombstones()
        written = ix.sentences_written()
    by: dict[int, list[bytes]] = {}
    for key, blob in rows:
        by.setdefault(key, []).append(blob)
    if not by:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    if mode == fusion.SPARC:
        mult, scale = np.ones(len(by), np.int64), ix.weight_scale
    else:
        df = np.array([sum(codec.header(b)[1] for b in bl) for bl in by.values()], np.int64)
        max_q = np.array([max(codec.bound(b) for b in bl) for bl in by.values()], np.int64)
        mult, scale = fusion.multipliers(list(by), df, max_q, written, codec.QMAX)
    plist = [(i, q.astype(np.int64) * m) for bl, m in zip(by.values(), mult.tolist()) for i, q in codec.decode_lists(bl)]
    ids = np.concatenate([i for i, _ in plist])
    w = np.concatenate([q for _, q in plist])
    sums = np.rint(np.bincount(ids, weights=w)).astype(np.int64)  # dense: ids are below the id bound
    sums[dead[dead < len(sums)]] = 0
    if allowed is not None:
        sums[len(allowed):] = 0
        sums[: len(allowed)][~allowed[: len(sums)]] = 0
    order = np.flatnonzero(sums > 0)
    order = order[np.lexsort((order, -sums[order]))][:k]
    return order.astype(np.int64), (sums[order] * np.float64(np.float32(scale))).astype(np.float32)


def db_breakdown(ix) -> dict[str, int]:
    """Bytes per table/index (dbstat), free pages, and the file size."""
    c = ix.conn
    out = dict(c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    page = c.execute("PRAGMA page_size").fetchone()[0]
    out["(free pages)"] = c.execute("PRAGMA freelist_count").fetchone()[0] * page
    return out


ASK_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from sparc_local.query.ask import Asker
from sparc_local.model.info import ModelInfo
from sparc_local.index.store import Index
t1 = time.perf_counter()
index = Index(sys.argv[1])
t2 = time.perf_counter()
asker = Asker(index, ModelInfo.load(sys.argv[3]))
t3 = time.perf_counter()
questions = json.loads(sys.argv[2])
first = asker.ask(questions[0])
t4 = time.perf_counter()
for q in questions[1:]:
    asker.ask(q)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forked parent across exec
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps(dict(imports=t1 - t0, open=t2 - t1, tokenizer=t3 - t2, first_ask=t4 - t3,
                      answers=len(first), maxrss_kb=hwm)))
"""


def ask_process(db: Path, questions: list[str], model: Path) -> dict:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", ASK_CHILD, str(db), json.dumps(questions), str(model)],
                         capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    d = json.loads(res.stdout)
    d["wall"] = time.perf_counter() - t0
    return d


def reference_us(reps: int = 30) -> float:
    """Median time of a fixed numpy kernel shaped like a search at 1M sentences (a scatter-add
    of 100k postings into a 1M uint16 accumulator, a dense threshold pass): printed per round,
    it shows how fast this (drifting) VM was while that round ran."""
    rng = np.random.default_rng(0)
    acc = np.zeros(1_000_000, np.uint16)
    ids = np.sort(rng.choice(len(acc), 100_000, replace=False))
    q = rng.integers(1, 70, len(ids)).astype(np.uint16)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.add.at(acc, ids, q)
        np.flatnonzero(acc >= 69 * 2)
        ts.append(time.perf_counter() - t0)
        acc.fill(0)
    return float(np.median(ts) * 1e6)


def kept_sentences(ix, glob: str) -> np.ndarray:
    """A bool per sentence id: the live sentences of the files ``glob`` keeps, read independently
    of ``Searcher.search``'s mask (the reference for exactness)."""
    rows = ix.conn.execute("SELECT s.id, f.path FROM sentences s JOIN files f ON f.id = s.file_id").fetchall()
    keep = np.zeros(1 + max(i for i, _ in rows), bool)
    keep[[i for i, p in rows if fnmatch.fnmatch(p, glob)]] = True
    return keep


def _percentiles(runs: list[np.ndarray]) -> dict:
    """p50/p99/mean of the round with the best p50, and every round's p50."""
    best = min(runs, key=lambda r: float(np.percentile(r, 50)))
    return dict(p50=float(np.percentile(best, 50)), p99=float(np.percentile(best, 99)), mean=float(best.mean()),
                p50_rounds=[float(np.percentile(r, 50)) for r in runs])


def measure(db: Path, questions: list[str], tokens: list[np.ndarray], check: int, rounds: int, model: Path,
            k: int = 10) -> dict:
    from sparc_local.index.store import Index
    from sparc_local.query.modes import MODES
    from sparc_local.query.pathfilter import PathFilter
    from sparc_local.query.searcher import Searcher

    ask = ask_process(db, questions[:20], model)
    filters = [PathFilter(glob) for _, glob in FILTERS]
    resolve = []
    for f in filters:  # the first filtered question of a process resolves the filter's mask
        with Index(db) as ix:
            searcher = Searcher(ix)
            searcher.search(tokens[0], k, mode=FILTER_MODE)
            t0 = time.perf_counter()
            searcher.search(tokens[0], k, file_filter=f, mode=FILTER_MODE)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            searcher.search(tokens[0], k, file_filter=f, mode=FILTER_MODE)
            resolve.append((first, time.perf_counter() - t0))
    # what is timed for each question: every mode unfiltered, then each filter in FILTER_MODE
    jobs = [(m, None) for m in MODES] + [(FILTER_MODE, f) for f in filters]
    with Index(db) as ix:
        searcher = Searcher(ix)
        st = ix.stats()
        n = st["sentences"]
        parts = db_breakdown(ix)
        for t in tokens[:20]:  # warm up
            for mode, f in jobs:
                searcher.search(t, k, file_filter=f, mode=mode)
        runs: list[list[np.ndarray]] = [[] for _ in jobs]  # per job, every question timed once per round
        touched: list[list[int]] = [[] for _ in MODES]
        refs = []  # rounds expose this VM's drifting speed
        for _ in range(rounds):
            refs.append(reference_us())
            lat: list[list[float]] = [[] for _ in jobs]
            for i, t in enumerate(tokens):
                # the question in every job back to back; the first job changes from one question
                # to the next (the second search of a question finds its blobs in the CPU caches)
                for j in np.roll(np.arange(len(jobs)), -i).tolist():
                    mode, f = jobs[j]
                    stats: dict = {}
                    t0 = time.perf_counter()
                    searcher.search(t, k, stats=stats, file_filter=f, mode=mode)
                    lat[j].append(time.perf_counter() - t0)
                    if f is None:
                        touched[j].append(stats.get("postings_scored", 0))
            for r, la in zip(runs, lat):
                r.append(np.array(la) * 1e3)
        modes = {}
        for j, mode in enumerate(MODES):
            mism = 0
            for t in tokens[:check]:
                ids, sc = searcher.search(t, k, mode=mode)
                eids, esc = exhaustive(ix, t, mode, k)
                if not (np.array_equal(ids, eids) and np.array_equal(sc, esc)):
                    mism += 1
            modes[mode] = dict(**_percentiles(runs[j]), touched_max=int(max(touched[j])),
                               touched_mean=float(np.mean(touched[j])), mismatches=mism)
        unfiltered = runs[MODES.index(FILTER_MODE)]
        fres = []
        for (label, glob), f, fr, (first, again) in zip(FILTERS, filters, runs[len(MODES):], resolve):
            allowed = kept_sentences(ix, glob)
            fmism = 0
            for t in tokens[:check]:
                ids, sc = searcher.search(t, k, file_filter=f, mode=FILTER_MODE)
                eids, esc = exhaustive(ix, t, FILTER_MODE, k, allowed)
                if not (np.array_equal(ids, eids) and np.array_equal(sc, esc)):
                    fmism += 1
            p50s = [float(np.percentile(r, 50)) for r in fr]
            fres.append(dict(label=label, glob=glob, kept=int(allowed.sum()) / n, p50_rounds=p50s,
                             p99_rounds=[float(np.percentile(r, 99)) for r in fr],
                             ratio_rounds=[a / float(np.percentile(u, 50)) for a, u in zip(p50s, unfiltered)],
                             first_ms=first * 1e3, again_ms=again * 1e3, mismatches=fmism))
    return dict(sentences=n, segments=st["segments"], postings=st["postings"],
                posting_bytes=st["posting_bytes"], db_bytes=st["db_bytes"], parts=parts, modes=modes,
                reference_us=refs, checked=min(check, len(tokens)), ask=ask, filters=fres)


def report(size: int, build_s: float, m: dict) -> str:
    n = m["sentences"]
    a = m["ask"]
    lines = [
        f"== {size:,} sentences ({m['segments']} segments, {m['postings'] / n:.1f} postings/sentence)",
        f"build (write_files + tiered merges)   {build_s:9.1f} s",
        f"bytes/sentence, posting blobs         {m['posting_bytes'] / n:9.1f}",
        f"bytes/sentence, whole database file   {m['db_bytes'] / n:9.1f}",
    ]
    for name, b in sorted(m["parts"].items(), key=lambda kv: -kv[1]):
        if b / n >= 1:
            lines.append(f"    {name:<33} {b / n:9.1f}")
    lines += [
        f"open Index (fresh ask process)        {a['open'] * 1e3:9.2f} ms",
        f"ask process: imports {a['imports'] * 1e3:.0f} ms, tokenizer {a['tokenizer'] * 1e3:.0f} ms,"
        f" first ask {a['first_ask'] * 1e3:.1f} ms, wall (20 questions) {a['wall']:.2f} s",
        f"ask process max RSS                   {a['maxrss_kb'] / 1024:9.1f} MiB",
        f"reference kernel per round (machine speed; lower is faster) {' '.join(f'{x:.0f}' for x in m['reference_us'])} us",
        f"search top 10, best of {len(m['reference_us'])} rounds (ms)  p50     p99     mean  | p50 per round"
        f"            | postings scored max / mean | top 10 != exhaustive",
    ]
    for mode, r in m["modes"].items():
        lines.append(f"  {mode:<30} {r['p50']:7.3f} {r['p99']:7.3f} {r['mean']:7.3f}  | "
                     f"{' '.join(f'{x:.3f}' for x in r['p50_rounds']):<24} | {r['touched_max']:>9,} / {r['touched_mean']:>9,.0f}"
                     f" | {r['mismatches']} of {m['checked']}")
    lines.append(f"filtered (ask --path, {FILTER_MODE}), paired with the unfiltered {FILTER_MODE} search of each question;"
                 " per round:")
    for f in m["filters"]:
        lines += [
            f"  {f['label']} {f['glob']!r}: keeps {100 * f['kept']:.1f}% of sentences",
            f"    p50 {' '.join(f'{x:.3f}' for x in f['p50_rounds'])} ms, p99 {' '.join(f'{x:.3f}' for x in f['p99_rounds'])}"
            f" ms; p50 / unfiltered p50 {' '.join(f'{x:.2f}' for x in f['ratio_rounds'])}",
            f"    first filtered question of a process (resolves the mask) {f['first_ms']:.1f} ms, the same again"
            f" {f['again_ms']:.2f} ms; top-10 != exhaustive over its files: {f['mismatches']} of {m['checked']}",
        ]
    return "\n".join(lines)


PAIRED_CHILD = r"""
import json, sys, time
import numpy as np
from sparc_local.index.store import Index
try:
    from sparc_local.query.searcher import Searcher
except ImportError:  # a tree from before the Searcher (issue 15) searches with Index.search
    Searcher = None
tokens = [np.asarray(t, np.int32) for t in json.load(sys.stdin)]
with Index(sys.argv[1]) as ix:
    search = ix.search if Searcher is None else Searcher(ix).search
    for t in tokens[:20]:  # warm up
        search(t, 10)
    lat = []
    for t in tokens:
        t0 = time.perf_counter()
        search(t, 10)
        lat.append(time.perf_counter() - t0)
print(json.dumps(lat))
"""


def paired(base_tree: Path, base_db: Path, workdir: Path, tokens: list[np.ndarray], rounds: int) -> str:
    """SPARC-mode top-10 latency of ``base_tree``'s code against this tree's on the same data, in
    alternating child processes (see the module docstring) -> the report."""
    import shutil

    from sparc_local.index.store import SCHEMA_VERSION, Index

    here = Path(__file__).resolve().parents[1]
    db = workdir / f"{base_db.stem}-migrated-v{SCHEMA_VERSION}.db"
    if not db.exists():  # this tree's Index migrates the copy in place; base_db stays readable by base_tree
        shutil.copyfile(base_db, db.with_suffix(".copying"))
        with Index(db.with_suffix(".copying")):
            pass
        db.with_suffix(".copying").rename(db)
    sides = {"base": (base_tree.resolve(), base_db), "this": (here, db)}
    payload = json.dumps([t.tolist() for t in tokens])
    out: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    lines = [f"paired SPARC-mode search top 10, {len(tokens)} questions per run: base = {sides['base'][0]} on {base_db},"
             f" this = {here} on {db}", "run  side  reference us   p50 ms   p99 ms"]
    for r in range(rounds):
        for name in (("base", "this"), ("this", "base"))[r % 2]:
            tree, path = sides[name]
            ref = reference_us()
            env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
            res = subprocess.run([sys.executable, "-c", PAIRED_CHILD, str(path)], input=payload, capture_output=True,
                                 text=True, check=True, cwd=tree, env=env)
            lat = np.array(json.loads(res.stdout)) * 1e3
            out[name].append((ref, float(np.percentile(lat, 50)), float(np.percentile(lat, 99))))
            lines.append(f"{r:>3}  {name:<5} {ref:12.0f} {out[name][-1][1]:8.3f} {out[name][-1][2]:8.3f}")
    for name, rows in out.items():
        a = np.array(rows)
        lines.append(f"{name}: median over runs p50 {np.median(a[:, 1]):.3f} ms (min {a[:, 1].min():.3f}, max"
                     f" {a[:, 1].max():.3f}), p99 {np.median(a[:, 2]):.3f} ms; reference {np.median(a[:, 0]):.0f} us")
    d50 = np.array(out["this"])[:, 1] / np.array(out["base"])[:, 1]
    lines.append(f"this / base p50, per round: {' '.join(f'{x:.3f}' for x in d50)} (median {np.median(d50):.3f})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10k,100k,1M")
    ap.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "sparc-local-bench")
    ap.add_argument("--batch", type=int, default=4096, help="sentences per write_files transaction")
    ap.add_argument("--queries", type=int, default=2000, help="squad-dev questions timed")
    ap.add_argument("--check", type=int, default=2000, help="questions checked against exhaustive scoring")
    ap.add_argument("--rounds", type=int, default=3, help="timed passes over the questions; the best p50's is reported")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this core (default: the last one)")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--build-only", action="store_true", help="build missing indexes, measure nothing")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--eval-home", type=Path, default=EVAL_HOME,
                    help="the SPARC_LOCAL_HOME where `sparc-local eval` cached squad-dev and newsqa-dev")
    ap.add_argument("--paired", type=Path, default=None, metavar="TREE",
                    help="time SPARC-mode search of TREE's code against this tree's (needs --paired-db)")
    ap.add_argument("--paired-db", type=Path, default=None, help="an index TREE's code reads (see --paired)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: 1k sentences from the tiny test model on a tiny set, 20 questions (smoke.py)")
    args = ap.parse_args()
    if (args.paired is None) != (args.paired_db is None):
        ap.error("--paired and --paired-db go together")

    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})

    from sparc_local.evaluation import reqa
    from sparc_local.model.info import ModelInfo, load_tokenizer, shipped_model_dir
    from sparc_local.query.tokens import query_token_ids

    model, sets = shipped_model_dir(), SETS
    if args.smoke:
        s = smoke_setup()
        model, sets, args.eval_home, args.workdir = s.model, (s.data,), Path(os.environ["SPARC_LOCAL_HOME"]), s.folder
        args.sizes, args.queries, args.check, args.rounds = SMOKE_SIZE, 20, 20, 1
    info = ModelInfo.load(model)
    tok = load_tokenizer(info.tokenizer_path)
    ds = reqa.load(sets[0])
    questions = [q for _, q, _ in ds.queries[: args.queries]]
    tokens = [query_token_ids(tok, q, info.skip_array()) for q in questions]
    args.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if args.paired is not None:
        print(paired(args.paired, args.paired_db, args.workdir, tokens, args.rounds), flush=True)
        return
    passages = None
    results = {}
    for size in map(parse_size, args.sizes.split(",")):
        db = cache_db(args.workdir, size, info)
        if args.rebuild or not db.exists():
            if passages is None:
                passages = load_real(info, args.eval_home, sets)
            db.unlink(missing_ok=True)
            build(db, passages, size, args.batch, info)
        if args.build_only:
            continue
        from sparc_local.index.store import Index

        with Index(db) as ix:
            build_s = float(ix.get_meta("bench_build_seconds") or "nan")
        m = measure(db, questions, tokens, args.check, args.rounds, model)
        results[size] = dict(build_seconds=build_s, **m)
        print(report(size, build_s, m), flush=True)
        print(flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
