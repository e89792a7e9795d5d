"""A ReQA set of one split's natural questions: the FAQ and HOWTO pairs of a technical build
(sparc_lab/techdata.py), over the whole documents that hold their answers (issue 31).

    python -m sparc_lab.naturalset BUILD OUT [--split dev] [--without EARLIER_BUILD]

These are the only technical questions a person wrote as a question, as a user asks; headings,
terms and options are not. The documents around an answer stay whole, so its negatives are the
same manual's other sentences. ``--without`` leaves out the units an earlier build already had in
that split, so a set built before keeps its eval cache and the new one holds only new questions.
Ids are UNIT:ID, as techdata's own dev and test sets.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from sparc_lab.data import NATURAL_KINDS
from sparc_lab.techdata import PACKAGES_DIR, SPLIT_FILE, write_set
from sparc_local.evaluation.reqa import read_jsonl


def _document(sentence_id: str) -> str:
    """DOC of a sentence id DOC-PASSAGE-POSITION (techdata's corpus ids)."""
    return sentence_id.rsplit("-", 2)[0]


def natural_set(build: Path, out: Path, split: str = "dev", without: Path | None = None) -> dict:
    """Write the set to OUT and return its counts."""
    units = json.loads((build / SPLIT_FILE).read_text())[split]
    if without is not None:
        earlier = set(json.loads((without / SPLIT_FILE).read_text())[split])
        units = [u for u in units if u not in earlier]
    corpus: list[dict] = []
    queries: list[dict] = []
    for unit in units:
        folder = build / PACKAGES_DIR / unit
        asked = [q for q in read_jsonl(folder / "queries.jsonl.gz") if q.get("kind") in NATURAL_KINDS]
        if not asked:
            continue
        keep = {_document(a) for q in asked for a in q["answers"]}
        queries += [{**q, "id": f"{unit}:{q['id']}", "answers": [f"{unit}:{a}" for a in q["answers"]]}
                    for q in asked]
        corpus += [{**r, "id": f"{unit}:{r['id']}", "passage": f"{unit}:{r['passage']}"}
                   for r in read_jsonl(folder / "corpus.jsonl.gz") if _document(r["id"]) in keep]
    write_set(out, corpus, queries, {"source": f"the natural questions of {build.name}'s {split} units",
                                     "packages": units})
    return {"sentences": len(corpus), "queries": len(queries), "documents": len({_document(r["id"]) for r in corpus}),
            "per_kind": dict(sorted(Counter(q["kind"] for q in queries).items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--split", default="dev", choices=("train", "dev", "test"))
    ap.add_argument("--without", type=Path, help="an earlier build whose units of --split are left out")
    args = ap.parse_args()
    print(json.dumps(natural_set(args.build, args.out, args.split, args.without), indent=1))


if __name__ == "__main__":
    main()
