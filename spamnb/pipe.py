"""Pipe mode's one change to a message: a verdict header at the end of its header block.

Everything else passes byte for byte: line endings, an mbox ``From `` line, 8-bit
bodies, a message without a body.  Removing the inserted bytes from the output gives
back the input exactly, which is what the never-lose-mail tests check.
"""

from __future__ import annotations

import math
import os
import re

# Without importing typing, which costs the pipe filter's start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO, TextIO

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
DEFAULT_MAX_SIZE = 1024 * 1024

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


def verdict_and_score(log_odds: float, calibration: dict[str, float]) -> tuple[str, float]:
    """The calibrated spam score (see calibration.py) and its verdict, in plain floats."""
    z = calibration["slope"] * log_odds + calibration["intercept"]
    score = 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
    if score >= calibration["spam_cutoff"]:
        return "Spam", score
    if score <= calibration["ham_cutoff"]:
        return "Ham", score
    return "Unsure", score


def verdict_header(verdict: str, score: float | None, version: str, reason: str = "") -> str:
    """The header's value, built only from spamnb's own values (nothing from the mail)."""
    parts = [verdict]
    if score is not None:
        parts.append(f"score={score:.4f}")
    if reason:
        parts.append(f"reason={reason}")
    parts.append(f"version={version}")
    return ", ".join(parts)


def score_message(
    data: bytes, model_path: str | os.PathLike[str], *, trust: bool
) -> tuple[str, float]:
    """Verdict and calibrated spam score: from the scoring table, else from the model."""
    from .paths import table_path
    from .table import load_table
    from .tokens import TokenizerSettings, tokenize

    table = load_table(model_path, table_path(model_path), trust=trust)
    if table is not None:
        settings = TokenizerSettings.from_dict(table.header["tokenizer"])
        log_odds = table.log_odds(tokenize(data, settings))
        return verdict_and_score(log_odds, table.header["calibration"])
    # No fresh table (an older model, or one a table cannot express): the full scorer.
    from .store import load

    spam_filter = load(model_path, trust=trust)
    if spam_filter.positive_class() is None or len(spam_filter.classes) < 2:
        raise ValueError(f"the model needs a spam class and another ({spam_filter.classes})")
    _proba, log_odds = spam_filter.score_tokens(spam_filter.tokenize([data]))
    return verdict_and_score(float(log_odds[0]), spam_filter.calibration.to_dict())


def run(
    stdin: BinaryIO,
    stdout: BinaryIO,
    stderr: TextIO,
    model_path: str | os.PathLike[str],
    *,
    header_name: str = "X-Spamnb",
    exit_zero: bool = False,
    max_size: int = DEFAULT_MAX_SIZE,
    trust: bool = False,
) -> int:
    """Filter one message; returns the exit status.

    Mail is never lost: whatever fails (model, tokenizer, memory), the message is
    written unchanged, one line goes to stderr, and the status is EXIT_ERROR.
    """
    from . import __version__

    data = b""
    try:
        data = stdin.read()
        if not data:
            raise ValueError("standard input is empty")
        if len(data) > max_size:
            verdict = "Unscored"
            value = verdict_header(verdict, None, __version__, reason="too-large")
        else:
            verdict, score = score_message(data, model_path, trust=trust)
            value = verdict_header(verdict, score, __version__)
        output = insert_header(data, header_name, value)
    except Exception as exc:  # noqa: BLE001 - whatever failed, the mail must get through
        return pass_through(data, stdout, stderr, describe(exc))
    try:
        stdout.write(output)
        stdout.flush()
    except OSError as exc:
        stderr.write(f"spamnb: cannot write the message: {exc.strerror or exc}\n")
        return EXIT_ERROR
    return 0 if exit_zero else EXIT_CODES[verdict]


def describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def pass_through(data: bytes, stdout: BinaryIO, stderr: TextIO, error: str) -> int:
    """The failure path: the message unchanged, one line on stderr, EXIT_ERROR."""
    try:
        stdout.write(data)
        stdout.flush()
    finally:
        stderr.write(f"spamnb: {error}\n")
        stderr.flush()
    return EXIT_ERROR
