"""Hostile mail (issue 7): any input gets tokens, in time linear in its size and
memory a small multiple of it, and the command line gives every message a verdict
or passes it through unchanged.

Times are CPU seconds of this process (other work on a shared machine does not
count) with the garbage collector off; memory is the peak of what Python allocates
(tracemalloc) beyond the input.  The bounds leave room for a machine several times
slower, but a quadratic step or a copy per part or per line breaks them.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import random
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import run, without_added_header

from spamnb.mail import detect_format, iter_messages
from spamnb.tokens import DEFAULT_SETTINGS, TokenizerSettings, tokenize

MB = 1 << 20


def cpu_seconds(func: Callable[[], object]) -> float:
    """This thread's CPU time: threads other tests left running (a Dask client's, a
    thread pool's) would otherwise be counted too."""
    gc.collect()
    gc.disable()
    try:
        start = time.thread_time()
        func()
        return time.thread_time() - start
    finally:
        gc.enable()


def peak_bytes(func: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------------------
# The worst cases
# ---------------------------------------------------------------------------


def text_message(size: int, line: bytes) -> bytes:
    return b"Subject: big\nContent-Type: text/plain; charset=iso-8859-1\n\n" + line * (
        size // len(line)
    )


def many_parts(parts: int) -> bytes:
    body = b"".join(
        b"--b\nContent-Type: %s\n\npart %d\n" % (b"text/plain" if i % 2 else b"image/gif", i)
        for i in range(parts)
    )
    return b'Subject: parts\nContent-Type: multipart/mixed; boundary="b"\n\n' + body + b"--b--\n"


def nested(depth: int, body: bytes = b"innermost words\n") -> bytes:
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="b%d"\n\n--b%d\n' % (level, level)
        for level in range(depth)
    )
    closing = b"".join(b"\n--b%d--\n" % level for level in reversed(range(depth)))
    return b"Subject: nested\n" + opening + b"Content-Type: text/plain\n\n" + body + closing


def long_subject(size: int) -> bytes:
    return b"Subject: " + b"cheap pills now " * (size // 16) + b"\n\nbody\n"


def base64_line(size: int) -> bytes:
    payload = base64.b64encode(b"buy cheap watches today " * (size * 3 // 4 // 24))
    return b"Subject: b64\nContent-Transfer-Encoding: base64\n\n" + payload


RFC822 = b"Subject: forwarded\nContent-Type: message/rfc822\n\n"


def only_headers(fields: int) -> bytes:
    return b"".join(b"X-Field-%d: value number %d\n" % (i, i) for i in range(fields))


# name: (message, CPU seconds allowed, bytes allowed beyond the input per input byte).
# The comments give what was measured on the development machine (2 cores), and
# before issue 7 where that differed.
WORST_CASES = {
    # 0.28 s, 3.0x: the text, the body cut from it, and the body as bytes.
    "50 MB of ASCII text": (lambda: text_message(50 * MB, b"hello world spam eggs\n"), 4, 4),
    # 0.62 s, 5.0x: 8-bit bytes take two bytes a character while parsing.
    "50 MB of 8-bit text": (
        lambda: text_message(50 * MB, "h\xe9llo w\xf6rld \x80uro spam\n".encode("latin-1")),
        6,
        7,
    ),
    # 0.23 s, 20x: 0.7 kB of objects a part.
    "10,000 MIME parts": (lambda: many_parts(10_000), 3, 30),
    # 0.03 s, 3.8x (before: 0.71 s and 458x, read as unparsable).
    "multipart nested 1,000 deep": (lambda: nested(1_000), 0.5, 8),
    # 0.04 s, 26x: unparsable, so 10,000 word tokens of 65 kB (before: 0.89 s, 70x).
    "the same in a message/rfc822": (lambda: RFC822 + nested(1_000), 0.5, 30),
    # 0.03 s, 6.0x (before: 0.23 s, 52x and 393,219 tokens).
    "a 1 MB header line": (lambda: long_subject(MB), 0.5, 10),
    # 0.07 s, 2.8x.
    "a 10 MB single-line base64 body": (lambda: base64_line(10 * MB), 2, 4),
    # 0.13 s, 11x: 0.35 kB of objects a field.
    "a message of only headers": (lambda: only_headers(50_000), 2, 20),
    # 0.11 s, 7.0x.
    "5 MB of random bytes": (lambda: random.Random(7).randbytes(5 * MB), 2, 9),
    # 0.00 s, 3.0x.
    "5 MB of NULs": (lambda: bytes(5 * MB), 1, 4),
    # 0.3 s, 6.4x: the slowest markup there is, read to twice the text budget (version
    # 6 first read a megabyte of it, 2.5 s, and ten with max_bytes=0, 28 s).  Besides
    # the text's copies, the start-tag pattern's state for that much of it: 36 MB.
    "10 MB of hostile HTML markup": (
        lambda: b"Content-Type: text/html\n\n" + b'<a b=">"' * (10 * MB // 8) + b' x="',
        2,
        7,
    ),
    # 0.02 s: the forwarded message's Subject is cut before its encoded words are
    # decoded (0.2 s a megabyte, decoded whole; review 24).
    "a 1 MB Subject of encoded words in a message/rfc822": (
        lambda: RFC822 + b"Subject: " + b"=?utf-8?q?caf=C3=A9?= " * (MB // 22) + b"\n\nbody\n",
        0.1,
        20,
    ),
    # 0.08 s, 8.5x (a bytes object a block): base64 read block by block by position
    # (short padded lines took 19 s a megabyte, each block slicing off the rest;
    # review 24).
    "a 1 MB base64 body of padded lines": (
        lambda: b"Content-Transfer-Encoding: base64\n\n" + b"QUFBQUFBQUFBQUFBQUFB=\n" * (MB // 21),
        0.5,
        10,
    ),
    # 0.003 s: a long line after padding that is not base64 is rejected in one pass
    # (groups of four in the pattern made the engine try every split: 22 s for
    # 160,000 characters; review 25).
    "a 1 MB line after padded base64": (
        lambda: b"Content-Transfer-Encoding: base64\n\nAAAA=\n" + b"Q" * MB + b"!\n",
        0.5,
        4,
    ),
    # 0.3 s, 19x (the start-tag pattern's state for the markup read, a bound of its
    # own): the markup's bound is the message's, not each part's (five parts of hidden
    # text, spending none of the text budget, took 1.2 s; review 24).
    "ten parts of slow hidden markup": (
        lambda: (
            b'Content-Type: multipart/mixed; boundary="b"\n\n'
            + b"".join(
                b"--b\nContent-Type: text/html\n\n<title>" + b'<a b=">"' * (MB // 80) + b"\n"
                for _ in range(10)
            )
            + b"--b--\n"
        ),
        1,
        24,
    ),
}


# The default settings read a message's first megabyte only; without that limit the
# whole input must still be read in bounded time and memory.
WHOLE_MESSAGE = TokenizerSettings(max_bytes=0)


@pytest.mark.parametrize("settings", [DEFAULT_SETTINGS, WHOLE_MESSAGE], ids=["default", "whole"])
@pytest.mark.parametrize("case", WORST_CASES)
def test_worst_case_tokenizes_in_bounded_time_and_memory(case, settings):
    build, seconds, memory_factor = WORST_CASES[case]
    data = build()
    results = []
    assert cpu_seconds(lambda: results.append(tokenize(data, settings))) < seconds
    tokens = results[0]
    assert isinstance(tokens, list) and tokens and all(isinstance(t, str) for t in tokens)
    assert len(tokens) <= settings.max_tokens
    # Half a megabyte on top covers the fixed costs (a few thousand tokens).
    assert peak_bytes(lambda: tokenize(data, settings)) < memory_factor * len(data) + MB // 2


@pytest.mark.parametrize("whole", [False, True], ids=["default", "whole"])
def test_a_megabyte_of_han_read_as_pairs_is_bounded(whole):
    # 0.06 s and 32 times the input at its peak (33 MB): the 100,000 characters read
    # give 200,000 pairs and pairs of pairs before the cap keeps 50,000, where English
    # text's worst is 7 MB.  Bounded by the text budget, and only with --cjk-pairs.
    settings = TokenizerSettings(cjk_pairs=1, max_bytes=0 if whole else MB)
    rng = random.Random(0)
    text = "".join(chr(rng.randrange(0x4E00, 0xA000)) for _ in range(MB // 3))
    data = b"Content-Type: text/plain; charset=utf-8\n\n" + text.encode() + b"\n"
    results = []
    assert cpu_seconds(lambda: results.append(tokenize(data, settings))) < 1
    assert len(results[0]) == settings.max_tokens
    assert peak_bytes(lambda: tokenize(data, settings)) < 40 * len(data)


def test_empty_input_gets_tokens():
    assert tokenize(b"") == ["header-count:0"]


def test_deep_nesting_is_read_to_a_depth_and_the_rest_is_one_attachment():
    tokens = tokenize(nested(1_000))
    assert "parse:failed" not in tokens
    assert "attachment:multipart/mixed" in tokens
    # Shallow nesting is read to the innermost words.
    assert "innermost words" in tokenize(nested(40))
    # feedparser, which reads message/rfc822 parts, would take a time in proportion
    # to lines times depth: such mail is read as unparsable words instead.
    tokens = tokenize(RFC822 + nested(1_000))
    assert tokens[0] == "parse:failed" and "innermost" in tokens
    assert "innermost words" in tokenize(RFC822 + nested(40))


def test_a_huge_header_is_read_for_its_first_words_only():
    tokens = tokenize(long_subject(MB))
    assert tokens[:3] == ["subject:cheap", "subject:pills", "subject:cheap pills"]
    # Header values are read up to max_text_chars in all, like a body.
    assert tokens.count("subject:cheap") == DEFAULT_SETTINGS.max_text_chars // 16


# ---------------------------------------------------------------------------
# The command line: a verdict row for each file, and the pipe filter
# ---------------------------------------------------------------------------


CLI_CASES = {
    "50 MB of text": lambda: text_message(50 * MB, b"hello world spam eggs\n"),
    "10,000 MIME parts": lambda: many_parts(10_000),
    "multipart nested 1,000 deep": lambda: nested(1_000),
    "a 1 MB header line": lambda: long_subject(MB),
    "a 10 MB single-line base64 body": lambda: base64_line(10 * MB),
    "a message of only headers": lambda: only_headers(50_000),
}


def test_classify_gives_each_worst_case_a_verdict_row(model, tmp_path):
    paths = []
    for n, build in enumerate(CLI_CASES.values()):
        paths.append(tmp_path / f"m{n}")
        paths[-1].write_bytes(build())
    result = run("classify", "-m", model, *paths)
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [where for _label, _p, where in rows] == [str(p) for p in paths]
    assert all(label in ("spam", "ham") and 0 <= float(p) <= 1 for label, p, _where in rows)


PIPE_CASES = {
    **{name: build for name, build in CLI_CASES.items() if "50 MB" not in name},
    "512 kB of random bytes": lambda: random.Random(8).randbytes(512 << 10),
    "512 kB of NULs": lambda: bytes(512 << 10),
    "an empty input": lambda: b"",
}


@pytest.mark.parametrize("case", PIPE_CASES)
def test_the_pipe_filter_scores_each_worst_case_or_passes_it_through(model, case):
    message = PIPE_CASES[case]()
    result = run("classify", "--pipe", "-m", model, input=message)
    assert result.exit_code in (0, 1, 2, 3)
    if result.exit_code == 3:
        assert result.stdout_bytes == message
    else:
        assert without_added_header(result.stdout_bytes, message)
    if message:
        # Only an empty input has nothing to score.
        assert result.exit_code != 3, result.stderr


# ---------------------------------------------------------------------------
# "From " lines inside a body in an mbox
# ---------------------------------------------------------------------------

FIRST = b"Subject: one\n\nfirst body\n"
SECOND = (
    b"Subject: two\n\nDear Bob,\nFrom the desk of the president: all is well.\n\n"
    b"From here on we meet on Mondays.\n"
)
THIRD = b"Subject: three\n\nthird body\n"
ENVELOPES = (
    b"From alice@example.org Mon Jan  1 10:00:00 2024\n",
    b"From bob@example.org Tue Jan  2 11:30:00 2024\n",
    b"From carol@example.org Wed Jan  3 12:45:00 2024\n",
)


def mbox(*messages: bytes) -> bytes:
    return b"\n".join(e + m for e, m in zip(ENVELOPES, messages, strict=True))


def test_a_from_line_in_a_body_stays_in_its_message(tmp_path):
    path = tmp_path / "box"
    path.write_bytes(mbox(FIRST, SECOND, THIRD))
    assert detect_format(path) == "mbox"
    skipped = []
    items = list(iter_messages(path, on_skip=lambda *args: skipped.append(args)))
    # Neither body line is an envelope line (a blank line, then "From ", a sender,
    # a weekday and a time), so neither splits the second message: all three come
    # out whole, as mutt reads them (Python's mailbox module cut the second one at
    # each, and the pieces, not starting like mail, were skipped).
    assert [(item.source, item.data) for item in items] == [
        (f"{path}:1", FIRST),
        (f"{path}:2", SECOND),
        (f"{path}:3", THIRD),
    ]
    assert skipped == []


def test_an_unquoted_envelope_line_in_a_body_stays_in_its_message(tmp_path):
    # A quoted reply that starts like an envelope line: no header field follows it, so
    # it is no envelope line, and the message keeps it (it had ended there, and the
    # rest been skipped as not mail).
    second = b"Subject: two\n\nBob wrote:\n\nFrom bob Tue Jan  2 09:15:00 2024 wrote:\n> hi\n"
    path = tmp_path / "box"
    path.write_bytes(mbox(FIRST, second, THIRD))
    skipped = []
    items = list(iter_messages(path, on_skip=lambda *args: skipped.append(args)))
    assert [item.data for item in items] == [FIRST, second, THIRD]
    assert [item.source for item in items] == [f"{path}:{n}" for n in (1, 2, 3)]
    assert skipped == []


# ---------------------------------------------------------------------------
# Linear time: each pattern and scanning loop of the tokenizer on input made to make
# it backtrack or search again, at a size n and at 4n
# ---------------------------------------------------------------------------

# Without the limits on what is read, which would hide a quadratic step below them.
UNLIMITED = TokenizerSettings(max_text_chars=10**9, max_tokens=0, max_bytes=0)


def body(text: str, content_type: str = "text/plain", headers: str = "") -> bytes:
    head = f"Subject: x\n{headers}Content-Type: {content_type}\n\n"
    return (head + text).encode("utf-8", "surrogateescape")


def header(line: str) -> bytes:
    return f"{line}\n\nbody\n".encode("utf-8", "surrogateescape")


def multipart(text: str) -> bytes:
    return b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n\n' + text.encode() + b"\n--b--\n"


# name: (message of size n, n).  Most sizes keep a message at 4n within about 64 kB
# (and its tokens few): larger ones outgrow the processor's caches, which adds to the
# time at 4n what is not the algorithm's.  Two library steps (many encoded words, many
# parameters) show their quadratic time only at a few hundred kB.  At these sizes
# each quadratic step found for issue 7 took from 0.1 to 17 seconds at n, or at 4n
# 6 to 16 times as long as at n.
LINEARITY_CASES = {
    # Text patterns of a body
    "URLs and near misses": (lambda n: body("http://x.example/p?q=1 ftp:/ https:/ " * n), 400),
    "www near misses": (lambda n: body(("www." + "a-" * 20 + " www.x ") * n), 300),
    "money: a long run of digits and commas": (lambda n: body("dollars " + "1," * n + "x"), 10000),
    "words and pairs": (lambda n: body("ab cd efg " * n), 1500),
    "one-letter words": (lambda n: body("a b " * n), 4000),
    "long words": (lambda n: body(("x" * 30 + " ") * n), 500),
    "punctuation runs": (lambda n: body("!!! ?? " * n + "-" * n), 2000),
    # Header fields
    "a dotted word without a domain in Received": (
        lambda n: header("Received: from " + "a." * n + "a1"),
        10000,
    ),
    "a hyphenated word in Received": (
        lambda n: header("Received: from " + "a-" * n + ".a1"),
        10000,
    ),
    "IPv4 near misses in Received": (lambda n: header("Received: from " + "1.2.3." * n), 2500),
    "an address without @": (lambda n: header("To: " + "a" * n), 20000),
    "an address without a domain": (lambda n: header("From: " + "a" * n + "@x"), 20000),
    "many addresses": (lambda n: header("To: " + "a@b.example, " * n), 1000),
    "a folded field": (lambda n: header("Subject: a\n" + " b c\n" * n), 3000),
    "many fields": (lambda n: b"X-Field: value\n" * n + b"\nbody\n", 1000),
    "many Content-Type fields after others": (
        lambda n: b"X: y\n" * n + b"Content-Type: text/plain\n" * n + b"\nbody\n",
        1000,
    ),
    "encoded-word near misses": (lambda n: header("Subject: " + "=?x?q?a" * n), 3000),
    "many encoded words": (lambda n: header("Subject: " + "=?utf-8?q?a?= " * n), 5000),
    "base64 encoded words": (lambda n: header("Subject: " + "=?utf-8?b?YWJj?=" * n), 1000),
    "an 8-bit field": (lambda n: header("Subject: " + "\udce9a " * n), 5000),
    "many parameters": (lambda n: header("Content-Type: text/plain" + ";a=b" * n), 20000),
    "semicolons in a quoted parameter": (
        lambda n: header('Content-Type: text/plain; a="' + ";" * n + '"'),
        20000,
    ),
    # HTML
    "unfinished tags (<a\\nb\\nc)": (lambda n: body("<a\nb\nc" * n, "text/html"), 3000),
    "unfinished tags and a NUL": (lambda n: body("<a\nb\nc" * n + "\x00", "text/html"), 3000),
    "tag names running to a NUL": (lambda n: body("<a" * n + "\x00", "text/html"), 10000),
    "quoted > in unfinished tags": (lambda n: body('<a b=">"' * n + ' x="', "text/html"), 2000),
    "tag names running over <": (lambda n: body("<a" * n, "text/html"), 10000),
    "unclosed attribute quotes": (lambda n: body('<a b="' * n, "text/html"), 3000),
    "unfinished CDATA sections": (lambda n: body("<![CDATA[x" * n, "text/html"), 1500),
    "unfinished conditional sections": (lambda n: body("<![if x" * n, "text/html"), 3000),
    "unfinished comments": (lambda n: body("<!--x" * n, "text/html"), 3000),
    "unfinished end tags and declarations": (lambda n: body("</x<!x<?x" * n, "text/html"), 1500),
    "ordinary markup": (
        lambda n: body("<p>hi <b>you</b> <a href='http://x.example/p'>x</a>" * n, "text/html"),
        250,
    ),
    # MIME structure and decoding
    "lines almost a boundary": (lambda n: multipart("--bx\n--b \tx\n" * n), 1000),
    "many parts": (lambda n: many_parts(n), 300),
    "deep nesting": (lambda n: nested(n), 200),
    "a base64 body": (lambda n: base64_line(n), 15000),
    "a quoted-printable body": (
        lambda n: body(
            "caf=C3=A9 =\n" * n, headers="Content-Transfer-Encoding: quoted-printable\n"
        ),
        1500,
    ),
    "a UTF-7 body": (lambda n: body("+AGEA- b " * n, "text/plain; charset=utf-7"), 2000),
    "a punycode body": (lambda n: body("x-" + "ab" * n, "text/plain; charset=punycode"), 10000),
}


def linearity(make: Callable[[int], object], n: int, run: Callable[[object], object]) -> float:
    """The time at 4n over the time at n, each the best of several measurements of
    enough runs that one takes 50 ms, so that the clock's noise does not count.  The
    two sizes take turns, so that a change in the machine's load affects both, and
    more turns are taken only while the ratio is not clearly linear."""

    def measure(data: object, runs: int) -> float:
        def repeated() -> None:
            # Each result is dropped before the next run, as the tokenizer's are.
            for _ in range(runs):
                run(data)

        return cpu_seconds(repeated)

    small_input, large_input = make(n), make(4 * n)
    runs = 1
    while (small := measure(small_input, runs)) < 0.05 and runs < 4096:
        runs *= 2
    large = measure(large_input, runs)
    for _ in range(7):
        if large < 5 * small:
            break
        small = min(small, measure(small_input, runs))
        large = min(large, measure(large_input, runs))
    return large / small


def tokenizing_ratios() -> dict[str, float]:
    return {
        case: linearity(make, n, lambda data: tokenize(data, UNLIMITED))
        for case, (make, n) in LINEARITY_CASES.items()
    }


@pytest.fixture(scope="module")
def linearity_ratios() -> dict[str, float]:
    """Every case's ratio, measured in a fresh interpreter.  Late in the whole suite,
    the same linear code measured 6.5 and 8.2 where a fresh process measures 3.5 to
    4.9: the heap that hundreds of earlier tests leave behind makes large inputs'
    allocations dearer.  A new process measures the tokenizer, not the suite."""
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "import test_worst_cases; print(json.dumps(test_worst_cases.tokenizing_ratios()))"
    )
    # Nor the allocator's settings any test left in the environment: under glibc's
    # MALLOC_TRIM_THRESHOLD_=65536, which Dask's nanny gives its workers, the heap is
    # handed back and taken again around the larger input's strings, and the IPv4
    # case measured 6.2 (15 against 60 kB; the old heap layout, 4).  That is the
    # allocator's cost on a Dask worker, where the tokenizer's limits still bound it.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).parent)],
        capture_output=True,
        check=True,
        timeout=900,
        env=environment,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", LINEARITY_CASES)
def test_tokenizing_takes_linear_time(case, linearity_ratios):
    # Linear is 4; quadratic 16.  Not 6: a linear case's larger input outgrows the
    # processor's caches, and on this project's shared virtual machine "many
    # Content-Type fields after others" measured 4.4 one day and 5.2 to 6.5 another
    # (6.15 failed CI), its cost a field 0.98, 1.14 and 1.35 microseconds at 1,000,
    # 4,000 and 16,000 fields: growing by a sixth each time the input grows fourfold,
    # where a quadratic cost would grow fourfold.
    assert linearity_ratios[case] < 8


def test_telling_an_mbox_from_a_message_takes_linear_time(tmp_path):
    def make(n: int) -> object:
        path = tmp_path / f"{n}"
        path.write_bytes(ENVELOPES[0] + b"Subject: x\n\nbody\n\nFrom x " + b"Mon" * n + b"\n")
        return path

    assert linearity(make, 20_000, detect_format) < 6
