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
import string
import unicodedata
from collections.abc import Sequence
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


# BertNormalizer's clean_text beyond ASCII: White_Space characters that are not controls (controls go)
_SPACES = frozenset("\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                    "\u2028\u2029\u202f\u205f\u3000")
# clean_text's controls (is_other): unassigned characters are not among them
_CONTROLS = frozenset(("Cc", "Cf", "Co", "Cs"))
# BERT's "Chinese characters" (CJK ideograph blocks), which its normalizer puts between spaces
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


# The characters whose every property the steps above read (category, NFD, lowercase, White_Space)
# is the same in Python's unicodedata and in the tables of the tokenizers library; tests/test_query.py
# checks every one of them. Text with any other character (scripts whose characters came in newer
# Unicode versions) goes to the library.
_OTHER = re.compile("[^\x00-\u05ff\u2000-\u2dff\u3000-\u9fff\uac00-\ud7ff\uf900-\uffff\U0001f000-\U0001faff]")


def _reorders(text: str) -> bool:
    """Would NFD reorder combining marks here (a mark after one of a higher class)? Then characters
    move, and only the library's alignment knows where each one came from."""
    last = 0
    for c in text:
        if c == "\ufffd" or c not in "\t\n\r" and unicodedata.category(c) in _CONTROLS:
            continue  # clean_text drops it before NFD: the marks around it meet
        for x in unicodedata.normalize("NFD", c) if c >= "\u00c0" else c:
            ccc = unicodedata.combining(x)
            if 0 < ccc < last:
                return True
            last = ccc
    return False


class _Bert:
    """BERT's split of text into token ids, as tokenizers does it: special tokens matched first
    (leftmost-longest, on the raw text), then BertNormalizer (clean_text, Chinese characters
    spaced, accents stripped by NFD, lowercase), BertPreTokenizer (spaces split, punctuation
    isolated) and WordPiece (greedy longest match, ``##`` continuations, [UNK] for a word that
    cannot be spelled or is too long). ASCII text takes a regular-expression path; other text is
    normalized a character at a time, which keeps each piece's characters in the original text."""

    def __init__(self, vocab: dict[str, int], unk: int, prefix: str, max_chars: int, lowercase: bool,
                 strip_accents: bool, chinese: bool, specials: dict[str, int]) -> None:
        self.vocab, self.unk, self.prefix, self.max_chars, self.lowercase = vocab, unk, prefix, max_chars, lowercase
        self.strip_accents, self.chinese, self.specials = strip_accents, chinese, specials
        alternatives = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
        self.split = re.compile(f"({alternatives})").split if specials else None
        self._normal: dict[str, str] = {}

    @classmethod
    def of(cls, spec: dict) -> _Bert | None:
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
            vocab, lowercase = model["vocab"], bool(norm.get("lowercase", True))
            strip = norm.get("strip_accents")
            return cls(vocab, vocab[model["unk_token"]], model.get("continuing_subword_prefix", "##"),
                       int(model.get("max_input_chars_per_word", 100)), lowercase,
                       lowercase if strip is None else bool(strip), bool(norm.get("handle_chinese_chars", True)),
                       {a["content"]: int(a["id"]) for a in added})
        except (KeyError, TypeError, AttributeError, ValueError):
            return None

    @staticmethod
    def reads(text: str) -> bool:
        """Does this splitter give the library's tokens and offsets for ``text``?"""
        return text.isascii() or not _OTHER.search(text) and not _reorders(text)

    def ids(self, text: str) -> list[int]:
        return [i for i, _, _ in self.spans(text)]

    def spans(self, text: str) -> list[Span]:
        """(token id, start, end) of each token, [start, end) in ``text``."""
        parts = self.split(text) if self.split else [text]
        out: list[Span] = []
        at = 0
        for i, part in enumerate(parts):
            if i % 2:  # a special token
                out.append((self.specials[part], at, at + len(part)))
            elif part.isascii() and len(clean := part.translate(_CLEAN)) == len(part):
                for m in _PRE_TOKENS.finditer(clean.lower() if self.lowercase else clean):
                    out += self._wordpiece(m.group(), range(at + m.start(), at + m.end()))
            else:
                out += self._unicode(part, at)
            at += len(part)
        return out

    def _char(self, c: str) -> str:
        """What BertNormalizer makes of one character (its steps all work a character at a time)."""
        if c.isascii():
            s = c.translate(_CLEAN)
            return s.lower() if self.lowercase else s
        if c == "\ufffd" or unicodedata.category(c) in _CONTROLS:
            return ""
        if c in _SPACES:
            return " "
        s = f" {c} " if self.chinese and any(a <= ord(c) <= b for a, b in _CJK) else c
        if self.strip_accents:
            s = "".join(x for x in unicodedata.normalize("NFD", s) if unicodedata.category(x) != "Mn")
        return s.lower() if self.lowercase else s

    def _unicode(self, text: str, at: int) -> list[Span]:
        out: list[Span] = []
        word: list[str] = []
        where: list[int] = []  # the character of the text each character of ``word`` came from

        def flush() -> None:
            if word:
                out.extend(self._wordpiece("".join(word), where.copy()))
                word.clear()
                where.clear()

        for j, c in enumerate(text, start=at):
            normal = self._normal.get(c)
            if normal is None:
                normal = self._normal[c] = self._char(c)
            for n in normal:
                if n == " ":
                    flush()
                elif n in string.punctuation or not n.isascii() and unicodedata.category(n)[0] == "P":
                    flush()
                    out.extend(self._wordpiece(n, [j]))
                else:
                    word.append(n)
                    where.append(j)
        flush()
        return out

    def _wordpiece(self, word: str, where: Sequence[int]) -> list[Span]:
        """``where[j]``: the character of the text that the word's j-th character came from."""
        if len(word) > self.max_chars:
            return [(self.unk, where[0], where[-1] + 1)]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                i = self.vocab.get(word[start:end] if start == 0 else self.prefix + word[start:end])
                if i is not None:
                    break
            else:
                return [(self.unk, where[0], where[-1] + 1)]
            pieces.append((i, where[start], where[end - 1] + 1))
            start = end
        return pieces


class QueryTokenizer:
    """The model's tokenizer as the `ask` path uses it: ``encode(text, add_special_tokens=False).ids``
    and ``id_to_token``, like a tokenizers.Tokenizer.

    tokenizers.Tokenizer.from_file spends ~19 ms building its WordPiece vocabulary, a fifth of a
    cold `ask`; json reads the same file in ~5 ms.  So questions and answers are split by _Bert,
    which tests/test_query.py holds to the library's ids and offsets on random text of many scripts;
    --explain's names and a tokenizer.json of another kind load the library.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._library = None
        try:
            spec = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            spec = None
        self._bert = _Bert.of(spec) if isinstance(spec, dict) else None
        if self._bert is None:
            self._lib()  # ModelMissing or ModelDamaged, as the library reads the file

    def _lib(self):
        if self._library is None:
            self._library = load_tokenizer(self.path)
        return self._library

    def encode(self, text: str, add_special_tokens: bool = False) -> _Encoding:
        if self._bert is not None and not add_special_tokens and self._bert.reads(text):
            return _Encoding(self._bert.ids(text))
        return _Encoding(self._lib().encode(text, add_special_tokens=add_special_tokens).ids)

    def spans(self, text: str) -> list[Span]:
        """(token id, start, end) of each token of ``text`` (no special tokens added), the
        tokens ``encode`` gives, with their characters in ``text``."""
        if self._bert is not None and self._bert.reads(text):
            return self._bert.spans(text)
        enc = self._lib().encode(text, add_special_tokens=False)
        return [(i, a, b) for i, (a, b) in zip(enc.ids, enc.offsets)]

    def id_to_token(self, token_id: int) -> str | None:
        return self._lib().id_to_token(token_id)
