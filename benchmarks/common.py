"""What several benchmarks share, below all of them: the scripts and smoke.py import it, it
imports none of them.

- the desks' file names (desk.py reads them, smoke.py writes a tiny desk in that format);
- the paired before/after line of the desks, adapt_e2e.py and model_compare.py;
- a ReQA corpus's sentences written into the data dir's index from `eval`'s cached encodings
  (adapt_e2e.py, and smoke.py's index for the adapt scripts);
- the active model of a scratch data dir;
- a child process's CPU time and memory, from /proc (watch_latency.py, watch_idle.py, messy_home.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# a desk's data folder (benchmarks/desk/): package, installed file and name on the desk; question,
# file and answer substring
SOURCES_FILE = "sources.txt"
QUESTIONS_FILE = "questions.tsv"
TOP_K = 10  # the answers a question is scored on: MRR@10


def paired_line(before: dict[str, int], after: dict[str, int], seed: int = 0, level: str = "sentence",
                recall: int = 0) -> str:
    """Questions ranked better and worse than in BEFORE, and the mean reciprocal-rank difference
    with a 95% bootstrap interval: is a before/after difference more than question noise? Ranks
    past TOP_K count as misses for MRR and hit@1; with ``recall`` N also the difference in how
    often the rank is within N (both runs must have asked for the top N)."""
    from sparc_local.evaluation.metrics import paired_bootstrap  # numpy: the rest runs on any Python

    shared = [q for q in after if q in before]
    old, new = ([r if r <= TOP_K else 0 for r in (ranks[q] for q in shared)] for ranks in (before, after))
    p = paired_bootstrap(old, new, seed=seed)
    h = paired_bootstrap(old, new, seed=seed, hit_at=1)
    line = (f"paired with the earlier ranks ({p.questions} questions): {p.better} better, "
            f"{p.worse} worse; {level} MRR@{TOP_K} {p.mean:+.4f}, 95% interval "
            f"[{p.low:+.4f}, {p.high:+.4f}]; hit@1 {h.mean:+.4f} [{h.low:+.4f}, {h.high:+.4f}]")
    if recall:
        r = paired_bootstrap([before[q] for q in shared], [after[q] for q in shared], seed=seed, hit_at=recall)
        line += f"; in the top {recall} {r.mean:+.4f} [{r.low:+.4f}, {r.high:+.4f}]"
    return line


def use_model(home: Path, model: Path) -> None:
    """Make ``model`` the active model of the data dir ``home``, as `adapt` would point to one."""
    from sparc_local.model.info import ACTIVE_POINTER

    (home / ACTIVE_POINTER).write_text(str(Path(model).resolve()))


def build_index(data: Path, model_dir: Path | None, threads: int | None = None) -> dict:
    """Index the corpus's sentences with the base model (skipped if the index already has them).

    Not `index`: one "file" per passage, its other sentences as context, written from `eval`'s
    cache of the encoded corpus (the base encoding is reused between runs), for what `adapt`
    reads of an index: its sentences."""
    from sparc_local.evaluation import reqa
    from sparc_local.evaluation.evaluate import encode_corpus
    from sparc_local.index.store import FileUpdate, Index, SentenceRow
    from sparc_local.model.info import ModelInfo, active_model
    from sparc_local.model.sparse import SparseVectors
    from sparc_local.paths import db_path

    info = ModelInfo.load(model_dir) if model_dir else active_model()
    ds = reqa.load(data)
    with Index(db_path()) as idx:
        n = idx.stats()["sentences"]
        if n == len(ds.texts) and idx.get_meta("model") == info.id:
            return {"sentences": n, "seconds": 0.0, "model": info.id}
        t0 = time.perf_counter()
        vectors = encode_corpus(ds, data, info, threads=threads).head(info.top_k)  # eval's cache
        members: dict[str, list[int]] = {}
        for i, p in enumerate(ds.passages):
            members.setdefault(p, []).append(i)
        updates = []
        for passage, rows in members.items():
            para = " ".join(ds.texts[i] for i in rows)
            offsets, pos = [], 0
            for i in rows:
                offsets.append(pos)
                pos += len(ds.texts[i]) + 1
            updates.append(FileUpdate(f"/reqa/{ds.name}/{passage}.txt", len(para), 0.0, passage,
                                      [SentenceRow(ds.texts[i], para, o) for i, o in zip(rows, offsets)],
                                      SparseVectors.from_rows([vectors.row(i) for i in rows])))
        idx.add_roots([f"/reqa/{ds.name}"])
        for start in range(0, len(updates), 200):
            idx.write_files(updates[start:start + 200], merge=False)
        idx.merge_all()
        idx.set_meta("model", info.id)
        idx.set_meta("model_path", str(info.path))
        return {"sentences": idx.stats()["sentences"], "seconds": time.perf_counter() - t0, "model": info.id}


def proc_cpu_seconds(pid: int) -> float:
    """A process's CPU time so far, every thread's: utime + stime of /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_mem_mb(pid: int) -> tuple[float, float]:
    """A process's resident memory and its peak (VmRSS, VmHWM), in MB."""
    kv = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(kv["VmRSS"].split()[0]) / 1024, int(kv["VmHWM"].split()[0]) / 1024
