"""When is `ask`'s best answer no answer?  The hybrid score's threshold (issue 17), from training data.

    SPARC_LOCAL_HOME=~/.cache/sparc-local-train/evalhome python benchmarks/no_answer.py [--model DIR]
    python benchmarks/no_answer.py --smoke    # the tiny model on a tiny set (smoke.py), calibrated and checked
    python benchmarks/no_answer.py --reranker DIR   # the second stage's threshold (rerank.json's likely; issue 44)

Training data only: du2017-train calibrates, squad-train-head checks (never squad-dev or
newsqa-dev, the evaluation sets).  The calibration index holds the passages of du2017-train's
even-numbered articles (a00, a02, ...), written by ``evaluate.fill_index`` with the `eval`
encoding cache (SPARC_LOCAL_HOME above holds it for the shipped model), and every question is
asked through ``query.ask.Asker``, the `ask` path, in hybrid mode.  Three kinds of question:

- answerable: its answer sentence is indexed (the even articles' questions);
- absent: a real question whose article is not indexed (the odd articles' questions);
- nonsense: random letter strings such as "zzzzqqq" (seeded).

A top answer is right when it is one of its question's answer sentences.  The threshold is the
highest score that keeps RECALL of the right top answers at or above it: below it the top answer
is rarely right, and the signal rarely hides a right one.  Printed for it (and other recalls):
that recall, the precision (right answers among all top answers called likely, over the three
kinds), and the share of each kind called unlikely; the F1-best threshold for comparison; the
same for `ask`'s own rule (``ask.LIKELY_SCORE`` and a question word in the passage, read from
the answers); then the same figures on squad-train-head (its own index, every question
answerable, with nonsense).

Off-topic questions (issue 32: "what is the best recipe for banana bread" answered from a manual
with no "No likely answer"): --tech N adds N small packages of the technical training data
(``training.techdata``'s "train" units only, never dev/test, none of the kept-out packages), each
with its own index, asked its own questions (answerable), the questions of the next package and
du2017-train questions (off-topic: real questions whose answer is not indexed) and nonsense; the
check set (squad-train-head) is also asked the questions of packages outside the calibration
sample (off-topic).  The threshold is then taken over all calibration answers pooled.
"""

from __future__ import annotations

import argparse
import random
import string
import tempfile
from pathlib import Path

import numpy as np

from sparc_local import paths
from sparc_local.errors import NoQueryTokens
from sparc_local.evaluation import reqa
from sparc_local.evaluation.evaluate import encode_corpus, fill_index
from sparc_local.index.store import Index
from sparc_local.model.info import ModelInfo, active_model
from sparc_local.query import fusion
from sparc_local.query.ask import LIKELY_SCORE, MIN_COVERAGE, Asker, shares_word

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "reqa"
TECH = Path.home() / ".cache" / "sparc-local-train" / "tech-v1"  # python -m sparc_lab.techdata
TECH_MAX_SENTENCES = 2000  # packages sampled for calibration are this small: encoding stays minutes
TECH_MIN_QUESTIONS = 30
OFF_TOPIC = 150  # off-topic questions asked per package index
TECH_CHECK = 4  # small technical packages outside the calibration sample, for the check
RECALL = 0.95  # right top answers kept "likely"
NONSENSE = 500  # random letter strings asked
SEED = 17
LINEAR_GRID = (0.25, 0.5, 1.0, 2.0)  # score + L x coverage
COVERAGE_GRID = (0.0, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.3)  # least share of the question's idf in the passage


def nonsense(n: int, seed: int = SEED) -> list[str]:
    rng = random.Random(seed)
    return ["zzzzqqq"] + ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 12))) for _ in range(n - 1)]


def top_answers(ds: reqa.ReqaSet, ds_dir: Path, keep, questions: list[tuple[str, set[str]]],
                info: ModelInfo, reranker=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(top hybrid score, top answer right, its passage holds a question word, the share of the question's
    idf its passage holds) per question, on an index of the passages ``keep`` accepts; with a
    ``reranker`` (``rerank.model.Reranker``), the top answer and score of `ask`'s second stage."""
    vectors = encode_corpus(ds, ds_dir, info, threads=None).head(info.top_k)
    scores, right, shares, cover = [], [], [], []
    with tempfile.TemporaryDirectory(dir=paths.user_dir()) as tmp:
        with Index(Path(tmp) / "calibrate.db") as index:
            to_sid = fill_index(index, ds, vectors, info, keep=keep)
            asker = Asker(index, info)
            for question, gold in questions:
                try:
                    top = asker.ask(question, k=1, mode=fusion.HYBRID, phrases=0, reranker=reranker)
                except NoQueryTokens:  # no searchable token: no answer at all
                    top = []
                scores.append(top[0].score if top else 0.0)
                right.append(bool(top) and to_sid[top[0].sentence_id] in gold)
                shares.append(bool(top) and shares_word(question, top[0].context))
                cover.append(float(asker.searcher.coverage(asker.tokens(question), [top[0].sentence_id])[0])
                             if top else 0.0)
    return np.array(scores), np.array(right), np.array(shares), np.array(cover)


def article(passage: str) -> int:
    return int(passage.split("_")[0][1:])  # "a07_003": article 7


def tech_units(n: int, seed: int = SEED) -> tuple[list[Path], list[Path]]:
    """(n small "train" packages for calibration, the other "train" packages) of the technical
    training data; dev and test units are never read."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the lab sits beside the package
    from sparc_lab import techdata

    train = json.loads((TECH / techdata.SPLIT_FILE).read_text())["train"]
    folders = [TECH / techdata.PACKAGES_DIR / u for u in sorted(train)]
    sets = {f: reqa.load(f) for f in folders}
    small = [f for f, d in sets.items() if 0 < len(d.ids) <= TECH_MAX_SENTENCES and len(d.queries) >= TECH_MIN_QUESTIONS]
    chosen = random.Random(seed).sample(small, min(n, len(small)))
    return chosen, [f for f in small if f not in chosen]


def questions_of(folder: Path, n: int, seed: int) -> list[str]:
    qs = [q for _, q, _ in reqa.load(folder).queries]
    return random.Random(seed).sample(qs, min(n, len(qs)))


def figures(above: np.ndarray, right: np.ndarray, kinds: dict[str, np.ndarray]) -> str:
    """Recall and precision of the right top answers among those called likely (``above``), and
    the share of each kind of question called unlikely."""
    recall = (above & right).sum() / max(right.sum(), 1)
    precision = (above & right).sum() / max(above.sum(), 1)
    flagged = ", ".join(f"{name} {np.mean(~above[m]):.3f}" for name, m in kinds.items())
    return f"recall {recall:.3f}, precision {precision:.3f}; flagged: {flagged}"


def asks(s: np.ndarray, shares: np.ndarray, cover: np.ndarray, args: argparse.Namespace) -> np.ndarray:
    """``ask``'s rule (query/ask.py) with the thresholds given: which top answers it calls likely."""
    return (s >= args.likely) & shares & (cover >= args.min_coverage)


def joint_threshold(s: np.ndarray, right: np.ndarray, passes: np.ndarray) -> float | None:
    """The highest score threshold that, with the other conditions (``passes``), keeps RECALL of
    the right top answers; None when the conditions alone drop more."""
    kept = np.sort(s[right & passes])[::-1]
    need = int(np.ceil(RECALL * right.sum()))
    return float(kept[need - 1]) if len(kept) >= need > 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calibrate", type=Path, default=DATA / "du2017-train")
    ap.add_argument("--check", type=Path, default=DATA / "squad-train-head")
    ap.add_argument("--tech", type=int, default=0, help="small packages of the technical training data to add")
    ap.add_argument("--likely", type=float, default=LIKELY_SCORE, help="the threshold `ask` uses (to report before/after)")
    ap.add_argument("--min-coverage", type=float, default=MIN_COVERAGE, help="the idf share `ask` asks of a passage")
    ap.add_argument("--model", type=Path, help="model folder (default: the active model)")
    ap.add_argument("--reranker", type=Path,
                    help="a reranker folder: calibrate the likely threshold of `ask`'s second stage (rerank.json's likely)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds: the tiny test model on a tiny set (smoke.py), which calibrates and checks")
    args = ap.parse_args()
    if args.smoke:
        import smoke

        s = smoke.setup()
        args.calibrate, args.check, args.model = s.data, s.data, s.model
    info = ModelInfo.load(args.model) if args.model else active_model()
    reranker = None
    if args.reranker:
        from sparc_local.rerank.model import Reranker

        reranker = Reranker.load(args.reranker)

    ds = reqa.load(args.calibrate)
    passage_of = dict(zip(ds.ids, ds.passages))
    indexed = lambda p: article(p) % 2 == 0
    asked = [(q, set(a)) for _, q, a in ds.queries] + [(q, set()) for q in nonsense(NONSENSE)]
    s, right, shares, cover = top_answers(ds, args.calibrate, indexed, asked, info, reranker)
    n_real = len(ds.queries)
    answerable = np.zeros(len(asked), bool)
    answerable[:n_real] = [any(indexed(passage_of[a]) for a in gold) for _, gold in asked[:n_real]]
    absent = np.zeros(len(asked), bool)
    absent[:n_real] = ~answerable[:n_real]
    junk = np.zeros(len(asked), bool)
    junk[n_real:] = True
    off = np.zeros(len(asked), bool)
    wiki_off = np.zeros(len(asked), bool)
    if args.tech:
        units, others = tech_units(args.tech)
        wiki = [q for _, q, _ in ds.queries]
        for i, unit in enumerate(units):
            own = reqa.load(unit)
            away = questions_of(units[(i + 1) % len(units)], OFF_TOPIC, SEED + i) + random.Random(SEED + i).sample(
                wiki, OFF_TOPIC)
            asked_u = ([(q, set(a)) for _, q, a in own.queries] + [(q, set()) for q in away]
                       + [(q, set()) for q in nonsense(OFF_TOPIC // 3, SEED + 100 + i)])
            su, ru, lu, cu = top_answers(own, unit, None, asked_u, info, reranker)
            n_own, n_away = len(own.queries), len(away)
            s, right, shares = np.concatenate([s, su]), np.concatenate([right, ru]), np.concatenate([shares, lu])
            cover = np.concatenate([cover, cu])
            grow = np.zeros(len(asked_u), bool)
            ans_u, off_u, wiki_u, junk_u = grow.copy(), grow.copy(), grow.copy(), grow.copy()
            ans_u[:n_own], off_u[n_own:n_own + OFF_TOPIC], junk_u[n_own + n_away:] = True, True, True
            wiki_u[n_own + OFF_TOPIC:n_own + n_away] = True
            answerable, absent = np.concatenate([answerable, ans_u]), np.concatenate([absent, grow])
            off, junk = np.concatenate([off, off_u]), np.concatenate([junk, junk_u])
            wiki_off = np.concatenate([wiki_off, wiki_u])
        print(f"technical training data: {len(units)} packages ({', '.join(u.name for u in units)})")
    kinds = {"answerable wrong": answerable & ~right, "answerable right": right, "absent": absent,
             "off-topic": off, "encyclopedia in manuals": wiki_off, "nonsense": junk}
    kinds = {k: m for k, m in kinds.items() if m.any()}
    print(f"{ds.name}{' + technical' if args.tech else ''}: {answerable.sum()} answerable, {absent.sum()} absent, {off.sum()} off-topic, "
          f"{junk.sum()} nonsense questions; "
          f"top answer right for {right.sum()} ({right.sum() / answerable.sum():.3f} of answerable)")
    for name, m in kinds.items():
        q = np.quantile(s[m], [0.05, 0.25, 0.5, 0.75, 0.95])
        print(f"  {name:17} top score p5/25/50/75/95: " + " / ".join(f"{v:.3f}" for v in q))
    for level in (0.99, RECALL, 0.9, 0.8):
        t = float(np.quantile(s[right], 1 - level, method="lower"))
        print(f"{'threshold' if level == RECALL else 'at'} {t:.3f} (right top answers kept: {level:.0%}): "
              f"{figures(s >= t, right, kinds)}")
    t = float(np.quantile(s[right], 1 - RECALL, method="lower"))
    grid = np.unique(s)
    f1 = [2 * (s[right] >= g).sum() / ((s >= g).sum() + right.sum()) for g in grid]
    best = float(grid[int(np.argmax(f1))])
    print(f"F1-best threshold {best:.3f} (F1 {max(f1):.3f}): {figures(s >= best, right, kinds)}")
    print(f"--likely {args.likely:.3f} alone: {figures(s >= args.likely, right, kinds)}")
    rule = f"`ask` (--likely {args.likely:.3f}, --min-coverage {args.min_coverage:.3f} and a question word in the passage)"
    print(f"{rule}: {figures(asks(s, shares, cover, args), right, kinds)}")
    print(f"threshold {t:.3f} and a question word in the passage: {figures((s >= t) & shares, right, kinds)}")
    print("a question word in the passage, the share of the question's idf the passage holds at least C, and "
          f"the highest score threshold that keeps {RECALL:.0%} of right top answers:")
    rules = {}
    for c in COVERAGE_GRID:
        t_c = joint_threshold(s, right, shares & (cover >= c))
        if t_c is not None:
            rules[c] = t_c
            print(f"  C {c:.3f}, threshold {t_c:.3f}: {figures((s >= t_c) & shares & (cover >= c), right, kinds)}")
    print("a question word in the passage, and score + L x share at least a threshold that keeps "
          f"{RECALL:.0%} of right top answers:")
    lines = {}
    for lam in LINEAR_GRID:
        t_l = joint_threshold(s + lam * cover, right, shares)
        if t_l is not None:
            lines[lam] = t_l
            print(f"  L {lam:.2f}, threshold {t_l:.3f}: {figures((s + lam * cover >= t_l) & shares, right, kinds)}")
    c_best = max(rules, key=lambda c: (((s >= rules[c]) & shares & (cover >= c)) & right).sum()
                 / max(((s >= rules[c]) & shares & (cover >= c)).sum(), 1))
    print(f"chosen (the highest precision at {RECALL:.0%} recall): --min-coverage {c_best:.3f} --likely {rules[c_best]:.3f}")

    if args.check:
        check = reqa.load(args.check)
        away = [q for i, u in enumerate(others[:4]) for q in questions_of(u, OFF_TOPIC, SEED + 50 + i)] if args.tech else []
        asked = ([(q, set(a)) for _, q, a in check.queries] + [(q, set()) for q in away]
                 + [(q, set()) for q in nonsense(NONSENSE, SEED + 1)])
        s2, right2, shares2, cover2 = top_answers(check, args.check, None, asked, info, reranker)
        n_q = len(check.queries)
        off2, junk2 = np.zeros(len(asked), bool), np.zeros(len(asked), bool)
        off2[n_q:n_q + len(away)], junk2[n_q + len(away):] = True, True
        kinds2 = {"answerable wrong": ~junk2 & ~off2 & ~right2, "answerable right": right2, "off-topic": off2,
                  "nonsense": junk2}
        kinds2 = {k: m for k, m in kinds2.items() if m.any()}
        print(f"{check.name}: {len(check.queries)} answerable (top answer right for {right2.sum()}), "
              f"{off2.sum()} off-topic, {junk2.sum()} nonsense questions")
        print(f"  calibrated {t:.3f} alone: {figures(s2 >= t, right2, kinds2)}")
        print(f"  {rule}: {figures(asks(s2, shares2, cover2, args), right2, kinds2)}")
        print(f"  calibrated {t:.3f} and a question word in the passage: {figures((s2 >= t) & shares2, right2, kinds2)}")
        for c, t_c in rules.items():
            print(f"  C {c:.3f}, threshold {t_c:.3f}: {figures((s2 >= t_c) & shares2 & (cover2 >= c), right2, kinds2)}")
        for lam, t_l in lines.items():
            print(f"  L {lam:.2f}, threshold {t_l:.3f}: {figures((s2 + lam * cover2 >= t_l) & shares2, right2, kinds2)}")
        if args.tech:  # manuals outside the calibration sample, asked the check set's questions
            wiki2 = [q for _, q, _ in check.queries]
            parts = []
            for i, unit in enumerate(others[:TECH_CHECK]):
                own = reqa.load(unit)
                away = random.Random(SEED + 200 + i).sample(wiki2, OFF_TOPIC)
                asked_u = ([(q, set(a)) for _, q, a in own.queries] + [(q, set()) for q in away]
                           + [(q, set()) for q in nonsense(OFF_TOPIC // 3, SEED + 300 + i)])
                kind = np.repeat(np.arange(3), [len(own.queries), len(away), OFF_TOPIC // 3])
                parts.append((*top_answers(own, unit, None, asked_u, info, reranker), kind))
            s3, r3, l3, c3, k3 = (np.concatenate(a) for a in zip(*parts))
            kinds3 = {"answerable wrong": (k3 == 0) & ~r3, "answerable right": r3, "encyclopedia in manuals": k3 == 1,
                      "nonsense": k3 == 2}
            print(f"{TECH_CHECK} technical training packages outside the calibration sample "
                  f"({', '.join(u.name for u in others[:TECH_CHECK])}): {(k3 == 0).sum()} answerable "
                  f"(top answer right for {r3.sum()}), {(k3 == 1).sum()} {check.name} questions, {(k3 == 2).sum()} nonsense")
            print(f"  {rule}: {figures(asks(s3, l3, c3, args), r3, kinds3)}")
            for c, t_c in rules.items():
                print(f"  C {c:.3f}, threshold {t_c:.3f}: {figures((s3 >= t_c) & l3 & (c3 >= c), r3, kinds3)}")


if __name__ == "__main__":
    main()
