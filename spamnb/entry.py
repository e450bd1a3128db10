"""The `spamnb` command's entry point: a fast road for `classify --pipe`.

procmail runs the filter once per message, so `classify --pipe` with its own
options is parsed here by hand and run without importing click, rich, numpy or
scipy (see table.py).  Every other command line, including a pipe invocation with
options this parser does not know, goes through the click CLI; in pipe mode even a
command line click rejects still delivers the message.
"""

from __future__ import annotations

# io and os are loaded with the interpreter: importing them costs the pipe nothing.
import io
import os
import sys

# Without importing typing or pathlib, which cost the pipe filter's start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["fast_pipe_options", "is_misspelt_pipe", "is_pipe_invocation", "main"]

_VALUE_OPTIONS = {
    "-m": "model",
    "--model": "model",
    "--header-name": "header_name",
    "--max-size": "max_size",
}
_FLAGS = {"--exit-zero": "exit_zero", "--trust-model": "trust"}


def fast_pipe_options(args: Sequence[str]) -> dict[str, Any] | None:
    """The options of a plain `classify --pipe ...` command line, else None."""
    from .pipe import is_field_name

    if not args or args[0] != "classify":
        return None
    options: dict[str, Any] = {}
    pipe = False
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
        else:
            # As click reads a short option: the rest of the word is its value, an
            # equals sign included (-m=PATH is the model "=PATH"; review 9 found this
            # parser and click naming two models for one recipe).
            name, value = arg[:2], arg[2:]
            equals = "=" if value else ""
        if arg in ("-p", "--pipe"):
            pipe = True
        elif arg in _FLAGS:
            options[_FLAGS[arg]] = True
        elif name in _VALUE_OPTIONS and (equals or rest):
            value = value if equals else rest.pop(0)
            options[_VALUE_OPTIONS[name]] = value
        else:
            return None
    if not pipe:
        return None
    if "max_size" in options:
        size = options["max_size"]
        if not (size.isascii() and size.isdigit() and len(size) <= 15 and int(size) >= 1):
            return None
        options["max_size"] = int(size)
    if "header_name" in options and not is_field_name(options["header_name"]):
        return None
    return options


def is_pipe_invocation(args: Sequence[str]) -> bool:
    """Whether the command line asks for `classify --pipe`, however it is spelt."""
    if "classify" not in args:
        return False
    flags = args[args.index("classify") + 1 :]
    short = any(a.startswith("-") and not a.startswith("--") and "p" in a[1:] for a in flags)
    return short or any(a == "--pipe" or a.startswith("--pipe=") for a in flags)


def is_misspelt_pipe(args: Sequence[str]) -> bool:
    """Whether the command line looks like a misspelt `classify --pipe`: `--pipe`
    after another command, or an option one letter from it (`--pip`, `--piep`).
    From procmail the message must still pass through."""
    return any(a.startswith("--") and _near_pipe(a[2:].partition("=")[0]) for a in args)


def _near_pipe(name: str) -> bool:
    """Whether ``name`` is "pipe" or one edit from it (a letter added, dropped,
    changed, or two swapped); no other option of spamnb is."""
    target = "pipe"
    if name == target:
        return True
    if abs(len(name) - len(target)) > 1:
        return False
    if len(name) == len(target):
        differ = [i for i in range(len(name)) if name[i] != target[i]]
        return len(differ) == 1 or (
            len(differ) == 2
            and differ[1] == differ[0] + 1
            and name[differ[0]] == target[differ[1]]
            and name[differ[1]] == target[differ[0]]
        )
    shorter, longer = sorted((name, target), key=len)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def exit_without_streams() -> None:
    """End the pipe filter at once, with status 3, when it has no message to read or
    nowhere to write it: the status tells the mail program to keep its copy, and
    stderr, if open, says why."""
    from .pipe import EXIT_ERROR, say

    if sys.stdin is None or sys.stdout is None:
        say(sys.stderr, f"standard {'input' if sys.stdin is None else 'output'} is closed")
        sys.exit(EXIT_ERROR)


def exit_filter(status: int) -> None:
    """End the pipe filter with ``status``.  Output it could not write (a full disk)
    stays in stdout's buffer, and Python's flush at exit failed on it again: a second
    message, and status 120 in place of 3 (review 35).  Such output is dropped."""
    import os

    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        except OSError:
            pass
    sys.exit(status)


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:
        # Ctrl-C before the command's own handler is in place (its imports take some
        # 60 ms): one line, as after it, not a traceback (review 49: 8 of 80 runs).
        _say_interrupted(is_pipe_invocation(sys.argv[1:]))


def _say_interrupted(pipe: bool) -> None:
    """End with "spamnb: interrupted" and the status of an interrupted command: 130, or
    the filter's 3 (the mail program keeps the message it could not pass on)."""
    if sys.stderr is not None:
        try:
            sys.stderr.write("\nspamnb: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    if pipe:
        exit_filter(3)
    sys.exit(130)


def _main() -> None:
    args = sys.argv[1:]
    options = fast_pipe_options(args)
    if options is not None:
        from .paths import default_model_file
        from .pipe import run

        exit_without_streams()
        model_path = options.pop("model", None)
        if model_path is None:  # an empty -m "" is a wrong path, as for every command
            model_path = default_model_file()
        exit_filter(run(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, model_path, **options))

    import click

    from .cli import main as cli

    # A misspelt pipe at a terminal is an ordinary mistake: no mail is waiting on
    # standard input, and passing it through would wait for one.
    misspelt = is_misspelt_pipe(args) and sys.stdin is not None and not sys.stdin.isatty()
    if not (is_pipe_invocation(args) or misspelt):
        _run_reporting_output_errors(cli)
        return
    from .pipe import pass_through

    exit_without_streams()
    if any(a in ("-h", "--help", "--version") for a in args):
        # Help on stdout would be delivered as the mail: never in pipe mode.
        error = "--help and --version are not available with --pipe"
    else:
        try:
            cli.main(args, prog_name="spamnb", standalone_mode=False)
        except click.ClickException as exc:
            error = exc.format_message()
        except click.exceptions.Abort:
            error = "aborted"
        else:
            error = "the message was not filtered"
    exit_filter(pass_through(b"", sys.stdin.buffer, sys.stdout.buffer, sys.stderr, error))


def _run_reporting_output_errors(cli: Any) -> None:
    """Run the command line, a failure to write its output (a full disk, a terminal
    gone) ending it with one line on stderr and status 1 instead of a traceback.

    click already does this for a closed pipe, and any other error with a file is
    turned into a one-line error where it happens; what reaches here is stdout's.
    """
    import os
    from contextlib import suppress

    if sys.stdout is None:
        # Descriptor 1 closed: click would drop every line, and the status say success.
        if sys.stderr is not None:
            sys.stderr.write("spamnb: cannot write the output: standard output is closed\n")
        sys.exit(1)
    if sys.stderr is None:
        # Descriptor 2 closed (a daemon's "2>&-"): messages go nowhere, as asked.  As
        # None, every progress check failed (nothing done, status 1), and click wrote
        # its errors into the output instead.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until exit
    _write_stdout_whole()
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character (a Latin-1 locale) gets its escape
        # rather than a traceback in place of the report.  In the C locale without
        # UTF-8 mode Python writes ASCII with surrogateescape, which fails the same
        # way on any other character ("±" in evaluate's tables, review 35).
        if getattr(stream, "errors", None) in ("strict", "surrogateescape"):
            with suppress(AttributeError, ValueError):
                stream.reconfigure(errors="backslashreplace")
    try:
        try:
            cli(prog_name="spamnb")
        finally:
            # What is still buffered is written now, inside the try, not at exit.
            if sys.stdout is not None:
                sys.stdout.flush()
    except OSError as exc:
        with suppress(OSError):
            sys.stderr.write(f"spamnb: cannot write the output: {exc.strerror or exc}\n")
        # Nothing more may be written to the broken output when Python exits.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - open until exit
        sys.exit(1)


def _write_stdout_whole() -> None:
    """Put standard output on a writer that writes every byte or raises.

    Python's buffered writer drops what a short write leaves: under a file size limit
    (ulimit -f) or on a disk that fills, `spamnb info > out` wrote 1,024 of its 1,857
    bytes and exited 0 (review 43), where the next write would have said why.  Only
    the real standard output is replaced, keeping its encoding, error handler and line
    buffering; the pipe filter writes through pipe.write_all, which already loops.
    """
    stdout = sys.stdout
    try:
        if stdout is not sys.__stdout__ or stdout.fileno() != 1:
            return
        stdout.flush()
    except (AttributeError, OSError, ValueError):
        return
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_WholeWriter(1)),
        encoding=stdout.encoding,
        errors=stdout.errors,
        line_buffering=stdout.line_buffering,
    )


class _WholeWriter(io.RawIOBase):
    """A raw writer of descriptor ``fd`` whose writes are whole: it loops over short
    writes, waits while a non-blocking descriptor is full, and raises the error that
    stops it.  Closing it leaves the descriptor open."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            try:
                written = os.write(self._fd, view[done:])
            except BlockingIOError:
                import select

                select.select([], [self._fd], [])
                continue
            if not written:  # no progress and no error: an error rather than a hang
                raise OSError(5, "nothing could be written")  # EIO
            done += written
        return done
