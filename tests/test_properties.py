"""Property tests for the mail reader and the tokenizer on hostile, mail-shaped input.

Random bytes seldom get past the first header line, so most strategies here build
mail: header fields with RFC 2047 encoded words and 8-bit values, nested multiparts
with tricky boundaries, base64 and quoted-printable parts (intact and broken), real
and bogus charsets, HTML.  tests/test_tokens.py already covers plain random bytes and
short lists of MIME fragments, tests/test_mail.py the Message-ID reader, and
tests/test_pipe.py header insertion; these tests do not repeat them.
"""

from __future__ import annotations

import base64
import quopri
import re
import tempfile
import unicodedata
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from spamnb.mail import (
    MailSourceError,
    date_header,
    detect_format,
    header_value,
    iter_messages,
    message_id,
)
from spamnb.tokens import DEFAULT_SETTINGS, TokenizerSettings, tokenize

# Charsets Python can decode, each with text that only it (or Unicode) can encode,
# so that decoding with the wrong codec would show.
REAL_CHARSETS = {
    "us-ascii": "",
    "utf-8": "naïve 日本語",
    "iso-8859-1": "café",
    "windows-1252": "café “quoted”",
    "koi8-r": "привет",
    "shift_jis": "日本語",
    "euc-jp": "日本語",
    "iso-2022-jp": "日本語",
    "big5": "中文",
    "gb2312": "中文",
    "utf-16": "naïve 日本語",
    "utf-32": "naïve",
    "utf-7": "naïve",
}
# Names of no text codec at all: unknown, or codecs between bytes and bytes.
NOT_CHARSETS = [
    b"x-bogus",
    b"unknown-8bit",
    b"base64",
    b"rot13",
    b"zlib",
    b"hex",
    b"utf-8\x00",
    b"a" * 200,
]
# Codecs that decode most bytes into something else, and names that break the
# parameter's syntax.
BOGUS_CHARSETS = [
    *NOT_CHARSETS,
    b"idna",
    b"punycode",
    b"unicode_escape",
    b"raw_unicode_escape",
    b"",
    b"\xff\xfe",
    b'utf-8"; charset="koi8-r',
]
ALL_CHARSETS = [name.encode() for name in REAL_CHARSETS] + BOGUS_CHARSETS
TRANSFER_ENCODINGS = [
    b"7bit",
    b"8bit",
    b"binary",
    b"base64",
    b"quoted-printable",
    b"BASE64 ",
    b"x-uuencode",
    b"uuencode",
    b"x-bogus",
    b"",
]
CONTENT_TYPES = [
    b"text/plain",
    b"text/html",
    b"text/x-bogus",
    b"application/octet-stream",
    b"image/gif",
    b"message/rfc822",
    b"message/delivery-status",
    b"text",
    b"/",
    b"TEXT/HTML",
]
# Boundaries where one begins another, has blanks or quotes, or is empty.
BOUNDARIES = [b"b", b"b--x", b"bb", b"=_part_1", b"a b", b"'q'", b"", b"x" * 70, b"--"]
HTML_PIECES = [
    b"<p>",
    b"</p>",
    b"<br/>",
    b"<a href='http://example.com/path?x=1'>",
    b'<a href="http://[::1">',
    b"<img src=http://192.0.2.1/i.gif>",
    b"</a>",
    b"<script>",
    b"</script>",
    b"<style>p{}</style>",
    b"<!--",
    b"-->",
    b"<![CDATA[",
    b"<![x",
    b"]]>",
    b"<!DOCTYPE html>",
    b"<?xml ?>",
    b"&amp;",
    b"&#x110000;",
    b"&#0;",
    b"&bogus;",
    b"<",
    b">",
    b"<a b=c<a b=c",
    b"<title>",
    b"words in the page",
    b"FREE MONEY $1,000,000",
    b"\xff\xfe",
]

# The tokenizer's default, and settings that take the other code paths for words.
TOKENIZER_SETTINGS = st.sampled_from(
    [
        DEFAULT_SETTINGS,
        TokenizerSettings(word_pairs=0),
        TokenizerSettings(cjk_pairs=1),
        TokenizerSettings(min_word_length=1, max_word_length=4, max_text_chars=50),
    ]
)


def _b64(data: bytes) -> bytes:
    return base64.encodebytes(data)


def _q_word(data: bytes) -> bytes:
    """RFC 2047 "Q" encoding: letters and digits as themselves, every other byte =XX."""
    return b"".join(
        bytes([byte]) if chr(byte).isalnum() and byte < 0x80 else b"=%02X" % byte for byte in data
    )


# --- building blocks of hostile mail ------------------------------------------------------


@st.composite
def encoded_words(draw: st.DrawFn) -> bytes:
    """An RFC 2047 encoded word, well-formed or broken in charset, encoding or payload."""
    charset = draw(st.sampled_from(ALL_CHARSETS))
    kind = draw(st.sampled_from([b"B", b"Q", b"b", b"q", b"X", b""]))
    raw = draw(st.binary(max_size=30))
    payload = draw(
        st.sampled_from(
            [
                _b64(raw).replace(b"\n", b""),
                _b64(raw).replace(b"\n", b"").rstrip(b"="),
                _q_word(raw),
                raw.replace(b"?", b""),
                b"!!!=",
                b"=",
                b"====",
                b"=F",
                b"_",
            ]
        )
    )
    end = draw(st.sampled_from([b"?=", b"?=", b"?", b"", b"?==?"]))
    return b"=?" + charset + b"?" + kind + b"?" + payload + end


FIELD_NAMES = st.one_of(
    st.sampled_from(
        [
            b"Subject",
            b"From",
            b"To",
            b"Cc",
            b"Reply-To",
            b"Received",
            b"Message-ID",
            b"Date",
            b"X-Mailer",
            b"Content-Type",
            b"Content-Disposition",
            b"Content-Transfer-Encoding",
        ]
    ),
    st.from_regex(rb"\A[!-9;-~]{1,12}\Z"),
)
FIELD_VALUES = st.one_of(
    st.sampled_from(
        [
            b"hello world",
            b"Alice <alice@example.com>",
            b"from mx.example.com ([192.0.2.7]) by relay.example.org",
            b"<1234@mail.example.com>",
            b"Mon, 1 Jan 2024 00:00:00 +0000",
            b"caf\xe9 \xff\xfe 8-bit",
            b"attachment; filename*=utf-8''%FF%FE.exe",
            b"attachment; filename*0*=x-bogus''a; filename*1=b.zip",
            b'attachment; filename="=?utf-8?B?////?="',
            b"multipart/mixed",
            b"text/plain; charset*=unicode_escape''%5Cq",
            b"",
        ]
    ),
    encoded_words(),
    st.lists(encoded_words(), min_size=2, max_size=4).map(b" ".join),
    st.binary(max_size=40).map(lambda value: value.replace(b"\n", b" ")),
)


@st.composite
def header_fields(draw: st.DrawFn) -> bytes:
    """One header field, maybe folded, maybe malformed."""
    name = draw(FIELD_NAMES)
    value = draw(FIELD_VALUES)
    # Mostly well-formed: a broken line ends the header block, hiding what follows.
    shape = draw(st.sampled_from(["plain"] * 6 + ["folded"] * 2 + ["no-colon", "leading-blank"]))
    if shape == "folded":
        return name + b": " + value.replace(b" ", b"\n\t", 1) + b"\n"
    if shape == "no-colon":
        return name + b" " + value + b"\n"
    if shape == "leading-blank":
        return b" " + name + b": " + value + b"\n"
    return name + b": " + value + b"\n"


@st.composite
def leaf_bodies(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """The header fields and body of a part that is not a multipart."""
    ctype = draw(st.sampled_from(CONTENT_TYPES))
    charset = draw(st.none() | st.sampled_from(ALL_CHARSETS))
    cte = draw(st.none() | st.sampled_from(TRANSFER_ENCODINGS))
    if draw(st.booleans()):
        raw = b"".join(draw(st.lists(st.sampled_from(HTML_PIECES), max_size=12)))
    else:
        text = draw(st.text(max_size=120))
        codec = charset.decode("latin-1") if charset else "utf-8"
        try:
            raw = text.encode(codec)
        except (LookupError, ValueError):
            raw = text.encode("utf-8")
    payload = raw
    encoding = (cte or b"").strip().lower()
    if encoding == b"base64":
        payload = _b64(raw)
    elif encoding == b"quoted-printable":
        payload = quopri.encodestring(raw)
    # Encoded bodies arrive damaged too: cut short, padding lost, stray characters.
    damage = draw(st.sampled_from([None, None, "cut", "pad", "stray"]))
    if damage == "cut":
        payload = payload[: draw(st.integers(0, len(payload)))]
    elif damage == "pad":
        payload = payload.replace(b"=", b"")
    elif damage == "stray":
        payload = payload + b"!*%=\n=Z=\n====\n"
    head = b"Content-Type: " + ctype
    if charset is not None:
        head += b'; charset="' + charset + b'"'
    head += b"\n"
    if cte is not None:
        head += b"Content-Transfer-Encoding: " + cte + b"\n"
    return head, payload


@st.composite
def entities(draw: st.DrawFn, depth: int = 0) -> bytes:
    """A MIME entity: fields, a blank line (usually), and a leaf or multipart body."""
    fields = b"".join(draw(st.lists(header_fields(), max_size=4)))
    if depth < 3 and draw(st.integers(0, 2)) == 0:
        boundary = draw(st.sampled_from(BOUNDARIES))
        subtype = draw(st.sampled_from([b"mixed", b"alternative", b"digest", b"related"]))
        head = b"Content-Type: multipart/" + subtype + b'; boundary="' + boundary + b'"\n'
        parts = draw(st.lists(entities(depth + 1), max_size=3))
        delimiter = b"--" + boundary + b"\n"
        lines = [draw(st.sampled_from([b"", b"preamble\n"]))]
        for part in parts:
            lines.append(delimiter)
            # Boundary lines get lost and repeated in the wild.
            if draw(st.integers(0, 5)) == 0:
                lines.append(delimiter)
            lines.append(part)
        if draw(st.booleans()):
            lines.append(b"--" + boundary + b"--\n")
        lines.append(draw(st.sampled_from([b"", b"epilogue\n"])))
        body = b"".join(lines)
    else:
        head, body = draw(leaf_bodies())
    separator = b"\n" if draw(st.integers(0, 7)) else b""
    # The structure's own fields first, so that a broken field cannot hide them.
    return head + fields + separator + body


@st.composite
def hostile_mail(draw: st.DrawFn) -> bytes:
    """A message built as mail, with the line ends and damage that real mail has."""
    data = draw(entities())
    if draw(st.booleans()):
        data = b"From sender@example.com Mon Jan  1 00:00:00 2024\n" + data
    line_end = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    if line_end != b"\n":
        data = data.replace(b"\n", line_end)
    # A few bytes put in anywhere: a NUL, invalid UTF-8, a stray line end.
    insertions = draw(
        st.lists(
            st.tuples(
                st.integers(0, 10_000), st.sampled_from([b"\x00", b"\xc3\x28", b"\n", b"\r", b"="])
            ),
            max_size=3,
        )
    )
    for position, extra in insertions:
        at = position % (len(data) + 1)
        data = data[:at] + extra + data[at:]
    return data


# --- the tokenizer ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(hostile_mail(), TOKENIZER_SETTINGS)
def test_hostile_mail_gives_string_tokens_deterministically(data: bytes, tokenizer) -> None:
    tokens = tokenize(data, tokenizer)
    assert isinstance(tokens, list)
    assert all(isinstance(token, str) and token for token in tokens)
    assert tokenize(data, tokenizer) == tokens


@settings(max_examples=100, deadline=None)
@given(hostile_mail())
def test_hostile_mail_is_parsed_not_abandoned(data: bytes) -> None:
    # "parse:failed" marks the last resort, the raw bytes' words after an exception;
    # mail the parser can read at all must get the real tokenizer's header tokens.
    tokens = tokenize(data)
    assert "parse:failed" not in tokens
    assert any(token.startswith("header-count:") for token in tokens)


def _visible_part(
    charset: str, encoding: str, html: bool, word: str, hidden: str
) -> tuple[bytes, bytes]:
    """A text part showing ``word`` and hiding ``hidden`` where readers do not look."""
    filler = REAL_CHARSETS[charset]
    if html:
        text = (
            f"<html><head><title>{hidden}</title><script>{hidden}</script></head>"
            f'<body><font face="{hidden}">{filler}</font><p>{word}</p></body></html>'
        )
    else:
        text = f"{filler}\n{word} {filler}\n"
    raw = text.encode(charset)
    if encoding == "base64":
        body = _b64(raw)
    elif encoding == "quoted-printable":
        body = quopri.encodestring(raw)
    else:
        body = raw
    ctype = "text/html" if html else "text/plain"
    head = (
        f'Content-Type: {ctype}; charset="{charset}"\nContent-Transfer-Encoding: {encoding}\n\n'
    ).encode("ascii")
    return head, body


def _encodings_for(charset: str) -> list[str]:
    """Transfer encodings that carry text in this charset through a multipart intact."""
    if charset in ("utf-16", "utf-32"):
        # Their line ends are two or four bytes; a multipart's parser would cut them.
        return ["base64"]
    if charset in ("us-ascii", "iso-2022-jp", "utf-7"):
        return ["7bit", "base64", "quoted-printable"]
    return ["8bit", "base64", "quoted-printable"]


@st.composite
def mail_with_known_words(draw: st.DrawFn) -> tuple[bytes, set[str], set[str]]:
    """A well-formed message; the words a reader sees in it, and some no reader sees."""
    words = st.from_regex(r"\A[a-z]{3,10}\Z")
    subject_word = draw(words)
    charset = draw(st.sampled_from(sorted(REAL_CHARSETS)))
    encoded_subject = draw(st.sampled_from([b"B", b"Q"]))
    subject = (subject_word + " " + REAL_CHARSETS[charset]).encode(charset)
    payload = _b64(subject).replace(b"\n", b"") if encoded_subject == b"B" else _q_word(subject)
    head = (
        b"From: Alice <alice@example.com>\n"
        b"Subject: =?" + charset.encode() + b"?" + encoded_subject + b"?" + payload + b"?=\n"
        b"MIME-Version: 1.0\n"
    )
    seen = {"subject:" + subject_word}
    hidden: set[str] = set()
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        charset = draw(st.sampled_from(sorted(REAL_CHARSETS)))
        encoding = draw(st.sampled_from(_encodings_for(charset)))
        word, secret = draw(words), draw(words)
        html = draw(st.booleans())
        parts.append(_visible_part(charset, encoding, html, word, secret))
        seen.add(word)
        if html:
            hidden.add(secret)
    # An attachment's content is not text to read, whatever words it holds.
    secret = draw(words)
    hidden.add(secret)
    parts.append(
        (
            b'Content-Type: text/plain\nContent-Disposition: attachment; filename="notes.txt"\n\n',
            secret.encode() + b"\n",
        )
    )
    if len(parts) == 2 and draw(st.booleans()):
        # A lone text part, without a multipart around it (and without the attachment).
        part_head, body = parts[0]
        data = head + part_head + body
        hidden.discard(secret)
    else:
        boundary = b"=_b" + str(draw(st.integers(0, 99))).encode()
        data = head + b'Content-Type: multipart/mixed; boundary="' + boundary + b'"\n\n'
        for part_head, body in parts:
            data += b"--" + boundary + b"\n" + part_head + body + b"\n"
        data += b"--" + boundary + b"--\n"
    if draw(st.booleans()):
        data = data.replace(b"\n", b"\r\n")
    return data, seen, hidden - seen


@settings(max_examples=200, deadline=None)
@given(mail_with_known_words())
def test_words_come_out_of_any_charset_and_transfer_encoding(case) -> None:
    data, seen, hidden = case
    tokens = set(tokenize(data))
    assert seen <= tokens, sorted(seen - tokens)
    assert not hidden & tokens, sorted(hidden & tokens)
    assert not {"charset:unknown", "charset:lying", "charset:undeclared-8bit"} & tokens


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(NOT_CHARSETS),
    st.from_regex(r"\A[a-z]{3,10}\Z"),
    st.sampled_from(["8bit", "base64", "quoted-printable"]),
)
def test_a_name_of_no_charset_is_a_token_and_the_text_still_reads(charset, word, cte) -> None:
    text = f"{word} naïve\n".encode()
    body = {"8bit": text, "base64": _b64(text), "quoted-printable": quopri.encodestring(text)}[cte]
    data = (
        b'Content-Type: text/plain; charset="' + charset + b'"\n'
        b"Content-Transfer-Encoding: " + cte.encode() + b"\n\n" + body
    )
    tokens = tokenize(data)
    assert {word, "naïve", "charset:unknown"} <= set(tokens)


# --- the header readers -----------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(header_fields(), max_size=8), st.binary(max_size=60))
def test_header_readers_give_one_printable_line_or_none(fields, rest) -> None:
    data = b"".join(fields) + rest
    results = [header_value(data, name) for name in ("Subject", "From", "Received", "X-Nope")]
    results += [date_header(data), message_id(data)]
    for result in results:
        assert result is None or isinstance(result, str)
        if result is not None:
            assert result == " ".join(result.split()) != ""
            assert not any(unicodedata.category(ch) == "Cc" for ch in result)
            result.encode("utf-8")  # no surrogate escapes left over from 8-bit bytes
    assert message_id(data) == header_value(data, "Message-ID")


# Well-formed fields with any one-line value: encoded words, 8-bit bytes, controls.
WELL_FORMED_FIELDS = st.builds(
    lambda name, value: name + b": " + value + b"\n",
    st.sampled_from([b"Subject", b"From", b"Received", b"Message-ID", b"X-Other"]),
    st.one_of(encoded_words(), st.binary(max_size=30)).map(
        lambda value: value.replace(b"\r", b"").replace(b"\n", b"")
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.from_regex(r"\A[!-~]{1,15}\Z"), min_size=1, max_size=6),
    st.lists(WELL_FORMED_FIELDS, max_size=3),
    st.sampled_from([b"\n", b"\r\n"]),
    st.sampled_from([b" ", b"\n ", b"\n\t", b"  "]),
)
def test_a_plain_field_reads_back_as_written(words, others, line_end, fold) -> None:
    value = fold.join(word.encode() for word in words)
    fields = [*others, b"X-Probe: " + value + b"\n", b"Subject: after\n"]
    data = b"".join(fields).replace(b"\n", line_end) + line_end + b"X-Probe: in the body\n"
    assert header_value(data, "X-Probe") == " ".join(words)
    assert header_value(data, "x-probe") == " ".join(words)


# --- the mail reader ----------------------------------------------------------------------


def _read_all(path: Path, fmt: str | None = None) -> tuple[list[bytes], list[str], str | None]:
    """The messages read from ``path``, the skip reasons, and the error if reading failed."""
    skipped: list[str] = []
    items: list[bytes] = []
    try:
        for item in iter_messages(path, fmt, on_skip=lambda _source, why: skipped.append(why)):
            items.append(item.data)
    except MailSourceError as exc:
        return items, skipped, str(exc)
    return items, skipped, None


def _found_in_order(pieces: list[bytes], data: bytes) -> bool:
    at = 0
    for piece in pieces:
        found = data.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _looks_like_mail(data: bytes) -> bool:
    """The rule spamnb.mail documents: after a UTF-8 byte-order mark and blank lines,
    an envelope line or a field name and colon, and NULs no more than 1% of the first
    4 KB; but not nmh's context file, which starts "Current-Folder:" (hypothesis found
    that one, since aa8d543)."""
    head = data[:4096]
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip(b"\r\n")
    name = start.split(b":", 1)[0].rstrip(b" \t") if b":" in start else b""
    is_field = bool(name) and all(0x21 <= byte <= 0x7E for byte in name)
    if start.startswith(b"Current-Folder:"):
        return False
    return (start.startswith(b"From ") or is_field) and head.count(0) * 100 <= len(head)


def _starts_a_header(data: bytes) -> bool:
    """Whether data's first line that is no "From " or ">From " line (an envelope line
    kept or quoted by a program that wrapped the message) is a header field's: a name
    of printable ASCII, blanks and a colon, as after every envelope line a mail
    program writes."""
    lines = data.split(b"\n")
    line = next((line for line in lines if not line.startswith((b"From ", b">From "))), b"")
    name = line.split(b":", 1)[0].rstrip(b" \t") if b":" in line else b""
    return bool(name) and all(0x21 <= byte <= 0x7E for byte in name)


def _from_lines(data: bytes) -> int:
    # The most messages an mbox reader can split data into: one per line that
    # starts with "From " (what Python's mailbox.mbox does).
    return sum(1 for line in data.split(b"\n") if line.startswith(b"From "))


ANY_INPUT = st.one_of(st.binary(max_size=400), hostile_mail())


@settings(max_examples=150, deadline=None)
@given(ANY_INPUT)
@example(b"Current-Folder:")
@example(b"\xef\xbb\xbfSubject: saved by an editor\n\nhi\n")
def test_any_file_reads_as_its_own_bytes_or_a_mail_source_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "message"
        path.write_bytes(data)
        fmt = detect_format(path)
        items, skipped, error = _read_all(path)
    assert fmt in ("file", "mbox")
    if fmt == "file":
        # One message, byte for byte, or a one-line reason why it is not mail.
        assert skipped == []
        if _looks_like_mail(data):
            assert (items, error) == ([data], None)
        else:
            assert items == [] and error is not None and "\n" not in error
    else:
        # Read as an mbox only when a second message follows the first.
        assert _found_in_order(items, data)
        assert 2 <= len(items) + len(skipped) <= _from_lines(data)
        assert (error is None) == bool(items)
    assert all(items)


DATED_ENVELOPES = [
    b"From alice@example.org Mon Jan  1 10:00:00 2024\n",
    b"From bob Tue Jan  2 11:30:00 2024\n",
]
MBOX_CONTENT = st.one_of(hostile_mail(), st.binary(max_size=40))


def _as_stored_in_mbox(message: bytes) -> bytes:
    """The message as an mbox writer stores it: lines that start with "From " quoted
    (the first too), and a line end at the end."""
    quoted = re.sub(rb"(?m)^From ", b">From ", message)
    return quoted if quoted.endswith(b"\n") else quoted + b"\n"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(DATED_ENVELOPES), MBOX_CONTENT), min_size=1, max_size=4))
def test_an_mbox_gives_back_each_message_as_stored(entries) -> None:
    contents = [_as_stored_in_mbox(message) for _, message in entries]
    # Each message after its envelope line and before a blank line, as writers do it.
    data = b"".join(
        envelope + content + b"\n" for (envelope, _), content in zip(entries, contents, strict=True)
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "box"
        path.write_bytes(data)
        items, skipped, error = _read_all(path, "mbox")
    # A message starts at an envelope line that a header field follows; one that has
    # none (not mail) stays in the message before it, with its envelope line.
    messages = [contents[0]]
    for (envelope, _), content in zip(entries[1:], contents[1:], strict=True):
        if _starts_a_header(content):
            messages.append(content)
        else:
            messages[-1] += b"\n" + envelope + content
    messages = [_as_before_quoting(message) for message in messages]
    assert items == [message for message in messages if _looks_like_mail(message)]
    assert len(items) + len(skipped) == len(messages)
    assert (error is None) == bool(items)


def _as_before_quoting(message: bytes) -> bytes:
    """A message as stored, but for its own envelope lines: a message that started with
    its "From " line (a wrapped message's, which a header field follows) has it back
    without the quote the writer gave it."""
    lines = message.split(b"\n")
    if not lines[0].startswith(b">From ") or not _starts_a_header(message):
        return message
    envelopes = 0
    while lines[envelopes].startswith((b"From ", b">From ")):
        lines[envelopes] = lines[envelopes].removeprefix(b">")
        envelopes += 1
    return b"\n".join(lines)


@st.composite
def hostile_mbox_files(draw: st.DrawFn) -> bytes:
    """An mbox as found in the wild: envelope lines without a date, no blank line
    before the next one, "From " body lines left unquoted, any line ends."""
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        envelope = draw(st.sampled_from([*DATED_ENVELOPES, b"From \n", b"From x\n"]))
        body = draw(
            st.sampled_from([b"", b"From the desk of the editor\n", b">From quoted\n", b"\n\n"])
        )
        message = draw(MBOX_CONTENT).replace(b"\nFrom ", b"\n>From ")
        pieces.append(envelope + message + b"\n" + body + draw(st.sampled_from([b"\n", b""])))
    data = b"".join(pieces)
    return data.replace(b"\n", b"\r\n") if draw(st.booleans()) else data


def _unmistakable_envelopes(data: bytes) -> int:
    """The fewest messages an mbox reader may find: the first line, and each dated
    envelope line after a blank line and before a header field."""
    lines = data.split(b"\n")
    dated = {envelope.rstrip(b"\n") for envelope in DATED_ENVELOPES}
    return 1 + sum(
        1
        for before, line, after in zip(lines, lines[1:], lines[2:], strict=False)
        if before in (b"", b"\r") and line.rstrip(b"\r") in dated and _starts_a_header(after)
    )


@settings(max_examples=80, deadline=None)
@given(hostile_mbox_files())
def test_a_hostile_mbox_splits_between_its_sure_and_its_possible_envelopes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "box"
        path.write_bytes(data)
        items, skipped, error = _read_all(path, "mbox")
    assert _found_in_order(items, data)
    assert _unmistakable_envelopes(data) <= len(items) + len(skipped) <= _from_lines(data)
    assert (error is None) == bool(items)


@settings(max_examples=150, deadline=None)
@given(ANY_INPUT)
def test_any_maildir_message_is_read_whole_or_skipped_with_a_reason(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for sub in ("cur", "new", "tmp"):
            (root / sub).mkdir()
        (root / "new" / "1700000000.M1P1.host").write_bytes(data)
        assert detect_format(root) == "maildir"
        items, skipped, error = _read_all(root)
    if _looks_like_mail(data):
        assert (items, skipped, error) == ([data], [], None)
    else:
        assert items == [] and len(skipped) == 1 and "no messages" in str(error)
