"""query.QueryTokenizer: a question or answer gets exactly the token ids and offsets the tokenizers
library gives it, without the library's 19 ms load; text in scripts the splitter does not read goes
to the library."""

from __future__ import annotations

import json
import random
import string
import sys
import unicodedata
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from sparc_local.model.info import shipped_model_dir
from sparc_local.query.tokens import _OTHER, QueryTokenizer
from sparc_local.sample import sample_questions
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
    assert ours._bert is not None  # the fast splitter reads this tokenizer
    texts = _texts(0, 4000) + sample_questions()
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


# what the splitter reads beyond ASCII: Latin, Greek, Cyrillic, combining marks, punctuation and
# symbols, CJK, kana, Hangul, fullwidth forms and emoji (the ranges _OTHER leaves out)
READ = [(0x80, 0x600), (0x2000, 0x2E00), (0x3000, 0xA000), (0xAC00, 0xD800), (0xF900, 0x10000), (0x1F000, 0x1FB00)]


def _unicode_texts(seed: int, n: int) -> list[str]:
    """Random text from the ranges the splitter reads: accents to strip, marks that NFD reorders,
    controls clean_text drops between them, spaces of every kind, CJK to put between spaces."""
    rng = random.Random(seed)
    pools = [range(0x20, 0x7F), range(0x00, 0x20), range(0xA0, 0x250), range(0x300, 0x370), range(0x370, 0x400),
             range(0x400, 0x500), range(0x1E00, 0x1F00), range(0x2000, 0x2070), range(0x2100, 0x2150),
             range(0x3000, 0x3040), range(0x4E00, 0x4E40), range(0xAC00, 0xAC20), range(0xF900, 0xF920),
             range(0xFE00, 0xFE10), range(0xFF00, 0xFF60), range(0x1F600, 0x1F610)]
    return ["".join(chr(rng.choice(rng.choice(pools))) if rng.random() < 0.6 else rng.choice(" abcdefghiklmnoprstea")
                    for _ in range(rng.randint(1, 30))) for _ in range(n)]


def test_text_beyond_ascii_gets_the_library_ids_and_offsets(tokenizer_file: Path):
    library = Tokenizer.from_file(str(tokenizer_file))
    ours = QueryTokenizer(tokenizer_file)
    texts = _unicode_texts(2, 6000) + ["naïve café", "80 °C", "“quoted” – dash…", "ΟΔΟΣ σας", "Ünïcödé [MASK] x",
                                       "東京タワー 서울", "İstanbul", "ﬁne ½ Å", "tg\u302f\u034d", "\u302f\x1d\u302a"]
    assert sum(ours._bert.reads(t) for t in texts) > 3000  # the rest: marks NFD would reorder
    for text in texts:
        enc = library.encode(text, add_special_tokens=False)
        assert ours.spans(text) == [(i, a, b) for i, (a, b) in zip(enc.ids, enc.offsets)], ascii(text)
        assert ours.encode(text).ids == enc.ids, ascii(text)


def test_every_character_the_splitter_reads_is_split_as_the_library_splits_it(tokenizer_file: Path):
    """Python's Unicode tables and the library's differ for characters of newer Unicode versions:
    the ranges the splitter reads hold none of them, alone, inside a word, doubled or after an accent."""
    library = Tokenizer.from_file(str(tokenizer_file))
    ours = QueryTokenizer(tokenizer_file)
    chars = [chr(c) for a, b in READ for c in range(a, b) if unicodedata.category(chr(c)) != "Cs"]
    assert not any(_OTHER.search(c) for c in chars)
    for at in range(0, len(chars), 400):
        text = " ".join(f"{c} a{c}b {c}{c} é{c}" for c in chars[at:at + 400])
        enc = library.encode(text, add_special_tokens=False)
        assert ours._bert.spans(text) == [(i, a, b) for i, (a, b) in zip(enc.ids, enc.offsets)], ascii(chars[at])


def test_a_question_the_splitter_reads_does_not_load_the_library(tokenizer_file: Path):
    ours = QueryTokenizer(tokenizer_file)
    ours.encode("How long should green tea steep?")
    ours.spans("Steep it at about 80 °C – “not boiling”.")
    ours.encode("Wie lange zieht grüner Tee?")
    assert ours._library is None
    ours.encode("كم من الوقت؟")  # Arabic: a script the splitter leaves to the library
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
    assert ours._bert is None and ours._library is not None
    text = "Green tea: steep it\tfor 3 minutes [MASK]."
    assert ours.encode(text).ids == library.encode(text, add_special_tokens=False).ids


def test_a_damaged_tokenizer_is_reported_as_the_library_reads_it(tmp_path: Path):
    from sparc_local.errors import ModelDamaged, ModelMissing

    with pytest.raises(ModelMissing):
        QueryTokenizer(tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer.json").write_text("{bad")
    with pytest.raises(ModelDamaged, match="key must be a string"):
        QueryTokenizer(tmp_path / "tokenizer.json")


def test_ask_path_imports_no_tokenizers_library_for_a_question_it_reads(tokenizer_file: Path):
    import subprocess

    code = ("import sys; from sparc_local.query.tokens import QueryTokenizer; "
            f"QueryTokenizer({str(tokenizer_file)!r}).encode('green tea at 80 °C?'); print('tokenizers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr
