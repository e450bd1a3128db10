"""Pipe mode's one change to a message: a verdict header at the end of its header block.

Everything else passes byte for byte: line endings, an mbox ``From `` line, 8-bit
bodies, a message without a body.  Removing the inserted bytes from the output gives
back the input exactly, which is what the never-lose-mail tests check.
"""

from __future__ import annotations

import re

__all__ = [
    "EXIT_CODES",
    "EXIT_ERROR",
    "header_block_end",
    "header_insertion",
    "insert_header",
    "is_field_name",
    "verdict_header",
]

# bogofilter's exit codes, which procmail and maildrop users already know.
EXIT_CODES = {"Spam": 0, "Ham": 1, "Unsure": 2, "Unscored": 1}
EXIT_ERROR = 3

_FIELD_RE = re.compile(rb"[\x21-\x39\x3b-\x7e]+[ \t]*:")


def header_block_end(message: bytes) -> int:
    """Offset just past the last line of the header block as a mail parser reads it.

    The block ends at the first empty line, or at the first line that is neither a
    header field nor a continuation (a broken header: parsers start the body there,
    so a header inserted after it would be read as body text).
    """
    position = 0
    first = True
    while position < len(message):
        newline = message.find(b"\n", position)
        end = len(message) if newline < 0 else newline + 1
        line = message[position:end]
        content = line.rstrip(b"\r\n")
        if not content:
            return position
        is_envelope = first and content.startswith(b"From ")
        is_continuation = not first and content[:1] in (b" ", b"\t")
        if not (is_envelope or is_continuation or _FIELD_RE.match(content)):
            return position
        first = False
        position = end
    return position


def is_field_name(name: str) -> bool:
    """Whether ``name`` may name a header field (printable ASCII, no colon or space)."""
    return name.isascii() and _FIELD_RE.fullmatch((name + ":").encode("ascii")) is not None


def header_insertion(message: bytes, name: str, value: str) -> tuple[int, bytes]:
    """Where the header goes and the exact bytes inserted there."""
    eol = b"\r\n" if b"\r\n" in message[: message.find(b"\n") + 1 or len(message)] else b"\n"
    at = header_block_end(message)
    line = f"{name}: {value}".encode("ascii") + eol
    if at > 0 and not message[:at].endswith(b"\n"):
        # The last header line has no line end (a message of headers only): end it first.
        line = eol + line.rstrip(b"\r\n")
    return at, line


def insert_header(message: bytes, name: str, value: str) -> bytes:
    at, line = header_insertion(message, name, value)
    return message[:at] + line + message[at:]


def verdict_header(verdict: str, score: float | None, version: str, reason: str = "") -> str:
    """The header's value, built only from spamnb's own values (nothing from the mail)."""
    parts = [verdict]
    if score is not None:
        parts.append(f"score={score:.4f}")
    if reason:
        parts.append(f"reason={reason}")
    parts.append(f"version={version}")
    return ", ".join(parts)
