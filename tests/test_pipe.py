"""Header insertion for pipe mode: one header added, every other byte kept."""

from __future__ import annotations

import email
import email.policy
import io
import re

from cli_helpers import without_added_header
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.pipe import (
    EXIT_ERROR,
    HeaderRenamer,
    header_block_end,
    header_continues,
    insert_header,
    is_field_name,
    pass_through,
    rename_existing,
    run,
    verdict_header,
)


def parsed_header(message: bytes) -> str | None:
    return email.message_from_bytes(message, policy=email.policy.compat32).get("X-Spamnb")


def test_lf_message_gets_the_header_at_the_end_of_its_header_block():
    message = b"From: a@example.com\nSubject: hi\n\nbody line\n"
    out = insert_header(message, "X-Spamnb", "Ham, v=1")
    assert out == b"From: a@example.com\nSubject: hi\nX-Spamnb: Ham, v=1\n\nbody line\n"


def test_crlf_message_keeps_crlf():
    message = b"From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n"
    out = insert_header(message, "X-Spamnb", "Spam")
    assert out == b"From: a@example.com\r\nSubject: hi\r\nX-Spamnb: Spam\r\n\r\nbody\r\n"


def test_mbox_from_line_and_folded_headers_stay_in_the_block():
    message = b"From a@example.com Mon Jan  1 00:00:00 2024\nSubject: a\n long subject\n\nx\n"
    out = insert_header(message, "X-Spamnb", "Ham")
    assert out.endswith(b" long subject\nX-Spamnb: Ham\n\nx\n")
    assert out.startswith(b"From a@example.com")


def test_message_without_body_or_final_newline():
    assert insert_header(b"Subject: x\n", "X-Spamnb", "Ham") == b"Subject: x\nX-Spamnb: Ham\n"
    out = insert_header(b"Subject: x", "X-Spamnb", "Ham")
    assert out == b"Subject: x\nX-Spamnb: Ham"
    assert without_added_header(out, b"Subject: x")


def test_broken_header_block_gets_the_header_where_parsers_still_see_it():
    message = b"From: a@example.com\nthis line has no colon\nSubject: hi\n\nbody\n"
    out = insert_header(message, "X-Spamnb", "Spam")
    assert parsed_header(out) == "Spam"
    assert without_added_header(out, message)


def test_eight_bit_body_is_untouched():
    message = b"Subject: caf\xe9\nContent-Type: text/plain; charset=latin-1\n\n\xe9\xe8\xff\x00\n"
    out = insert_header(message, "X-Spamnb", "Ham")
    assert without_added_header(out, message) and out.endswith(b"\n\n\xe9\xe8\xff\x00\n")


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_lose_nothing(message):
    out = insert_header(message, "X-Spamnb", "Unsure, score=0.5000, version=1")
    assert len(out) > len(message)
    assert without_added_header(out, message)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"Subject: x", b"From a@b Mon", b" folded", b"", b"no colon here", b"To: y", b"\r"]
        ),
        max_size=8,
    ),
    st.sampled_from([b"\n", b"\r\n"]),
    st.binary(max_size=50),
)
def test_header_like_inputs_lose_nothing(lines, eol, tail):
    message = eol.join(lines) + tail
    assert without_added_header(insert_header(message, "X-Spamnb", "Ham"), message)


def header_block_end_line_by_line(message: bytes) -> int:
    """The header block's end found a line at a time: what the one regex replaced."""
    field = re.compile(rb"[\x21-\x39\x3b-\x7e]+[ \t]*:")
    position = 0
    first = True
    while position < len(message):
        newline = message.find(b"\n", position)
        end = len(message) if newline < 0 else newline + 1
        content = message[position:end].rstrip(b"\r\n")
        if not content:
            return position
        is_envelope = first and content.startswith(b"From ")
        is_continuation = not first and content[:1] in (b" ", b"\t")
        if not (is_envelope or is_continuation or field.match(content)):
            return position
        first = False
        position = end
    return position


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"From ", b"From", b"a", b"Subject", b":", b" ", b"\t", b"\r", b"\n", b"\x7f", b"\xe9"]
        ),
        max_size=40,
    )
)
def test_header_block_end_is_where_a_line_by_line_reading_stops(pieces):
    message = b"".join(pieces)
    assert header_block_end(message) == header_block_end_line_by_line(message)


def test_header_block_end_on_the_shapes_that_end_a_block():
    assert header_block_end(b"") == 0
    assert header_block_end(b"\nSubject: x\n") == 0
    assert header_block_end(b" folded first\n") == 0
    assert header_block_end(b"From a@b Mon\nTo: y\n\nFrom: body\n") == 19
    assert header_block_end(b"To: y\nFrom a@b Mon\n") == 6
    assert header_block_end(b"To: y\r\n \r\n\r\nbody") == 10
    assert header_block_end(b"To: y\n\r\n") == 6
    assert header_block_end(b"To: y") == 5


def test_field_names_and_values():
    assert is_field_name("X-Spamnb") and is_field_name("X-My_Filter.1")
    assert not is_field_name("") and not is_field_name("X Spam") and not is_field_name("X:Y")
    assert not is_field_name("X-Späm")
    assert verdict_header("Spam", 0.99871, "1.2") == "Spam, score=0.9987, version=1.2"
    assert verdict_header("Ham", 0.1, "1.2", "size+tokens") == (
        "Ham, score=0.1000, cut=size+tokens, version=1.2"
    )


def test_renaming_reaches_as_far_as_procmail_reads_the_header():
    # procmail's header ends at a line feed alone (review 9).
    behind_a_cr = b"From: a@example.com\n\r\nX-Spamnb: Spam\n\nbody\n"
    assert rename_existing(behind_a_cr, "X-Spamnb") == behind_a_cr.replace(
        b"X-Spamnb:", b"X-Spamnb-Previous:"
    )
    crlf = b"From: a@example.com\r\n\r\nX-Spamnb: Spam\r\nbody\r\n"
    assert rename_existing(crlf, "X-Spamnb") == crlf.replace(b"X-Spamnb:", b"X-Spamnb-Previous:")
    assert not header_continues(behind_a_cr) and header_continues(crlf)
    # A body line after a real empty line is no header to anyone, and stays.
    body = b"From: a@example.com\n\nX-Spamnb: Spam\n"
    assert rename_existing(body, "X-Spamnb") == body


_HEADER_LINES = [
    b"X-Spamnb: Ham",
    b"x-spamnb \t: Spam",
    b"X-SPAMNB:Spam",
    b"X-SpamnbX: not ours",
    b"X-Spam: not ours",
    b"Subject: hello X-Spamnb: no",
    b" X-Spamnb: a continuation line",
    b"X-Pad: " + b"y" * 300,
    b"broken header line",
    b"X-Spamnb" + b" " * 300 + b": Ham",
    b"X-Spamnb" + b" " * 300 + b"not ours",
    b"X-Spam",
    b"X-Spamnb\r",
    b"\r",
]


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.sampled_from(_HEADER_LINES), min_size=1, max_size=10),
    eol=st.sampled_from([b"\n", b"\r\n"]),
    body=st.booleans(),
    cut=st.integers(min_value=1),
    chunk_sizes=st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=30),
)
def test_renaming_streamed_past_the_first_part_equals_renaming_the_whole(
    lines, eol, body, cut, chunk_sizes
):
    """The pipe reads a message's first --max-size bytes and copies the rest; a verdict
    field in the header section past that point is renamed all the same, wherever the
    cut and the chunks of the rest fall."""
    message = eol.join(lines) + eol
    if body:
        message += eol + b"X-Spamnb: Spam in the body" + eol
    cut = cut % len(message) or 1
    first = message[:cut]
    if not header_continues(first):
        return
    renamed = rename_existing(first, "X-Spamnb")
    line_start = renamed.rfind(b"\n") + 1
    renamer = HeaderRenamer("X-Spamnb", renamed[line_start:])
    rest, streamed = message[cut:], [renamed[:line_start]]
    for size in chunk_sizes * (len(rest) // sum(chunk_sizes) + 1):
        if not rest:
            break
        streamed.append(renamer.feed(rest[:size]))
        rest = rest[size:]
    streamed.append(renamer.finish())
    assert b"".join(streamed) == rename_existing(message, "X-Spamnb")


class _EndThenNoMemory(io.RawIOBase):
    """Stdin holding ``data``, whose reads after its end has been told fail as a read's
    buffer does under a tight memory limit (ulimit -v)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.ended = data, False

    def read(self, size: int = -1) -> bytes:
        if self.data:
            data, self.data = self.data, b""
            return data
        if self.ended:
            raise MemoryError
        self.ended = True
        return b""


def test_a_message_read_whole_is_not_read_again_on_the_failure_path(tmp_path):
    message = b"From: a@example.com\nSubject: hi\n\nbody\n"
    stdout, stderr = io.BytesIO(), io.StringIO()
    status = run(_EndThenNoMemory(message), stdout, stderr, tmp_path / "no-model.joblib")
    assert status == EXIT_ERROR
    assert stdout.getvalue() == message
    (line,) = stderr.getvalue().splitlines()
    assert "no usable model" in line


def test_running_out_of_memory_while_passing_mail_through_is_one_line_and_exit_3():
    stdin = _EndThenNoMemory(b"")
    stdin.ended = True
    stdout, stderr = io.BytesIO(), io.StringIO()
    status = pass_through(b"Subject: x\n\nbody\n", stdin, stdout, stderr, "no usable model")
    assert status == EXIT_ERROR
    assert stdout.getvalue() == b"Subject: x\n\nbody\n"
    (line,) = stderr.getvalue().splitlines()
    assert line.startswith("spamnb: cannot write the message: MemoryError")
    assert "(first: no usable model)" in line


class _InterruptedAfter(io.RawIOBase):
    """Stdin that gives ``data`` and is then interrupted (Ctrl-C) mid-read."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int = -1) -> bytes:
        if self.data:
            data, self.data = self.data, b""
            return data
        raise KeyboardInterrupt


def test_an_interrupt_while_reading_passes_on_what_was_read(tmp_path):
    # The bytes read before Ctrl-C were dropped and "spamnb: KeyboardInterrupt" said
    # (review 9); the status tells a mail program to keep its own copy.
    stdout, stderr = io.BytesIO(), io.StringIO()
    head = b"From: a@example.com\nSubject: hello\n"
    status = run(_InterruptedAfter(head), stdout, stderr, tmp_path / "model.joblib")
    assert status == EXIT_ERROR
    assert stdout.getvalue() == head
    assert stderr.getvalue() == "spamnb: interrupted\n"


class _InterruptedWriter(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        raise KeyboardInterrupt


def test_an_interrupt_while_writing_is_one_line_and_exit_3():
    stderr = io.StringIO()
    message = b"Subject: x\n\nbody\n"
    status = pass_through(message, None, _InterruptedWriter(), stderr, "no usable model")
    assert status == EXIT_ERROR
    (line,) = stderr.getvalue().splitlines()
    assert line.startswith("spamnb: interrupted while writing the message")
