"""From a question to the set of vocabulary tokens whose stored weights are summed.

g(q,s) = Σ_{v∈q} f(v,s) (SPARC Eq. 2) is a sum over the question's tokens as a set:
- a repeated token counts once ("the the" is not twice as much evidence);
- special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]) never count;
- punctuation-only tokens ("?", ",") never count: every question has them, they carry no
  information, and a sentence's weight for them only adds noise;
- stop words do count: the model learned their weights in training, and f is already small
  for them wherever they do not matter.
Training uses this same function, so the model is trained on the queries it will see.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sparc_local.model.info import load_tokenizer


def query_token_ids(tokenizer, text: str, skip: np.ndarray) -> np.ndarray:
    # plain sets: np.unique/np.isin would import numpy.ma on every cold `ask` (~9 ms)
    ids = set(tokenizer.encode(text, add_special_tokens=False).ids).difference(skip.tolist())
    return np.asarray(sorted(ids), dtype=np.int32)


class _Encoding(NamedTuple):
    ids: list[int]


Span = tuple[int, int, int]  # a token id and its [start, end) characters in the text


# ASCII punctuation, which BERT's pre-tokenizer isolates (Rust's is_ascii_punctuation)
_PUNCT = r"!-/:-@\[-`{-~"
_PRE_TOKENS = re.compile(rf"[^ {_PUNCT}]+|[{_PUNCT}]")
# BertNormalizer's clean_text on ASCII: control characters dropped, tab and line ends made spaces
_CLEAN = {c: None for c in [*range(0x00, 0x20), 0x7F]} | {ord("\t"): " ", ord("\n"): " ", ord("\r"): " "}


class _AsciiBert:
    """BERT's split of ASCII text into token ids: special tokens matched first (leftmost-longest,
    on the raw text), then BertNormalizer (clean_text, lowercase; its accent and CJK steps change
    no ASCII text), BertPreTokenizer (spaces split, punctuation isolated) and WordPiece (greedy
    longest match, ``##`` continuations, [UNK] for a word that cannot be spelled or is too long)."""

    def __init__(self, vocab: dict[str, int], unk: int, prefix: str, max_chars: int, lowercase: bool,
                 specials: dict[str, int]) -> None:
        self.vocab, self.unk, self.prefix, self.max_chars, self.lowercase = vocab, unk, prefix, max_chars, lowercase
        self.specials = specials
        alternatives = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
        self.split = re.compile(f"({alternatives})").split if specials else None

    @classmethod
    def of(cls, spec: dict) -> _AsciiBert | None:
        """The splitter of a tokenizer.json whose every step is one it reproduces, else None."""
        try:
            norm, model, added = spec["normalizer"], spec["model"], spec.get("added_tokens") or []
            post = (spec.get("post_processor") or {}).get("type")
            if (norm["type"] != "BertNormalizer" or not norm.get("clean_text", True)
                    or spec["pre_tokenizer"] != {"type": "BertPreTokenizer"} or model["type"] != "WordPiece"
                    or post not in (None, "TemplateProcessing", "BertProcessing")
                    or any(a["normalized"] or a["single_word"] or a["lstrip"] or a["rstrip"] or not a["content"]
                           for a in added)):
                return None
            vocab = model["vocab"]
            return cls(vocab, vocab[model["unk_token"]], model.get("continuing_subword_prefix", "##"),
                       int(model.get("max_input_chars_per_word", 100)), bool(norm.get("lowercase", True)),
                       {a["content"]: int(a["id"]) for a in added})
        except (KeyError, TypeError, AttributeError, ValueError):
            return None

    def ids(self, text: str) -> list[int]:
        return [i for i, _, _ in self.spans(text)]

    def spans(self, text: str) -> list[Span]:
        """(token id, start, end) of each token, [start, end) in ``text``; offsets hold when
        clean_text deletes nothing (``QueryTokenizer.spans`` checks)."""
        parts = self.split(text) if self.split else [text]
        out: list[Span] = []
        at = 0
        for i, part in enumerate(parts):
            if i % 2:  # a special token
                out.append((self.specials[part], at, at + len(part)))
            else:
                clean = part.translate(_CLEAN)
                for m in _PRE_TOKENS.finditer(clean.lower() if self.lowercase else clean):
                    out += self._wordpiece(m.group(), at + m.start())
            at += len(part)
        return out

    def _wordpiece(self, word: str, at: int) -> list[Span]:
        if len(word) > self.max_chars:
            return [(self.unk, at, at + len(word))]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                i = self.vocab.get(word[start:end] if start == 0 else self.prefix + word[start:end])
                if i is not None:
                    break
            else:
                return [(self.unk, at, at + len(word))]
            pieces.append((i, at + start, at + end))
            start = end
        return pieces


class QueryTokenizer:
    """The model's tokenizer as the `ask` path uses it: ``encode(text, add_special_tokens=False).ids``
    and ``id_to_token``, like a tokenizers.Tokenizer.

    tokenizers.Tokenizer.from_file spends ~19 ms building its WordPiece vocabulary, a fifth of a
    cold `ask`; json reads the same file in ~5 ms.  So an ASCII question (most are) is split by
    _AsciiBert, which tests/test_query.py holds to the library's ids on random text; any other
    question, --explain's names and a tokenizer.json of another kind load the library.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._library = None
        try:
            spec = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            spec = None
        self._ascii = _AsciiBert.of(spec) if isinstance(spec, dict) else None
        if self._ascii is None:
            self._lib()  # ModelMissing or ModelDamaged, as the library reads the file

    def _lib(self):
        if self._library is None:
            self._library = load_tokenizer(self.path)
        return self._library

    def encode(self, text: str, add_special_tokens: bool = False) -> _Encoding:
        if self._ascii is not None and text.isascii() and not add_special_tokens:
            return _Encoding(self._ascii.ids(text))
        return _Encoding(self._lib().encode(text, add_special_tokens=add_special_tokens).ids)

    def spans(self, text: str) -> list[Span]:
        """(token id, start, end) of each token of ``text`` (no special tokens added), the
        tokens ``encode`` gives, with their characters in ``text``."""
        if self._ascii is not None and text.isascii() and len(text.translate(_CLEAN)) == len(text):
            return self._ascii.spans(text)
        enc = self._lib().encode(text, add_special_tokens=False)
        return [(i, a, b) for i, (a, b) in zip(enc.ids, enc.offsets)]

    def id_to_token(self, token_id: int) -> str | None:
        return self._lib().id_to_token(token_id)
