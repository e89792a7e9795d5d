"""rerank_text: the one text format training and `ask` share (issue 44)."""

from sparc_local.rerank.inputs import rerank_text


def test_heading_prefix_and_whitespace():
    assert rerank_text(["Run  it.", "Then\nstop."], 0, "Usage") == "Usage — Run it. Then stop."
    assert rerank_text(["Run it."], 0, "") == "Run it."


def test_long_passage_keeps_the_best_sentence_and_its_neighbours():
    s = [c * 300 for c in "abcde"]
    assert [w[0] for w in rerank_text(s, 3, "").split()] == ["c", "d", "e"]
    assert [w[0] for w in rerank_text(s, 0, "").split()] == ["a", "b", "c"]
    assert rerank_text(["x" * 2000], 0, "") == "x" * 2000  # the best sentence alone may be longer
