"""Mutation fuzzer for the tokenizer, the pipe filter and the header readers.

Usage::

    python tests/fuzz.py --seconds N [--seed S] [--corpus-dir DIR] [--save DIR]
                         [--count N] [--timeout T] [--replay FILE...]

Real messages from the SpamAssassin public corpus and Enron1 are damaged the way
hostile or broken mail is (flipped bytes, truncation, duplicated and deleted MIME
boundary lines, bogus charsets and transfer encodings, broken RFC 2047 encoded words,
NUL bytes, invalid UTF-8 in headers, deep nesting, repeated runs, and combinations
of these), and each mutant goes through:

* ``tokenize``: must return a list of strings, the same list twice;
* the pipe filter (``spamnb.pipe.run``, in memory, with a model trained at start-up
  on corpus messages): the output must be the input plus one verdict header line,
  with the exit status of that verdict, or the input unchanged with exit status 3
  (only for empty input: with a good model, exit 3 means scoring failed);
* ``message_id``, ``header_value`` and ``date_header``: None or one printable line,
  and ``message_id`` must agree with ``header_value(data, "Message-ID")``.

Each input runs in a worker process, so an input that hangs (longer than
``--timeout``) or kills the interpreter is recorded too and the run goes on.  Input
number I of seed S is the same on every run (its random generator is seeded with
both), so a run is reproducible; the digest printed at the end tells two runs apart.
Failing inputs (a few per kind of failure) and the slowest inputs are written to
``--save`` (build/fuzz/ by default) with a note of how each was made.  The exit
status is 1 when anything failed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import math
import multiprocessing
import os
import quopri
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unicodedata
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

# The tests' own way to find and unpack the corpora (this script runs from tests/).
from conftest import _load_fetch, corpus_mirror

from spamnb import __version__

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ("spamassassin", "enron1")
# Messages per label the start-up model learns from: enough for real verdicts.
TRAIN_PER_LABEL = 250
# Mutants are cut here: the pipe filter scores the first 1 MiB, so larger mutants also
# take its road for large mail, without letting repetition eat the machine's memory.
MAX_MUTANT_BYTES = 3 << 20
# The worker's address space limit: a memory blow-up becomes a MemoryError to report
# instead of a machine shared with others swapping.
WORKER_MEMORY_BYTES = 4 << 30
# Inputs saved per kind of failure (all are counted).
SAVED_PER_KIND = 3
# Time per kilobyte is compared over inputs at least this large, where the fixed
# cost of a pipe run no longer dominates: what grows faster than its size shows.
RATE_MIN_BYTES = 64 << 10
HEADER_NAME = "X-Spamnb"
# spamnb.pipe's limit (checked at start-up): larger mail is scored on its first bytes.
DEFAULT_MAX_SIZE = 1024 * 1024


# --- the corpora and the model ----------------------------------------------------------


@dataclass(frozen=True)
class CorpusMessage:
    name: str  # path below the corpus folder, for notes
    label: str
    path: Path


def corpus_messages(dest: Path) -> list[CorpusMessage]:
    """Every message of the corpora unpacked (if not yet there) under ``dest``, in a
    fixed order."""
    fetch = _load_fetch()
    messages = []
    for corpus in CORPORA:
        try:
            root = fetch.fetch(corpus, dest, mirror=corpus_mirror())
        except fetch.FetchError as exc:
            raise SystemExit(f"fuzz: cannot get the {corpus} corpus: {exc}") from None
        for label, folders in sorted(fetch.labelled_dirs(corpus, root).items()):
            for folder in folders:
                for path in fetch.message_files(folder):
                    name = str(path.relative_to(dest))
                    messages.append(CorpusMessage(name, label, path))
    return messages


def train_model(messages: list[CorpusMessage], seed: int, folder: Path) -> Path:
    """A model trained by the real command on a seeded sample of the corpora."""
    rng = random.Random(f"{seed}:model")
    for label in ("spam", "ham"):
        pool = [m for m in messages if m.label == label]
        (folder / label).mkdir()
        for number, message in enumerate(rng.sample(pool, min(TRAIN_PER_LABEL, len(pool)))):
            shutil.copyfile(message.path, folder / label / f"{number:05d}")
    model = folder / "model.joblib"
    command = [sys.executable, "-m", "spamnb", "train", "--new", "-m", str(model)]
    command += ["--spam", str(folder / "spam"), "--ham", str(folder / "ham"), "--jobs", "1"]
    # Run from the scratch folder: "-m" puts the working directory first on the path.
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=folder)
    if result.returncode != 0:
        raise SystemExit(f"fuzz: training the model failed:\n{result.stderr}")
    return model


# --- mutations ------------------------------------------------------------------------------
#
# Each mutation takes the random generator, the message and a function that draws
# another corpus message, and returns the new message and a note of what it did.

Donor = Callable[[], bytes]
Mutation = Callable[[random.Random, bytes, Donor], tuple[bytes, str]]

_BODY_SEPARATOR = re.compile(rb"\r?\n\r?\n")
_BOUNDARY_PARAM = re.compile(rb'boundary[ \t]*=[ \t]*(?:"([^"\r\n]*)"|([^\s;"]+))', re.I)
_DASH_LINE = re.compile(rb"^--[^\r\n]*(?:\r?\n)?", re.M)
_CHARSET_PARAM = re.compile(rb'charset[ \t]*=[ \t]*"?([^"\s;]*)', re.I)
_CTE_VALUE = re.compile(rb"^content-transfer-encoding[ \t]*:[ \t]*([^\r\n]*)", re.I | re.M)
_CONTENT_TYPE_VALUE = re.compile(rb"^content-type[ \t]*:[ \t]*([^\r\n]*)", re.I | re.M)
_ADDRESS_OR_SUBJECT = re.compile(rb"^(?:subject|from|to|cc|reply-to)[ \t]*:[ \t]*", re.I | re.M)
_FIELD_START = re.compile(rb"^[!-9;-~]+[ \t]*:[ \t]*", re.M)
_NEWLINE = re.compile(rb"\n")

REAL_CHARSETS = (b"utf-8", b"iso-8859-1", b"windows-1252", b"koi8-r", b"shift_jis", b"big5")
BOGUS_CHARSETS = (
    b"x-bogus",
    b"unknown-8bit",
    b"utf-7",
    b"utf-16",
    b"utf-32-be",
    b"cp037",
    b"iso-2022-jp",
    b"base64",
    b"rot13",
    b"zlib",
    b"hex",
    b"idna",
    b"punycode",
    b"unicode_escape",
    b"raw_unicode_escape",
    b"",
    b'"',
    b"\xff\xfe",
    b"utf-8\x00",
    b"us-ascii'en'",
    b"a" * 300,
)
TRANSFER_ENCODINGS = (
    b"base64",
    b"quoted-printable",
    b"x-uuencode",
    b"uuencode",
    b"x-uue",
    b"7bit",
    b"8bit",
    b"binary",
    b"bogus",
    b"BASE64  ",
    b"base64\x00",
    b"quoted-printable; x=y",
    b"",
    b"b" * 300,
)
INVALID_UTF8 = (
    b"\xff",
    b"\xfe\xff",
    b"\xc3\x28",
    b"\xe2\x82",
    b"\xf0\x28\x8c\x28",
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xc0\xaf",  # an overlong slash
    b"\xf8\x88\x80\x80\x80",
    b"\x80" * 20,
)
CONTENT_TYPES = (
    b"multipart/mixed",
    b'multipart/mixed; boundary=""',
    b"multipart/mixed; boundary=",
    b"multipart/mixed; boundary*0=a; boundary*1=b",
    b'multipart/digest; boundary="d"',
    b"message/rfc822",
    b"message/partial; id=1; number=2",
    b"message/delivery-status",
    b"text/html",
    b"text/plain; format=flowed; delsp=yes",
    b"application/octet-stream",
    b"text",
    b"/",
    b"text/plain; charset*=utf-8''%FF%FE",
    b"text/plain; charset*=bogus''x",
    b"text/plain; charset*=unicode_escape''%5Cq",
    b"text/plain; name*0*=utf-8''%E2; name*1*=%82",
    b"image/gif; name==?utf-8?B?////?=",
)
DISPOSITION_PARAMETERS = (
    b"filename*=utf-8''%FF%FE%41.exe",
    b"filename*0*=x-bogus''a; filename*1=b.zip",
    b"filename*0=a; filename*2=c",
    b"filename*=''",
    b"filename*=utf-8'en'",
    b"name*0*=utf-8''%E2%82; name*1*=%AC",
    b'filename="=?utf-8?B?////?="',
    b"filename*=unicode_escape''%5Cq",
    b"filename*=zlib''x",
    b"filename*99999999999=x",
    b'filename=""',
    b"filename=" + b"a" * 5000,
)
HTML_JUNK = (
    b"<!--",
    b"-->",
    b"<![CDATA[",
    b"]]>",
    b"<![if x]>",
    b"<![x",
    b"<!DOCTYPE",
    b"<?php",
    b"<script>",
    b"</script>",
    b"<style>",
    b"<title>",
    b"<a href=http://",
    b"<a href='http://[::1'>",
    b'<img src="http://192.0.2.1/x.gif">',
    b"<a b=c<a b=c",
    b"&#x110000;",
    b"&#99999999999;",
    b"&bogus;",
    b"&amp",
    b"<",
    b">",
    b"</",
    b"<p",
    b"<br/>",
    b'<a href="',
    b'="',
    b"<x y='",
    b"\x00",
    b"<table><tr><td>",
)


def _body_start(data: bytes) -> int:
    found = _BODY_SEPARATOR.search(data)
    return found.end() if found else len(data)


def _line_end(data: bytes) -> bytes:
    first = data.find(b"\n")
    return b"\r\n" if first > 0 and data[first - 1 : first] == b"\r" else b"\n"


def _boundaries(data: bytes) -> list[bytes]:
    # A quoted boundary may be empty, which is not the same as no quoted one.
    return [
        m.group(1) if m.group(1) is not None else m.group(2) for m in _BOUNDARY_PARAM.finditer(data)
    ]


def _boundary_lines(data: bytes) -> list[tuple[int, int]]:
    """Spans of the lines that start with "--" and a declared boundary (any "--" line
    when none is declared)."""
    declared = [b"--" + boundary for boundary in _boundaries(data)]
    return [
        m.span()
        for m in _DASH_LINE.finditer(data)
        if not declared or any(m.group().startswith(prefix) for prefix in declared)
    ]


def _header_line_starts(data: bytes) -> list[int]:
    end = _body_start(data)
    return [0] + [m.end() for m in _NEWLINE.finditer(data, 0, end) if m.end() < end]


def _insert(data: bytes, at: int, extra: bytes) -> bytes:
    return data[:at] + extra + data[at:]


def flip_bytes(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    if not data:
        return b"\x00", "flip: empty became a NUL"
    buffer = bytearray(data)
    count = rng.choice((1, 2, 4, 8, 32))
    header_end = _body_start(data)
    for _ in range(count):
        # Half land in the header block, where the parser takes its decisions.
        limit = header_end if rng.random() < 0.5 else len(buffer)
        at = rng.randrange(max(1, min(limit, len(buffer))))
        buffer[at] ^= (1 << rng.randrange(8)) if rng.random() < 0.7 else rng.randrange(1, 256)
    return bytes(buffer), f"flip {count} bytes"


def truncate(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    spans = _boundary_lines(data)
    where = rng.choice(("anywhere", "header", "boundary" if spans else "anywhere"))
    if where == "header":
        at = rng.randrange(_body_start(data) + 1)
    elif where == "boundary":
        start, end = rng.choice(spans)
        at = rng.randrange(start, end + 1)
    else:
        at = rng.randrange(len(data) + 1)
    return data[:at], f"truncate to {at} of {len(data)} bytes ({where})"


def nul_bytes(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    how = rng.choice(("insert", "replace", "line ends", "header"))
    if how == "line ends":
        return data.replace(b"\n", b"\x00\n"), "NUL before every line end"
    if how == "replace" and data:
        at = rng.randrange(len(data))
        run = rng.choice((1, 4, 64))
        return data[:at] + b"\x00" * run + data[at + run :], f"{run} bytes at {at} made NUL"
    run = rng.choice((1, 2, 16, 1000))
    limit = _body_start(data) if how == "header" else len(data)
    at = rng.randrange(limit + 1)
    return _insert(data, at, b"\x00" * run), f"{run} NULs inserted at {at}"


def duplicate_boundary(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    spans = _boundary_lines(data)
    if not spans:
        boundary = rng.choice([*_boundaries(data), b"x"])
        line = b"--" + boundary + _line_end(data)
        at = rng.randrange(_body_start(data), len(data) + 1)
        return _insert(data, at, line), f"boundary line --{boundary!r} added at {at}"
    start, end = rng.choice(spans)
    line = data[start:end]
    if not line.endswith(b"\n"):
        line += _line_end(data)
    times = rng.choice((1, 1, 2, 10, 1000))
    if rng.random() < 0.5:
        return _insert(data, end, line * times), f"boundary line at {start} repeated {times}x"
    starts = [0] + [m.end() for m in _NEWLINE.finditer(data)]
    at = rng.choice(starts)
    return _insert(data, at, line * times), f"boundary line at {start} copied {times}x to {at}"


def delete_boundary(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    spans = _boundary_lines(data)
    if not spans:
        return truncate(rng, data, donor)
    if rng.random() < 0.2:
        for start, end in reversed(spans):
            data = data[:start] + data[end:]
        return data, f"all {len(spans)} boundary lines deleted"
    start, end = rng.choice(spans)
    return data[:start] + data[end:], f"boundary line at {start} deleted"


def _replace_a_value(
    rng: random.Random, data: bytes, pattern: re.Pattern[bytes], value: bytes, chance: float
) -> bytes | None:
    """With probability ``chance``, one match's group 1 replaced by ``value``; None when
    there is no match or the dice say add a field instead."""
    found = list(pattern.finditer(data))
    if not found or rng.random() >= chance:
        return None
    m = rng.choice(found)
    return data[: m.start(1)] + value + data[m.end(1) :]


def bogus_charset(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    charset = rng.choice(BOGUS_CHARSETS)
    replaced = _replace_a_value(rng, data, _CHARSET_PARAM, charset, 0.8)
    if replaced is not None:
        return replaced, f"charset {charset[:20]!r}"
    eol = _line_end(data)
    field = b"Content-Type: text/plain; charset=" + charset + eol
    return field + data, f"Content-Type with charset {charset[:20]!r} put first"


def bogus_transfer_encoding(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    encoding = rng.choice(TRANSFER_ENCODINGS)
    replaced = _replace_a_value(rng, data, _CTE_VALUE, encoding, 0.7)
    if replaced is not None:
        return replaced, f"transfer encoding {encoding!r}"
    starts = [m.start() for m in _CONTENT_TYPE_VALUE.finditer(data)] or [0]
    at = rng.choice(starts)
    line = b"Content-Transfer-Encoding: " + encoding + _line_end(data)
    return _insert(data, at, line), f"transfer encoding {encoding[:20]!r} added at {at}"


def _broken_encoded_word(rng: random.Random) -> bytes:
    charset = rng.choice(REAL_CHARSETS + BOGUS_CHARSETS)
    kind = rng.choice((b"B", b"Q", b"b", b"q", b"X", b"", b"BB"))
    raw = rng.randbytes(rng.randrange(40))
    encoded = base64.b64encode(raw)
    payload = rng.choice(
        (
            encoded,
            encoded[:-1],
            encoded.rstrip(b"="),
            encoded + b"=",
            b"".join(b"=%02X" % byte for byte in raw),
            raw.replace(b"?", b""),
            b"=",
            b"=XY",
            b"",
            b"_" * 50,
            b"?",
            b"\xff\xfe",
        )
    )
    end = rng.choice((b"?=", b"?=", b"?", b"", b"?==?", b"?= =?"))
    return b"=?" + charset + b"?" + kind + b"?" + payload + end


def encoded_words(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    count = rng.choice((1, 1, 2, 5, 200))
    words = b" ".join(_broken_encoded_word(rng) for _ in range(count))
    header_end = _body_start(data)
    fields = [m for m in _ADDRESS_OR_SUBJECT.finditer(data) if m.start() < header_end]
    if fields and rng.random() < 0.6:
        m = rng.choice(fields)
        return _insert(data, m.end(), words + b" "), f"{count} broken encoded words in a field"
    names = [m.end() for m in re.finditer(rb'name="?', data, re.I)]
    if names and rng.random() < 0.5:
        at = rng.choice(names)
        return _insert(data, at, words), f"{count} broken encoded words in a file name"
    field = b"Subject: " + words + _line_end(data)
    return field + data, f"{count} broken encoded words in a new Subject"


def invalid_utf8_in_headers(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    junk = rng.choice(INVALID_UTF8)
    header_end = _body_start(data)
    fields = [m for m in _FIELD_START.finditer(data) if m.start() < header_end]
    if not fields:
        return junk + data, f"invalid UTF-8 {junk!r} first"
    m = rng.choice(fields)
    if rng.random() < 0.3:
        at = m.start() + rng.randrange(max(1, m.end() - m.start() - 1))
        return _insert(data, at, junk), f"invalid UTF-8 {junk!r} in a field name"
    line_end = data.find(b"\n", m.end())
    at = rng.randrange(m.end(), (line_end if line_end >= 0 else len(data)) + 1)
    return _insert(data, at, junk), f"invalid UTF-8 {junk!r} in a field value"


def line_ends(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    how = rng.choice(("CRLF", "LF", "CR", "mixed", "stray CRs"))
    lf = data.replace(b"\r\n", b"\n")
    if how == "CRLF":
        return lf.replace(b"\n", b"\r\n"), "line ends CRLF"
    if how == "LF":
        return lf, "line ends LF"
    if how == "CR":
        return lf.replace(b"\n", b"\r"), "line ends CR"
    if how == "mixed":
        *lines, last = lf.split(b"\n")
        mixed = [line + rng.choice((b"\n", b"\r\n", b"\r")) for line in lines]
        return b"".join(mixed) + last, "line ends mixed"
    header_end = _body_start(data)
    for _ in range(rng.choice((1, 5, 50))):
        data = _insert(data, rng.randrange(header_end + 1), b"\r")
        header_end += 1
    return data, "stray CRs in the header block"


def splice(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    other = donor()
    how = rng.choice(("insert", "graft", "append"))
    if how == "graft":
        return data[: _body_start(data)] + other[_body_start(other) :], "body of another message"
    if how == "append":
        return data + other, "another message appended"
    start = rng.randrange(len(other) + 1)
    piece = other[start : start + rng.choice((16, 256, 4096))]
    at = rng.randrange(len(data) + 1)
    return _insert(data, at, piece), f"{len(piece)} bytes of another message at {at}"


def repeat(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    if not data:
        return data, "repeat: nothing to repeat"
    at = rng.randrange(len(data))
    if rng.random() < 0.5:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        unit = data[start : end + 1 if end >= 0 else len(data)]
        what = "line"
    else:
        start = at
        unit = data[at : at + rng.choice((1, 2, 8, 64))]
        what = "run"
    times = min(rng.choice((10, 100, 1000, 10000)), max(1, (1 << 20) // len(unit)))
    return _insert(data, start, unit * times), f"{what} at {start} repeated {times}x"


def delete_range(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    start = rng.randrange(len(data) + 1)
    length = rng.choice((1, 16, 256, 4096))
    return data[:start] + data[start + length :], f"{length} bytes deleted at {start}"


def header_shape(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    eol = _line_end(data)
    at = rng.choice(_header_line_starts(data))
    how = rng.choice(
        (
            "no blank line",
            "line without colon",
            "continuation first",
            "envelope inside",
            "colon first",
            "long line",
            "blank lines first",
            "many fields",
        )
    )
    if how == "no blank line":
        found = _BODY_SEPARATOR.search(data)
        if found:
            return data[: found.start()] + eol + data[found.end() :], how
        return data, how + " (there was none)"
    if how == "continuation first":
        return b" continued" + eol + data, how
    if how == "blank lines first":
        return eol * rng.choice((1, 3)) + data, how
    line = {
        "line without colon": b"this line has no colon" + eol,
        "envelope inside": b"From someone@example.com Mon Jan  1 00:00:00 2024" + eol,
        "colon first": b": no name" + eol,
        "long line": b"X-Long: "
        + rng.choice((b"a", b"a ", b"=?")) * rng.choice((1000, 100000))
        + eol,
        "many fields": (b"X-F: v" + eol) * rng.choice((100, 5000)),
    }[how]
    return _insert(data, at, line), f"{how} at {at}"


def content_type(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    value = rng.choice(CONTENT_TYPES)
    boundaries = _boundaries(data)
    if boundaries and rng.random() < 0.3:
        subtype = rng.choice((b"mixed", b"alternative", b"digest", b"related", b"report"))
        value = b"multipart/" + subtype + b'; boundary="' + rng.choice(boundaries) + b'"'
    found = list(_CONTENT_TYPE_VALUE.finditer(data))
    if found and rng.random() < 0.7:
        m = rng.choice(found)
        return data[: m.start(1)] + value + data[m.end(1) :], f"Content-Type {value[:40]!r}"
    return b"Content-Type: " + value + _line_end(data) + data, f"Content-Type {value[:40]!r} first"


def _multipart_around(inner: bytes, name: bytes, eol: bytes) -> bytes:
    """A multipart entity (fields, blank line, body) holding one part."""
    return (
        b'Content-Type: multipart/mixed; boundary="'
        + name
        + b'"'
        + eol
        + eol
        + b"--"
        + name
        + eol
        + inner
        + eol
        + b"--"
        + name
        + b"--"
        + eol
    )


def nest(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    # Around 500 levels the tokenizer's own parser runs out of stack and leaves the
    # message to the email package's, as it does a digest at any depth.  Such inputs
    # take seconds, so they are rare enough not to crowd out the rest.
    depth = rng.choice((600, 1000)) if rng.random() < 0.1 else rng.choice((1, 2, 10, 100))
    subtype = rng.choice((b"mixed", b"mixed", b"digest"))
    eol = _line_end(data)
    body_start = _body_start(data)
    inner = b"Content-Type: text/plain" + eol + eol + data[body_start:]
    for level in range(depth - 1, 0, -1):
        inner = _multipart_around(inner, b"n%d" % level, eol)
    body = b"--n0" + eol + inner + eol + b"--n0--" + eol
    top = b"Content-Type: multipart/" + subtype + b'; boundary="n0"' + eol
    note = f"body nested {depth} multiparts deep ({subtype.decode()} outside)"
    return top + data[:body_start] + body, note


def html_junk(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    body_start = _body_start(data)
    if rng.random() < 0.3:
        piece = rng.choice(HTML_JUNK) + rng.choice((b"x", b"", b" "))
        times = rng.choice((100, 1000, 20000))
        at = rng.randrange(body_start, len(data) + 1)
        data, note = _insert(data, at, piece * times), f"HTML {piece!r} repeated {times}x"
    else:
        count = rng.randrange(1, 21)
        for _ in range(count):
            data = _insert(data, rng.randrange(body_start, len(data) + 1), rng.choice(HTML_JUNK))
        note = f"{count} pieces of broken HTML"
    found = list(_CONTENT_TYPE_VALUE.finditer(data))
    if found:
        m = rng.choice(found)
        return data[: m.start(1)] + b"text/html" + data[m.end(1) :], note + " in a text/html part"
    return b"Content-Type: text/html" + _line_end(data) + data, note + ", text/html put first"


def reencoded_body(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    body_start = _body_start(data)
    body = data[body_start:]
    if rng.random() < 0.5:
        kind = b"base64"
        encoded = base64.encodebytes(body)
        damage = rng.choice(("none", "padding", "garbage", "cut", "one line", "blanks"))
        if damage == "padding":
            encoded = encoded.replace(b"=", b"") + b"===="
        elif damage == "garbage":
            encoded = _insert(encoded, rng.randrange(len(encoded) + 1), b"!*%\x00=\xff")
        elif damage == "cut":
            encoded = encoded[: rng.randrange(len(encoded) + 1)]
        elif damage == "one line":
            encoded = encoded.replace(b"\n", b"")
        elif damage == "blanks":
            encoded = encoded.replace(b"\n", b" \t\n")
    else:
        kind = b"quoted-printable"
        encoded = quopri.encodestring(body)
        damage = rng.choice(("none", "bad escapes", "soft break at end", "lower case"))
        if damage == "bad escapes":
            encoded = encoded.replace(b"=", b"=X", rng.randrange(1, 50))
        elif damage == "soft break at end":
            encoded += b"="
        elif damage == "lower case":
            encoded = re.sub(rb"=[0-9A-F]{2}", lambda m: m.group().lower(), encoded)
    top = b"Content-Transfer-Encoding: " + kind + _line_end(data)
    return top + data[
        :body_start
    ] + encoded, f"body re-encoded as {kind.decode()}, damage: {damage}"


def rfc2231_parameters(rng: random.Random, data: bytes, donor: Donor) -> tuple[bytes, str]:
    parameter = rng.choice(DISPOSITION_PARAMETERS)
    line = b"Content-Disposition: attachment; " + parameter + _line_end(data)
    spans = _boundary_lines(data)
    at = rng.choice(spans)[1] if spans and rng.random() < 0.6 else 0
    return _insert(data, at, line), f"Content-Disposition {parameter[:40]!r} at {at}"


MUTATIONS: tuple[tuple[str, Mutation, int], ...] = (
    ("flip", flip_bytes, 3),
    ("truncate", truncate, 2),
    ("nul", nul_bytes, 2),
    ("duplicate-boundary", duplicate_boundary, 3),
    ("delete-boundary", delete_boundary, 3),
    ("charset", bogus_charset, 3),
    ("transfer-encoding", bogus_transfer_encoding, 3),
    ("encoded-words", encoded_words, 3),
    ("invalid-utf8", invalid_utf8_in_headers, 2),
    ("line-ends", line_ends, 2),
    ("splice", splice, 2),
    ("repeat", repeat, 2),
    ("delete", delete_range, 1),
    ("header-shape", header_shape, 2),
    ("content-type", content_type, 2),
    ("nest", nest, 1),
    ("html", html_junk, 2),
    ("reencode", reencoded_body, 2),
    ("rfc2231", rfc2231_parameters, 1),
)


@dataclass
class Mutant:
    data: bytes
    source: str  # the corpus message it was made from, or the replayed file
    recipe: list[str]
    index: int | None = None  # its number in the seed's sequence


def make_mutant(seed: int, index: int, messages: list[CorpusMessage]) -> Mutant:
    """Input ``index`` of ``seed``: a corpus message and one or more mutations."""
    rng = random.Random(f"{seed}:{index}")
    source = messages[rng.randrange(len(messages))]
    data = source.path.read_bytes()

    def donor() -> bytes:
        return messages[rng.randrange(len(messages))].path.read_bytes()

    recipe = []
    names = [name for name, _, _ in MUTATIONS]
    functions = {name: function for name, function, _ in MUTATIONS}
    weights = [weight for _, _, weight in MUTATIONS]
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 6))):
        name = rng.choices(names, weights)[0]
        data, note = functions[name](rng, data, donor)
        recipe.append(f"{name}: {note}")
        if len(data) > MAX_MUTANT_BYTES:
            data = data[:MAX_MUTANT_BYTES]
            recipe.append(f"cut to {MAX_MUTANT_BYTES} bytes")
    return Mutant(data, source.name, recipe, index)


# --- checks (in the worker) -------------------------------------------------------------

_ADDED_LINE = re.compile(
    rb"(?:\r?\n)?"
    + HEADER_NAME.encode()
    + rb": (Spam|Ham|Unsure), score=([01]\.\d{4})"
    + rb"(?:, cut=(?P<cut>size|tokens|size\+tokens))?, version="
    + re.escape(__version__.encode())
    + rb"(?P<end>\r?\n)?"
)
_EXIT_OF_VERDICT = {b"Spam": 0, b"Ham": 1, b"Unsure": 2}


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] agrees, a[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def pipe_output_problem(
    data: bytes, status: int, output: bytes, stderr: str
) -> tuple[str, str] | None:
    """What is wrong with the pipe filter's answer to ``data`` (a kind of failure and
    its details), or None.

    Written without spamnb.pipe's helpers: the output must be the input with one
    verdict line inserted at a line start (or, after a last header line without a
    line end, a line end and the header at the end), or the input unchanged with
    exit status 3 and one line on standard error.
    """
    error_lines = stderr.splitlines()
    if status == 3:
        if output != data:
            return "pipe: exit status 3, but the output is not the input", ""
        if len(error_lines) != 1:
            return "pipe: exit status 3 without one line on standard error", stderr
        if data:
            # With a good model only empty input may fail; anything else is a crash
            # that the pipe filter's last resort hid.
            return f"pipe: scoring failed (exit status 3): {error_lines[0][:100]}", stderr
        return None
    if stderr:
        return f"pipe: exit status {status} with standard error", stderr
    extra = len(output) - len(data)
    if extra <= 0:
        return "pipe: no header added", f"exit status {status}"
    before = _common_prefix(output, data)
    after = _common_prefix(output[::-1], data[::-1])
    name = HEADER_NAME.encode()
    # Every k with output[:k] == data[:k] and output[k + extra:] == data[k:].
    for at in range(max(0, len(data) - after), min(before, len(data)) + 1):
        line = _ADDED_LINE.fullmatch(output, at, at + extra)
        if line is None:
            continue
        # A line of its own, or a line end and the header after a last line without one.
        at_line_start = at == 0 or data[at - 1 : at] == b"\n"
        whole_line = at_line_start and output.startswith(name, at) and line.group("end") is not None
        appended = at == len(data) and not output.startswith(name, at) and not line.group("end")
        if not (whole_line or appended):
            continue
        verdict = line.group(1)
        if status != _EXIT_OF_VERDICT[verdict]:
            return "pipe: exit status not that of the verdict", f"{verdict!r}, {status}"
        too_large = len(data) > DEFAULT_MAX_SIZE
        cut = line.group("cut") or b""
        if (b"size" in cut) != too_large:
            return "pipe: cut=size exactly when too large", f"{cut!r}, {len(data)} bytes"
        return None
    return "pipe: output is not the input plus one header line", f"exit status {status}"


def one_line_problem(value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return f"a {type(value).__name__}, not a string"
    if value != " ".join(value.split()) or not value:
        return f"not one line of single spaces: {value[:80]!r}"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return f"control characters: {value[:80]!r}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"not printable as UTF-8 (surrogates): {value[:80]!r}"
    return None


@dataclass
class Outcome:
    problems: list[tuple[str, str]] = field(default_factory=list)  # (kind, detail)
    times: dict[str, float] = field(default_factory=dict)
    last_resort: bool = False


def _exception_kind(check: str, exc: BaseException) -> str:
    """Which failure this is: the check, the exception and where in spamnb it rose."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [frame for frame in frames if f"{os.sep}spamnb{os.sep}" in frame.filename] or frames
    where = f"{Path(own[-1].filename).name}:{own[-1].lineno}" if own else "?"
    return f"{check} raised {type(exc).__name__} at {where}"


def check_input(data: bytes, model: str) -> Outcome:
    """Run every check on one input (in the worker process); a warning is a finding.

    The tokenizer once let a charset named unicode_escape reach Python's escape
    decoder, and the only sign was a DeprecationWarning for an invalid escape.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = _run_checks(data, model)
    for warning in caught:
        where = f"{Path(warning.filename).name}:{warning.lineno}"
        kind = f"{warning.category.__name__} in {where}"
        outcome.problems.append((kind, str(warning.message)[:300]))
    return outcome


def _run_checks(data: bytes, model: str) -> Outcome:
    from spamnb import pipe
    from spamnb.mail import date_header, header_value, message_id
    from spamnb.tokens import tokenize

    outcome = Outcome()
    problems = outcome.problems

    started = time.perf_counter()
    try:
        tokens = tokenize(data)
        outcome.times["tokenize"] = time.perf_counter() - started
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            problems.append(("tokenize gave no list of strings", repr(tokens)[:300]))
        else:
            started = time.perf_counter()
            if tokenize(data) != tokens:
                problems.append(("tokenize is not deterministic", ""))
            outcome.times["tokenize again"] = time.perf_counter() - started
            outcome.last_resort = "parse:failed" in tokens
    except Exception as exc:  # noqa: BLE001 - any exception is the finding
        outcome.times.setdefault("tokenize", time.perf_counter() - started)
        problems.append((_exception_kind("tokenize", exc), traceback.format_exc()))

    started = time.perf_counter()
    stdout, stderr = io.BytesIO(), io.StringIO()
    try:
        status = pipe.run(io.BytesIO(data), stdout, stderr, model, header_name=HEADER_NAME)
        problem = pipe_output_problem(data, status, stdout.getvalue(), stderr.getvalue())
        if problem is not None:
            problems.append(problem)
    except Exception as exc:  # noqa: BLE001 - any exception is the finding
        problems.append((_exception_kind("pipe.run", exc), traceback.format_exc()))
    outcome.times["pipe"] = time.perf_counter() - started

    started = time.perf_counter()
    try:
        values = {name: header_value(data, name) for name in ("Subject", "From", "Received")}
        values["Message-ID"] = header_value(data, "Message-ID")
        values["Date"] = header_value(data, "Date")
        values["message_id()"] = message_id(data)
        values["date_header()"] = date_header(data)
        for name, value in values.items():
            problem = one_line_problem(value)
            if problem is not None:
                problems.append((f"header {name}: {problem.split(':')[0]}", problem))
        if values["message_id()"] != values["Message-ID"]:
            detail = f"{values['message_id()']!r} != {values['Message-ID']!r}"
            problems.append(("message_id disagrees with header_value", detail))
        if values["date_header()"] != values["Date"]:
            problems.append(("date_header disagrees with header_value", ""))
    except Exception as exc:  # noqa: BLE001 - any exception is the finding
        problems.append((_exception_kind("header readers", exc), traceback.format_exc()))
    outcome.times["headers"] = time.perf_counter() - started
    return outcome


def _worker(connection: Connection, parent_end: Connection, model: str) -> None:
    # The fork copied the parent's end too; while it is open here, the parent closing
    # its own copy would never reach this process as the end of its input.
    parent_end.close()
    # Ctrl-C is for the parent, which stops the run and still reports it; the worker
    # dying of it would look like a crash.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    while True:
        try:
            data = connection.recv()
            connection.send(check_input(data, model))
        except (EOFError, BrokenPipeError):
            return  # the parent has finished, or stopped in the middle of an input


class Worker:
    """The process inputs are checked in; restarted after a hang or a crash."""

    def __init__(self, model: Path, timeout: float) -> None:
        self.model = str(model)
        self.timeout = timeout
        self.context = multiprocessing.get_context("fork")
        self._start()

    def _start(self) -> None:
        self.connection, child = self.context.Pipe()
        self.process = self.context.Process(
            target=_worker, args=(child, self.connection, self.model), daemon=True
        )
        self.process.start()
        child.close()

    def _restart(self) -> None:
        self.process.kill()
        self.process.join()
        self.connection.close()
        self._start()

    def check(self, data: bytes) -> Outcome:
        started = time.perf_counter()
        self.connection.send(data)
        if not self.connection.poll(self.timeout):
            self._restart()
            hang = Outcome([(f"hang: no answer within {self.timeout:g} s", "")])
            hang.times["total (killed)"] = time.perf_counter() - started
            return hang
        try:
            return self.connection.recv()
        except EOFError:
            self.process.join()
            code = self.process.exitcode
            self._restart()
            return Outcome([(f"worker died (exit code {code})", "")])

    def close(self) -> None:
        self.connection.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()


# --- the run -----------------------------------------------------------------------------


@dataclass
class Finding:
    count: int = 0
    saved: list[Path] = field(default_factory=list)


@dataclass
class Slowest:
    seconds: float = -1.0
    mutant: Mutant | None = None
    times: dict[str, float] = field(default_factory=dict)


def _note(mutant: Mutant, seed: int, extra: str) -> str:
    made = f"input {mutant.index} of seed {seed}" if mutant.index is not None else "replayed"
    lines = [made, f"from: {mutant.source}", f"size: {len(mutant.data)} bytes"]
    lines += ["mutations:", *(f"  {step}" for step in mutant.recipe), "", extra, ""]
    return "\n".join(lines)


def _save(folder: Path, stem: str, mutant: Mutant, note: str) -> Path:
    path = folder / f"{stem}.eml"
    path.write_bytes(mutant.data)
    (folder / f"{stem}.txt").write_text(note, encoding="utf-8", errors="backslashreplace")
    return path


def _times_text(times: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.3f} s" for name, seconds in times.items())


def run(args: argparse.Namespace) -> int:
    from spamnb import pipe

    if pipe.DEFAULT_MAX_SIZE != DEFAULT_MAX_SIZE:
        raise SystemExit("fuzz: spamnb.pipe.DEFAULT_MAX_SIZE changed; update tests/fuzz.py")
    save = Path(args.save)
    save.mkdir(parents=True, exist_ok=True)
    # Only the files an earlier run wrote: the folder may be one the user chose.
    earlier = [*save.glob("failure-*.eml"), *save.glob("failure-*.txt"), *save.glob("slowest*")]
    for old in [*earlier, save / "summary.txt", save / "failures.log"]:
        old.unlink(missing_ok=True)

    setup_started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spamnb-fuzz-") as scratch:
        corpus_dir = Path(args.corpus_dir) if args.corpus_dir else Path(scratch) / "corpora"
        messages = corpus_messages(corpus_dir)
        model_dir = Path(scratch) / "model"
        model_dir.mkdir()
        model = train_model(messages, args.seed, model_dir)
        worker = Worker(model, args.timeout)
        setup = time.perf_counter() - setup_started
        try:
            summary, failed = _fuzz(args, messages, worker, save, setup)
        finally:
            worker.close()
    print(summary)
    (save / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    return 1 if failed else 0


def _inputs(args: argparse.Namespace, messages: list[CorpusMessage]) -> Iterator[Mutant]:
    """The replayed files, or the seed's mutants in order."""
    if args.replay:
        for name in args.replay:
            yield Mutant(Path(name).read_bytes(), name, [])
        return
    index = 0
    while True:
        yield make_mutant(args.seed, index, messages)
        index += 1


def _fuzz(
    args: argparse.Namespace,
    messages: list[CorpusMessage],
    worker: Worker,
    save: Path,
    setup: float,
) -> tuple[str, bool]:
    findings: dict[str, Finding] = {}
    slowest, slowest_rate = Slowest(), Slowest()
    digest = hashlib.sha256()
    tried = last_resort = 0
    # Every failure on one line, where the saved examples cover only a few per kind.
    log = (save / "failures.log").open(
        "w", buffering=1, encoding="utf-8", errors="backslashreplace"
    )
    started = time.perf_counter()
    deadline = started + args.seconds
    next_progress = started + 60
    interrupted = False
    try:
        for mutant in _inputs(args, messages):
            now = time.perf_counter()
            if not args.replay and (now >= deadline or (args.count and tried >= args.count)):
                break
            if now >= next_progress:
                print(
                    f"fuzz: {now - started:.0f} s, {tried} inputs, "
                    f"{sum(f.count for f in findings.values())} failures",
                    file=sys.stderr,
                    flush=True,
                )
                next_progress += 60
            outcome = worker.check(mutant.data)
            tried += 1
            digest.update(len(mutant.data).to_bytes(8, "little") + mutant.data)
            last_resort += outcome.last_resort
            seconds = sum(outcome.times.values())
            if seconds > slowest.seconds:
                slowest = Slowest(seconds, mutant, outcome.times)
            if len(mutant.data) >= RATE_MIN_BYTES:
                rate = seconds / len(mutant.data) * 1024
                if rate > slowest_rate.seconds:
                    slowest_rate = Slowest(rate, mutant, outcome.times)
            for kind, detail in outcome.problems:
                where = f"input {mutant.index}" if mutant.index is not None else mutant.source
                print(f"{where}\t{kind}\t{mutant.source}\t{'; '.join(mutant.recipe)}", file=log)
                finding = findings.setdefault(kind, Finding())
                finding.count += 1
                if len(finding.saved) < SAVED_PER_KIND:
                    number = list(findings).index(kind) + 1
                    stem = f"failure-{number:02d}-{len(finding.saved) + 1}"
                    replay = f"replay: python tests/fuzz.py --replay {save / stem}.eml"
                    note = _note(mutant, args.seed, f"{kind}\n{replay}\n\n{detail}")
                    finding.saved.append(_save(save, stem, mutant, note))
                if args.replay:
                    print(f"{mutant.source}: {kind}\n{detail}", file=sys.stderr)
    except KeyboardInterrupt:
        interrupted = True
    elapsed = time.perf_counter() - started
    log.close()

    lines = [
        f"spamnb fuzz: seed {args.seed}, {elapsed:.0f} s of fuzzing after {setup:.0f} s of set-up"
        + (" (interrupted)" if interrupted else ""),
        f"corpus: {len(messages)} messages; model trained on {2 * TRAIN_PER_LABEL} of them",
        f"inputs tried: {tried} ({tried / max(elapsed, 1e-9):.1f} a second); "
        f"{last_resort} took the tokenizer's last resort (parse:failed)",
        f"failures: {sum(f.count for f in findings.values())}",
    ]
    for number, (kind, finding) in enumerate(findings.items(), start=1):
        saved = ", ".join(str(p) for p in finding.saved)
        lines.append(f"  {number:2d}. {kind}: {finding.count}x (saved: {saved})")
    if findings:
        lines.append(f"  every failure: {save / 'failures.log'}")
    if slowest.mutant is not None:
        path = _save(save, "slowest", slowest.mutant, _note(slowest.mutant, args.seed, ""))
        lines.append(
            f"slowest input: {slowest.seconds:.3f} s ({_times_text(slowest.times)}), "
            f"{len(slowest.mutant.data)} bytes: {path}"
        )
        lines.append(f"  from {slowest.mutant.source}; " + "; ".join(slowest.mutant.recipe))
    if slowest_rate.mutant is not None:
        mutant = slowest_rate.mutant
        path = _save(save, "slowest-per-kb", mutant, _note(mutant, args.seed, ""))
        lines.append(
            f"slowest for its size (of inputs over {RATE_MIN_BYTES >> 10} KB): "
            f"{slowest_rate.seconds * 1000:.2f} ms per KB, "
            f"{len(mutant.data)} bytes in {sum(slowest_rate.times.values()):.3f} s: {path}"
        )
    lines.append(
        f"inputs digest: {digest.hexdigest()[:16]} (the same seed and count give the same)"
    )
    return "\n".join(lines), bool(findings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="which inputs to try (default 0)")
    parser.add_argument(
        "--corpus-dir",
        help="where the corpora are unpacked (or already are); default a temporary folder",
    )
    parser.add_argument(
        "--save",
        default=str(ROOT / "build" / "fuzz"),
        help="folder for failing and slowest inputs (default build/fuzz)",
    )
    parser.add_argument("--count", type=int, help="stop after this many inputs")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds before an input counts as a hang"
    )
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="check these files instead")
    args = parser.parse_args(argv)
    if not math.isfinite(args.seconds) or args.seconds < 0:
        parser.error("--seconds must be a number of seconds")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
