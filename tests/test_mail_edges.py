"""Reading mail at the edges a mutation audit of spamnb.mail found no test pinning
(review 16): where an mbox's messages begin, what the same message is, which folders
a recursive read enters, and the bounds of what counts as mail."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from spamnb.mail import MailSourceError, _mail_problem, detect_format, iter_messages, message_digest

ENVELOPE = b"From a@b Mon Jan  6 10:30:00 2025\n"


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def sources(path: Path, fmt: str | None = None, **kwargs) -> list[str]:
    return [Path(item.source).name for item in iter_messages(path, fmt, **kwargs)]


# --------------------------------------------------------------------------- mbox


def test_a_from_line_of_prose_after_a_blank_line_starts_no_message(tmp_path):
    # Only an envelope line (sender and date) starts a message, not "From the desk".
    box = write(
        tmp_path / "box",
        ENVELOPE + b"Subject: 1\n\nhi\n\nFrom the desk of Bob\nNote: meeting\n\n"
        + ENVELOPE + b"Subject: 2\n\nx\n",
    )  # fmt: skip
    assert sources(box, "mbox") == ["box:1", "box:2"]
    assert sources(box) == ["box:1", "box:2"]


@pytest.mark.parametrize(
    "second",
    [
        b"From a@b Tue 4 Mar 2025 09:12:00\n",  # RFC 2822's date without the comma
        # An envelope, then the envelope of the message a program wrapped, quoted.
        ENVELOPE + b">From c@d Mon Jan  6 10:29:00 2025\n",
    ],
)
def test_envelope_lines_mbox_writers_write_start_messages(tmp_path, second):
    box = write(
        tmp_path / "box", ENVELOPE + b"Subject: 1\n\nbody\n\n" + second + b"Subject: 2\n\nb\n"
    )
    assert detect_format(box) == "mbox"
    assert sources(box) == ["box:1", "box:2"]


# A message as its sender wrote it, then stored by a program that put its own envelope
# line before the one it came with, kept or quoted as an mbox body line is quoted.
WRAPPED = b"Subject: hello there\nMessage-ID: <m@x>\n\nbody words\n"
OWN_ENVELOPE = b"From c@d Mon Jan  6 10:29:00 2025\n"


@pytest.mark.parametrize("own", [OWN_ENVELOPE, b">" + OWN_ENVELOPE])
def test_a_wrapped_message_is_the_message_it_wraps(tmp_path, own):
    from spamnb.mail import message_id
    from spamnb.pipe import header_block_end
    from spamnb.tokens import tokenize

    as_file = ENVELOPE + own + WRAPPED
    box = write(tmp_path / "box", ENVELOPE + b"Subject: 1\n\nb\n\n" + as_file)
    in_box = [item.data for item in iter_messages(box)]
    # Read from the mbox, the quoted envelope line was the message's first line, and
    # the message was skipped as not mail.
    assert in_box[1] == OWN_ENVELOPE + WRAPPED
    # Given as a file, its header was read as body: no Message-ID, no Subject tokens.
    for data in (as_file, in_box[1]):
        assert message_id(data) == "<m@x>"
        assert message_digest(data) == message_digest(WRAPPED)
        assert data[header_block_end(data) :] == b"\nbody words\n"
        assert "subject:hello" in tokenize(data)
        assert set(tokenize(data)) - set(tokenize(WRAPPED)) <= {
            "defect:MisplacedEnvelopeHeaderDefect"
        }


def test_a_quoted_from_line_not_followed_by_a_header_stays_body():
    from spamnb.pipe import header_block_end, unquote_wrapped_envelopes

    data = ENVELOPE + b">From the desk of Bob\nhello\n"
    assert unquote_wrapped_envelopes(data) is data
    assert header_block_end(data) == len(ENVELOPE)


@pytest.mark.parametrize(
    "line",
    [
        b"From  Mon Jan  6 10:30:00 2025",  # no sender
        b"From x aMon Jan  6 10:30:00 2025",  # no weekday word
        b"From x MonJan  6 10:30:00 2025",
        b"From a@b Mon Jan  6 10:3 2025",  # no time
    ],
)
def test_prose_shaped_like_an_envelope_does_not_make_an_mbox(tmp_path, line):
    data = ENVELOPE + b"Subject: 1\n\nb\n\n" + line + b"\nSubject: 2\n\nc\n"
    assert detect_format(write(tmp_path / "one", data)) == "file"


def test_an_mbox_forced_on_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            list(iter_messages(fifo, "mbox"))
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - what the reader raised is the result
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # let it go: a writer ends its wait
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO as an mbox waited for a writer")
    assert isinstance(outcome[0], MailSourceError)
    assert "not a regular file" in str(outcome[0])


# --------------------------------------------------------------------------- identity


def test_a_body_quoted_by_an_mboxrd_writer_is_the_same_message():
    # mboxrd adds a ">" to every ">*From " line: ">From" is stored as ">>From".
    once = b"Message-ID: <x@y>\n\n>From a quote\n"
    twice = b"Message-ID: <x@y>\n\n>>From a quote\n"
    assert message_digest(once) == message_digest(twice)


# --------------------------------------------------------------------------- folders


def test_a_recursive_maildir_read_enters_only_its_maildirs(tmp_path):
    maildir = tmp_path / "md"
    for sub in ("cur", "new", "tmp", "Archive/cur", "Archive/new", "Archive/tmp"):
        (maildir / sub).mkdir(parents=True)
    write(maildir / "cur" / "1:2,S", b"Subject: x\n\nb\n")
    write(maildir / "Archive" / "cur" / "2:2,S", b"Subject: y\n\nc\n")
    # A plain Archive/ is a Maildir as Dovecot's LAYOUT=fs keeps it; a folder that is
    # no Maildir is not read.
    write(maildir / "attachments" / "3", b"Subject: z\n\nd\n")
    assert sources(maildir, recursive=True) == ["1:2,S", "2:2,S"]
    assert sources(maildir) == ["1:2,S"]


def test_a_recursive_mh_read_passes_over_hidden_folders(tmp_path):
    mh = tmp_path / "mh"
    write(mh / ".mh_sequences", b"")
    write(mh / "1", b"Subject: x\n\nb\n")
    write(mh / ".trash" / "1", b"Subject: y\n\nc\n")
    assert sources(mh, recursive=True) == ["1"]


def test_a_comma_file_is_a_deleted_mh_message_only_when_numbered(tmp_path):
    folder = tmp_path / "plain"
    write(folder / ",draft", b"Subject: x\n\nb\n")
    write(folder / ",3", b"Subject: gone\n\nb\n")
    assert sources(folder) == [",draft"]


def test_a_maildir_with_only_cur_is_known_despite_hidden_folders_in_it(tmp_path):
    maildir = tmp_path / "md"
    (maildir / "cur" / ".index").mkdir(parents=True)
    write(maildir / "cur" / "1:2,S", b"Subject: x\n\nb\n")
    assert detect_format(maildir) == "maildir"


# --------------------------------------------------------------------------- what is mail


def test_what_counts_as_mail_at_its_bounds():
    assert _mail_problem(b"Subject : hi\n\nbody\n") is None  # a blank before the colon
    one_percent = b"Subject: x\n\n" + b"a" * 87 + b"\0"  # 1 NUL in 100 bytes
    assert len(one_percent) == 100 and _mail_problem(one_percent) is None
    assert _mail_problem(one_percent + b"\0") is not None


# A bounce that carries the original with its own envelope line, unquoted.
BOUNCE = (
    ENVELOPE + b"From: MAILER-DAEMON@example.org\nSubject: returned\n\nYour mail:\n\n"
    b"From ann@example.org Mon Jan  6 09:00:00 2025\nFrom: ann@example.org\n"
    b"Subject: hello\n\nhi\n"
)


@pytest.mark.parametrize("layout", ["maildir", "mh"])
def test_a_file_of_a_maildir_or_mh_folder_is_one_message_however_it_is_reached(tmp_path, layout):
    # Review 50: through the Maildir it was one message, through the folder above it or
    # given itself two, so it could be learnt under two labels as different mail.
    if layout == "maildir":
        folder = tmp_path / "mail" / "Maildir"
        (folder / "cur").mkdir(parents=True)
        message = write(folder / "new" / "1700000000.M1P1.host", BOUNCE)
    else:
        folder = tmp_path / "mail" / "inbox"
        write(folder / ".mh_sequences", b"")
        message = write(folder / "1", BOUNCE)
    for path in (folder, tmp_path / "mail", message):
        items = list(iter_messages(path))
        assert [item.data for item in items] == [BOUNCE], path
    assert detect_format(message) == "file"
    if layout == "mh":
        # A file that is no MH message (not numbered) is read by the file's own rules.
        other = write(folder / "archive.mbox", BOUNCE)
        assert len(list(iter_messages(other))) == 2
    # Outside such a folder it is an mbox of two, as mutt reads it.
    loose = write(tmp_path / "loose" / "bounce", BOUNCE)
    assert len(list(iter_messages(loose))) == len(list(iter_messages(loose.parent))) == 2
    assert detect_format(loose) == "mbox"


def _mboxcl2(bodies: list[bytes], lengths: list[int] | None = None, eol: bytes = b"\n") -> bytes:
    """An mboxcl2 file: no "From " quoting, each body's length in Content-Length."""
    out = b""
    for n, body in enumerate(bodies):
        length = len(body) if lengths is None else lengths[n]
        head = f"From a@b Mon Jan  6 10:3{n}:00 2025\nSubject: m{n}\nContent-Length: {length}\n\n"
        out += head.encode().replace(b"\n", eol) + body + eol
    return out


PATCH = (
    b"Here is the fix.\n\n"
    b"From 3f1c0d2e9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d Mon Sep 17 00:00:00 2001\n"
    b"From: Bob <bob@example.org>\nSubject: [PATCH] fix\n\n---\n"
)


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_an_mboxcl2_body_is_read_to_its_content_length(tmp_path, eol):
    # Review 50: the patch's envelope line split the second message in two, and the
    # third was named :4.  (mutt wants a length that ends the body just before the
    # blank line that separates messages.)
    bodies = [b"one\n", PATCH.replace(b"\n", eol), b"three\n".replace(b"\n", eol)]
    box = write(tmp_path / "cl2", _mboxcl2(bodies, eol=eol))
    items = list(iter_messages(box))
    assert [item.source.rsplit(":", 1)[1] for item in items] == ["1", "2", "3"]
    assert bodies[1] in items[1].data and b"Subject: m2" not in items[1].data
    assert bodies[2] in items[2].data
    # One such message alone is one message.
    alone = write(tmp_path / "alone", _mboxcl2([PATCH]))
    assert len(list(iter_messages(alone))) == 1


@pytest.mark.parametrize("wrong", [-1, 1, 2, -5, 10_000, 10**14])
def test_a_content_length_not_borne_out_is_passed_over(tmp_path, wrong):
    # Too short, too long, or ending inside a line: the length is not trusted (a
    # sender's forged field must not swallow the next message), and the patch's
    # envelope line splits the message as in any mbox.  One more takes in the blank
    # line after the body, where mutt wants it after.  A length past the file's end
    # made the seek fail, and the whole mbox could not be read (review 51).
    lengths = [4, len(PATCH) + wrong, 6]
    box = write(tmp_path / "cl2", _mboxcl2([b"one\n", PATCH, b"three\n"], lengths))
    items = list(iter_messages(box))
    assert len(items) == 4
    assert items[-1].data.endswith(b"three\n")


def test_a_short_content_length_cannot_split_where_no_blank_line_is(tmp_path):
    # Review 51: a length ending the body just before an unquoted envelope line with
    # no blank line before it split the message there.
    body = b"first line\nFrom a@b Mon Jan  6 10:30:00 2025\nSubject: inside\n\nrest\n"
    short = len(b"first line\n")
    box = write(tmp_path / "cl2", _mboxcl2([b"one\n", body, b"three\n"], [4, short, 6]))
    assert len(list(iter_messages(box))) == 3


def test_a_content_length_that_ends_at_the_files_end_is_borne_out(tmp_path):
    # One mboxcl2 message whose body runs to the file's end, without the blank line mutt
    # wants after it, was read whole before lengths were checked (review 52).
    head = f"From a@b Mon Jan  6 10:30:00 2025\nSubject: patch\nContent-Length: {len(PATCH)}\n\n"
    alone = write(tmp_path / "alone", head.encode() + PATCH)
    [item] = iter_messages(alone, "mbox")
    assert item.data.endswith(PATCH)
