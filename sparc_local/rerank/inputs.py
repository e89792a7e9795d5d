"""The reranker's passage text: one function, shared by training (the lab) and `ask`.

PROVISIONAL: the training side owns this format; this version stands in until its own replaces it,
so the model is always fed at `ask` exactly what it was trained on. Pure str: no imports.
"""

WINDOW_CHARS = 1200  # at most this much of a passage around its best sentence (~256 WordPiece tokens)
HEADING_JOIN = " — "


def rerank_text(context: str, offset: int, length: int, heading: str | None = None) -> str:
    """The passage ``context`` as the reranker reads it: a window of at most WINDOW_CHARS centred on
    its best sentence ``context[offset:offset + length]``, cut at spaces, ``heading`` in front."""
    text = context
    if len(context) > WINDOW_CHARS:
        centre = offset + length // 2
        lo = max(0, min(centre - WINDOW_CHARS // 2, len(context) - WINDOW_CHARS))
        hi = lo + WINDOW_CHARS
        if lo > 0:  # start after a space, so no word is cut; the sentence's own start at the latest
            space = context.find(" ", lo, max(lo, offset))
            lo = space + 1 if space >= 0 else lo
        if hi < len(context):  # end before a space; the sentence's own end at the earliest
            space = context.rfind(" ", min(hi, offset + length), hi)
            hi = space if space >= 0 else hi
        text = context[lo:hi]
    text = text.strip()
    return f"{heading}{HEADING_JOIN}{text}" if heading else text
