"""Helpers for the CLI tests: run spamnb through click's CliRunner."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from spamnb.cli import main


def run(*args: str | Path, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)


def run_json(*args: str | Path, input: bytes | None = None) -> dict:
    result = run(*args, "--json", input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def train_sample(model: Path, maildir: Path, *extra: str | Path, spam: str = "") -> Result:
    """``spamnb train -m MODEL`` on the sample Maildir's spam (or its ``spam``
    subfolder, e.g. "cur") and ham, with ``extra`` options."""
    spam_path = maildir / "spam" / spam if spam else maildir / "spam"
    return run("train", "-m", model, "--spam", spam_path, "--ham", maildir / "ham", *extra)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# The added bytes: a header line with its line end, or (after a last header line that
# had none) a line end and the header.
ADDED = (
    re.compile(rb"X-Spamnb: [^\r\n]*\r?\n"),
    re.compile(rb"\nX-Spamnb: [^\r\n]*"),
    re.compile(rb"\r\nX-Spamnb: [^\r\n]*"),
)


def without_added_header(output: bytes, original: bytes) -> bool:
    """Whether removing one added header from ``output`` gives back ``original``."""
    return any(
        output[: m.start()] + output[m.end() :] == original
        for pattern in ADDED
        for m in pattern.finditer(output)
    )


def forged_verdicts(ham: bytes) -> tuple[bytes, ...]:
    """``ham`` with a sender's own "X-Spamnb: Spam" where a mail filter's rule could read it.

    After a broken header line it is header to procmail though body to a mail parser;
    so it is after a line holding only a carriage return, and in the body of CRLF mail,
    where procmail's header goes on to a bare line feed (review 9).
    """
    head, _, body = ham.partition(b"\n\n")
    crlf_head, crlf_body = head.replace(b"\n", b"\r\n"), body.replace(b"\n", b"\r\n")
    return (
        b"X-Spamnb: Spam\n" + ham,
        head + b"\nnot a header line\nX-Spamnb: Spam\n\n" + body,
        head + b"\n\r\nX-Spamnb: Spam\n\n" + body,
        crlf_head + b"\r\n\r\nX-Spamnb: Spam\r\n" + crlf_body,
    )


def pipe_subprocess(args: list[str], message: bytes, **kwargs) -> subprocess.CompletedProcess:
    """``spamnb ARGS`` in a process of its own, ``message`` on its stdin."""
    return subprocess.run(
        [sys.executable, "-m", "spamnb", *args],
        input=message,
        capture_output=True,
        check=False,
        **kwargs,
    )


def on_a_terminal(
    args: list[str],
    stdout_too: bool = False,
    program: tuple[str, ...] = ("-m", "spamnb"),
    term: str = "xterm",
) -> bytes:
    """What a terminal shows of ``spamnb ARGS`` (or of Python running ``program``):
    its stderr is the terminal, and with ``stdout_too`` so is its stdout (else stdout
    is thrown away)."""
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, *program, *args],
            stdout=follower if stdout_too else subprocess.DEVNULL,
            stderr=follower,
            env={**os.environ, "TERM": term, "COLUMNS": "200"},
        )
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end closed: Linux says EIO
                break
            if not chunk:
                break
            shown += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(leader)
    return shown
