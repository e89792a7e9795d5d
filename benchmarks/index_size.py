"""How far index.db sits above its steady size right after `index`, and after one `forget`.

    python benchmarks/index_size.py [--data ../shared/data/reqa/squad-dev] [--limit 520] [--threads 1]
    python benchmarks/index_size.py --smoke     # the tiny model on a tiny set (smoke.py)

Each squad-dev passage becomes a .txt file (as benchmarks/index_squad.py writes them) and
`index` runs over them (``app.run.index``, at normal priority). Prints the main file, the WAL,
the free pages and the size the same database has once VACUUMed (its floor), then the same after
`forget` of one file (``app.run.forget``). Run it with PYTHONPATH pointing at another checkout to
compare two versions on the same folder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from sparc_local.evaluation import reqa


def sizes(db: Path) -> str:
    wal = Path(f"{db}-wal")
    with sqlite3.connect(db) as c:
        free = c.execute("PRAGMA freelist_count").fetchone()[0] * c.execute("PRAGMA page_size").fetchone()[0]
    floor = db.with_name("vacuumed.db")
    shutil.copyfile(db, floor)
    with sqlite3.connect(floor) as c:
        c.execute("VACUUM")
    mb = 1e6
    return (f"file {db.stat().st_size / mb:.2f} MB + WAL {(wal.stat().st_size if wal.exists() else 0) / mb:.2f} MB "
            f"(free pages {free / mb:.2f} MB); VACUUMed {floor.stat().st_size / mb:.2f} MB")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared/data/reqa/squad-dev"))
    p.add_argument("--limit", type=int, default=520, help="passages (520: about ten batches of 512 sentences)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", help="model folder (default: the shipped model)")
    p.add_argument("--smoke", action="store_true", help="seconds: the tiny test model on a tiny set (smoke.py)")
    args = p.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.data, args.model = str(s.data), str(s.model)

    ds = reqa.load(Path(args.data))
    passages: dict[str, list[str]] = {}
    for text, passage in zip(ds.texts, ds.passages):
        passages.setdefault(passage, []).append(text)
    with tempfile.TemporaryDirectory() as tmp:
        home, docs = Path(tmp) / "home", Path(tmp) / "docs"
        docs.mkdir()
        home.mkdir(mode=0o700)
        os.environ["SPARC_LOCAL_HOME"] = str(home)
        names = sorted(passages)[: args.limit]
        for name in names:
            (docs / f"{name}.txt").write_text(" ".join(passages[name]) + "\n")

        from common import use_model

        from sparc_local.app import run
        from sparc_local.app.jobs import ForgetRequest, IndexRequest
        from sparc_local.paths import db_path

        if args.model:
            use_model(home, Path(args.model))
        db = db_path()
        t0 = time.perf_counter()
        report = run.index(IndexRequest((str(docs),), threads=args.threads, low_priority=False))
        print(f"indexed {report.indexed} files, {report.sentences} sentences in {time.perf_counter() - t0:.0f} s")
        print(f"after index:  {sizes(db)}")
        run.forget(ForgetRequest(str(docs / f"{names[0]}.txt")))
        print(f"after forget: {sizes(db)}")


if __name__ == "__main__":
    main()
