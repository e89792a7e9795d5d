"""The ReQA dataset format (corpus.jsonl.gz + queries.jsonl.gz), shared by eval and training."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from sparc_local.errors import DatasetMissing


@dataclass(frozen=True)
class ReqaSet:
    name: str
    ids: list[str]  # sentence ids, grouped by passage, in position order
    texts: list[str]
    passages: list[str]  # passage id of each sentence
    queries: list[tuple[str, str, list[str]]]  # (query id, question, answer sentence ids)

    def contexts(self) -> list[str]:
        """The SPARC context of each sentence: the other sentences of its passage, in order (§6.2)."""
        by_passage: dict[str, list[int]] = {}
        for i, p in enumerate(self.passages):
            by_passage.setdefault(p, []).append(i)
        out = [""] * len(self.ids)
        for members in by_passage.values():
            for i in members:
                out[i] = " ".join(self.texts[j] for j in members if j != i)
        return out


def _jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load(folder: Path) -> ReqaSet:
    folder = Path(folder)
    if not (folder / "corpus.jsonl.gz").is_file():
        raise DatasetMissing(f"{folder} is not a ReQA dataset folder (no corpus.jsonl.gz)",
                             "Give a folder holding corpus.jsonl.gz and queries.jsonl.gz.")
    rows = sorted(_jsonl(folder / "corpus.jsonl.gz"), key=lambda r: (r["passage"], r["position"]))
    queries = [(q["id"], q["question"], list(q["answers"])) for q in _jsonl(folder / "queries.jsonl.gz")]
    return ReqaSet(
        name=folder.name,
        ids=[r["id"] for r in rows],
        texts=[r["text"] for r in rows],
        passages=[r["passage"] for r in rows],
        queries=queries,
    )
