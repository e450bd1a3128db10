"""Pipe mode's change to a message: a verdict header at the end of its header block.

Everything else passes byte for byte: line endings, an mbox ``From `` line, 8-bit
bodies, a message without a body.  Removing the inserted bytes from the output gives
back the input exactly, which is what the never-lose-mail tests check.  The one
exception is a verdict header the message already carried: anyone can write one, so
it is renamed (``X-Spamnb`` becomes ``X-Spamnb-Previous``) and only spamnb's own
header answers a recipe's ``^X-Spamnb:``.
"""

from __future__ import annotations

import codecs
import math
import os
import re

# Without importing typing, which costs the pipe filter's start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import BinaryIO, TextIO

    from .tokens import TokenizerSettings

__all__ = [
    "EXIT_CODES",
    "EXIT_ERROR",
    "HeaderRenamer",
    "header_block_end",
    "header_insertion",
    "insert_header",
    "is_field_name",
    "rename_existing",
    "unquote_wrapped_envelopes",
    "verdict_header",
    "verdict_of",
]

# bogofilter's exit codes, which procmail and maildrop users already know.
EXIT_CODES = {"Spam": 0, "Ham": 1, "Unsure": 2}
EXIT_ERROR = 3
DEFAULT_MAX_SIZE = 1024 * 1024

# A field name (printable ASCII but the colon), and with its colon as readers take it.
_FIELD_NAME = rb"[\x21-\x39\x3b-\x7e]+"
_FIELD = _FIELD_NAME + rb"[ \t]*:"
_FIELD_NAME_RE = re.compile(_FIELD_NAME)
# The envelope lines of a message a program wrapped: after its own envelope line, the
# "From " line the message came with, kept or quoted (">From ") as an mbox writer
# quotes a body line, and then a header field.  mutt and Python's email parser take an
# unquoted one for a misplaced envelope line; quoted, they took it for the start of the
# body, and the header for body text.
_WRAPPED_ENVELOPES = rb"From [^\n]*\n((?:>?From [^\n]*\n)+)(?=" + _FIELD + rb")"
_WRAPPED_ENVELOPES_RE = re.compile(_WRAPPED_ENVELOPES)
# The header block: a first line that is a field or an mbox "From " line (with the
# envelope lines of a wrapped message), then fields and continuation lines (starting
# with a blank or tab).  It ends at the first line of any other kind, an empty line
# included ("\r\n" or "\n" starts with neither a name character nor a blank).  One
# match instead of a Python step per line: 30 microseconds a message less, which
# training pays for every message's digest.
_HEADER_BLOCK_RE = re.compile(
    rb"(?:"
    + _WRAPPED_ENVELOPES
    + rb"|(?:From |"
    + _FIELD
    + rb")[^\n]*(?:\n|\Z))(?:(?:"
    + _FIELD
    + rb"|[ \t])[^\n]*(?:\n|\Z))*"
)


def header_block_end(message: bytes) -> int:
    """Offset just past the last line of the header block as a mail parser reads it.

    The block ends at the first empty line, or at the first line that is neither a
    header field nor a continuation (a broken header: parsers start the body there,
    so a header inserted after it would be read as body text).
    """
    # After a UTF-8 byte-order mark, which some programs write first in a file, as the
    # tokenizer reads the header after it (review 22: the verdict went before it, and
    # the message filtered was then all body to a later training).
    bom = codecs.BOM_UTF8
    block = _HEADER_BLOCK_RE.match(message, len(bom) if message.startswith(bom) else 0)
    return 0 if block is None else block.end()


def unquote_wrapped_envelopes(message: bytes) -> bytes:
    """``message`` with the quoted envelope lines of a wrapped message (see
    _WRAPPED_ENVELOPES) unquoted, so that a mail parser reads its header as header."""
    if not message.startswith(b"From "):
        return message
    wrapped = _WRAPPED_ENVELOPES_RE.match(message)
    if wrapped is None or b">" not in wrapped.group(1):
        return message
    start, end = wrapped.span(1)
    return message[:start] + re.sub(rb"(?m)^>", b"", wrapped.group(1)) + message[end:]


def is_field_name(name: str) -> bool:
    """Whether ``name`` may name a header field (printable ASCII, no colon or space)."""
    # Not _FIELD, which allows blanks before the colon as readers do: a name with a
    # blank at its end wrote "X-Spamnb : Spam", which a recipe's ^X-Spamnb: never
    # matches (review 20).
    return name.isascii() and _FIELD_NAME_RE.fullmatch(name.encode("ascii")) is not None


def header_insertion(message: bytes, name: str, value: str) -> tuple[int, bytes]:
    """Where the header goes and the exact bytes inserted there."""
    eol = b"\r\n" if b"\r\n" in message[: message.find(b"\n") + 1 or len(message)] else b"\n"
    at = header_block_end(message)
    line = f"{name}: {value}".encode("ascii") + eol
    if at > 0 and not message[:at].endswith(b"\n"):
        # The last header line has no line end (a message of headers only): end it first.
        line = eol + line.rstrip(b"\r\n")
    return at, line


PREVIOUS_SUFFIX = "-Previous"


# A line feed alone: where procmail's header ends.  A line holding only a carriage
# return is no empty line to procmail, so a sender could hide a verdict field after
# one in an LF message, and in CRLF mail procmail reads on into the body (review 9:
# both got a forged "X-Spamnb: Spam" past the renaming, and ham into the junk folder).
_BLANK_LINE_RE = re.compile(rb"(?m)^\n")


def rename_existing(message: bytes, name: str) -> bytes:
    """The message with every field called ``name`` (in any case) renamed.

    Every line before the first empty one (a line feed alone) is searched, not only
    the header block a mail parser reads: procmail and maildrop match their
    conditions against all of those lines, so a sender could hide a verdict after a
    broken header line, or after a line holding only a carriage return.  In CRLF mail
    that is every line up to one that ends in a bare line feed, the body included, as
    procmail reads it.
    """
    blank = _BLANK_LINE_RE.search(message)
    end = blank.start() if blank else len(message)
    if not end:
        return message  # no header lines at all
    if name.lower().encode("ascii") not in message[:end].lower():
        # A CRLF message is searched whole (procmail reads it so): this costs 0.5 ms
        # a MiB where the pattern costs 7 (review 15).
        return message
    pattern = re.compile(rb"(?im)^(" + re.escape(name.encode("ascii")) + rb")(?=[ \t]*:)")
    head = pattern.sub(rb"\1" + PREVIOUS_SUFFIX.encode("ascii"), message[:end])
    return head + message[end:] if len(head) != end else message


class HeaderRenamer:
    """:func:`rename_existing` for the rest of a message streamed after its first part,
    when that part ended inside the header section: a sender could otherwise put a
    verdict field past ``--max-size`` (a header section over 1 MiB), where the
    first part's renaming never looked.

    ``start`` is the first part's last, unfinished line (renamed already if it could
    be).  Complete lines are renamed by one substitution; an unfinished last line is
    held back only while it could still become the field (the name and blanks so
    far, up to ``_MOST_HELD`` bytes).
    """

    # A field name followed by more blanks than this before its colon is not renamed
    # when a read ends inside them (no filter recipe matches such a line either).
    _MOST_HELD = 64 * 1024

    def __init__(self, name: str, start: bytes = b"") -> None:
        encoded = name.encode("ascii")
        self._sub = re.compile(rb"(?im)^(" + re.escape(encoded) + rb")(?=[ \t]*:)").sub
        self._name = encoded.lower()
        self._replacement = rb"\1" + PREVIOUS_SUFFIX.encode("ascii")
        self._held = start
        self._mid_line = False
        self._done = False

    def _undecided(self, line: bytes) -> bool:
        """Whether an unfinished line could still become the field."""
        name, n = self._name, len(self._name)
        if len(line) <= n:
            return name.startswith(line.lower())
        return (
            line[:n].lower() == name and not line[n:].strip(b" \t") and len(line) < self._MOST_HELD
        )

    def feed(self, chunk: bytes) -> bytes:
        if self._done:
            return chunk
        data, self._held = self._held + chunk, b""
        start = 0
        if self._mid_line:
            newline = data.find(b"\n")
            if newline < 0:
                return data
            start, self._mid_line = newline + 1, False
        blank = _BLANK_LINE_RE.search(data, start)
        if blank:
            self._done = True
            head = self._sub(self._replacement, data[start : blank.start()])
            return data[:start] + head + data[blank.start() :]
        line_start = data.rfind(b"\n", start) + 1 or start
        head = self._sub(self._replacement, data[start:line_start])
        last = data[line_start:]
        if last and self._undecided(last):
            self._held = last
            last = b""
        elif last:
            last = self._sub(self._replacement, last)
            self._mid_line = True
        return data[:start] + head + last

    def finish(self) -> bytes:
        """What is held back when the message ends (a last line without its end)."""
        held, self._held = self._held, b""
        return held  # the name and blanks, no colon: not the field


def header_continues(message: bytes) -> bool:
    """Whether the message's lines before the first empty one (see
    :func:`rename_existing`) go on past ``message``, a message's first part."""
    return _BLANK_LINE_RE.search(message) is None


def insert_header(message: bytes, name: str, value: str, *, complete: bool = True) -> bytes:
    """The message with the header added (and any it carried renamed); ``complete=False``
    for the first part of a message whose header block may go on past it (then the
    header goes first, after any ``From `` line, rather than into the middle of a
    header line)."""
    message = rename_existing(message, name)
    at, line = header_insertion(message, name, value)
    # The block's end is not in the part read when it runs to the end, or when it stops
    # only at an unfinished last line, which a cut inside a field's name leaves
    # ("X-Lo"; review 43 found the header put before it, inside the block).
    if not complete and (
        at >= len(message) or (message.find(b"\n", at) < 0 and header_continues(message))
    ):
        # After a byte-order mark, as header_block_end reads the header after it, and
        # after an envelope line (review 47: one after a mark got the verdict before it).
        at = len(codecs.BOM_UTF8) if message.startswith(codecs.BOM_UTF8) else 0
        if message.startswith(b"From ", at):
            at = message.find(b"\n", at) + 1
        # The mail's line end, as header_insertion finds it: ``line`` may start with
        # one instead of ending in it (the part read ends inside a line), and read
        # from its end gave CRLF mail a bare line feed (review 12).
        eol = b"\r\n" if b"\r\n" in line else b"\n"
        line = f"{name}: {value}".encode("ascii") + eol
    return message[:at] + line + message[at:]


def verdict_and_score(
    log_odds: float, length: float, calibration: dict[str, float]
) -> tuple[str, float]:
    """The calibrated spam score (see calibration.py) and its verdict, in plain floats."""
    if math.isnan(log_odds):
        raise ValueError("the model gives this message no score (an unsmoothed model?)")
    exponent = calibration.get("length_exponent", 0.0)
    evidence = log_odds / max(length, 1.0) ** exponent if exponent else log_odds
    z = calibration["slope"] * evidence + calibration["intercept"]
    score = 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
    return verdict_of(score, calibration["ham_cutoff"], calibration["spam_cutoff"]), score


def verdict_of(score: float, ham_cutoff: float, spam_cutoff: float) -> str:
    """Spam at or above the spam cut-off, else Ham at or below the ham cut-off, else
    Unsure: the filter's rule, which ``classify --json`` also gives."""
    if score >= spam_cutoff:
        return "Spam"
    return "Ham" if score <= ham_cutoff else "Unsure"


def verdict_header(verdict: str, score: float, version: str, cut: str = "") -> str:
    """The header's value, built only from spamnb's own values (nothing from the mail).

    ``cut`` says what was not scored: ``size`` (only the message's first bytes),
    ``tokens`` (the tokenizer's cap was reached) or ``size+tokens``.
    """
    parts = [verdict, f"score={score:.4f}"]
    if cut:
        parts.append(f"cut={cut}")
    parts.append(f"version={version}")
    return ", ".join(parts)


def score_message(
    data: bytes,
    model_path: str | os.PathLike[str],
    *,
    trust: bool,
    max_size: int | None = None,
) -> tuple[str, float, str]:
    """Verdict, calibrated spam score and what was cut (see :func:`verdict_header`),
    scoring the first ``max_size`` bytes only: from the scoring table, else from the
    model.

    Both roads score with the table's arithmetic (the model's table is built in
    memory when the file is missing or stale), so a message gets the same verdict
    whichever road it took, even at a cut-off.
    """
    from .paths import table_path
    from .table import load_table
    from .tokens import TokenizerSettings, tokenize

    size = len(data)
    data = data[:max_size] if max_size else data
    model_path = os.path.realpath(model_path)  # the table sits beside the real file
    table = load_table(model_path, table_path(model_path), trust=trust)
    if table is not None:
        try:
            settings = TokenizerSettings.from_dict(table.header["tokenizer"])
            tokens = tokenize(data, settings)
            log_odds, length = table.evidence(tokens)
            verdict, score = verdict_and_score(log_odds, length, table.header["calibration"])
            return verdict, score, _cut(size, max_size, tokens, settings)
        except (KeyError, IndexError, TypeError, ValueError):
            pass  # a damaged table: the model itself still scores
    return score_apart(
        lambda: score_with_model(data, size, model_path, trust=trust, max_size=max_size)
    )


def score_apart(score: Callable[[], tuple[str, float, str]]) -> tuple[str, float, str]:
    """``score()`` (:func:`score_with_model`) in a child process, where there is fork.

    Only this road imports numpy and unpickles the model, and some failures there do
    not raise: under a tight memory limit (ulimit -v 80 MB) OpenBLAS gave up while
    numpy was imported and ended the process, with the message unwritten.  A child
    that dies leaves this process to pass the message on unchanged.  The fork costs a
    millisecond on a road that loads the whole model.  What the child's libraries
    print on stderr comes back with its answer, so that the one line this process
    says can name the cause.
    """
    if not hasattr(os, "fork"):
        return score()
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's report is what the tests check
        os.close(reading)
        os.dup2(writing, 2)
        try:
            verdict, spam_score, cut = score()
            answer = f"{_ANSWER}ok\t{verdict}\t{spam_score!r}\t{cut}"
        except BaseException as exc:  # noqa: BLE001 - told to the parent, which fails safe
            answer = f"{_ANSWER}error\t{describe(exc)}"
        try:
            view = memoryview(answer.encode("utf-8", "backslashreplace"))
            while view:
                view = view[os.write(writing, view) :]
        finally:
            os._exit(0)
    os.close(writing)
    chunks = []
    with open(reading, "rb") as answer_stream:
        while chunk := answer_stream.read(1 << 16):
            chunks.append(chunk)
    _, status = os.waitpid(child, 0)
    said, marked, answer = b"".join(chunks).decode("utf-8", "replace").rpartition(_ANSWER)
    fields = answer.split("\t")
    if marked and fields[0] == "ok" and len(fields) == 4:
        return fields[1], float(fields[2]), fields[3]
    if marked and fields[0] == "error" and len(fields) >= 2:
        raise ValueError("\t".join(fields[1:]))
    last = (said or answer).strip().splitlines()[-1:]
    cause = f": {describe(ValueError(last[0]))}" if last else ""
    raise RuntimeError(f"scoring with the model ended without a verdict ({_ended(status)}){cause}")


# Starts the child's answer, after anything its libraries printed on stderr.
_ANSWER = "\nspamnb answer\t"


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def score_with_model(
    data: bytes,
    size: int,
    model_path: str,
    *,
    trust: bool,
    max_size: int | None,
) -> tuple[str, float, str]:
    """The slow road of :func:`score_message`: the whole model loaded and scored."""
    # numpy's OpenBLAS starts a thread with its own buffers per core; one message
    # needs no second thread, and each costs memory a tight limit may not have.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .store import load
    from .table import ScoringTable, encode_table, table_arrays
    from .words import class_list

    spam_filter = load(model_path, trust=trust)
    if spam_filter.positive_class() is None or len(spam_filter.classes) < 2:
        has = class_list(spam_filter.classes)
        raise ValueError(f"the model needs a spam class and another (it has {has})")
    problem = spam_filter.scoring_problem()
    if problem is not None:
        raise ValueError(problem)
    tokens = spam_filter.tokenize([data])
    arrays = table_arrays(spam_filter)
    if arrays is not None:
        log_odds, length = ScoringTable(encode_table(*arrays)).evidence(tokens[0])
    else:
        _, all_log_odds, lengths = spam_filter.score_tokens(tokens)
        log_odds, length = float(all_log_odds[0]), float(lengths[0])
    verdict, score = verdict_and_score(log_odds, length, spam_filter.calibration.to_dict())
    return verdict, score, _cut(size, max_size, tokens[0], spam_filter.settings)


def _cut(size: int, max_size: int | None, tokens: list[str], settings: TokenizerSettings) -> str:
    """What was not scored of a message of ``size`` bytes: the pipe's own limit and the
    tokenizer's both cut it to its first bytes."""
    from .tokens import was_capped

    cuts = []
    if any(limit and size > limit for limit in (max_size, settings.max_bytes)):
        cuts.append("size")
    if was_capped(tokens, settings):
        cuts.append("tokens")
    return "+".join(cuts)


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
    written unchanged, one line goes to stderr, and the status is EXIT_ERROR.  At
    most ``max_size`` + 1 bytes are held in memory: a larger message is scored on its
    first ``max_size`` bytes, its header written with them and the rest copied
    through.  Passing it on unscored instead would let a spammer slip past the
    filter by padding a message.
    """
    from . import __version__

    data = b""
    read: list[bytes] = []  # what was read, should reading be cut short
    too_large = False
    whole = False  # whether ``data`` is all of the message
    try:
        data = read_at_most(stdin, max_size + 1, read)
        whole = len(data) <= max_size
        if not data:
            raise ValueError("standard input is empty")
        model_problem = check_model(model_path, trust)
        if model_problem:
            raise ValueError(model_problem)
        too_large = len(data) > max_size
        verdict, score, cut = score_message(data, model_path, trust=trust, max_size=max_size)
        value = verdict_header(verdict, score, __version__, cut)
        output = insert_header(data, header_name, value, complete=not too_large)
    except KeyboardInterrupt:
        # Ctrl-C means stop, so the rest of stdin is not waited for; what the reads
        # that finished gave goes out (a read cut short by it loses its bytes, up to a
        # MiB: review 49), and status 3 tells a mail program to keep its own copy.
        return pass_through(data or b"".join(read), None, stdout, stderr, "interrupted")
    except Exception as exc:  # noqa: BLE001 - the mail must get through
        # Read to its end already, stdin is not read again: under a memory limit the
        # next read's buffer of a MiB was the allocation that failed.
        return pass_through(data, None if whole else stdin, stdout, stderr, describe(exc))
    try:
        if too_large and header_continues(data):
            # The header section goes on past what was read: keep renaming there.
            # The last line may be unfinished, so it goes through the renamer too.
            cut = output.rfind(b"\n") + 1
            renamer = HeaderRenamer(header_name, output[cut:])
            write_all(stdout, output[:cut])
            copy_rest(stdin, stdout, renamer)
        else:
            write_all(stdout, output)
            if too_large:
                copy_rest(stdin, stdout)
        flush_all(stdout)
    except OSError as exc:
        say(stderr, f"cannot write the message: {exc.strerror or exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        say(stderr, "interrupted while writing the message, which may be cut short")
        return EXIT_ERROR
    return 0 if exit_zero else EXIT_CODES[verdict]


def read_at_most(stream: BinaryIO, limit: int, chunks: list[bytes] | None = None) -> bytes:
    """Up to ``limit`` bytes of ``stream``, read a MiB at a time: read(limit) itself
    allocates ``limit`` bytes first, and a --max-size of 10^15 ran out of memory.
    The pieces are kept in ``chunks`` as they come, for a caller whose reading is cut
    short (an interrupt) to pass on what was read."""
    chunks = [] if chunks is None else chunks
    total = 0
    while total < limit:
        chunk = read_some(stream, min(limit - total, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def check_model(model_path: str | os.PathLike[str], trust: bool) -> str | None:
    """Why the model cannot be used, checked even for mail too large to score."""
    from .paths import ModelFileError, check_trusted

    if not os.fspath(model_path):
        return "no usable model: the model path (-m) is empty"
    try:
        status = os.stat(model_path)
        if not trust:
            check_trusted(status, model_path)
    except ModelFileError as exc:
        return str(exc)
    except OSError as exc:
        return f"no usable model at {os.fspath(model_path)}: {exc.strerror or exc}"
    return None


def read_some(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes of ``stream``, and b"" only at its end.

    A stream in non-blocking mode (the program before spamnb may leave its pipe so)
    gives None, or raises BlockingIOError, when nothing has arrived yet; taken for the
    end, that scored the part of a message read so far, headed it, and dropped the
    rest with exit status 0.  So wait for more instead.
    """
    while True:
        try:
            chunk = stream.read(size)
        except BlockingIOError:
            chunk = None
        if chunk is not None:
            return chunk
        _wait(stream, reading=True)


def write_all(stream: BinaryIO, data: bytes) -> None:
    """Write every byte: an unbuffered stream may take only part of a write, and a
    non-blocking one none."""
    view = memoryview(data)
    while view:
        try:
            written = stream.write(view)
        except BlockingIOError as exc:
            written = exc.characters_written
        if not written:
            _wait(stream, reading=False)
        view = view[written or 0 :]


def flush_all(stream: BinaryIO) -> None:
    while True:
        try:
            stream.flush()
            return
        except BlockingIOError:
            _wait(stream, reading=False)


def _wait(stream: BinaryIO, *, reading: bool) -> None:
    """Until a non-blocking ``stream`` can be read or written."""
    import select

    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file: try again at once
    select.select([descriptor] if reading else [], [] if reading else [descriptor], [])


def copy_rest(stdin: BinaryIO, stdout: BinaryIO, renamer: HeaderRenamer | None = None) -> None:
    while chunk := read_some(stdin, 1 << 20):
        write_all(stdout, renamer.feed(chunk) if renamer else chunk)
    if renamer:
        write_all(stdout, renamer.finish())


def describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def say(stderr: TextIO | None, message: str) -> None:
    if not message.isprintable():
        # A path or a value from the command line, in a mail program's log: its
        # control characters as escapes, as every other command shows them (review 35).
        from .words import printable

        message = printable(message)
    try:
        if stderr is not None:
            stderr.write(f"spamnb: {message}\n")
            stderr.flush()
    except (OSError, ValueError):
        pass  # nowhere left to say it; the exit status still tells


def pass_through(
    data: bytes, stdin: BinaryIO | None, stdout: BinaryIO, stderr: TextIO | None, error: str
) -> int:
    """The failure path: the message unchanged, one line on stderr, EXIT_ERROR."""
    try:
        write_all(stdout, data)
        if stdin is not None:
            copy_rest(stdin, stdout)
        flush_all(stdout)
    except (OSError, ValueError, MemoryError) as exc:
        # The status still tells the mail program to keep its own copy.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else describe(exc)
        say(stderr, f"cannot write the message: {reason} (first: {error})")
        return EXIT_ERROR
    except KeyboardInterrupt:
        say(stderr, f"interrupted while writing the message, which may be cut short ({error})")
        return EXIT_ERROR
    say(stderr, error)
    return EXIT_ERROR
