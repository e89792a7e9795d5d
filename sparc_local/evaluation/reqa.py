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

    def paragraphs(self) -> list[list[str]]:
        """The sentence texts grouped by passage, in corpus order: the encoder's input, as a
        file's paragraphs are in `index` (each sentence's context comes from its passage, §6.2)."""
        out: list[list[str]] = []
        for i, text in enumerate(self.texts):
            if i == 0 or self.passages[i] != self.passages[i - 1]:
                out.append([])
            out[-1].append(text)
        return out


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a gzipped JSON-lines file of the format (also read by the lab for fields load drops)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load(folder: Path) -> ReqaSet:
    folder = Path(folder)
    if not (folder / "corpus.jsonl.gz").is_file():
        raise DatasetMissing(f"{folder} is not a ReQA dataset folder (no corpus.jsonl.gz)",
                             "Give a folder holding corpus.jsonl.gz and queries.jsonl.gz.")
    rows = sorted(read_jsonl(folder / "corpus.jsonl.gz"), key=lambda r: (r["passage"], r["position"]))
    queries = [(q["id"], q["question"], list(q["answers"])) for q in read_jsonl(folder / "queries.jsonl.gz")]
    return ReqaSet(
        name=folder.name,
        ids=[r["id"] for r in rows],
        texts=[r["text"] for r in rows],
        passages=[r["passage"] for r in rows],
        queries=queries,
    )
