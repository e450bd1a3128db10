"""The `spamnb` command's entry point: a fast road for `classify --pipe`.

procmail runs the filter once per message, so `classify --pipe` with its own
options is parsed here by hand and run without importing click, rich, numpy or
scipy (see table.py).  Every other command line, including a pipe invocation with
options this parser does not know, goes through the click CLI; in pipe mode even a
command line click rejects still delivers the message.
"""

from __future__ import annotations

import sys

# Without importing typing or pathlib, which cost the pipe filter's start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["fast_pipe_options", "is_pipe_invocation", "main"]

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
        name, equals, value = arg.partition("=")
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


def main() -> None:
    args = sys.argv[1:]
    options = fast_pipe_options(args)
    if options is not None:
        from .paths import default_model_file
        from .pipe import EXIT_ERROR, run

        if sys.stdin is None or sys.stdout is None:
            sys.exit(EXIT_ERROR)  # no message to read, or nowhere to write it
        model_path = options.pop("model", None) or default_model_file()
        sys.exit(run(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, model_path, **options))

    import click

    from .cli import main as cli

    if not is_pipe_invocation(args):
        cli(prog_name="spamnb")
        return
    from .pipe import EXIT_ERROR, pass_through

    if sys.stdin is None or sys.stdout is None:
        sys.exit(EXIT_ERROR)
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
    sys.exit(pass_through(b"", sys.stdin.buffer, sys.stdout.buffer, sys.stderr, error))
