"""A fixed rule that turns a technical pair's heading, term or option into a question (issue 31).

A manual's reader asks "How do I check the device connection?", but the mechanically built pairs
(sparc_lab/techdata.py) hold "Checking Device Connection", "nvols" or "--album=NAME". Trained
only on those, the model never sees the question words a real question carries. The rule:

- a question already (ends with "?" or starts with a question word): as it is;
- an option ("-x", "--name"): "What does OPTION do?";
- a heading whose first word is a gerund ("Checking …"): "How do I check …?" (the stem is the
  gerund minus "ing", with a doubled last consonant undone, or an "e" restored when that form
  is a whole word of the vocabulary);
- anything else (a noun phrase, a term): "What is X?".
"""

from __future__ import annotations

import re
from collections.abc import Container

QUESTION_WORDS = frozenset("how what why when where which who whom whose can could does do is are should will "
                           "would may must did".split())
_OPTION = re.compile(r"^-{1,2}[A-Za-z0-9]")
_REWRITTEN_KINDS = frozenset({"heading", "term", "option"})
NOT_GERUNDS = frozenset("being during thing nothing something anything everything string morning evening "
                        "ceiling spring wing king ring sing".split())


def is_question(text: str) -> bool:
    words = text.split()
    return text.rstrip().endswith("?") or (bool(words) and words[0].lower() in QUESTION_WORDS)


def verb_of(gerund: str, vocab: Container[str]) -> str | None:
    """"checking" -> "check", "running" -> "run", "using" -> "use"; None if not a gerund."""
    word = gerund.lower()
    if len(word) < 5 or not word.endswith("ing") or word in NOT_GERUNDS:
        return None
    stem = word[:-3]
    if not re.search(r"[aeiouy]", stem):
        return None  # "string", "strings": not a verb's gerund
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "ls" and stem[:-1] in vocab:
        return stem[:-1]
    for verb in (stem + "e", stem):
        if verb in vocab:
            return verb
    return None


def as_question(text: str, kind: str, vocab: Container[str]) -> str:
    """The pair's question in question form, by the rule above; ``kind`` is techdata's."""
    text = " ".join(text.split()).rstrip(" .:")
    if kind not in _REWRITTEN_KINDS or not text or is_question(text):
        return text
    if kind == "option" or _OPTION.match(text):
        return f"What does {text} do?"
    first, _, rest = text.partition(" ")
    verb = verb_of(first, vocab)
    if kind == "heading" and verb is not None:
        return f"How do I {verb} {rest.lower()}?".replace(" ?", "?")
    return f"What is {text}?"
