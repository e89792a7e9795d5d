"""Compare sentence splitters against squad-dev's gold boundaries (MultiReQA annotations).

Run from the repo root:  python benchmarks/segmenter.py [--data PATH] [--limit N]
(`--smoke`: a tiny ReQA set, smoke.py, one timing run.)

Each passage is rebuilt by joining its gold sentences with one space. A boundary is the char
offset where a sentence starts (offset 0 excluded); a predicted boundary counts only if it hits
a gold offset exactly (leading whitespace of a predicted sentence is skipped first). Speed is
gold sentences per second over the whole set, best of --repeat runs, one process.

The gold is noisy: MultiReQA also "splits" before Wikipedia citation marks ("[citation needed]",
":33") and after abbreviations before lowercase words ("the U.S. | state"). R(cap) is therefore
also reported: recall on the gold boundaries whose sentence starts with a capital or digit, which
English readers would agree on; F1(cap) pairs it with the precision.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

Splitter = Callable[[str], list[int]]  # paragraph -> sentence start offsets

DEFAULT_DATA = (
    Path(__file__).resolve().parents[1] / ".." / "shared/data/reqa/squad-dev/corpus.jsonl.gz"
)


def load(path: Path, limit: int | None) -> list[tuple[str, list[int]]]:
    """(paragraph, gold boundary offsets) per passage, in file order."""
    passages: dict[str, list[tuple[int, str]]] = defaultdict(list)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            passages[d["passage"]].append((d["position"], d["text"]))
    out = []
    for sents in passages.values():
        sents.sort()
        text, starts = "", []
        for _, s in sents:
            if text:
                text += " "
            starts.append(len(text))
            text += s
        out.append((text, starts[1:]))
        if limit and len(out) >= limit:
            break
    return out


def _starts(text: str, spans: list[tuple[int, int]]) -> list[int]:
    out = []
    for s, _ in spans:
        while s < len(text) and text[s].isspace():
            s += 1
        if 0 < s < len(text):
            out.append(s)
    return out


def naive() -> Splitter:
    pat = re.compile(r"[.!?][\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
    return lambda text: [m.end() for m in pat.finditer(text)]


def rules() -> Splitter:
    from sparc_local.ingest.sentences import split_sentences

    return lambda text: _starts(text, split_sentences(text))


def pysbd_splitter() -> Splitter:
    import pysbd

    seg = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return lambda text: _starts(text, [(s.start, s.end) for s in seg.segment(text)])


def sentencex_splitter() -> Splitter:
    from sentencex import get_sentence_boundaries

    return lambda text: _starts(
        text, [(b["start_index"], b["end_index"]) for b in get_sentence_boundaries("en", text)]
    )


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "?"


CANDIDATES: dict[str, Callable[[], Splitter]] = {
    "naive [.!?] + Upper": naive,
    "rules (sparc_local)": rules,
    f"pysbd {_version('pysbd')}": pysbd_splitter,
    f"sentencex {_version('sentencex')}": sentencex_splitter,
}


def evaluate(split: Splitter, data: list[tuple[str, list[int]]], repeat: int) -> tuple[float, ...]:
    tp = fp = fn = cap_tp = cap_n = 0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        preds = [split(text) for text, _ in data]
        best = min(best, time.perf_counter() - t0)
    for (text, gold), pred in zip(data, preds, strict=True):
        g, p = set(gold), set(pred)
        tp += len(g & p)
        fp += len(p - g)
        fn += len(g - p)
        cap = {o for o in g if text[o].isupper() or text[o].isdigit()}
        cap_tp += len(cap & p)
        cap_n += len(cap)
    precision = tp / max(tp + fp, 1)
    recall = tp / max(tp + fn, 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-9)
    cap_recall = cap_tp / max(cap_n, 1)
    cap_f1 = 2 * precision * cap_recall / max(precision + cap_recall, 1e-9)
    sentences = sum(len(gold) + 1 for _, gold in data)
    return precision, recall, f1, cap_recall, cap_f1, sentences / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--limit", type=int, default=None, help="first N passages only")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs (best is kept)")
    ap.add_argument("--errors", type=str, default=None, help="print misses of this splitter")
    ap.add_argument("--smoke", action="store_true", help="seconds: a tiny ReQA set, one timing run (smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.data, args.repeat = s.data / "corpus.jsonl.gz", 1
    data = load(args.data, args.limit)
    n = sum(len(g) + 1 for _, g in data)
    print(f"{len(data)} passages, {n} gold sentences, {n - len(data)} boundaries")
    head = f"{'splitter':<24}{'precision':>10}{'recall':>8}{'F1':>7}{'R(cap)':>8}{'F1(cap)':>8}"
    print(f"{head}{'sentences/s':>13}")
    for name, make in CANDIDATES.items():
        try:
            split = make()
        except ImportError as e:
            print(f"{name:<24}  not installed ({e.name})")
            continue
        repeat = 1 if name.startswith("pysbd") else args.repeat  # pysbd is ~100x slower
        p, r, f1, cap_r, cap_f1, speed = evaluate(split, data, repeat)
        print(f"{name:<24}{p:>10.3f}{r:>8.3f}{f1:>7.3f}{cap_r:>8.3f}{cap_f1:>8.3f}{speed:>13,.0f}")
        if args.errors and name.startswith(args.errors):
            for text, gold in data:
                pred = set(split(text))
                for off in sorted(set(gold) ^ pred):
                    kind = "miss" if off in gold else "extra"
                    print(f"  {kind:5} ...{text[max(0, off - 40) : off]}|{text[off : off + 25]}...")


if __name__ == "__main__":
    main()
