"""The one input builder: contexts drawn from a paragraph, and the same inputs for index and eval."""

from __future__ import annotations

import gzip
import json

import pytest

from sparc_local.model.info import load_tokenizer
from sparc_local.model.inputs import InputSpec, paragraph_inputs
from tests.tiny import write_tokenizer

WORDS = "tea green black steep minutes water boil cup tower paris".split()  # one token each


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(write_tokenizer(tmp_path_factory.mktemp("tok") / "tok.json"))


def _context(tok, item) -> list[str]:
    """The context words of one input: after the sentence's [SEP], before the last [SEP]."""
    ids, types = item
    return [tok.id_to_token(int(t)) for t, s in zip(ids[:-1], types[:-1]) if s == 1]


def test_nearest_neighbours_in_document_order(tok):
    items = paragraph_inputs(tok, [WORDS], InputSpec(64, 2, 3, context_sentences=6))
    assert _context(tok, items[0]) == WORDS[1:7]  # shifted right at the start
    assert _context(tok, items[5]) == WORDS[2:5] + WORDS[6:9]  # 3 on each side
    assert _context(tok, items[9]) == WORDS[3:9]  # shifted left at the end
    assert [tok.id_to_token(int(t)) for t in items[5][0][:3]] == ["[CLS]", WORDS[5], "[SEP]"]


def test_nearest_order_and_odd_counts(tok):
    items = paragraph_inputs(tok, [WORDS], InputSpec(64, 2, 3, context_sentences=3, context_order="nearest"))
    assert _context(tok, items[5]) == [WORDS[4], WORDS[6], WORDS[3]]  # before wins a tie
    assert _context(tok, items[0]) == WORDS[1:4]


def test_the_token_budget_drops_the_farthest(tok):
    # 3 specials + 1 sentence token leave 4 context tokens
    items = paragraph_inputs(tok, [WORDS], InputSpec(8, 2, 3, context_sentences=1000))
    assert _context(tok, items[5]) == [WORDS[3], WORDS[4], WORDS[6], WORDS[7]]
    assert all(len(ids) <= 8 for ids, _ in items)


def test_no_context(tok):
    single, *_ = paragraph_inputs(tok, [["tea green"]], InputSpec(64, 2, 3))
    none = paragraph_inputs(tok, [WORDS[:3]], InputSpec(64, 2, 3, context_sentences=0))
    for ids, types in [single, *none]:
        assert ids[-1] == 3 and list(ids).count(3) == 1 and not types.any()


def test_paragraphs_do_not_share_context(tok):
    items = paragraph_inputs(tok, [WORDS[:2], WORDS[2:4]], InputSpec(64, 2, 3))
    assert [_context(tok, i) for i in items] == [[WORDS[1]], [WORDS[0]], [WORDS[3]], [WORDS[2]]]


def test_a_long_sentence_keeps_priority(tok):
    ids, types = paragraph_inputs(tok, [[" ".join(WORDS * 3), "tea"]], InputSpec(16, 2, 3))[0]
    assert len(ids) == 15 and not types.any()  # cut to max_length - 1, no room left for context


PASSAGE = ["Green tea should steep for three minutes.", "Black tea takes longer.",
           "Boil the water first.", "The tower was built in Paris.", "It took one year to build.",
           "The river runs past the tower.", "A train station is near the bridge.",
           "The museum sells a ticket for the tower.", "The king built a school."]


def test_index_and_eval_give_the_encoder_the_same_inputs(tmp_path, tiny_model_dir, monkeypatch):
    """A ReQA passage written as a file and indexed gets, sentence for sentence, the encoder
    inputs `eval` builds for it (issue #12: every figure is the product's own path)."""
    from sparc_local.evaluation.evaluate import evaluate
    from sparc_local.index.store import Index
    from sparc_local.model import encoder as encode
    from sparc_local.model.info import ModelInfo
    from sparc_local.pipeline import run_index

    seen: list[list] = []

    class Recording(encode.Encoder):
        def encode(self, paragraphs, *args, **kwargs):
            seen.append(paragraph_inputs(self.tokenizer, paragraphs, self.info.inputs))
            return super().encode(paragraphs, *args, **kwargs)

    monkeypatch.setattr(encode, "Encoder", Recording)
    info = ModelInfo.load(tiny_model_dir)
    ds = tmp_path / "reqa"
    ds.mkdir()
    with gzip.open(ds / "corpus.jsonl.gz", "wt") as fh:
        for i, text in enumerate(PASSAGE):
            fh.write(json.dumps({"id": f"p1-{i}", "text": text, "passage": "p1", "position": i}) + "\n")
    with gzip.open(ds / "queries.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "q1", "question": "how long should green tea steep", "answers": ["p1-0"]}) + "\n")
    evaluate(ds, info, threads=1)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "passage.txt").write_text(" ".join(PASSAGE) + "\n")
    with Index(tmp_path / "index.db") as index:
        run_index(index, [str(tmp_path / "docs")], info, lambda: Recording(info, threads=1))
    assert len(seen) == 2
    by_eval, by_index = seen
    assert len(by_eval) == len(by_index) == len(PASSAGE)
    for (a_ids, a_types), (b_ids, b_types) in zip(by_eval, by_index):
        assert a_ids.tolist() == b_ids.tolist() and a_types.tolist() == b_types.tolist()
    assert any(t.any() for _, t in by_eval)  # contexts were built, not empty
