"""Find messages in mail folders and hand back their raw bytes.

This is the "mail" stage of spamnb. It never writes to, locks or renames anything
it reads, and returns message bytes exactly as stored (line ends, 8-bit bytes and
all), so that tokenizing sees what the mail client saw. The one exception is mbox,
whose messages come without their ``From_`` line (see below).

Supported sources and how a PATH is recognised when no format is forced
(``detect_format``; checked in this order):

``maildir``
    A directory with both ``cur/`` and ``new/`` subdirectories, or with one of them,
    holding no folders, and nothing else but ``tmp/``, dot-files and files that are
    not messages (git, zip and some copies drop empty folders). Messages come from ``cur/`` and
    ``new/`` (never ``tmp/``, which holds deliveries in progress), sorted by file
    name across both; a message marked trashed (flag ``T``) is skipped. With
    ``recursive=True`` the Maildir++ subfolders (``.Name/`` directories that are
    Maildirs themselves) follow, sorted.
``mh``
    A directory holding an ``.mh_sequences`` file (nmh and ``mailbox.MH`` create
    one in every folder). Messages are the files named by a number in ASCII digits,
    in number order, under the names they have ("007" stays "007"); other names,
    such as nmh's ",12" for a deleted message, are not messages.
    ``recursive=True`` adds the subfolders. A folder of numbered files without
    ``.mh_sequences`` (nmh deletes it when no sequence is left) is read as ``dir``,
    which yields the same messages: a ``dir`` walk reads a folder with
    ``.mh_sequences`` by these rules, and passes over a deleted ``,N`` anywhere.
``dir``
    Any other directory: a tree of message files, one message per regular file,
    walked in full in sorted order (names of ASCII digits sort by number), depth
    first, except a Maildir's ``tmp/`` below it (deliveries in progress), the
    trashed messages of a Maildir below it, MH's deleted messages, nmh's ``context``
    file (see ``mh``), editors' copies (``NAME~``, ``#NAME#``) and files of more than
    ``MAX_STREAM_BYTES`` that are not mboxes. A file
    that is an mbox by the test below is split into its messages (a mutt
    ``~/Mail``, Thunderbird's Local Folders). Hidden entries (``.name``, files and
    directories) are passed over silently; files that do not look like mail,
    named pipes, sockets and link loops are reported through ``on_skip`` instead of
    failing the whole run.
``mbox``
    A regular file whose first line starts with ``From `` *and* which holds a
    second message: a blank line, then an envelope line, i.e. a line ``From SENDER
    ...`` that also carries the delivery date as every mbox writer puts it there (a
    weekday, then month, day and ``hh:mm`` time, see _ENVELOPE_DATE), and after which
    comes a header field (past any "From " or ">From " lines: a wrapped message's
    own envelope line, which starts the message, unquoted). Requiring the date and
    the header keeps a body line such as "From the desk of ...", "From our Monday
    meeting at 10:30" or "From Bob: Mon Jan 6 meeting moved to 10:30" in a single
    message from turning it into an mbox. Messages are split at the same envelope lines (and at the
    first line), so such a body line stays in its message, as in mbox readers
    that check the line (mutt) rather than split at every ``From `` (Python's
    ``mailbox.mbox``, which cut such a message in two and skipped the second part
    as not mail). Forced with ``fmt="mbox"``, a file is split at envelope lines
    with or without a blank line before them (files made by concatenating
    messages have none).
    Each item's bytes omit the ``From_`` line, and a blank line (LF) before the
    next one or at the end, as ``mailbox.mbox`` returns them. A message Thunderbird
    marked deleted (``X-Mozilla-Status`` with flag 0008, as its first line) is skipped.
``file``
    Any other regular file (or a named pipe): one message, bytes untouched,
    including a leading ``From_`` line as in the SpamAssassin corpus.  Unless forced,
    a Thunderbird folder of one message it deleted (the same field just below that
    line) is skipped. ``-`` is one
    message read from standard input, or with ``fmt="mbox"`` an mbox (its messages
    named ``-:1``, ``-:2``, ...).

The PATH ``-`` always means standard input; a file of that name can be given as
``./-``. Folders reached through symbolic links are followed, but each real
folder is read once, so a link loop or a second link cannot repeat messages.

Inside a folder or mbox, messages that do not look like mail, or that a mail program
marked deleted, are left out and reported through ``on_skip(source, reason)``; given
directly as PATH, a file that is not mail is an error. A file "looks like mail" when,
after an optional UTF-8 byte-order mark and blank lines, its first line is a
``From `` envelope line or starts a header field (``Name:`` with the field name in
printable ASCII), and NUL bytes make up no more than 1% of its first 4 KB.
"""

from __future__ import annotations

import codecs
import errno
import functools
import io
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

FORMATS = ("file", "dir", "mbox", "maildir", "mh")

# The most read as one message: from standard input or a named pipe, which need not
# end (< /dev/zero, a stuck producer), or from a file (a file of gigabytes read whole
# ran out of memory).  Mail is far smaller than this.
MAX_STREAM_BYTES = 256 << 20

# How much of a message the "is this mail?" test looks at. Binary files show a NUL
# almost at once, and the first line is all the header test needs.
_SNIFF_BYTES = 4096
# Read size while scanning a lone file for a second mbox message; large mboxes are
# recognised after the first message without reading the rest.
_SCAN_CHUNK = 1 << 20

# A header field's first line: what follows every envelope line mail programs write.
_FIELD_LINE = re.compile(rb"[!-9;-~]+[ \t]*:")
_FIRST_LINE = re.compile(rb"From |" + _FIELD_LINE.pattern)
# Whole words: "From our Monday meeting at 10:30" in a body is no envelope line.
_ENVELOPE_TO_WEEKDAY = re.compile(
    rb"From [^\s]+[ \t][^\r\n]*?(?<![A-Za-z])(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)(?![A-Za-z])"
)
_MONTHS = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# The delivery date from its weekday on, as mbox writers put it: "Tue Mar  4 09:12"
# (asctime's order: procmail, mutt, Thunderbird, Python's mailbox, Gmail's export) or
# "Tue, 4 Mar 2025 09:12" (RFC 2822's).  Month, day and time in that order, next to
# each other, as mutt requires: "From Bob: Mon Jan 6 meeting moved to 10:30" is prose.
_ENVELOPE_DATE = re.compile(
    rb"[ \t]*(?:" + _MONTHS + rb"[ \t]+\d{1,2}|,?[ \t]*\d{1,2}[ \t]+" + _MONTHS + rb"[ \t]+\d{4})"
    rb"[ \t]+\d{1,2}:\d\d"
)
# Longest line the envelope pattern may need across a chunk boundary, plus slack;
# real envelope lines are well under 100 bytes.
_SCAN_OVERLAP = 512
# UTF-8's byte-order mark, which some editors put at the start of a saved message.
_BOM = codecs.BOM_UTF8
# The blank line that ends a header block (LF or CRLF line ends).
_HEADER_END = re.compile(rb"\n\r?\n")
# Control characters (Unicode category Cc) that are not whitespace. Whitespace ones
# (tab, CR, LF, ...) are left to str.split(), because in a folded header they
# separate words and must become a space rather than vanish.
_NON_SPACE_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")

SkipHandler = Callable[[str, str], None]
# A directory's identity regardless of the path (or symbolic link) it was reached by.
_FolderKey = tuple[int, int]


class MailSourceError(Exception):
    """A path that cannot be read as mail; ``str(exc)`` is one line naming the path,
    ``reason`` the same without it (what a skipped entry is told with)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class NoMessagesFound(MailSourceError):
    """A path read whole that held no message (the only error that subfolders left
    out, or files skipped, can explain)."""


@dataclass(frozen=True)
class MailItem:
    """One message: where it came from and its bytes exactly as stored."""

    source: str
    """File path; ``PATH:N`` (1-based) for an mbox message; ``-`` for stdin."""
    data: bytes


def display_source(source: str) -> str:
    """``source`` as it should be printed in one field of tab-separated output.

    Unchanged unless it holds what :func:`spamnb.words.printable` escapes (a control
    character such as a newline or tab, a bidirectional control, a line separator, or
    an undecodable byte kept as a surrogate escape) or starts with a quote; then its
    ``repr()``.  Joiners and
    non-breaking spaces, which Persian, Indic and emoji names need, leave a name as it
    is (str.isprintable() made such names literals; review 20).
    """
    # A file name may hold any byte but "/" and NUL. repr() keeps the field on one
    # line, escapes what a terminal would act on, and makes the printed text
    # encodable even when the name was not valid in the file-system encoding.
    from .words import printable

    # One that starts with a quote is a literal too: else the name "'x\\ty'" printed as
    # the literal of "x<TAB>y" (review 35).
    plain = printable(source) == source and not source.startswith(("'", '"'))
    return source if plain else repr(source)


def _show(path: str | os.PathLike[str]) -> str:
    """The path as it should appear in a one-line error message."""
    return display_source(os.fspath(path))


# A line the email package's parser reads as part of the header block (its own rule):
# an envelope "From " line, a field name and colon, or a continuation.
_HEADER_LINES = re.compile(rb"(?:(?:From |[\x21-\x39\x3b-\x7e]*:|[ \t])[^\r\n]*\r?\n)*")
_MESSAGE_ID_FIELD = re.compile(rb"^message-id:", re.I | re.M)
_PLAIN_LINE = re.compile(rb"([\x20-\x7e\t]*)\r?\n(?![ \t])")


def _header_block(data: bytes) -> bytes:
    """The lines a header parser reads of ``data``: past a UTF-8 byte-order mark and
    blank lines, a wrapped message's quoted envelope lines unquoted (so both readers
    below agree with the tokenizer), up to the first empty line."""
    from .pipe import unquote_wrapped_envelopes

    head = unquote_wrapped_envelopes(data.removeprefix(_BOM).lstrip(b"\r\n"))
    end = _HEADER_END.search(head)
    return head if end is None else head[: end.start() + 1]


def message_id(data: bytes) -> str | None:
    """The Message-ID header of the raw message ``data``, for printing on one line.

    Whitespace runs (including header folding) become single spaces and other
    control characters are dropped; 8-bit bytes in the value show as U+FFFD.
    Returns None when the header is missing or empty, or when the header block
    cannot be parsed. Never raises.
    """
    # Training digests every message by its Message-ID, and parsing each header block
    # a second time took a fifth of training.  A plain one-line ASCII field after
    # well-formed header lines reads the same without the parser; anything else
    # (folding, 8-bit bytes, stray CRs, a malformed line before it) goes to it.
    head = _header_block(data)
    if b"message-id" not in head.lower():
        return None  # the parser reads no more than this block, so it finds none either
    field = _MESSAGE_ID_FIELD.search(head)
    line = _PLAIN_LINE.match(head, field.end()) if field is not None else None
    if field is not None and line is not None:
        plain_crs = b"\r" not in head[: line.end()].replace(b"\r\n", b"")
        if plain_crs and _HEADER_LINES.fullmatch(head[: field.start()]):
            text = " ".join(line.group(1).decode("ascii").split())
            return text or None
    return header_value(data, "Message-ID")


def message_digest(data: bytes) -> str:
    """What identifies a message for "trained before?": its Message-ID and its body.

    Other headers are left out because they change after delivery (the verdict
    header, a mail client's Status: flags), and the message must still be recognised
    when filed again from the junk folder; the Message-ID tells apart identical
    bodies, or the Subject when there is no Message-ID.  The body is read as an mbox
    and a file both keep it (see :func:`message_digests`).
    """
    return message_digests(data)[0]


# A body line starting "From " is stored in an mbox as ">From " (and ">From " as
# ">>From " by some programs); no reader can tell which it was.
_ESCAPED_FROM = re.compile(rb"^>+(?=From )", re.M)
# Where an mbox writer puts its ">" (mailbox.mbox and most others: one, before "From ").
_UNESCAPED_FROM = re.compile(rb"^(?=From )", re.M)


def message_digests(data: bytes) -> tuple[str, tuple[str, ...]]:
    """:func:`message_digest`, and the digests earlier spamnb gave the same message
    where they differ, so that mail trained then is still known (empty when none).

    The same message in a file and in an mbox differs in its body: a line starting
    "From " is written ">From " in the mbox, and the body's end gets a line end or a
    blank line more there.  Digested as it came, a message moved between the two forms
    was learnt again under its new label rather than moved, and counted in both classes.
    So the digest reads such lines without their ">" and the body to one line end.
    The same holds for line ends: a copy saved by a program that writes CRLF (a mail
    client's "this is spam" button, a mailbox from Windows) is the same message as
    the LF copy delivered to a Maildir (review 50 found them learnt under both labels).
    So the body is digested with its CRLFs read as LFs; until model format 7 they were
    kept.
    """
    import hashlib

    from .pipe import header_block_end

    end = header_block_end(data)
    body = data[end:].lstrip(b"\r\n")
    stored = _ESCAPED_FROM.sub(b"", body) if b"From " in body else body
    text = stored.rstrip(b"\r\n")
    if text:
        # The line end the body has (kept in the digest before format 7), or one.
        stored = text + (b"\r\n" if stored[len(text) :].startswith(b"\r\n") else b"\n")
    identity = message_id(data)
    if identity is None:
        # Without a Message-ID, mail that differs only in its Subject (form letters,
        # or Enron1's 87 training messages that share a body) must still count as
        # different messages; a client rewriting the Subject is the lesser risk.
        identity = "subject:" + (subject_line(data[:end]) or "")
    identity_bytes = identity.encode("utf-8", "replace") + b"\0"

    def digest_of(text: bytes) -> str:
        return hashlib.blake2b(identity_bytes + text, digest_size=16).hexdigest()

    with_crlf = b"\r\n" in stored
    digest = digest_of(stored.replace(b"\r\n", b"\n") if with_crlf else stored)
    # The digest of formats 5 and 6, which kept the body's CRLFs.
    older = (digest_of(stored),) if with_crlf else ()
    if stored != body:
        return digest, (*older, digest_of(body))
    if b"From " in body and _UNESCAPED_FROM.search(body):
        # Given as a file, as it is: a spamnb before format 5 that learnt it from an
        # mbox digested it as the mbox stores it, its "From " lines written ">From ".
        # (A body that also has ">From " lines as given is known by that form only.)
        escaped = _UNESCAPED_FROM.sub(b">", body)
        return digest, (*older, digest_of(escaped))
    return digest, older


def digest_changed_in_format_7(data: bytes) -> bool:
    """Whether a spamnb of model format 5 or 6 digests ``data`` otherwise (see
    :func:`message_digests`): its body has a CRLF.  It may err towards true, as it
    only decides which format a model is saved in."""
    from .pipe import header_block_end

    return b"\r\n" in data and b"\r\n" in data[header_block_end(data) :].lstrip(b"\r\n")


def subject_line(header_block: bytes) -> str | None:
    """The raw Subject field of a header block, unfolded, or None."""
    match = re.search(rb"(?im)^subject:(.*(?:\r?\n[ \t].*)*)", header_block)
    if match is None:
        return None
    return " ".join(match.group(1).decode("utf-8", "replace").split())


def date_header(data: bytes) -> str | None:
    """The Date header of the raw message, on one line (None as for message_id)."""
    return header_value(data, "Date")


def header_value(data: bytes, name: str) -> str | None:
    """The first ``name`` header of the raw message, on one line; never raises."""
    # Imported here so that importing this module stays cheap for callers that
    # never need headers.
    from email import policy
    from email.parser import BytesHeaderParser

    # Only the header block is parsed, so a large attachment costs nothing. Blank
    # lines before the headers are allowed by _mail_problem, but the parser would
    # take the first one as the end of an empty header block.
    head = _header_block(data)
    try:
        value = BytesHeaderParser(policy=policy.compat32).parsebytes(head).get(name)
        if value is None:
            return None
        # compat32 hands back 8-bit values as an email.header.Header; str() of
        # that, or a surrogate escape left in a plain value, must still print.
        text = str(value).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - arbitrary input bytes; the contract is "never raise"
        return None
    text = " ".join(_NON_SPACE_CONTROL.sub("", text).split())
    return text or None


EMPTY_PATH = "a mail path is empty; give a file or folder of mail ('-' for stdin)"


def _os_error(path: str | os.PathLike[str], exc: OSError) -> MailSourceError:
    shown = _show(path)
    if not os.fspath(path):
        # An empty argument, which the system calls missing: "Error:  does not exist".
        return MailSourceError(EMPTY_PATH, "empty path")
    if isinstance(exc, FileNotFoundError):
        return MailSourceError(f"{shown} does not exist", "does not exist")
    if isinstance(exc, PermissionError):
        return MailSourceError(f"{shown}: permission denied", "permission denied")
    reason = " ".join((exc.strerror or str(exc) or type(exc).__name__).split())
    return MailSourceError(f"cannot read {shown}: {reason}", reason)


# Mail folders are often kept compressed (logrotate, archives): say so, rather than
# "binary data".
_COMPRESSED = (
    (b"\x1f\x8b", "gzip"),
    *((b"BZh" + bytes([level]), "bzip2") for level in b"123456789"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)


def _mail_problem(data: bytes) -> str | None:
    """Why ``data`` does not look like an e-mail message, or None if it does."""
    if not data:
        return "empty file"
    for magic, program in _COMPRESSED:
        if data.startswith(magic):
            return f"compressed with {program}; decompress it first"
    head = data[:_SNIFF_BYTES]
    # Binary files are full of NULs, while real mail occasionally carries a stray
    # one (an Enron-Spam message ends in a single NUL), so only a share over 1% of
    # the sniffed bytes counts as binary.
    if head.count(b"\0") * 100 > len(head):
        return "binary data (contains NUL bytes)"
    # Past a UTF-8 byte-order mark, as the tokenizer and the pipe read such a file (a
    # message saved by an editor on Windows): it was refused as not mail.
    body = head.removeprefix(_BOM).lstrip(b"\r\n")
    if not body:
        return "only blank lines"
    if not _FIRST_LINE.match(body):
        return "does not start with a header or 'From ' line"
    if body.startswith(b"Current-Folder:"):
        return "nmh's context file"
    return None


def _natural_key(name: str) -> tuple[int, int, str]:
    # MH-style and other numbered files should come out 1, 2, 10 rather than 1, 10, 2.
    if _is_numbered(name):
        return (0, int(name), name)
    return (1, 0, name)


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as exc:
        raise _os_error(path, exc) from None


def _read(path: str) -> bytes:
    """A message file given as PATH, or a named pipe there, as one message, read to a
    bound: a file of gigabytes read whole ended in a MemoryError's traceback."""
    try:
        with open(path, "rb") as fh:
            status = os.fstat(fh.fileno())
            if stat.S_ISREG(status.st_mode):
                if status.st_size > MAX_STREAM_BYTES:
                    raise MailSourceError(_too_long(_show(path)))
                # Whole, not to the bound: read(n) allocates n bytes first.
                return fh.read()
            data = fh.read(MAX_STREAM_BYTES + 1)
    except OSError as exc:
        raise _os_error(path, exc) from None
    if len(data) > MAX_STREAM_BYTES:
        raise MailSourceError(_too_long(_show(path)))
    return data


def _too_long(shown: str) -> str:
    return f"{shown} holds more than {MAX_STREAM_BYTES:,} bytes, more than a message"


_MAILDIR_PARTS = ("cur", "new", "tmp")


def _is_maildir(path: str) -> bool:
    """Whether ``path`` has Maildir's cur/ and new/, or one of them, holding no folders,
    and nothing else but tmp/ and files that are not mail: git, zip and some copies
    drop empty folders, and a Maildir kept in git often has only cur/ (while a plain
    folder of "old/" and "new/", or of "new/" and messages, is no Maildir)."""
    cur, new = (os.path.isdir(os.path.join(path, part)) for part in ("cur", "new"))
    if cur and new:
        return True
    if not (cur or new):
        return False
    try:
        with os.scandir(path) as entries:
            if not all(
                entry.name.startswith(".")
                or entry.name in _MAILDIR_PARTS
                or (not _is_folder(entry) and not _looks_like_mail(entry.path))
                for entry in entries
            ):
                return False
        # And the messages' folder holds messages, not folders of them.
        with os.scandir(os.path.join(path, "cur" if cur else "new")) as entries:
            return not any(_is_folder(e) for e in entries if not e.name.startswith("."))
    except OSError:
        return False


def _looks_like_mail(path: str) -> bool:
    """Whether the regular file at ``path`` starts like a message (state files of
    mail programs sit beside a Maildir's folders; messages do not)."""
    try:
        with open(path, "rb", opener=_open_without_blocking) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return False
            return _mail_problem(fh.read(_SNIFF_BYTES)) is None
    except OSError:
        return False


def _is_mh(path: str) -> bool:
    return os.path.isfile(os.path.join(path, ".mh_sequences"))


def _dir_format(path: str) -> str:
    if _is_maildir(path):
        return "maildir"
    if _is_mh(path):
        return "mh"
    return "dir"


def _starts_with_from(head: bytes) -> bool:
    return head.removeprefix(_BOM).lstrip(b"\r\n").startswith(b"From ")


def _scan_file(path: str, keep: bool) -> tuple[str, bytes | None]:
    """Tell a single message from an mbox, reading the file at most once.

    Returns the format and, when it is "file" and ``keep`` is true, the whole
    content, so the caller does not have to read the file again (None if it is
    larger than MAX_STREAM_BYTES, more than a message).
    """
    try:
        with open(path, "rb") as fh:
            return _scan(fh, fh.read(_SCAN_CHUNK), keep)
    except OSError as exc:
        raise _os_error(path, exc) from None


def _scan(
    fh: BinaryIO, head: bytes, keep: bool, *, whole: bool = False
) -> tuple[str, bytes | None]:
    """:func:`_scan_file` of an open file whose first bytes, ``head``, were read (all of
    it, if ``whole``)."""
    if not _starts_with_from(head):
        if not keep or os.fstat(fh.fileno()).st_size > MAX_STREAM_BYTES:
            return "file", None
        return "file", head + fh.read()
    # Start searching after the first envelope line's "From", so that it does not
    # count as a second message.
    start = head.index(b"From ") + 1
    chunks: list[bytes] | None = [head] if keep else None
    kept = len(head)
    window = head
    while True:
        if _has_envelope(window, start):
            return "mbox", None
        more = b"" if whole else fh.read(_SCAN_CHUNK)
        if not more:
            break
        if chunks is not None:
            kept += len(more)
            if kept <= MAX_STREAM_BYTES:
                chunks.append(more)
            else:
                chunks = None  # more than a message: only whether it is an mbox is asked
        tail = window[-_SCAN_OVERLAP:]
        window = tail + more
        start = 0
    return "file", b"".join(chunks) if chunks is not None else None


def _is_envelope(data: bytes, pos: int = 0) -> bool:
    """Whether the line at data[pos] is an envelope line: "From ", a sender, a blank,
    then on the same line a weekday, a word of its own, and the date after it (see
    _ENVELOPE_DATE)."""
    # One pattern for all of it tried every weekday on the line with a search for a
    # time to the line's end after each: quadratic in a long line of weekdays
    # ("From x MonMonMon...": 18 s for 60 kB).  Only the first weekday is tried.
    weekday = _ENVELOPE_TO_WEEKDAY.match(data, pos)
    return weekday is not None and _ENVELOPE_DATE.match(data, weekday.end()) is not None


def _envelope_at(data: bytes, pos: int) -> bool:
    """Whether the line at data[pos] is an envelope line that starts a message: the
    first line after it that is no "From " or ">From " line (a message's own envelope
    line, kept or quoted by the program that wrapped it) is a header field."""
    if not _is_envelope(data, pos):
        return False
    line_end = data.find(b"\n", pos)
    while line_end >= 0 and data.startswith((b"From ", b">From "), line_end + 1):
        line_end = data.find(b"\n", line_end + 1)
    return line_end >= 0 and _FIELD_LINE.match(data, line_end + 1) is not None


def _has_envelope(data: bytes, start: int) -> bool:
    """Whether data[start:] holds a second message: a blank line, then an envelope line
    that starts a message."""
    # A search for "\nFrom", then a look before and after it: three times as fast as a
    # pattern or a longer string (a line end and a blank are too common to skip by),
    # and every file of a folder that starts with an envelope line is searched.
    at = data.find(b"\nFrom", start)
    while at >= 0:
        blank_before = data.endswith(b"\n", 0, at) or data.endswith(b"\n\r", 0, at)
        if blank_before and data.startswith(b" ", at + 5) and _envelope_at(data, at + 1):
            return True
        at = data.find(b"\nFrom", at + 1)
    return False


def detect_format(path: Path) -> str:
    """The format (one of ``FORMATS``) that ``path`` would be read as.

    Raises MailSourceError if the path is missing, unreadable, or neither a
    directory nor a regular file / named pipe.
    """
    text = os.fspath(path)
    mode = _stat(text).st_mode
    if stat.S_ISDIR(mode):
        return _dir_format(text)
    if stat.S_ISFIFO(mode):
        # A pipe can be read only once, so it cannot be sniffed and then handed
        # to mailbox; treat it as one message (e.g. "<(zcat msg.gz)" in a shell).
        return "file"
    if stat.S_ISREG(mode):
        return "file" if _in_message_folder(text) else _scan_file(text, keep=False)[0]
    raise MailSourceError(f"{_show(text)} is neither a directory nor a regular file")


def _in_message_folder(path: str) -> bool:
    """Whether the file at ``path`` is a message of a Maildir's cur/ or new/ or an MH
    folder's numbered one, which is one message whatever envelope lines it holds (a
    bounce quoting the original with its envelope line was two messages read through
    the folder above the Maildir, and one through the Maildir: review 50)."""
    folder = os.path.dirname(path) or "."
    try:
        states = tuple(
            (status.st_dev, status.st_ino, status.st_mtime_ns)
            for status in (os.stat(folder), os.stat(os.path.join(folder, os.pardir)))
        )
    except OSError:
        return False
    rules = _cached_folder_rules(folder, states)
    return rules == "maildir" or (rules == "mh" and _is_numbered(os.path.basename(path)))


@functools.lru_cache(maxsize=64)
def _cached_folder_rules(folder: str, states: tuple[tuple[int, int, int], ...]) -> str | None:
    """:func:`_folder_rules` of a folder and its parent as they are (``states``: their
    devices, inodes and modification times): the messages of a cur/-only Maildir
    given one by one each scanned the whole folder (3,900 files: 2.1 s became 8.8 s,
    review 51)."""
    return _folder_rules(folder, True)


def iter_messages(
    path: str | Path,
    fmt: str | None = None,
    *,
    recursive: bool = False,
    stdin: BinaryIO | None = None,
    on_skip: SkipHandler | None = None,
    allow_empty: bool = False,
) -> Iterator[MailItem]:
    """Yield every message found at ``path`` (see the module docstring for formats).

    ``path`` may be ``-`` for one message read from ``stdin`` (default
    ``sys.stdin.buffer``), or with ``fmt`` "mbox" its messages. ``fmt`` forces a
    format instead of detecting it.
    ``recursive`` includes Maildir++ and MH subfolders (plain directories are
    always walked in full). Files inside a folder that do not look like mail are
    passed to ``on_skip(source, reason)`` and left out.

    The path and format are checked at once, so a missing path or unknown format
    raises MailSourceError from this call; problems found while reading (such as
    an unreadable file, or a folder without messages) raise it during iteration.
    With ``allow_empty`` a folder without messages, or an empty file (an emptied
    mbox), yields nothing instead.
    """
    text = os.fspath(path)
    if fmt is not None and fmt not in FORMATS:
        raise MailSourceError(
            f"unknown mail format {fmt!r} for {_show(text)} (expected one of: {', '.join(FORMATS)})"
        )
    skip = on_skip if on_skip is not None else _ignore_skip

    if text == "-":
        if fmt not in (None, "file", "mbox"):
            raise MailSourceError(
                f"standard input ('-') can only be read as a message or an mbox, not {fmt}"
            )
        return _iter_stdin(stdin, fmt, skip, allow_empty=allow_empty)

    status = _stat(text)
    mode = status.st_mode
    is_dir = stat.S_ISDIR(mode)
    is_file = stat.S_ISREG(mode) or stat.S_ISFIFO(mode)
    if not is_dir and not is_file:
        raise MailSourceError(f"{_show(text)} is neither a directory nor a regular file")

    data: bytes | None = None
    forced = fmt is not None
    if fmt is None:
        if is_dir:
            fmt = _dir_format(text)
        elif stat.S_ISFIFO(mode) or _in_message_folder(text):
            fmt = "file"
        else:
            fmt, data = _scan_file(text, keep=True)
    elif fmt in ("file", "mbox") and is_dir:
        raise MailSourceError(f"{_show(text)} is a directory, not {_describe(fmt)}")
    elif fmt in ("dir", "maildir", "mh") and not is_dir:
        raise MailSourceError(f"{_show(text)} is not a directory, so it cannot be {_describe(fmt)}")
    elif fmt == "mbox" and not stat.S_ISREG(mode):
        raise MailSourceError(f"{_show(text)} is not a regular file, so it cannot be an mbox file")
    elif fmt == "maildir" and not _is_maildir(text):
        raise MailSourceError(f"{_show(text)} is not a Maildir (it has no cur/ or new/ folder)")

    if allow_empty and stat.S_ISREG(mode) and status.st_size == 0:
        return iter(())  # an emptied mbox, or an empty file of a glob
    if fmt == "file" and forced:
        return _iter_one_file(text, data)
    if fmt == "file":
        return _expect_some(text, _iter_one_file(text, data, skip), allow_empty=allow_empty)
    if fmt == "dir":
        return _expect_some(
            text, _iter_dir(text, skip, mh_rules=not forced), allow_empty=allow_empty
        )
    if fmt == "mbox":
        # Named mbox by the user (forced) it is split at every envelope line, a blank
        # line before it or not (files made by concatenating messages have none).
        return _expect_some(
            text, _iter_mbox(text, skip, after_blank=not forced), allow_empty=allow_empty
        )
    if fmt == "maildir":
        return _expect_some(
            text, _iter_maildir(text, recursive, skip, set()), allow_empty=allow_empty
        )
    return _expect_some(text, _iter_mh(text, recursive, skip, set()), allow_empty=allow_empty)


def _ignore_skip(source: str, reason: str) -> None:
    pass


def _describe(fmt: str) -> str:
    return {
        "file": "a message file",
        "dir": "a directory of messages",
        "mbox": "an mbox file",
        "maildir": "a Maildir",
        "mh": "an MH folder",
    }[fmt]


def _checked(source: str, data: bytes) -> MailItem:
    """The item for a lone message given by the user; not-mail is an error there."""
    problem = _mail_problem(data)
    if problem == "empty file":
        raise MailSourceError(f"{_show(source)} is empty")
    if problem is not None:
        raise MailSourceError(f"{_show(source)} is not a mail message ({problem})")
    return MailItem(source, data)


def _iter_stdin(
    stdin: BinaryIO | None, fmt: str | None, skip: SkipHandler, *, allow_empty: bool = False
) -> Iterator[MailItem]:
    """Standard input: one message, or with ``fmt`` "mbox" the messages of an mbox,
    named -:1, -:2, ...  Not told apart as a file is: a message piped from procmail or
    a mail client comes with its envelope line, and a bounce carrying the original
    with its own, or a patch from git format-patch in an attachment, read as two
    messages (review 31; :func:`looks_like_mbox` lets the caller warn instead)."""
    if stdin is None:
        # sys.stdin is None under pythonw and a text-only stream in some embedders.
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            raise MailSourceError("standard input ('-') is not available")
    try:
        # Bounded: reading an endless stream whole took all memory.
        data = stdin.read(MAX_STREAM_BYTES + 1)
    except OSError as exc:
        raise _os_error("-", exc) from None
    if len(data) > MAX_STREAM_BYTES:
        raise MailSourceError(
            f"standard input ('-') holds more than {MAX_STREAM_BYTES:,} bytes, more than "
            "spamnb reads from it; give the mbox as a file, which is read a message at a time"
            if fmt == "mbox"
            else _too_long("standard input ('-')")
        )
    problem = _mail_problem(data)
    if problem == "empty file":
        if allow_empty and fmt == "mbox":
            # An emptied mbox piped in (zcat junk.gz | spamnb train --format mbox ...);
            # one message (the "this is spam" button's) that is empty stays an error.
            return
        raise NoMessagesFound("standard input ('-') is empty")
    if problem is not None:
        raise MailSourceError(f"standard input ('-') is not a mail message ({problem})")
    if fmt != "mbox":
        yield MailItem("-", data)
        return
    if not _starts_with_from(data):
        raise MailSourceError(
            "standard input ('-') is not an mbox (it does not start with 'From ')"
        )
    found = False
    # Named mbox by the user it is split at every envelope line, as a file is.
    for item in _mbox_items("-", io.BytesIO(data), skip, after_blank=False):
        found = True
        yield item
    if not found and not allow_empty:
        raise NoMessagesFound("no messages found in standard input ('-')")


def joined_without_blank_lines(path: str, data: bytes) -> int:
    """How many more messages the file at ``path``, read as one message ``data``,
    seems to hold: envelope lines that a header field follows, with no blank line
    before them, as messages joined by ``cat`` are (an mbox needs the blank line, so
    such a file reads as one message).  0 for a Maildir's or MH folder's message, which
    is one message whatever it holds."""
    if not _starts_with_from(data[:_SNIFF_BYTES]) or _in_message_folder(path):
        return 0
    start = data.index(b"From ") + 1
    joined = 0
    at = data.find(b"\nFrom ", start)
    while at >= 0:
        joined += _envelope_at(data, at + 1)
        at = data.find(b"\nFrom ", at + 1)
    return joined


def looks_like_mbox(data: bytes) -> bool:
    """Whether a message read whole (standard input) holds more messages by the rules
    a file is told apart by: it starts with an envelope line, and a blank line, an
    envelope line and a header field follow."""
    return _scan(io.BytesIO(), data, keep=False, whole=True)[0] == "mbox"


def _iter_one_file(
    path: str, data: bytes | None, skip: SkipHandler | None = None
) -> Iterator[MailItem]:
    """The message of a file given as PATH; with ``skip``, nothing (told to it) when
    the file is a Thunderbird folder whose one message was deleted."""
    if data is None:
        data = _read(path)
    item = _checked(path, data)
    if skip is not None and _is_expunged_folder(data):
        skip(path, _EXPUNGED)
        return
    yield item


def _expect_some(
    path: str, items: Iterator[MailItem], *, allow_empty: bool = False
) -> Iterator[MailItem]:
    found = False
    for item in items:
        found = True
        yield item
    if not found and not allow_empty:
        raise NoMessagesFound(f"no messages found in {_show(path)}")


def _open_without_blocking(path: str, flags: int) -> int:
    # Opening a named pipe for reading waits for a writer, for ever: opened without
    # blocking, it is found out by fstat before anything is read.
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _iter_member(source: str, skip: SkipHandler, *, mbox_files: bool = False) -> Iterator[MailItem]:
    """The message in one file inside a folder, or with ``mbox_files`` the messages
    of an mbox file there; nothing when the file is skipped (told to ``skip``)."""
    try:
        with open(source, "rb", opener=_open_without_blocking) as fh:
            # (O_NONBLOCK changes nothing in reading a regular file.)
            status = os.fstat(fh.fileno())
            if not stat.S_ISREG(status.st_mode):
                skip(source, "not a regular file")
                return
            # Judge the file by its head before reading the rest, so that a large
            # non-mail file in a folder (an archive, a disk image) is skipped
            # without being loaded. _mail_problem looks at no more than this head,
            # so the verdict is the same as for the whole file.
            head = fh.read(_SNIFF_BYTES)
            problem = _mail_problem(head)
            if problem is not None:
                skip(source, problem)
                return
            if not mbox_files:
                kind = "file"
                data = head + fh.read() if status.st_size <= MAX_STREAM_BYTES else None
            elif status.st_size > _SCAN_CHUNK:
                kind, data = _scan(fh, head, keep=True)  # a large mbox is not read whole
            else:
                # Read whole, not by _scan's chunks: asking for a chunk of 1 MiB
                # allocates one, and training spent 0.1 s more system time on it.
                data = head + fh.read()
                kind = _scan(fh, data, keep=False, whole=True)[0]
    except FileNotFoundError:
        if os.path.lexists(source):
            skip(source, "broken symbolic link")
        else:
            # Mail clients move and delete files in live folders (new/ -> cur/ in a
            # Maildir) between our listing and the read; not worth failing over.
            skip(source, "disappeared while reading (moved or deleted)")
        return
    except IsADirectoryError:  # open() refuses a folder before fstat could
        skip(source, "not a regular file")
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            skip(source, "symbolic link loop")
            return
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket, opened without blocking
            skip(source, "not a regular file")
            return
        # One message that cannot be read (another user's, a bad sector) no longer
        # stops the run over a whole folder; it is counted and named as skipped.
        skip(source, _os_error(source, exc).reason)
        return
    if kind == "mbox" and data is None:
        # Read again, a message at a time: an mbox can be larger than memory.
        yield from _iter_mbox(source, skip)
    elif kind == "mbox":
        # A small one was read whole to be told from a message: split from memory.
        yield from _mbox_items(source, io.BytesIO(data), skip)
    elif data is None:
        skip(source, f"holds more than {MAX_STREAM_BYTES:,} bytes, more than a message")
    elif _is_expunged_folder(data):
        skip(source, _EXPUNGED)
    else:
        yield MailItem(source, data)


def _first_visit(path: str, seen: set[_FolderKey]) -> bool:
    """Record the real folder behind ``path``; False if it was already read."""
    # Symbolic links to folders are followed, so a link loop (``ln -s . loop``) or
    # a second link to the same folder must not repeat its messages or recurse
    # forever.
    st = _stat(path)
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return False
    seen.add(key)
    return True


def _sorted_entries(path: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError as exc:
        raise _os_error(path, exc) from None
    entries.sort(key=lambda e: _natural_key(e.name))
    return entries


def _entry_kind(entry: os.DirEntry[str], skip: SkipHandler) -> str | None:
    """ "dir" or "file" for a folder's entry (links followed), or None when it is
    neither, which ``skip`` is told."""
    try:
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
    except OSError as exc:
        reason = "symbolic link loop" if exc.errno == errno.ELOOP else None
        skip(entry.path, reason or _os_error(entry.path, exc).reason)
        return None
    broken = entry.is_symlink() and not os.path.exists(entry.path)
    skip(entry.path, "broken symbolic link" if broken else "not a regular file")
    return None


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # a link loop: no folder
        return False


def _iter_dir(root: str, skip: SkipHandler, *, mh_rules: bool = True) -> Iterator[MailItem]:
    """A tree of message files, depth first in sorted order: every file below it, but
    the deliveries in progress in a Maildir's tmp/ and, with ``mh_rules`` (a detected
    folder, not one forced), what MH and Maildir do not count as messages (MH's
    deleted ones and other names in an MH folder, Maildir's trashed ones) and editors'
    copies; an mbox file split into its messages.  (``--format dir`` asks for every
    file, and gets it.)"""
    seen: set[_FolderKey] = set()
    _first_visit(root, seen)
    rules = _folder_rules(root, mh_rules)
    # A stack of listings, not recursion: a tree a thousand folders deep is no error.
    listings = [(root, iter(_sorted_entries(root)), rules)]
    while listings:
        folder, entries, rules = listings[-1]
        entry = next(entries, None)
        if entry is None:
            listings.pop()
            continue
        if entry.name.startswith("."):
            continue
        kind = _entry_kind(entry, skip)
        if kind == "file":
            if mh_rules and _is_deleted_mh(entry.name):
                skip(entry.path, "a deleted MH message")
            elif rules == "maildir" and _is_trashed(entry.name):
                skip(entry.path, _TRASHED)
            elif mh_rules and _is_editor_copy(entry.name):
                skip(entry.path, "an editor's backup or autosave file")
            elif rules != "mh" or _is_numbered(entry.name):  # as _iter_mh reads an MH folder
                # A Maildir's or MH folder's file is one message, as those readers take it.
                yield from _iter_member(entry.path, skip, mbox_files=rules is None)
        elif kind == "dir":
            # (The root's own tmp/ is read: --format dir asks for every file.)
            if entry.name == "tmp" and folder != root and _is_maildir(folder):
                continue
            try:
                if not _first_visit(entry.path, seen):
                    continue
                listing = iter(_sorted_entries(entry.path))
            except MailSourceError as exc:
                # A folder inside one given (lost+found, another user's) is passed
                # over as an unreadable file is; one given itself is an error.
                skip(entry.path, exc.reason)
                continue
            listings.append((entry.path, listing, _folder_rules(entry.path, mh_rules)))


def _folder_rules(path: str, detected: bool) -> str | None:
    """Whose rules say which files of the folder at ``path`` are messages: "mh" for an
    MH folder, "maildir" for the cur/ or new/ of a Maildir (a tree of them, as mbsync
    keeps, is read folder by folder), None for others or a format forced.  Judged by
    the real folder, not the name a link gives it: the same folder read by another
    name would have given up its trashed mail, or not, by which name came first."""
    if not detected:
        return None
    if _is_mh(path):
        return "mh"
    parent, name = os.path.split(os.path.realpath(path))
    if name in ("cur", "new") and _is_maildir(parent):
        return "maildir"
    return None


def _is_numbered(name: str) -> bool:
    return name.isascii() and name.isdigit()  # int() also takes "²" as a digit


def _is_editor_copy(name: str) -> bool:
    """An editor's backup ("msg~") or autosave ("#msg#") of a file beside it: read as
    mail, a message edited in a folder was learnt twice, once as it was before."""
    return name.endswith("~") or (len(name) > 2 and name.startswith("#") and name.endswith("#"))


def _is_deleted_mh(name: str) -> bool:
    """nmh's name for a deleted message (",12"), kept until the next purge."""
    return name.startswith(",") and _is_numbered(name[1:])


def _iter_maildir(
    root: str, recursive: bool, skip: SkipHandler, seen: set[_FolderKey]
) -> Iterator[MailItem]:
    folders = [root]
    while folders:
        folder = folders.pop()
        if not _first_visit(folder, seen):
            continue
        names: list[tuple[str, str]] = []
        for sub in ("cur", "new"):
            part = os.path.join(folder, sub)
            if not os.path.isdir(part):  # one of them left out (see _is_maildir)
                continue
            for entry in _sorted_entries(part):
                # The Maildir spec reserves dot-files; clients keep their own state there.
                if not entry.name.startswith("."):
                    names.append((entry.name, entry.path))
        # Maildir file names begin with the delivery time, so sorting by name across
        # cur/ and new/ gives roughly the order in which the mail arrived.
        names.sort()
        for name, source in names:
            if _is_trashed(name):
                skip(source, _TRASHED)
            else:
                yield from _iter_member(source, skip)
        if recursive:
            subfolders = []
            for entry in _sorted_entries(folder):
                if _is_maildir_subfolder(entry):
                    subfolders.append(entry.path)
                elif (
                    entry.name not in _MAILDIR_PARTS
                    and _is_folder(entry)
                    and (reason := _unreadable(entry.path))
                ):
                    # Counted, as an unreadable file is: left out unsaid, a .Spam/ that
                    # could not be read looked like a Maildir with no spam folder.
                    skip(entry.path, reason)
            folders.extend(reversed(subfolders))


def _is_maildir_subfolder(entry: os.DirEntry[str]) -> bool:
    """Whether a Maildir's entry is a Maildir of its own that --recursive reads: a
    .Sub as Maildir++ names them, or a plain Sub as Dovecot's LAYOUT=fs and mbsync's
    "SubFolders Verbatim" keep them (review 50: those were never read)."""
    return entry.name not in _MAILDIR_PARTS and _is_maildir(entry.path)


def _unreadable(path: str) -> str | None:
    """Why the folder at ``path`` cannot be listed, or None if it can."""
    try:
        with os.scandir(path):
            return None
    except OSError as exc:
        return _os_error(path, exc).reason


_TRASHED = "a message marked deleted (Maildir flag T)"
# A Maildir file name's flags: ":2," then the flags, uppercase letters in order (lower
# case ones are Dovecot's keywords); ";" or "!" for ":" where a file system forbids it
# (mbsync, offlineimap on Windows).
_MAILDIR_FLAGS_RE = re.compile(r"[:;!]2,([A-Za-z]*)$")


def _is_trashed(name: str) -> bool:
    """Whether a Maildir file name carries the T (trashed) flag: a message deleted in
    the mail program (Dovecot, mutt) and kept until the folder is expunged.  Read as
    mail, the spam a user deleted from the inbox, and still there, was learnt as ham
    beside its copy in the junk folder."""
    found = _MAILDIR_FLAGS_RE.search(name)
    return found is not None and "T" in found[1]


# Thunderbird writes the field at a message's head in its folders (the envelope line
# above it is not in the message here).  Only there: a sender can put one
# anywhere in the header, and a spam carrying "0009" would not have been learnt, while
# other mail programs keep such a field from mail that passed through Thunderbird
# (review 29).
# For a POP3 account it writes its own X-Account-Key and X-UIDL lines before it.
_MOZILLA_STATUS_RE = re.compile(
    rb"(?:X-Account-Key: [^\r\n]*\r?\n)?(?:X-UIDL: [^\r\n]*\r?\n)?"
    rb"X-Mozilla-Status: ?([0-9A-Fa-f]{4})\r?\n"
)
# Thunderbird's flag for a message deleted from a local folder, whose bytes stay in the
# mbox until the folder is compacted (nsMsgMessageFlags::Expunged).
_MOZILLA_EXPUNGED = 0x8


_EXPUNGED = "a message marked deleted (Thunderbird's X-Mozilla-Status)"


def _is_expunged(data: bytes) -> bool:
    """Whether a message of an mbox is one Thunderbird deleted and has not compacted
    away (see _is_trashed for why it is left out)."""
    found = _MOZILLA_STATUS_RE.match(data)
    return found is not None and bool(int(found[1], 16) & _MOZILLA_EXPUNGED)


def _is_expunged_folder(data: bytes) -> bool:
    """Whether a file read as one message is a Thunderbird folder holding a single
    message, one it deleted: an mbox of one message is told apart as a message file
    with its envelope line, and so was learnt."""
    if not data.startswith(b"From "):
        return False
    end = data.find(b"\n")
    return end >= 0 and _is_expunged(data[end + 1 :])


def _iter_mbox(path: str, skip: SkipHandler, *, after_blank: bool = True) -> Iterator[MailItem]:
    try:
        fh = open(path, "rb")  # noqa: SIM115 - a with block below closes it
    except OSError as exc:
        raise _os_error(path, exc) from None
    with fh:
        try:
            head = fh.read(_SNIFF_BYTES)
            fh.seek(0)
        except OSError as exc:
            raise _os_error(path, exc) from None
        if not head:
            raise MailSourceError(f"{_show(path)} is empty")
        if not _starts_with_from(head):
            # A compressed mbox is named as such, as it is when the format is detected.
            problem = _mail_problem(head)
            if problem is None or not problem.startswith("compressed"):
                problem = "it does not start with 'From '"
            raise MailSourceError(f"{_show(path)} is not an mbox file ({problem})")
        yield from _mbox_items(path, fh, skip, after_blank=after_blank)


def _mbox_items(
    path: str, fh: BinaryIO, skip: SkipHandler, *, after_blank: bool = True
) -> Iterator[MailItem]:
    """The messages of the mbox file at ``path``, open as ``fh``, each named PATH:N;
    those that are not mail told to ``skip``."""
    messages = _mbox_messages(fh, after_blank=after_blank)
    number = 0
    while True:
        try:
            data = next(messages, None)
        except OSError as exc:
            raise _os_error(path, exc) from None
        if data is None:
            return
        number += 1
        source = f"{path}:{number}"
        problem = _mail_problem(data)
        if problem is None and _is_expunged(data):
            problem = _EXPUNGED
        if problem is None:
            yield MailItem(source, data)
        else:
            skip(source, problem)


_CONTENT_LENGTH = re.compile(rb"content-length:[ \t]*(\d{1,15})[ \t]*\r?\n", re.I)


def _body_length(fh: BinaryIO, length: int) -> int | None:
    """``length``, a Content-Length field's, when the body that starts at ``fh``'s
    position has that many bytes, ending in a line end, before a message boundary:
    the file's end, or the blank line that separates messages and then an envelope
    line or the file's end; else None.

    mboxcl2 files (Solaris mail, mutt's mbox_type) do not quote a body's "From "
    lines and give its length instead: a patch's "From <sha> Mon Sep 17 00:00:00 2001"
    line after a blank line split such a message in two, and every later message was
    named one number off (review 50).  Checked as mutt checks it, a wrong or forged
    length is passed over and the message is split as any other, so a length ends a
    message only where a blank line and an envelope line, or the file's end, would
    have ended it anyway.  A length past the file's end is no error (a forged one of
    14 digits made the seek fail, and the mbox could not be read at all: review 51).
    """
    start = fh.tell()
    try:
        size = fh.seek(0, io.SEEK_END)
        if start + length > size:
            return None
        fh.seek(start + length - 1 if length else start)
        if length and fh.read(1) != b"\n":
            return None
        after = fh.read(_SNIFF_BYTES)
        if not after:
            # The file ends with the body, without the blank line mutt wants: a file of
            # one such message was read whole before that check (review 52).
            return length
    except OSError:
        return None
    finally:
        fh.seek(start)
    for separator in (b"\r\n", b"\n"):
        if after.startswith(separator):
            rest = after[len(separator) :]
            return length if not rest or _is_envelope(rest) else None
    return None


def _mbox_messages(fh: BinaryIO, *, after_blank: bool = True) -> Iterator[bytes]:
    """The messages of an mbox file (open as ``fh``), each without its envelope line.

    A message starts at the first "From " line and at each envelope line after it
    that starts a message (see _envelope_at) and, with ``after_blank``, that a blank
    line comes before; lines before the first are not in any message.  A blank
    line (LF only, as mailbox.mbox reads it on POSIX) just before the next message or
    at the end of the file belongs to the format, not to the message.  A body whose
    Content-Length is borne out (see _body_length) is read whole.
    """
    message: list[bytes] | None = None
    # A line that may be an envelope line, with the "From " and ">From " lines after
    # it, until the next line tells (see _envelope_at).
    candidate: list[bytes] = []
    blank_before = False
    # Whether the message has a line past its envelope line and any "From " lines
    # right after it, which belong with it (a wrapper's envelope line, then the
    # message's own): only then can another envelope line end it.
    opened = False
    # In the message's header block, its Content-Length (if any), and then how many
    # bytes of its body that length still covers.
    in_header = False
    content_length: int | None = None
    covered = 0
    for line in fh:
        if covered > 0:
            assert message is not None
            message.append(line)
            covered -= len(line)
            # At the boundary the length was checked against: the next envelope line
            # starts a message, a blank line before it or not.
            blank_before = True
            continue
        if message is None:
            # Before the first envelope line: a file's byte-order mark (see
            # _starts_with_from) would hide it.
            line = line.removeprefix(_BOM)
        if candidate:
            assert message is not None
            if line.startswith((b"From ", b">From ")):
                candidate.append(line)
                continue
            if _FIELD_LINE.match(line):
                yield _mbox_message(message)
                message = candidate[1:]
                opened = False
                in_header, content_length = True, None
            else:
                message += candidate
            candidate = []
            blank_before = False
        if line.startswith(b"From "):
            if message is None:
                message = []
                blank_before = False
                in_header, content_length = True, None
                continue
            if opened and (blank_before or not after_blank) and _is_envelope(line):
                candidate = [line]
                continue
        if message is not None:
            message.append(line)
            opened = opened or not line.startswith((b"From ", b">From "))
            if in_header:
                if line in (b"\n", b"\r\n"):
                    in_header = False
                    if content_length is not None:
                        covered = _body_length(fh, content_length) or 0
                elif line[:1] in (b"C", b"c") and (field := _CONTENT_LENGTH.fullmatch(line)):
                    content_length = int(field.group(1))
        blank_before = line in (b"\n", b"\r\n")
    if message is not None:
        yield _mbox_message(message + candidate)


def _mbox_message(lines: list[bytes]) -> bytes:
    if lines and lines[-1] == b"\n":
        lines.pop()
    if lines and lines[0].startswith(b">From "):
        # A wrapped message's own envelope line, quoted by the program that wrapped it
        # (see _envelope_at): it is the message's first line, unquoted, as it was
        # before (quoted, the message did not start as mail and was skipped).
        wrapped = 1
        while wrapped < len(lines) and lines[wrapped].startswith((b"From ", b">From ")):
            wrapped += 1
        if wrapped < len(lines) and _FIELD_LINE.match(lines[wrapped]):
            lines[:wrapped] = [line.removeprefix(b">") for line in lines[:wrapped]]
    return b"".join(lines)


def subfolders_left_out(path: str | os.PathLike[str], given: str | None = None) -> bool:
    """Whether a Maildir or MH folder at ``path``, read as format ``given`` (None:
    detected), has subfolders that only a recursive read takes (a Maildir whose mail is
    all in its .Sub/ folders looks empty)."""
    text = os.fspath(path)
    try:
        fmt = _dir_format(text) if os.path.isdir(text) else None
        if fmt not in ("maildir", "mh") or given not in (None, fmt):
            return False
        with os.scandir(text) as entries:
            for entry in entries:
                if fmt == "maildir" and _is_maildir_subfolder(entry):
                    return True
                if fmt == "mh" and not entry.name.startswith(".") and _is_folder(entry):
                    return True
    except OSError:
        pass
    return False


def _iter_mh(
    path: str, recursive: bool, skip: SkipHandler, seen: set[_FolderKey]
) -> Iterator[MailItem]:
    """An MH folder's messages, the files named by a number, in number order; then,
    with ``recursive``, its subfolders', depth first.

    Listed here rather than by mailbox.MH, which keys messages by int(name): it read
    "01" as "1" a second time and could not find "007" at all.  Other names, such as
    nmh's ",12" for a deleted message, are not messages.
    """
    folders = [path]
    while folders:
        folder = folders.pop()
        try:
            if not _first_visit(folder, seen):
                continue
            entries = _sorted_entries(folder)
        except MailSourceError as exc:
            if folder == path:
                raise
            # A subfolder that cannot be read is passed over and counted, as a Maildir's
            # is; it stopped the whole run (review 50).
            skip(folder, exc.reason)
            continue
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if _is_numbered(entry.name):
                kind = _entry_kind(entry, skip)
                if kind == "file":
                    yield from _iter_member(entry.path, skip)
                elif kind == "dir":
                    subfolders.append(entry.path)
            elif _is_folder(entry):
                subfolders.append(entry.path)
        if recursive:
            folders.extend(reversed(subfolders))
