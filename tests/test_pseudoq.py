"""The fixed rule that puts a technical pair's heading, term or option in question form (issue 31)."""

import gzip
import json
import random

import numpy as np
import pytest

from sparc_lab.data import _rewritten, _tech_examples
from sparc_lab.interpolate import interpolate
from sparc_lab.pseudoq import as_question, verb_of
from sparc_lab.techdata import PACKAGES_DIR, SPLIT_FILE
from sparc_local.evaluation.reqa import load

VOCAB = frozenset("check run use write set map open install the".split())


@pytest.mark.parametrize(("text", "kind", "question"), [
    ("Checking Device Connection", "heading", "How do I check device connection?"),
    ("Running the tests", "heading", "How do I run the tests?"),
    ("Using the config file", "heading", "How do I use the config file?"),
    ("Writing rules:", "heading", "How do I write rules?"),
    ("String handling", "heading", "What is String handling?"),
    ("Configuration", "heading", "What is Configuration?"),
    ("nvols", "term", "What is nvols?"),
    ("--album=NAME", "option", "What does --album=NAME do?"),
    ("-c, --config <file>", "term", "What does -c, --config <file> do?"),
    ("How do I add a user?", "heading", "How do I add a user?"),
    ("What is a hook", "heading", "What is a hook"),
    ("Checking mail", "faq", "Checking mail"),  # an FAQ's own question is left as it is
])
def test_rule(text, kind, question):
    assert as_question(text, kind, VOCAB) == question


def test_verb_of_needs_a_whole_word_of_the_vocabulary():
    assert verb_of("mapping", VOCAB) == "map"
    assert verb_of("opening", VOCAB) == "open"
    assert verb_of("frobbing", VOCAB) is None
    assert verb_of("being", VOCAB) is None


def _write_set(folder, queries):
    folder.mkdir()
    corpus = [{"id": "p-0", "text": "Run make.", "passage": "p", "position": 0}]
    for name, rows in (("corpus", corpus), ("queries", queries)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)


def test_rewritten_share_and_kinds(tmp_path):
    queries = [{"id": f"q{i}", "question": "Running the tests", "answers": ["p-0"], "kind": "heading"}
               for i in range(200)] + [{"id": "faq", "question": "Running the tests", "answers": ["p-0"], "kind": "faq"}]
    _write_set(tmp_path / "pkg", queries)
    ds = load(tmp_path / "pkg")
    kinds = {q["id"]: q["kind"] for q in queries}
    out = _rewritten(ds, kinds, 0.5, VOCAB, random.Random(0))
    changed = [q for (_, old, _), (_, q, _) in zip(ds.queries, out.queries, strict=True) if q != old]
    assert 70 < len(changed) < 130 and set(changed) == {"How do I run the tests?"}
    assert dict((i, q) for i, q, _ in out.queries)["faq"] == "Running the tests"
    assert _rewritten(ds, kinds, 0.0, VOCAB, random.Random(0)).queries == ds.queries


def test_natural_questions_join_first(tmp_path):
    """With natural_first every FAQ pair is in the technical sample; the mechanical ones fill the rest."""
    (tmp_path / PACKAGES_DIR).mkdir()
    corpus = [{"id": f"p-{i}", "text": f"Sentence number {i} about make.", "passage": "p", "position": i}
              for i in range(20)]
    queries = [{"id": f"h{i}", "question": f"Heading {i}", "answers": [f"p-{i}"], "kind": "heading"}
               for i in range(15)] + [{"id": f"f{i}", "question": f"Why does make {i} fail?",
                                       "answers": [f"p-{i}"], "kind": "faq"} for i in range(3)]
    folder = tmp_path / PACKAGES_DIR / "pkg"
    folder.mkdir()
    for name, rows in (("corpus", corpus), ("queries", queries)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    (tmp_path / SPLIT_FILE).write_text(json.dumps({"train": ["pkg"], "dev": [], "test": []}))
    for natural_first, seed in ((True, 0), (True, 1), (False, 0)):
        out = _tech_examples(tmp_path, [], [], 5, 0.5, random.Random(seed), natural_first=natural_first)
        faqs = sum(ex.question.startswith("Why") for ex in out)
        assert len(out) == 5 and (faqs == 3 if natural_first else faqs < 5)


def test_interpolate_mixes_floats_and_keeps_the_rest():
    base = {"a": np.zeros(3, np.float32), "cfg": np.array("x")}
    tuned = {"a": np.full(3, 2.0, np.float32), "cfg": np.array("y")}
    out = interpolate(base, tuned, 0.25)
    assert out["a"].dtype == np.float32 and np.allclose(out["a"], 0.5)
    assert str(out["cfg"]) == "y"
    with pytest.raises(ValueError):
        interpolate(base, {"a": tuned["a"]}, 0.5)
