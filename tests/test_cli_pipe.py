"""`spamnb classify --pipe`: the mail filter that never loses mail."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import pipe_subprocess, run, without_added_header

from spamnb import tokens
from spamnb.pipe import DEFAULT_MAX_SIZE


def sample_messages(sample_maildir: Path, label: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((sample_maildir / label / "cur").iterdir())]


def test_verdicts_and_exit_codes(model, sample_maildir):
    verdicts = {"spam": [], "ham": []}
    for label in verdicts:
        for message in sample_messages(sample_maildir, label)[:5]:
            result = run("classify", "--pipe", "-m", model, input=message)
            assert without_added_header(result.stdout_bytes, message)
            header = next(
                line for line in result.stdout_bytes.splitlines() if line.startswith(b"X-Spamnb:")
            )
            verdict = header.split(b" ")[1].rstrip(b",").decode()
            assert result.exit_code == {"Spam": 0, "Ham": 1, "Unsure": 2}[verdict]
            assert b"score=" in header and b"version=" in header
            verdicts[label].append(verdict)
    # The model trained on these messages: most should get their own verdict.
    assert verdicts["spam"].count("Spam") >= 4 and verdicts["ham"].count("Ham") >= 4


def test_exit_zero_and_header_name(model, sample_maildir):
    message = sample_messages(sample_maildir, "spam")[0]
    result = run(
        "classify", "-p", "-m", model, "--exit-zero", "--header-name", "X-Junk", input=message
    )
    assert result.exit_code == 0
    assert b"\nX-Junk: " in result.stdout_bytes
    # Ham, whose status is otherwise 1: with a spam message this could not fail.
    ham = sample_messages(sample_maildir, "ham")[0]
    args = ["classify", "-p", "-m", str(model)]
    assert pipe_subprocess(args, ham).returncode == 1
    for done in (
        run(*args, "--exit-zero", input=ham),
        pipe_subprocess([*args, "--exit-zero"], ham),
    ):
        status = getattr(done, "exit_code", getattr(done, "returncode", None))
        assert status == 0
    bad = run("classify", "-p", "-m", model, "--header-name", "Bad Name", input=message)
    assert bad.exit_code != 0


def test_too_large_messages_are_scored_on_their_first_bytes(model, sample_maildir):
    # Padding a spam past the size limit must not let it through unscored.
    spam = sample_messages(sample_maildir, "spam")[0]
    padded = spam + b"\n" + b"lorem ipsum dolor " * 200_000
    result = run("classify", "-p", "-m", model, input=padded)
    assert result.exit_code == 0
    header = next(
        line for line in result.stdout_bytes.splitlines() if line.startswith(b"X-Spamnb:")
    )
    assert header.startswith(b"X-Spamnb: Spam, score=") and b", cut=size, " in header
    assert without_added_header(result.stdout_bytes, padded)
    # The same verdict as the message's first bytes on their own.
    first = run("classify", "-p", "-m", model, input=padded[:DEFAULT_MAX_SIZE])
    assert first.exit_code == result.exit_code


@pytest.mark.parametrize("problem", ["missing", "corrupt", "one-class"])
def test_model_problems_pass_the_message_unchanged(tmp_path, sample_maildir, problem):
    message = sample_messages(sample_maildir, "ham")[1]
    path = tmp_path / "model.joblib"
    if problem == "corrupt":
        path.write_bytes(b"\x80\x04garbage")
    elif problem == "one-class":
        run("train", "-m", path, "--spam", sample_maildir / "spam")
    result = run("classify", "--pipe", "-m", path, input=message)
    assert result.exit_code == 3
    assert result.stdout_bytes == message
    assert len(result.stderr.strip().splitlines()) == 1


def test_tokenizer_crash_passes_the_message_unchanged(model, sample_maildir, monkeypatch):
    def explode(*args, **kwargs):
        raise MemoryError("simulated")

    monkeypatch.setattr(tokens, "tokenize", explode)
    message = sample_messages(sample_maildir, "spam")[2]
    result = run("classify", "--pipe", "-m", model, input=message)
    assert result.exit_code == 3 and result.stdout_bytes == message


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the model is scored apart where there is fork")
def test_a_scorer_that_dies_without_raising_still_delivers_the_mail(
    tmp_path, sample_maildir, monkeypatch
):
    # Without its table the pipe loads the whole model, and numpy's OpenBLAS, out of
    # memory, ended the process from inside the import with the mail unwritten.
    path = tmp_path / "model.joblib"
    run("train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    Path(f"{path}.table").unlink()
    message = sample_messages(sample_maildir, "spam")[1]
    plain = run("classify", "--pipe", "-m", path, input=message)
    assert plain.exit_code == 0 and b"X-Spamnb: Spam" in plain.stdout_bytes

    def die(*args, **kwargs):
        os.write(2, b"libfoo: allocation failed, giving up\n")
        os._exit(1)

    monkeypatch.setattr("spamnb.pipe.score_with_model", die)
    result = run("classify", "--pipe", "-m", path, input=message)
    assert result.exit_code == 3
    assert result.stdout_bytes == message
    (line,) = result.stderr.strip().splitlines()
    assert "ended without a verdict (exit status 1): libfoo: allocation failed" in line


@pytest.mark.parametrize("closed", ["stdin", "stdout"])
def test_a_closed_standard_stream_is_said_and_exit_3(model, closed):
    # The mail program keeps its copy on status 3; stderr says why, as for every error.
    command = [sys.executable, "-m", "spamnb", "classify", "--pipe", "-m", str(model)]
    result = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        pass_fds=(),
        preexec_fn=lambda: os.close(0 if closed == "stdin" else 1),
        check=False,
    )
    assert result.returncode == 3
    word = "input" if closed == "stdin" else "output"
    assert result.stderr.decode() == f"spamnb: standard {word} is closed\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("options", [[], ["--exit-zero"], ["--json"], ["-m", "missing"]])
def test_a_full_disk_is_one_line_and_exit_3(model, sample_maildir, options):
    # The message stayed in stdout's buffer and Python's flush at exit failed on it
    # again: a second message and status 120, hidden by PYTHONUNBUFFERED (review 35).
    # The fast road, click's (--json is refused there) and a failure's pass-through.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    message = sample_messages(sample_maildir, "spam")[0]
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "spamnb", "classify", "--pipe", "-m", str(model), *options],
            input=message,
            stdout=full,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
        )
    assert done.returncode == 3
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("spamnb: cannot write the message: No space left on device")


def test_the_filters_errors_show_control_characters_as_escapes(sample_maildir):
    # A mail program's log is read on a terminal.
    message = sample_messages(sample_maildir, "ham")[0]
    done = pipe_subprocess(["classify", "--pipe", "-m", "no\x1b[31mpe"], message)
    assert done.returncode == 3 and done.stdout == message
    assert b"\x1b" not in done.stderr and b"no\\x1b[31mpe" in done.stderr


def test_empty_input_and_paths_with_pipe(model):
    empty = run("classify", "--pipe", "-m", model, input=b"")
    assert empty.exit_code == 3 and empty.stdout_bytes == b""


def test_a_mistyped_command_line_still_delivers_the_mail(model, sample_maildir):
    message = sample_messages(sample_maildir, "ham")[2]
    for args in (["--no-such-option"], ["--max-size", "lots"], ["extra-path"]):
        done = subprocess.run(
            [sys.executable, "-m", "spamnb", "classify", "--pipe", "-m", str(model), *args],
            input=message,
            capture_output=True,
            check=False,
        )
        assert done.returncode == 3, args
        assert done.stdout == message
        assert len(done.stderr.decode().strip().splitlines()) == 1


def broken_variants(message: bytes, rng: random.Random) -> list[bytes]:
    cut = rng.randrange(1, len(message))
    flipped = bytearray(message)
    for _ in range(20):
        flipped[rng.randrange(len(flipped))] = rng.randrange(256)
    return [
        message[:cut],
        bytes(flipped),
        message.replace(b"\n", b"\r\n"),
        message.replace(b"boundary=", b"boundary=x", 1),
        b"\x00" * 10 + message,
        message.split(b"\n\n", 1)[0],
        message.replace(b"charset=", b"charset=x-bogus-", 1),
    ]


@pytest.mark.corpus
def test_never_lose_mail_on_real_corpus_messages(model, real_corpus):
    corpus = real_corpus("spamassassin")
    files = sorted(p for d in corpus["spam"] + corpus["ham"] for p in d.iterdir() if p.is_file())
    rng = random.Random(7)
    chosen = rng.sample(files, 150)
    inputs = [p.read_bytes() for p in chosen]
    for message in inputs[:30]:
        inputs.extend(broken_variants(message, rng))
    assert len(inputs) >= 300
    for message in inputs:
        result = run("classify", "--pipe", "-m", model, input=message)
        assert result.exit_code in (0, 1, 2, 3)
        if result.exit_code == 3:
            assert result.stdout_bytes == message
        else:
            assert without_added_header(result.stdout_bytes, message), message[:200]


@pytest.mark.parametrize(
    "args",
    [["--help"], ["-h"], ["--version"], ["--max-size", "²"], ["--max-size", "9" * 5000]],
    ids=["help", "h", "version", "superscript-size", "huge-size"],
)
def test_odd_pipe_command_lines_still_deliver_the_mail(model, sample_maildir, args):
    message = sample_messages(sample_maildir, "ham")[3]
    done = pipe_subprocess(["classify", "--pipe", "-m", str(model), *args], message)
    assert (done.returncode, done.stdout) == (3, message)
    assert len(done.stderr.decode().strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [["clasify", "--pipe"], ["classify", "--pip"], ["classify", "--piep"], ["--pipe"]],
    ids=["command-typo", "pip", "piep", "no-command"],
)
def test_a_misspelt_pipe_command_still_delivers_the_mail(model, sample_maildir, args):
    message = sample_messages(sample_maildir, "ham")[3]
    done = pipe_subprocess([*args, "-m", str(model)], message)
    assert (done.returncode, done.stdout) == (3, message)
    assert len(done.stderr.decode().strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args", [["--json"], ["--explain"], ["--alpha", "0.1"], ["--no-word-pairs"]]
)
def test_options_the_pipe_would_ignore_are_refused_and_the_mail_delivered(
    model, sample_maildir, args
):
    message = sample_messages(sample_maildir, "ham")[3]
    done = pipe_subprocess(["classify", "--pipe", "-m", str(model), *args], message)
    assert (done.returncode, done.stdout) == (3, message)
    assert done.stderr.decode().strip().endswith("cannot be used with --pipe")


@pytest.mark.parametrize("size", ["999999999999999", "1000"])
def test_any_max_size_the_filter_takes_holds_only_the_message(model, sample_maildir, size):
    # Reading at most --max-size bytes must not set aside --max-size bytes first.
    message = sample_messages(sample_maildir, "ham")[3]
    done = pipe_subprocess(["classify", "--pipe", "-m", str(model), "--max-size", size], message)
    assert done.returncode in (0, 1, 2), done.stderr
    assert without_added_header(done.stdout, message)


def test_a_misspelt_pipe_at_a_terminal_is_an_ordinary_usage_error(model):
    # No mail waits on a terminal: passing it through would wait for one instead.
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "spamnb", "classify", "--pip", "-m", str(model)],
            stdin=follower,
            capture_output=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2
    assert "No such option" in done.stderr.decode()


def test_pipe_equals_form_is_still_a_pipe(model, sample_maildir):
    message = sample_messages(sample_maildir, "ham")[3]
    done = pipe_subprocess(["classify", "--pipe=1", "-m", str(model)], message)
    assert done.returncode == 3 and done.stdout == message


def test_too_large_messages_stream_through_with_bounded_reads(model, sample_maildir):
    message = sample_messages(sample_maildir, "spam")[4]
    big = message + b"x" * 3_000_000
    done = pipe_subprocess(["classify", "--pipe", "-m", str(model), "--max-size", "1000"], big)
    assert done.returncode in (0, 1, 2)
    assert without_added_header(done.stdout, big)
    assert b", cut=size, version=" in done.stdout[:2000]
    # Even with a header block longer than what is read, nothing lands inside a line.
    long_header = b"X-Long: " + b"y" * 5000 + b"\nSubject: z\n\nbody\n"
    done = pipe_subprocess(
        ["classify", "--pipe", "-m", str(model), "--max-size", "100"], long_header
    )
    assert done.stdout.startswith(b"X-Spamnb: ") and without_added_header(done.stdout, long_header)
    assert b"cut=size" in done.stdout.split(b"\n", 1)[0]


def test_unbuffered_output_is_written_in_full(model, sample_maildir):
    message = sample_messages(sample_maildir, "ham")[0] + b"z" * 2_000_000
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = pipe_subprocess(
        ["classify", "--pipe", "-m", str(model), "--max-size", "99999999"], message, env=env
    )
    assert done.returncode in (0, 1, 2) and without_added_header(done.stdout, message)


@pytest.mark.parametrize("max_size", [DEFAULT_MAX_SIZE, 1000])
def test_non_blocking_pipes_pass_the_whole_message(model, sample_maildir, max_size):
    """A program may hand the filter pipes in non-blocking mode: a read then finds
    nothing for a while before the mail goes on, and a write finds the pipe full."""
    import threading
    import time

    message = sample_messages(sample_maildir, "spam")[0] + b"w" * 300_000
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.set_blocking(stdin_read, False)
    os.set_blocking(stdout_write, False)
    command = ["classify", "--pipe", "-m", str(model), "--max-size", str(max_size)]
    process = subprocess.Popen(
        [sys.executable, "-m", "spamnb", *command],
        stdin=stdin_read,
        stdout=stdout_write,
        stderr=subprocess.PIPE,
    )
    os.close(stdin_read)
    os.close(stdout_write)
    received = []

    def slow_reader():
        time.sleep(0.5)  # the filter's output pipe fills up meanwhile
        while chunk := os.read(stdout_read, 1 << 16):
            received.append(chunk)

    reader = threading.Thread(target=slow_reader)
    reader.start()
    with open(stdin_write, "wb", buffering=0) as feed:
        feed.write(message[:300])
        time.sleep(0.5)  # the filter's first reads find nothing
        feed.write(message[300:])
    reader.join()
    process.wait(timeout=60)
    os.close(stdout_read)
    assert process.returncode in (0, 1, 2), process.stderr.read()
    assert without_added_header(b"".join(received), message)


def test_a_missing_model_is_reported_even_for_large_mail(tmp_path, sample_maildir):
    message = sample_messages(sample_maildir, "ham")[0]
    result = run("classify", "--pipe", "-m", tmp_path / "none", "--max-size", "10", input=message)
    assert result.exit_code == 3 and result.stdout_bytes == message


def test_a_verdict_header_in_the_message_cannot_speak_for_spamnb(model, sample_maildir):
    ham = sample_messages(sample_maildir, "ham")[0]
    # Forged verdicts: first field, odd case, a space before the colon, and one hidden
    # after a broken header line, where mail parsers see body but procmail sees header.
    head, _, body = ham.partition(b"\n\n")
    forged = (
        b"X-Spamnb: Spam, score=1.0000\nx-spamnb : Spam\n"
        + head
        + b"\nthis line breaks the header block\nX-SPAMNB: Spam\n\n"
        + body
    )
    result = run("classify", "--pipe", "-m", model, input=forged)
    assert result.exit_code == 1
    output = result.stdout_bytes
    lines_before_body = output.partition(b"\n\n")[0].splitlines()
    verdicts = [line for line in lines_before_body if line.lower().startswith(b"x-spamnb:")]
    assert len(verdicts) == 1 and verdicts[0].startswith(b"X-Spamnb: Ham, score=")
    previous = [line for line in lines_before_body if b"-Previous" in line]
    assert previous == [
        b"X-Spamnb-Previous: Spam, score=1.0000",
        b"x-spamnb-Previous : Spam",
        b"X-SPAMNB-Previous: Spam",
    ]
    # Nothing else changed: undo the renaming and the added header gives the input.
    restored = output.replace(b"-Previous", b"")
    assert without_added_header(restored, forged)
    # The body is not header: a verdict line there stays as it was.
    in_body = ham + b"\nX-Spamnb: Spam\n"
    assert run("classify", "--pipe", "-m", model, input=in_body).stdout_bytes.endswith(
        b"\nX-Spamnb: Spam\n"
    )


def test_a_verdict_field_past_max_size_is_renamed_too(model):
    """A header section longer than what the filter reads for scoring: a verdict forged
    after that point is renamed all the same (it had gone through as it was)."""
    forged = (
        b"X-Pad: " + b"y" * 200 + b"\nX-Spamnb: Ham\nx-spamnb : Ham\nSubject: s\n\n"
        b"X-Spamnb: Ham stays in the body\n"
    )
    done = pipe_subprocess(["classify", "--pipe", "-m", str(model), "--max-size", "100"], forged)
    assert done.returncode in (0, 1, 2)
    head, _, body = done.stdout.partition(b"\n\n")
    verdicts = [line for line in head.splitlines() if line.lower().startswith(b"x-spamnb")]
    assert verdicts[0].startswith(b"X-Spamnb: ") and b"cut=size" in verdicts[0]
    assert verdicts[1:] == [b"X-Spamnb-Previous: Ham", b"x-spamnb-Previous : Ham"]
    assert body == b"X-Spamnb: Ham stays in the body\n"
    assert without_added_header(done.stdout.replace(b"-Previous", b""), forged)


def test_the_renamed_header_follows_header_name(model, sample_maildir):
    ham = sample_messages(sample_maildir, "ham")[0]
    result = run(
        "classify", "-p", "-m", model, "--header-name", "X-Junk", input=b"X-Junk: yes\n" + ham
    )
    assert result.stdout_bytes.startswith(b"X-Junk-Previous: yes\n")


def test_an_empty_model_path_is_not_the_default_model(model, sample_maildir, tmp_path):
    # -m "" scored with $SPAMNB_MODEL's model, where every other command refuses it.
    message = sample_messages(sample_maildir, "ham")[3]
    environment = {**os.environ, "SPAMNB_MODEL": str(model)}
    done = pipe_subprocess(["classify", "--pipe", "-m", ""], message, env=environment)
    assert (done.returncode, done.stdout) == (3, message)
    assert pipe_subprocess(["classify", "--pipe"], message, env=environment).returncode == 1
