"""query.QueryTokenizer: an ASCII question gets exactly the token ids the tokenizers library gives it,
without the library's 19 ms load; anything else goes to the library."""

from __future__ import annotations

import json
import random
import string
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from sparc_local.model.info import shipped_model_dir
from sparc_local.query.tokens import QueryTokenizer
from tests.tiny import WORDS, write_tokenizer


@pytest.fixture(scope="module", params=["shipped", "tiny"])
def tokenizer_file(request, tmp_path_factory) -> Path:
    if request.param == "shipped":
        return shipped_model_dir() / "tokenizer.json"
    return write_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


def _texts(seed: int, n: int) -> list[str]:
    """Random ASCII: every character (controls too), words of the vocabularies, special tokens in
    and out of brackets, and words too long for WordPiece."""
    rng = random.Random(seed)
    chars = [chr(i) for i in range(128)]
    weights = [1] * 128
    for c in string.ascii_letters:
        weights[ord(c)] = 12
    weights[ord(" ")] = 40
    pieces = list(WORDS) + ["[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[mask]", "[MASK", "##ing", "unaffable",
                            "x" * 100, "y" * 101, "don't", "e-mail", "U.S.A.", "naïve"]
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 8)):
            if rng.random() < 0.5:
                parts.append(rng.choice(pieces))
            else:
                parts.append("".join(rng.choices(chars, weights, k=rng.randint(1, 12))))
        texts.append(rng.choice(["", " ", "\t", "\n"]).join(parts) if rng.random() < 0.3 else " ".join(parts))
    return texts


def test_ascii_questions_get_the_library_ids(tokenizer_file: Path):
    library = Tokenizer.from_file(str(tokenizer_file))
    ours = QueryTokenizer(tokenizer_file)
    assert ours._ascii is not None  # the fast splitter reads this tokenizer
    texts = _texts(0, 4000) + (shipped_model_dir().parent.parent / "sparc_local" / "sample" / "QUESTIONS.txt"
                               ).read_text().splitlines()
    ascii_texts = [t for t in texts if t.isascii()]
    assert len(ascii_texts) > 3000
    for text in texts:
        assert ours.encode(text).ids == library.encode(text, add_special_tokens=False).ids, repr(text)
    assert ours.id_to_token(library.token_to_id("tea")) == "tea"


def test_token_spans_are_the_library_offsets(tokenizer_file: Path):
    """The answer phrase maps stored token positions to characters with these spans."""
    library = Tokenizer.from_file(str(tokenizer_file))
    ours = QueryTokenizer(tokenizer_file)
    for text in _texts(1, 3000) + ["Green tea should steep for two to three minutes.", "naïve café", "a\x01b c"]:
        enc = library.encode(text, add_special_tokens=False)
        assert ours.spans(text) == [(i, a, b) for i, (a, b) in zip(enc.ids, enc.offsets)], repr(text)


def test_an_ascii_question_does_not_load_the_library(tokenizer_file: Path):
    ours = QueryTokenizer(tokenizer_file)
    ours.encode("How long should green tea steep?")
    assert ours._library is None
    ours.encode("Wie lange zieht grüner Tee?")  # not ASCII: the library splits it
    assert ours._library is not None


@pytest.mark.parametrize("change", [
    lambda spec: spec["normalizer"].update(clean_text=False),
    lambda spec: spec.update(pre_tokenizer={"type": "Whitespace"}),
    lambda spec: spec["added_tokens"].append({"id": 7, "content": "tea", "single_word": False, "lstrip": False,
                                              "rstrip": False, "normalized": True, "special": False}),
    lambda spec: spec["model"].update(unk_token="[NOPE]"),
    lambda spec: spec.update(normalizer=None),
])
def test_another_kind_of_tokenizer_goes_to_the_library(tmp_path: Path, change):
    spec = json.loads((shipped_model_dir() / "tokenizer.json").read_text())
    change(spec)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    try:
        library = Tokenizer.from_file(str(path))
    except Exception:  # the library rejects it too: so does QueryTokenizer, with the model errors
        pytest.skip("not a tokenizer the library reads")
    ours = QueryTokenizer(path)
    assert ours._ascii is None and ours._library is not None
    text = "Green tea: steep it\tfor 3 minutes [MASK]."
    assert ours.encode(text).ids == library.encode(text, add_special_tokens=False).ids


def test_a_damaged_tokenizer_is_reported_as_the_library_reads_it(tmp_path: Path):
    from sparc_local.errors import ModelDamaged, ModelMissing

    with pytest.raises(ModelMissing):
        QueryTokenizer(tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer.json").write_text("{bad")
    with pytest.raises(ModelDamaged, match="key must be a string"):
        QueryTokenizer(tmp_path / "tokenizer.json")


def test_ask_path_imports_no_tokenizers_library_for_an_ascii_question(tokenizer_file: Path):
    import subprocess

    code = ("import sys; from sparc_local.query.tokens import QueryTokenizer; "
            f"QueryTokenizer({str(tokenizer_file)!r}).encode('green tea?'); print('tokenizers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr
