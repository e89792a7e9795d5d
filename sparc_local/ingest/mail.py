"""Readers for e-mail: one message (.eml) or a mailbox of them (.mbox), with the standard library.

A message gives its Subject, then its body: the text/plain part when there is one, else the HTML
part through the HTML reader; attachments are not read. Charsets are decoded as text files are
(readers._detect): the declared one, else UTF-8, else cp1252, never failing on a bad byte.

The mbox is split into messages while it streams, and each message is cut at MAX_MESSAGE_BYTES:
the standard library's mailbox.mbox scans the whole file before the first message and reads each
message whole, so one 500 MB attachment would sit in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from sparc_local.ingest.plaintext import text_blocks
from sparc_local.ingest.readers import (
    ExtractError,
    RawBlock,
    Read,
    _detect,
    _html_charset,
    _is_binary,
    declared_charset,
    html_blocks,
    one_line,
)

if TYPE_CHECKING:
    from email.message import EmailMessage

MAX_MESSAGE_BYTES = 10_000_000  # bytes read of one message: its text comes first, attachments after
_LINE_BYTES = 1 << 16  # an mbox is read in lines of at most this many bytes
_MBOX_SEPARATOR = b"From "


def _decode(data: bytes, charset: str | None) -> str | None:
    """Bytes of a header or body as text; None for binary data."""
    try:
        return data.decode(_detect(data, False, charset), errors="replace")
    except ExtractError:
        return None


def _subject(msg: EmailMessage) -> str:
    """The Subject, its RFC 2047 words decoded with the charset each names. Their bytes, and raw
    8-bit bytes (not allowed, sent all the same), are decoded as a body is: a charset no codec
    knows, or none, falls back to UTF-8, then cp1252, instead of U+FFFD."""
    from email.errors import HeaderParseError
    from email.header import decode_header

    raw = next((value for key, value in msg.raw_items() if key.lower() == "subject"), None)
    if raw is None:
        return ""
    raw = " ".join(raw.split())
    try:
        chunks = decode_header(raw)
    except HeaderParseError:  # an encoded word that is not base64: the Subject as written
        chunks = [(raw, None)]
    parts = []
    for chunk, charset in chunks:
        if isinstance(chunk, str):  # no encoded word: the parser kept 8-bit bytes as surrogates
            chunk = chunk.encode("utf-8", "surrogateescape")
        parts.append(_decode(chunk, declared_charset(charset)) or "")
    return "".join(parts)


def _body(msg: EmailMessage) -> list[str]:
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return []
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes) or not data:
        return []
    html = part.get_content_subtype() == "html"
    charset = declared_charset(part.get_content_charset()) or (_html_charset(data[:4096]) if html else None)
    text = _decode(data, charset)
    if text is None:
        return []
    blocks = html_blocks(text, keep_title=False) if html else text_blocks(text, None)
    return [b[0] for b in blocks]


def _parse(data: bytes) -> EmailMessage:
    from email import policy
    from email.parser import BytesParser

    return BytesParser(policy=policy.default).parsebytes(data)


def _message_blocks(msg: EmailMessage, number: int) -> list[RawBlock]:
    texts = [_subject(msg), *_body(msg)]
    return [RawBlock(t, number, None) for t in texts]


def eml_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    """One message; page 1, as in a mailbox of one."""
    with open(path, "rb") as f:
        data = f.read(MAX_MESSAGE_BYTES)
    if not data.strip():
        return [], False
    if _is_binary(data[:8192]):
        raise ExtractError("binary file, not an e-mail message")
    if data.startswith(_MBOX_SEPARATOR):  # saved from a mailbox with its envelope line
        data = data.partition(b"\n")[2]
    try:
        msg = _parse(data)
        if not msg.keys():
            raise ExtractError("not an e-mail message (no headers)")
        return _message_blocks(msg, 1), False
    except ExtractError:
        raise
    except Exception as e:  # the email package on a malformed header it cannot take
        raise ExtractError(f"not a valid e-mail message ({one_line(e)})") from e


def _mbox_messages(f: IO[bytes]) -> Iterator[bytes]:
    """Each message of an mbox without its 'From ' line, at most MAX_MESSAGE_BYTES of each.
    A message starts at every line that starts with 'From ', as in Python's mailbox.mbox."""
    message: list[bytes] | None = None
    size = 0
    line_start = True
    while line := f.readline(_LINE_BYTES):
        starts, line_start = line_start, line.endswith(b"\n")
        if starts and line.startswith(_MBOX_SEPARATOR):
            if message is not None:
                yield b"".join(message)
            message, size = [], 0
        elif message is None:
            if line.strip():
                raise ExtractError("not an mbox file (it does not start with a 'From ' line)")
        elif size < MAX_MESSAGE_BYTES:
            message.append(line)
            size += len(line)
    if message is not None:
        yield b"".join(message)


def mbox_blocks(path: Path, max_chars: int, max_unpacked: int) -> Read:
    """Every message in mailbox order, page = its number (1-based). A message the email package
    cannot take is left out and the others are read."""
    out: list[RawBlock] = []
    chars = 0
    first_error: Exception | None = None
    with open(path, "rb") as f:
        for number, data in enumerate(_mbox_messages(f), 1):
            try:
                blocks = _message_blocks(_parse(data), number)
            except Exception as e:  # the email package on a malformed header it cannot take
                first_error = first_error or e
                continue
            out.extend(blocks)
            chars += sum(len(b[0]) for b in blocks)
            if chars > max_chars:
                return out, True
    if first_error is not None and not out:
        raise ExtractError(f"no readable message in the mbox ({one_line(first_error)})")
    return out, False
