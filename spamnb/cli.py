"""The command line: a thin click layer over the library.

With entry.py, which starts it (or the light pipe filter of pipe.py, which reads and
writes its message itself), this is the only code that touches the terminal.
Results go to stdout (tables for people, ``--json``/TSV for scripts); progress and
messages go to stderr.  Library errors become one-line ``click.ClickException``
errors here, at the edge.  Heavy imports (numpy, scipy, joblib, rich) happen inside
the commands that need them, so starting the program stays cheap.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .pipe import DEFAULT_MAX_SIZE
from .words import printable

if TYPE_CHECKING:
    from rich.console import Console

    from .filter import SpamFilter
    from .mail import MailItem
    from .parallel import BatchCounts
    from .table import TableScorer
    from .tokens import TokenizerSettings
    from .training import LabelledBatch

# Options that take several paths each, as in `--spam a b c --ham d`: shells expand
# `--spam ~/Mail/junk/*` to many words, and users expect that to work.
MULTI_PATH_OPTIONS = ("--spam", "--ham", "--label", "--forget")


class MultiPathCommand(click.Command):
    """A command whose MULTI_PATH_OPTIONS accept one or more values after one flag."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_multi_path_options(args))


def spread_multi_path_options(args: Sequence[str]) -> list[str]:
    """Rewrite `--spam a b --ham c` as `--spam a --spam b --ham c` for click, and
    `--label work=a b` as `--label work=a --label work=b`.

    A value list ends at the next word that starts with '-' (a lone '-' is stdin, a
    value) or at '--'.  After a --label, a word NAME=PATH starts a class (as it always
    has: `--label junk=a work=b` is two classes) and a word without '=' is one more path
    of the class before it; so a path holding '=' is given as NAME=PATH.
    """
    out: list[str] = []
    current: str | None = None
    label_name: str | None = None  # the NAME of the current --label's first value
    for position, arg in enumerate(args):
        if arg == "--":
            out.extend(args[position:])
            return out
        if arg in MULTI_PATH_OPTIONS:
            current, label_name = arg, None
            out.append(arg)
            continue
        flag, equals, value = arg.partition("=")
        if equals and flag in MULTI_PATH_OPTIONS:
            current = flag
            label_name = value.partition("=")[0] if "=" in value else None
            out.append(arg)
            continue
        if current and (arg == "-" or not arg.startswith("-")):
            if current == "--label" and "=" in arg:
                label_name = arg.partition("=")[0]
            elif current == "--label" and label_name is not None:
                arg = f"{label_name}={arg}"
            if out[-1] != current:
                out.append(current)
            out.append(arg)
            continue
        current = None
        out.append(arg)
    return out


# ---------------------------------------------------------------------------
# Terminal
# ---------------------------------------------------------------------------


# Narrower than this, a width from $COLUMNS is taken for a mistake: at 0 rich printed
# nothing at all, and at 10 a table one letter a line.
NARROWEST_TABLES = 20


def _usable_width(console: Console) -> Console:
    if console.width < NARROWEST_TABLES:
        console.width = 80
    return console


@functools.cache
def stdout_console() -> Console:
    from rich.console import Console

    return _usable_width(Console(highlight=False, soft_wrap=False))


@functools.cache
def stderr_console() -> Console:
    from rich.console import Console

    return _usable_width(Console(stderr=True, highlight=False))


@contextmanager
def progress_bar(
    description: str, total: int | None, *, prints_meanwhile: bool = False
) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; otherwise silent.  With no
    total (mail read as it streams), it counts without an end.  A command that
    ``prints_meanwhile`` (a line a message) shows none when its output is on a
    terminal too: the lines are the progress, and each would land on the bar's line."""
    # Ask the stream itself: rich treats FORCE_COLOR as a terminal, and progress codes
    # must never end up in a redirected log.  Asked before rich is imported, which
    # costs 50 ms that a redirected run would spend for nothing.
    if (
        not sys.stderr.isatty()
        or (total is not None and total < 50)
        or (prints_meanwhile and sys.stdout.isatty())
        # A terminal that cannot redraw a line (TERM=dumb or unknown, as Emacs' shell):
        # rich draws no bar there, but left an empty line for each.
        or not stderr_console().is_interactive
    ):
        yield lambda n=1: raise_if_interrupted()
        return
    console = stderr_console()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    global _live_bar
    shown_before = _live_bar
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            raise_if_interrupted()
            progress.advance(task, n)

        _live_bar = progress
        try:
            yield advance
        finally:
            _live_bar = shown_before


# The progress bar on stderr while one is shown: lines for stderr go above it, not
# onto its line (a warning printed mid-run was left beside a piece of the bar;
# review 35).
_live_bar: Any = None


def say_on_stderr(line: str) -> None:
    """One line on stderr, above the progress bar when one is shown."""
    if _live_bar is not None:
        from rich.text import Text

        # A Text, not markup=False: the bar is redrawn with this call's options.
        _live_bar.console.print(Text(line), soft_wrap=True)
    else:
        click.echo(line, err=True)


def one_line(text: str) -> str:
    """``text`` with what a terminal would break or act on (a newline in a path given
    to us, an escape) written as its Python escape, so an error stays one line."""
    return printable(text)


def fail(message: str) -> click.ClickException:
    return click.ClickException(one_line(message))


# ---------------------------------------------------------------------------
# Shared options
# ---------------------------------------------------------------------------


# Paths are checked where they are opened, each failure a line of its own: click's own
# checks (readable, not a folder) end in a usage message of three lines and status 2.
class _GivenPath(click.Path):
    """A path that may not be empty: Path("") is the current folder, and `-m ""` was
    refused as ". is a directory", a folder nobody named (review 43)."""

    def __init__(self, what: str) -> None:
        super().__init__(path_type=Path, readable=False)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:
            if isinstance(param, click.Option):
                name = param.opts[-1]
            else:
                name = param.human_readable_name if param is not None else "a path"
            raise fail(f"{name} is empty; give {self.what}")
        return super().convert(value, param, ctx)


MODEL_PATH = _GivenPath("a model file's path")


def _output_file(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A file evaluate will write, checked before the evaluation runs: a path it could
    not write cost the whole run, its results unprinted."""
    if value is None:
        return None
    option = param.opts[0]
    if not value.strip():
        raise fail(f"{option} needs a file name")
    if value == "-":
        raise fail(f"{option} -: give a file name (/dev/stdout writes to standard output)")
    if value.endswith("/") or os.path.isdir(value):
        raise fail(f"{option} {value}: that names a folder; give a file name")
    path = Path(value)
    if open_descriptor(path) is None:
        folder = os.path.dirname(os.path.realpath(path))
        if not os.path.isdir(folder):
            raise fail(f"cannot write {value}: there is no folder {folder}")
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = True  # not there yet: a new file in the folder
        # A file is replaced through a new one beside it; a device or FIFO is written.
        if regular and not os.access(folder, os.W_OK | os.X_OK):
            raise fail(f"cannot write {value}: {folder} may not be written")
    return path


def _remember_trust(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta["spamnb.trust_model"] = value


def trusting() -> bool:
    context = click.get_current_context(silent=True)
    return bool(context and context.meta.get("spamnb.trust_model"))


def trust_option(func: Callable) -> Callable:
    return click.option(
        "--trust-model",
        is_flag=True,
        expose_value=False,
        callback=_remember_trust,
        help="Load models even if another user owns them, or others may write or replace "
        "them (whoever can change a model decides what it calls spam).",
    )(func)


def model_option(func: Callable) -> Callable:
    func = trust_option(func)
    return click.option(
        "-m",
        "--model",
        "model_path",
        type=MODEL_PATH,
        help="Model file [default: $SPAMNB_MODEL, else $XDG_DATA_HOME/spamnb/model.joblib].",
    )(func)


def reader_options(func: Callable) -> Callable:
    from .mail import FORMATS

    func = click.option(
        "--format",
        "mail_format",
        type=click.Choice(FORMATS),
        help="Read every PATH as this format instead of detecting it.",
    )(func)
    return click.option(
        "--recursive",
        is_flag=True,
        help="Also read the subfolders of a Maildir (its .Name/ Maildir++ folders, or "
        "Maildirs inside it as Dovecot's LAYOUT=fs keeps them) or of an MH folder given "
        "as PATH; a plain folder is always read whole.",
    )(func)


def labelled_path_options(func: Callable) -> Callable:
    for option, metavar, help_text in (
        (
            "--label",
            "NAME=PATH...",
            "Messages of class NAME, for models with other classes; more NAME=PATH, or "
            "PATHs of the same class, may follow.",
        ),
        ("--ham", "PATH...", "Good mail: files, directories, mbox, Maildir or MH ('-': stdin)."),
        ("--spam", "PATH...", "Spam: files, directories, mbox, Maildir or MH ('-': stdin)."),
    ):
        func = click.option(option, multiple=True, metavar=metavar, help=help_text)(func)
    return func


# The model module's EVENT_MODELS, spelt out so that building the CLI does not import
# numpy and scipy (a test keeps the two in step).
EVENT_MODELS = ("multinomial", "boolean", "bernoulli")
FEATURE_SELECTIONS = ("ig", "df")


class FiniteRange(click.FloatRange):
    """click's FloatRange without "nan" and "inf", which float() accepts and every
    comparison with a bound lets through (a weight of nan made a model unloadable)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number", param, ctx)
        return number


# The tokenizer's settings among them are fixed when a model is created.
TOKENIZER_OPTIONS = ("word_pairs", "cjk_pairs", "max_bytes", "max_tokens")
# The tokenizer's settings that are on or off (tokens.SWITCHES), in words.
PAIR_SETTINGS = {"word_pairs": "word pairs", "cjk_pairs": "Chinese and Japanese pairs"}
SCORING_OPTIONS = (
    "event_model",
    "alpha",
    "min_count",
    "max_features",
    "selection",
    "mistake_weight",
)
SCORING_OPTIONS += TOKENIZER_OPTIONS


# The tokenizer's options as their help lists them: each is fixed when a model is made.
_TOKENIZER_OPTION_DECLARATIONS: tuple[tuple[str, dict[str, Any], str], ...] = (
    (
        "--word-pairs/--no-word-pairs",
        {"default": None},
        "Tokenize pairs of adjacent words too; fixed when a model is created [on].",
    ),
    (
        "--cjk-pairs/--no-cjk-pairs",
        {"default": None},
        "Read Chinese and Japanese text, written without spaces, as overlapping pairs of "
        "characters: for mail mostly in those languages; fixed when a model is created [off].",
    ),
    (
        "--max-bytes",
        {"type": click.IntRange(min=0)},
        "Tokenize only the first this many bytes of a larger message (0: all); fixed when a "
        "model is created [1,048,576].",
    ),
    (
        "--max-tokens",
        {"type": click.IntRange(min=0)},
        "Keep at most this many tokens of a message (0: all); fixed when a model is created "
        "[50,000].",
    ),
)


def with_tokenizer_options(command: Callable) -> Callable:
    """The tokenizer's options, each passed to the command by its own name."""
    # click lists a command's options in the reverse of the order they are applied.
    for declaration, settings, help_text in reversed(_TOKENIZER_OPTION_DECLARATIONS):
        command = click.option(declaration, help=help_text, **settings)(command)
    return command


def tokenizer_options_bundle(command: Callable) -> Callable:
    """The tokenizer's options alone, passed to the command as one ``tokenizer`` dict
    (for tune, which makes no model but must read mail as the model will)."""

    @functools.wraps(command)
    def func(*args: Any, **kwargs: Any) -> Any:
        kwargs["tokenizer"] = {name: kwargs.pop(name) for name in TOKENIZER_OPTIONS}
        return command(*args, **kwargs)

    return with_tokenizer_options(func)


def scoring_options(command: Callable) -> Callable:
    """The model's scoring settings, passed to the command as one ``scoring`` dict."""

    @functools.wraps(command)
    def func(*args: Any, **kwargs: Any) -> Any:
        kwargs["scoring"] = {name: kwargs.pop(name) for name in SCORING_OPTIONS}
        return command(*args, **kwargs)

    func = click.option(
        "--mistake-weight",
        type=FiniteRange(min=0, max=1),
        help="Weight of the mistake table (the hard mail, counted as CRM114 trains) "
        "against the counts of all mail; 0 turns it off, and training with 0 leaves it "
        "empty [model's: 0.5].",
    )(func)
    func = with_tokenizer_options(func)
    func = click.option(
        "--select",
        "selection",
        type=click.Choice(FEATURE_SELECTIONS),
        help="How --max-features ranks tokens: information gain or document frequency.",
    )(func)
    func = click.option(
        "--max-features",
        type=click.IntRange(min=0),
        help="Score only this many tokens, the most informative (0: all) [model's: all].",
    )(func)
    func = click.option(
        "--min-count",
        type=click.IntRange(min=1),
        help="Ignore tokens seen fewer times than this in all training mail [model's: 1].",
    )(func)
    func = click.option(
        "--alpha",
        # k=0 is the unsmoothed MLE, where one word unseen in a class vetoes it
        # outright: no use for filtering mail, so the CLI asks for k > 0 (the library
        # allows 0).
        type=FiniteRange(min=0, max=1e6, min_open=True),
        help="Smoothing strength k > 0: 1 is Laplace, below 1 Lidstone [model's: 0.01].",
    )(func)
    return click.option(
        "--event-model",
        type=click.Choice(EVENT_MODELS),
        help="multinomial counts every occurrence of a token, boolean once per message; "
        "bernoulli scores presence and absence [model's: boolean].",
    )(func)


def tokenizer_options_hidden(command: Callable) -> Callable:
    """Leave the tokenizer's options (fixed when a model is created) out of the help of
    a command that only ever reads a model, where they can only be refused."""
    for param in getattr(command, "__click_params__", []):
        if param.name in TOKENIZER_OPTIONS:
            param.hidden = True
    return command


def json_option(func: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


# parallel.BACKENDS, spelt out so that building the CLI does not import numpy.
BACKENDS = ("local", "dask")


def most_local_jobs() -> int:
    """The most worker processes --jobs starts here: the cores this process may use
    (two at least, so that two workers can always be asked for)."""
    from . import usable_cores

    return max(usable_cores(), 2)


def allow_empty_option(done: str) -> Callable[[Callable], Callable]:
    """--allow-empty, for the commands that read folders a user empties (a junk folder
    emptied since the last run, a new/ folder between deliveries)."""
    return click.option(
        "--allow-empty",
        is_flag=True,
        help=f"A folder, mbox or file without messages (a junk folder emptied since the "
        f"last run) {done} instead of being an error.",
    )


def parallel_options(command: Callable) -> Callable:
    """--jobs, --backend and --scheduler, passed to the command as one ``workers`` dict."""

    @functools.wraps(command)
    def func(*args: Any, **kwargs: Any) -> Any:
        workers = {name: kwargs.pop(name) for name in ("jobs", "backend", "scheduler")}
        if workers["backend"] == "dask" and not workers["scheduler"]:
            raise fail("--backend dask needs --scheduler tcp://HOST:PORT")
        if workers["scheduler"] and workers["backend"] != "dask":
            raise fail("--scheduler is for --backend dask")
        # An unset --jobs stays None: the library picks the default when it counts,
        # so parsing the options imports nothing heavy.
        most = most_local_jobs()
        if workers["backend"] == "local" and (workers["jobs"] or 0) > most:
            # Tokenizing is CPU work: workers beyond the cores only cost memory (400
            # of them took 2 GB more, and longer, for 501 messages).
            warn(f"--jobs {workers['jobs']}: this machine gives spamnb {most} cores; using {most}")
            workers["jobs"] = most
        kwargs["workers"] = workers
        return command(*args, **kwargs)

    func = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="With --backend dask: the Dask scheduler, e.g. tcp://10.0.0.5:8786.",
    )(func)
    func = click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default="local",
        show_default=True,
        help="Where batches of mail are tokenized: here, or on a Dask cluster "
        "(needs spamnb[dask]).",
    )(func)
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1),
        help="Processes that tokenize mail (and, to train, count it) in parallel; with "
        "--backend dask, every thread of the cluster does instead [default: every core "
        "on Linux, where workers are forked; elsewhere every core but one].",
    )(func)


# ---------------------------------------------------------------------------
# Helpers shared by the commands
# ---------------------------------------------------------------------------


def resolve_model_path(model_path: Path | None) -> Path:
    from .paths import default_model_path

    return model_path if model_path is not None else default_model_path()


def refuse_an_unusable_folder(path: Path, given: Path | None) -> None:
    """Fail when a model named by -m, $SPAMNB_MODEL or merge's OUTPUT would go into a
    folder that does not exist: a mistyped path made every folder on the way and a
    fresh model there (review 43), as no other writer of a named file does.  Only the
    default place ($XDG_DATA_HOME/spamnb) is made when missing.  And fail at once when
    the folder may not be written (its permissions, a read-only file system, an
    immutable folder): training counted all the mail first and failed only at the
    save (review 49)."""
    from .paths import default_model_file

    # Where the model would be written: a link's target (a link to a folder on a drive
    # not mounted, or to a mistyped path, would have had it made; review 44).
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    if os.path.isdir(folder) and not os.access(folder, os.W_OK):
        raise fail(f"cannot write {path}: its folder {folder} may not be written")
    environ = {name: value for name, value in os.environ.items() if name != "SPAMNB_MODEL"}
    default = default_model_file(environ)
    named = given is not None or bool(os.environ.get("SPAMNB_MODEL"))
    if (not named or real == os.path.realpath(default)) and not os.path.islink(default):
        return  # the default place, named or not, whose folders spamnb makes
    if not os.path.lexists(folder):  # one that is there but no folder: save names it
        raise fail(
            f"cannot write {path}: there is no folder {folder} (spamnb makes only its "
            "default folder; create it first if it is meant)"
        )


def load_filter(model_path: Path | None) -> tuple[SpamFilter, Path]:
    from .store import ModelFileError, load

    path = resolve_model_path(model_path)
    try:
        spam_filter = load(path, trust=trusting())
    except ModelFileError as exc:
        raise fail(str(exc)) from None
    warn_if_old_tokenizer(path, spam_filter.settings.version)
    return spam_filter, path


def load_table_scorer(model_path: Path | None) -> TableScorer | None:
    """A scorer from the scoring table beside the model, or None when the model must
    be loaded instead: no table, or one written by another spamnb or from another
    model file (the model is then loaded, and the next save writes a new table), or a
    damaged one or one that others may write (both said on stderr).  The table is
    checked whole, once: the batches then read most of it.

    The table spares loading the model: with the SpamAssassin corpus's, one message
    took 0.33 s against 1.08 s and 47 MB against 173 MB (2026-11-23, this project's
    2-core machine).  Each batch's distinct tokens must be hashed to be found in it,
    where the model's vocabulary finds them by a dict lookup: 0.03 to 0.15 ms more CPU
    a message.  That never caught up with the load: 25,000 messages took 18.3 s
    either way (medians of three), in 140 MB against 277 MB.
    """
    from .paths import ModelFileError, check_folders, table_path
    from .table import TableScorer, open_table

    path = resolve_model_path(model_path)
    real = os.path.realpath(path)  # the table sits beside the real file
    try:
        if not trusting():
            check_folders(path)  # as given: the links on the way count too
        table, state = open_table(real, table_path(real), trust=trusting())
    except ModelFileError:
        return None  # the model is not trusted: loading it says so, naming the path given
    if table is not None and state == "current":
        try:
            table.check_all()
            scorer = TableScorer(table)
        except (KeyError, IndexError, TypeError, ValueError):
            state = "damaged"
        else:
            warn_if_old_tokenizer(path, scorer.settings.version)
            return scorer
    said = {
        "damaged": "is damaged",
        "untrusted": "belongs to another user or is writable by others",
    }
    if state in said:
        warn(
            f"the scoring table beside {path} {said[state]}; scoring with the model itself "
            "(the next save writes a new table)"
        )
    return None


def warn_if_settings_dropped(path: Path, scoring: Mapping[str, Any]) -> None:
    """Say which tokenizer settings of the model that ``train --new`` replaces, among
    those not given on the command line, the new model will not have, and the option
    that keeps each.

    The settings are fixed when a model is created, and --new creates one from the
    options given: a nightly `train --new` that leaves out --cjk-pairs would otherwise
    turn the pairs off for good without a word.  The old settings come from the
    scoring table beside the model (a read of its header), else from the model itself
    (a model without a spam class has no table; review 44); a model that does not
    load is replaced without a word, as before.
    """
    from .paths import ModelFileError, table_path
    from .store import load
    from .table import TableScorer, open_table

    real = os.path.realpath(path)
    old: TokenizerSettings | None = None
    try:
        table, state = open_table(real, table_path(real), trust=trusting())
        if table is not None and state == "current":
            old = TableScorer(table).settings
    except (ModelFileError, KeyError, IndexError, TypeError, ValueError):
        pass
    if old is None:
        try:
            old = load(path, trust=trusting()).settings
        except ModelFileError:
            return
    given = tokenizer_options(scoring)
    settings = fresh_settings(scoring)
    for name in TOKENIZER_OPTIONS:
        was, now = getattr(old, name), getattr(settings, name)
        if was == now or name in given:
            continue
        flag = name.replace("_", "-")
        if name in PAIR_SETTINGS:
            keep = f"--{flag}" if was else f"--no-{flag}"
            change = f"{PAIR_SETTINGS[name]} {'on' if was else 'off'}; the new one has them "
            change += "on" if now else "off"
        else:
            keep = f"--{flag} {was}"
            change = f"--{flag} {was}; the new one {now}"
        warn(
            f"the model that --new replaces at {path} was made with {change} "
            f"(give {keep} to keep the old setting)"
        )


def warn_if_old_tokenizer(path: Path, version: int) -> None:
    from .tokens import TOKENIZER_VERSION

    if version < TOKENIZER_VERSION:
        warn(
            f"{path} was trained with tokenizer {version}, this spamnb "
            f"tokenizes with {TOKENIZER_VERSION}; retrain it with --new for full accuracy"
        )
    elif version > TOKENIZER_VERSION:
        # --new would throw away a model a newer spamnb made.
        warn(
            f"{path} was trained with tokenizer {version}, newer than this spamnb's "
            f"{TOKENIZER_VERSION}; upgrade spamnb to score it as it was trained"
        )


def labelled_sources(
    spam: Sequence[str], ham: Sequence[str], label: Sequence[str]
) -> list[tuple[str, str]]:
    from . import HAM, SPAM

    pairs = [(SPAM, path) for path in spam] + [(HAM, path) for path in ham]
    for item in label:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise fail(f"--label expects NAME=PATH, got {item!r}")
        if not name.isprintable():
            raise fail(f"--label names must be printable text, got {name!r}")
        pairs.append((name, path))
    for name in dict.fromkeys(name for name, _ in pairs):
        if (meant := near_miss_of_spam_or_ham(name)) is not None:
            # Review 48: "--label Spam=junk" trained a model the pipe then refused, and
            # evaluate reported no spam measures, with nothing said.
            warn(
                f"the class {name!r} is not {meant!r} (class names are exact), so it is a "
                f"class of its own; --{meant} names {meant!r}"
            )
    check_stdin_once([path for _, path in pairs])
    return pairs


def near_miss_of_spam_or_ham(name: str) -> str | None:
    """'spam' or 'ham' when ``name`` is that word in another case or Unicode form."""
    import unicodedata

    from . import HAM, SPAM

    folded = unicodedata.normalize("NFKC", name).casefold()
    return next((meant for meant in (SPAM, HAM) if folded == meant != name), None)


def check_stdin_once(paths: Sequence[str]) -> None:
    if sum(path == "-" for path in paths) > 1:
        raise fail("standard input ('-') can be given only once")


def message_identities() -> Callable[[str], str]:
    """A function giving one name per stored message, however its path was spelt (for
    duplicates).

    A message file is named by its folder's real path, resolved once per folder, and
    its own name, unless that is a symbolic link: resolving each message's path took
    19 microseconds (80 ms in the training process for the 4,232 SpamAssassin
    training messages, where the two workers needed the core) against 3.  The
    folders are resolved for the working directory of the first call: one run's.
    """
    real = functools.cache(os.path.realpath)

    def identity(source: str) -> str:
        if source == "-":
            return source
        try:
            is_link = stat.S_ISLNK(os.lstat(source).st_mode)
        except OSError:  # no such file: a message of an mbox, PATH:N
            path, _, key = source.rpartition(":")
            return f"{real(path)}:{key}"
        if is_link:
            return os.path.realpath(source)
        folder, name = os.path.split(source)
        return os.path.join(real(folder), name)

    return identity


def read_labelled(
    pairs: Sequence[tuple[str, str]], mail_format: str | None, recursive: bool
) -> tuple[list[MailItem], list[str]]:
    """The messages under each labelled path, each stored message once."""
    items: list[MailItem] = []
    labels: list[str] = []
    for item, label in iter_labelled(pairs, mail_format, recursive):
        items.append(item)
        labels.append(label)
    return items, labels


def forget_streaming(
    spam_filter: SpamFilter, paths: Sequence[str], mail_format: str | None, recursive: bool
) -> dict[str, int]:
    """Take the messages under ``paths`` out of the model, a batch at a time; only those
    it learnt are tokenized (``forgotten``), the rest are counted (``unknown``).

    Read whole and tokenized all at once, forgetting a mailbox held every message and
    its tokens (166 MB for 8,000 messages the model had never learnt)."""
    from .mail import message_digests
    from .parallel import BATCH_SIZE, batched

    outcome = {"forgotten": 0, "unknown": 0, "changed": 0}
    seen: set[str] = set()
    items = iter_labelled([("", p) for p in paths], mail_format, recursive)
    with progress_bar("Forgetting", None) as advance:
        for batch in batched(items, BATCH_SIZE):
            known, digests = [], []
            for item, _label in batch:
                digest, older = message_digests(item.data)
                if older and digest not in seen:
                    spam_filter.adopt_digests({digest: older})
                # Every digest the message is held by: a model before format 7 may hold
                # its LF and its CRLF copies apart, and forgetting both forgot one
                # (review 51).  A copy met again is forgotten once.
                fresh = [d for d in (digest, *older) if d not in seen]
                if not fresh:
                    continue
                seen.update(fresh)
                held = [d for d in fresh if d in spam_filter.trained]
                known += [item.data] * len(held)
                digests += held
                if not held and digest in fresh:
                    outcome["unknown"] += 1
            if known:
                done = spam_filter.forget(spam_filter.tokenize(known), digests)
                outcome["forgotten"] += done["forgotten"]
                outcome["changed"] += done["changed"]
            advance(len(batch))
    return outcome


def without_copies(
    items: list[MailItem], labels: list[str], command: str
) -> tuple[list[MailItem], list[str], dict[str, int]]:
    """The messages once each (see evaluation.first_copies), and what was left out;
    fails if that leaves one class of the two or more given, naming the copies as the
    cause (the error ``command`` would give next would not)."""
    from .evaluation import first_copies
    from .mail import message_digest

    kept, kept_labels, copies = first_copies([message_digest(item.data) for item in items], labels)
    remaining = set(kept_labels)
    if len(remaining) < 2 <= len(set(labels)):
        lost = [label for label in dict.fromkeys(labels) if label not in remaining]
        raise fail(
            f"cannot {command}: every {lost[0]!r} message is also filed under another label "
            f"and is used under the one read last, which leaves only the class "
            f"{kept_labels[0]!r}"
        )
    return [items[i] for i in kept], kept_labels, copies


def iter_labelled(
    pairs: Sequence[tuple[str, str]],
    mail_format: str | None,
    recursive: bool,
    *,
    allow_empty: bool = False,
) -> Iterator[tuple[MailItem, str]]:
    """Each stored message under the labelled paths once, with its label, as it is read
    (so that training holds a batch of mail in memory, not the mailbox); with
    ``allow_empty`` a folder or mbox without messages adds none instead of failing."""
    from .mail import (
        MailSourceError,
        NoMessagesFound,
        display_source,
        iter_messages,
        joined_without_blank_lines,
        looks_like_mbox,
        subfolders_left_out,
    )

    skipped: list[str] = []
    seen: dict[str, str] = {}
    message_identity = message_identities()
    repeated = 0
    for label, path in pairs:
        skipped_before = len(skipped)
        try:
            for item in iter_messages(
                path,
                mail_format,
                recursive=recursive,
                stdin=None,  # sys.stdin's, read only for "-" (it is None when closed)
                on_skip=lambda where, why: skipped.append(f"{display_source(where)}: {why}"),
                allow_empty=allow_empty,
            ):
                # Standard input's by name: a file may be called "-:1" too.
                identity = item.source if path == "-" else message_identity(item.source)
                if path == "-" and mail_format is None and looks_like_mbox(item.data):
                    warn(
                        "standard input holds more than one message by an mbox's envelope "
                        "lines; it was read as one (a bounce or a patch can carry such a "
                        "line): --format mbox reads it as an mbox"
                    )
                elif (
                    item.source == path
                    and mail_format is None
                    and (joined := joined_without_blank_lines(path, item.data))
                ):
                    # Review 50: five messages joined by cat were learnt as one.
                    warn(
                        f"{display_source(path)} was read as one message, but it holds "
                        f"{_count(joined, 'more envelope line')}, each with a header field "
                        "after it and no blank line before it, as messages joined together "
                        "have: --format mbox reads it as an mbox"
                    )
                if identity in seen:
                    if seen[identity] != label:
                        raise fail(
                            f"{display_source(item.source)} is given as both "
                            f"{seen[identity]} and {label}"
                        )
                    repeated += 1
                    continue
                seen[identity] = label
                yield item, label
        except MailSourceError as exc:
            # Only finding nothing is explained by what was passed over (review 50: the
            # notes were added to a permission error and to a format given wrongly).
            note = ""
            if isinstance(exc, NoMessagesFound):
                here = len(skipped) - skipped_before  # this path's, not the ones before it
                if here:
                    note = f" ({here:,} skipped as not mail or deleted, e.g. {skipped[-1]})"
                elif not recursive and subfolders_left_out(path, mail_format):
                    note = " (its subfolders are read with --recursive)"
            raise fail(f"{exc}{note}") from None
    if skipped:
        what = "file or message" if len(skipped) == 1 else "files or messages"
        warn(
            f"skipped {len(skipped):,} {what} that could not be read as mail or are "
            f"marked deleted, e.g. {skipped[0]}"
        )
    if repeated:
        warn(f"read {_count(repeated, 'message')} more than once (overlapping paths); counted once")


def _count(n: int, noun: str) -> str:
    """ "1 message", "2 messages"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def forgotten_class_warning(spam_filter: SpamFilter) -> None:
    """Warn of a model written with a side of spam against the rest forgotten whole,
    which would call all mail the other side."""
    if problem := spam_filter.forgotten_class_problem():
        warn(f"{problem}; until then classify and --pipe refuse it")


def waiting_notice(path: Path) -> Callable[[], None]:
    """What train and merge say when another spamnb is writing the model first."""
    return lambda: say_on_stderr(
        f"spamnb: waiting for another spamnb to finish writing {display_path(str(path))}"
    )


def warn(message: str) -> None:
    """One line on stderr, never wrapped, so scripts can grep it."""
    say_on_stderr(f"Warning: {one_line(' '.join(message.split()))}")


def tokenize_with_progress(
    spam_filter: SpamFilter,
    items: Sequence[MailItem],
    description: str,
    workers: Mapping[str, Any] | None = None,
) -> list[list[str]]:
    """Every message's tokens, one string per distinct token (see SpamFilter.tokenize):
    here, or with ``workers`` (a command's --jobs, --backend and --scheduler) a batch at
    a time in worker processes."""
    from .parallel import default_jobs
    from .tokens import share_strings

    # One process tokenizes more cheaply here than a batch at a time (by about 0.6 s
    # of the SpamAssassin corpus's 8, one run each): its strings are shared once, not
    # twice.
    if workers is None or (
        workers["backend"] == "local" and (workers["jobs"] or default_jobs()) == 1
    ):
        with progress_bar(description, len(items)) as advance:
            return spam_filter.tokenize([item.data for item in items], on_each=advance)

    tokenized = mail_in_workers(items, spam_filter.settings, workers, keep_tokens=True)
    # Each batch shares strings within itself; these share them across batches too.
    strings: dict[str, str] = {}
    token_lists: list[list[str]] = []
    with progress_bar(description, len(items)) as advance:
        for batch, counted in tokenized:
            assert counted.token_lists is not None
            token_lists += [share_strings(tokens, strings) for tokens in counted.token_lists]
            advance(len(batch))
    return token_lists


def tokenizer_options(scoring: Mapping[str, Any]) -> dict[str, int]:
    """The tokenizer settings given on the command line."""
    return {name: int(scoring[name]) for name in TOKENIZER_OPTIONS if scoring.get(name) is not None}


def new_tokenizer_options(given: Mapping[str, Any]) -> str:
    """The tokenizer options of ``given`` that a new model needs to read mail so (those
    unlike the defaults), as `spamnb train` takes them, each after a space."""
    from .tokens import DEFAULT_SETTINGS

    words = []
    for name, value in tokenizer_options(given).items():
        if value == getattr(DEFAULT_SETTINGS, name):
            continue
        flag = name.replace("_", "-")
        words.append(
            f"--{flag if value else 'no-' + flag}" if name in PAIR_SETTINGS else f"--{flag} {value}"
        )
    return "".join(" " + word for word in words)


def fresh_settings(scoring: Mapping[str, Any]) -> TokenizerSettings:
    """The tokenizer settings of a model made now: the defaults, but for those given
    on the command line (which apply_scoring_options then finds already set)."""
    from .tokens import DEFAULT_SETTINGS

    return DEFAULT_SETTINGS._replace(**tokenizer_options(scoring))


def apply_scoring_options(spam_filter: SpamFilter, scoring: Mapping[str, Any]) -> None:
    """Set the scoring options given on the command line; the rest stay the model's."""
    given = tokenizer_options(scoring)
    scoring = {name: value for name, value in scoring.items() if name not in TOKENIZER_OPTIONS}
    for name, value in given.items():
        current = getattr(spam_filter.settings, name)
        if value == current:
            continue
        # The vocabulary was counted with the model's tokenizer: only a model that
        # has counted nothing yet can take another.
        if len(spam_filter.vocabulary):
            if name in PAIR_SETTINGS:
                state = f"{PAIR_SETTINGS[name]} {'on' if current else 'off'}"
            else:
                state = f"--{name.replace('_', '-')} {current}"
            raise fail(
                f"this model was trained with {state}; the tokenizer is fixed "
                "when a model is created (train --new starts a new one)"
            )
        spam_filter.settings = spam_filter.settings._replace(**{name: value})
    weight = scoring.pop("mistake_weight", None)
    if weight is not None:
        spam_filter.mistakes.weight = float(weight)
    model = spam_filter.model
    for name, value in scoring.items():
        if value is not None:
            setattr(model, name, value)
    if scoring.get("max_features") == 0:
        model.max_features = None


def print_json(data: Any) -> None:
    click.echo(json.dumps(finite_or_null(data), allow_nan=False))


def finite_or_null(data: Any) -> Any:
    """JSON has no infinities or NaN: an unsmoothed model's certainty becomes null."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite_or_null(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [finite_or_null(value) for value in data]
    return data


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------


# The shell's convention for a program stopped by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


# Whether Ctrl-C was pressed during this command.  Python drops a KeyboardInterrupt
# raised while a fork runs its at-fork callbacks ("Exception ignored in:
# _releaseLock"), so a Ctrl-C just as a worker started was lost and training went on
# to save the model (the Ctrl-C test failed so once in CI).  The flag keeps it for
# raise_if_interrupted, called per batch of progress and before a model is saved.
_interrupted = False


def _on_interrupt(signum: int, frame: Any) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def raise_if_interrupted() -> None:
    if _interrupted:
        raise KeyboardInterrupt


@contextmanager
def interrupts_kept() -> Iterator[None]:
    """Ctrl-C as Python's own handler takes it, also remembered (see _interrupted)."""
    import signal

    global _interrupted
    _interrupted = False
    try:
        previous = signal.signal(signal.SIGINT, _on_interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class InterruptibleGroup(click.Group):
    """Ctrl-C ends any command with one line and status 130, not click's "Aborted!"
    and status 1: scripts and cron wrappers can tell an interruption from a failure.
    Nothing is half-written by then: model files are replaced whole (see store.save)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with interrupts_kept():
                result = super().invoke(ctx)
                raise_if_interrupted()
                return result
        except KeyboardInterrupt as exc:
            when = f" {exc.args[0]}" if exc.args and isinstance(exc.args[0], str) else ""
            click.echo(f"\nspamnb: interrupted{when}", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except MemoryError:
            # One line, as for any failure (a limit set by ulimit or a container);
            # nothing is half-written, as above.
            click.echo("spamnb: out of memory", err=True)
            raise click.exceptions.Exit(1) from None


@click.group(cls=InterruptibleGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spamnb")
def main() -> None:
    """A Naive Bayes spam filter you train on your own mail folders."""


@main.command(cls=MultiPathCommand, short_help="Learn from mail labelled spam or ham.")
@model_option
@labelled_path_options
@reader_options
@scoring_options
@click.option(
    "--forget",
    multiple=True,
    metavar="PATH...",
    help="Take these messages back out of the model (those it never learnt are counted and left).",
)
@click.option(
    "--ham-cutoff",
    type=FiniteRange(0, 1),
    help="Calibrated spam score at or below which --pipe says Ham [chosen from the data].",
)
@click.option(
    "--spam-cutoff",
    type=FiniteRange(0, 1),
    help="Calibrated spam score at or above which --pipe says Spam [chosen from the data].",
)
@click.option("--new", is_flag=True, help="Start a new model instead of adding to an existing one.")
@allow_empty_option("adds none")
@parallel_options
@json_option
def train(
    model_path: Path | None,
    spam: tuple[str, ...],
    ham: tuple[str, ...],
    label: tuple[str, ...],
    mail_format: str | None,
    recursive: bool,
    scoring: dict[str, Any],
    forget: tuple[str, ...],
    ham_cutoff: float | None,
    spam_cutoff: float | None,
    new: bool,
    allow_empty: bool,
    workers: dict[str, Any],
    as_json: bool,
) -> None:
    """Learn from mail labelled spam or ham (or other classes, --label).

    Adds to the model's counts when the model exists (unless --new), so you can
    train on new mistakes without retraining from scratch.  Each message is learnt
    once: run it again on the same folders and only new mail is counted; a message
    trained before under another label is moved.  Scoring options given alone
    (--alpha, --event-model, ...) set how an existing model scores.

    \b
    Example:
      spamnb train -m model.joblib --spam ~/Maildir/.Junk --ham ~/Maildir
    """
    from .store import (
        ModelFileError,
        NotAModelError,
        model_status,
        refuse_to_replace_a_non_model,
        training_lock,
    )

    pairs = labelled_sources(spam, ham, label)
    check_stdin_once([path for _, path in pairs] + list(forget))
    cutoffs = ham_cutoff is not None or spam_cutoff is not None
    # Scoring options alone (tune's advice) are set in the model, as cut-offs are.
    options_only = any(value is not None for value in scoring.values())
    if not pairs and not forget and not cutoffs and not options_only:
        raise fail(
            "give mail to learn from: --spam PATH..., --ham PATH..., or --forget PATH... "
            "(or options to set in the model)"
        )
    check_paths_exist([p for _, p in pairs] + list(forget))
    path = resolve_model_path(model_path)

    def replaceable(model: Path) -> bool:
        try:
            refuse_to_replace_a_non_model(model)
        except ModelFileError:
            return False
        return True

    def refuse_an_empty_model(fresh: bool) -> None:
        # Forgetting or setting cut-offs in a model that is not there: a mistyped path,
        # which would otherwise become an empty model.
        if fresh and not pairs:
            what = "--new starts a model" if new else f"there is no model at {path}"
            raise fail(f"{what}: give mail to learn from (--spam, --ham) to train one")

    try:
        # Before the lock, which would leave its file (and folders) at a mistyped path.
        refuse_an_empty_model(new or model_status(path) is None)
        refuse_an_unusable_folder(path, model_path)
        with training_lock(path, trust=trusting(), on_wait=waiting_notice(path)):
            # Read, add and write under the lock, so concurrent trainers add up.
            fresh = new or model_status(path) is None
            refuse_an_empty_model(fresh)
            settings = fresh_settings(scoring)
            if new and model_status(path) is not None:
                refuse_to_replace_a_non_model(path)
                warn_if_settings_dropped(path, scoring)
            # A new model's tokenizer settings are known before the model is made, so
            # its mail starts being counted first: the workers are forked before this
            # process imports scipy and the model's modules (0.2 s in all), which it
            # then does once the first batch is counted, while the workers count the
            # next ones: on the SpamAssassin training part they were
            # forked at 0.2 s instead of 0.36, and training took 3.67 s against 3.75
            # (medians of ten alternating runs).
            with (
                mail_counted(
                    pairs, settings, mail_format, recursive, workers, allow_empty=allow_empty
                )
                if fresh and pairs and workers["backend"] == "local"
                else nullcontext()
            ) as counted:
                from .filter import SpamFilter
                from .store import load, save

                try:
                    spam_filter = (
                        SpamFilter(settings=settings) if fresh else load(path, trust=trusting())
                    )
                except ModelFileError as exc:
                    # Not for a model refused for its owner or its newer format: --new
                    # would throw a good model away.
                    hint = (
                        " (use --new to replace it)"
                        if isinstance(exc, NotAModelError) and replaceable(path)
                        else ""
                    )
                    raise fail(f"{exc}{hint}") from None
                if not fresh:
                    # The nightly cron job's command: the one place such a user looks.
                    warn_if_old_tokenizer(path, spam_filter.settings.version)
                classes_before = list(spam_filter.classes)
                scored_as = spam_filter.scored_as()
                fitted_as = calibration_fit(spam_filter)
                apply_scoring_options(spam_filter, scoring)
                rescored = spam_filter.scored_as() != scored_as
                outcome: dict[str, Any] = {
                    "learned": 0,
                    "moved": 0,
                    "known": 0,
                    "conflicting": 0,
                    "forgotten": 0,
                    "unknown": 0,
                    "by_class": {},
                    "cut": {"size": 0, "tokens": 0},
                }
                # Messages moved or forgotten whose copy is not the one learnt.
                changed = 0
                held_twice = 0
                if forget:
                    outcome.update(forget_streaming(spam_filter, forget, mail_format, recursive))
                    changed += outcome.pop("changed")
                if pairs:
                    outcome.update(
                        learn_streaming(
                            spam_filter,
                            pairs,
                            mail_format,
                            recursive,
                            workers,
                            counted,
                            allow_empty=allow_empty,
                        )
                    )
                    changed += outcome.pop("changed")
                    held_twice = outcome.pop("held_twice")
                if fresh and not spam_filter.classes:
                    # Every folder was empty (--allow-empty): no model to make of nothing.
                    raise fail(f"no messages found in {', '.join(p for _, p in pairs)}")
                if cutoffs:
                    try:
                        spam_filter.choose_cutoffs(ham_cutoff, spam_cutoff)
                    except ValueError as exc:
                        raise fail(str(exc)) from None
                raise_if_interrupted()
                new_class_warning(classes_before, spam_filter.classes)
                if rescored and calibration_fit(spam_filter) == fitted_as:
                    # Known mail, or a batch too small to refit on, leaves the old fit.
                    stale_calibration_warning(spam_filter)
                size = save(spam_filter, path)
    except ModelFileError as exc:
        raise fail(str(exc)) from None
    by_class = outcome.pop("by_class")
    forgotten_class_warning(spam_filter)
    uncalibrated_warning(spam_filter)
    flat_calibration_warning(spam_filter)
    no_pipe_table_warning(spam_filter, path)
    for warning in cut_warnings(outcome["cut"], spam_filter.settings, "learnt"):
        warn(warning["message"])
    if changed:
        from .tokens import TOKENIZER_VERSION

        # A model of an older tokenizer learnt tokens this one no longer makes: an
        # unchanged copy reads otherwise now, and the copy is not to blame.
        why = (
            f"changed since, or read otherwise by tokenizer {TOKENIZER_VERSION} than by "
            f"tokenizer {spam_filter.settings.version} that learnt it"
            if spam_filter.settings.version < TOKENIZER_VERSION
            else "changed since, say headers added when it was forwarded"
        )
        warn(
            f"{_count(changed, 'message')} moved or forgotten had tokens that the copy learnt "
            f"did not ({why}); the counts taken back are the copy's now, so the model is "
            "near but not exactly as if it had never learnt them (train --new on your "
            "folders rebuilds it)"
        )
    if held_twice:
        warn(
            f"{_count(held_twice, 'message')} had been learnt twice, as copies with other "
            "line ends (by a spamnb before model format 7); the second copy's counts were "
            "taken out"
        )
    if outcome["conflicting"]:
        warn(
            f"{_count(outcome['conflicting'], 'message')} came under two labels in this "
            "run (the same mail in folders of both); each is counted under the label read last"
        )
    summary = {
        "model": str(path),
        **outcome,
        "classes": {
            name: {"trained": by_class.get(name, 0), "total": int(total)}
            for name, total in zip(spam_filter.classes, spam_filter.model.class_counts, strict=True)
        },
        "vocabulary": spam_filter.model.tokens_seen(),
        "model_bytes": size,
    }
    if as_json:
        print_json(summary)
    elif not sys.stdout.isatty():
        # For cron mail and logs: one line, no table.
        click.echo(one_line_summary(summary))
    else:
        from .report import training_summary

        stdout_console().print(training_summary(summary), crop=False)


def no_pipe_table_warning(spam_filter: SpamFilter, path: Path) -> None:
    """Warn that a model of spam and other mail was saved without the pipe filter's
    table: some weights are certainties (an unsmoothed model, k=0, which only the
    library makes), and --pipe cannot score the mail they decide (review 9: train said
    nothing, and the procmail recipe deferred most mail)."""
    from .paths import table_path

    if (
        spam_filter.positive_class() is None
        or spam_filter.scoring_problem() is not None
        or spam_filter.empty_classes()
    ):
        return  # no table is meant for it: said otherwise, or by info
    if os.path.lexists(table_path(os.path.realpath(path))):
        return  # beside the model's real file, where the save writes it
    model = spam_filter.model
    warn(
        f"{path} has no pipe scoring table: with k={model.alpha:g} some of the "
        f"{model.event_model} model's weights are certainties, so --pipe loads the whole "
        "model for every message and gives mail they decide no score (status 3, which the "
        "procmail recipe defers); a larger --alpha (the default is 0.01) makes them "
        "probabilities"
    )


def uncalibrated_warning(spam_filter: SpamFilter) -> None:
    """Warn that a model which can tell spam from ham has no calibrated spam score yet:
    trained one class per run, it never had held-out mail of both to fit one on."""
    calibration = spam_filter.calibration
    if calibration.fitted_on or calibration.chosen_cutoffs:
        return
    if spam_filter.positive_class() is None or len(spam_filter.classes) < 2:
        return
    warn(
        "the spam score is not calibrated yet (--pipe uses the raw probability and "
        "the default cut-offs): a run that brings two or more new messages of each "
        "class fits it, as does train --new on all of your mail"
    )


def flat_calibration_warning(spam_filter: SpamFilter) -> None:
    """Warn that the spam score was fitted flat: held-out spam scored no higher than
    held-out ham, which a map that does not fall can only meet with the base rate."""
    from .calibration import FLAT_SCORE

    calibration = spam_filter.calibration
    if calibration.fitted_on and calibration.slope == 0:
        warn(f"the spam score was {FLAT_SCORE}")


def calibration_fit(spam_filter: SpamFilter) -> tuple[float, float, int]:
    """What a refit of the calibration changes (cut-offs set by hand change apart)."""
    calibration = spam_filter.calibration
    return calibration.slope, calibration.intercept, calibration.fitted_on


def stale_calibration_warning(spam_filter: SpamFilter) -> None:
    """Warn that new scoring options leave the spam score calibrated for the old ones:
    the calibration is fitted on held-out mail, which a model does not keep."""
    if spam_filter.calibration.fitted_on:
        warn(
            "the spam score and its cut-offs stay as fitted under the old options; "
            "train --new on your folders refits them"
        )


def new_class_warning(classes: Sequence[str], now: Sequence[str]) -> None:
    """Warn when mail brought a model of ``classes`` a class it lacked (``now`` are its
    classes after the run): a mistyped --label NAME (or one in other case) would
    otherwise quietly become a class of its own."""
    if not classes:
        return
    for label in now:
        if label in classes or near_miss_of_spam_or_ham(label) is not None:
            continue  # (the latter said when it was given)
        alike = [c for c in classes if c.casefold() == label.casefold()]
        hint = f" (did you mean {alike[0]!r}?)" if alike else ""
        warn(f"added the class {label!r} to the model's {', '.join(map(repr, classes))}{hint}")


def learn_streaming(
    spam_filter: SpamFilter,
    pairs: Sequence[tuple[str, str]],
    mail_format: str | None,
    recursive: bool,
    workers: Mapping[str, Any],
    precounted: Iterator[tuple[LabelledBatch, BatchCounts]] | None = None,
    *,
    allow_empty: bool = False,
) -> dict[str, Any]:
    """Read, count and learn the mail a batch at a time, in parallel as asked; or
    learn what :func:`mail_counted` counts already (``precounted``)."""
    from .training import learn_counted

    with (
        mail_counted(
            pairs, spam_filter.settings, mail_format, recursive, workers, allow_empty=allow_empty
        )
        if precounted is None
        else nullcontext(precounted)
    ) as counted:
        return learn_counted(
            spam_filter,
            counted,
            jobs=workers["jobs"],
            progress=lambda: progress_bar("Learning", None),
        )


@contextmanager
def mail_counted(
    pairs: Sequence[tuple[str, str]],
    settings: TokenizerSettings,
    mail_format: str | None,
    recursive: bool,
    workers: Mapping[str, Any],
    *,
    allow_empty: bool = False,
) -> Iterator[Iterator[tuple[LabelledBatch, BatchCounts]]]:
    """The mail of ``pairs``, in batches counted with tokenizer ``settings`` as
    :func:`training.counting_started` counts them (any workers forked on entering)."""
    from .parallel import batches_for
    from .training import counting_started

    def batches() -> Iterator[tuple[list[bytes], list[str]]]:
        labelled = iter_labelled(pairs, mail_format, recursive, allow_empty=allow_empty)
        for batch in batches_for(
            labelled,
            lambda pair: len(pair[0].data),
            settings,
            jobs=workers["jobs"],
            backend=workers["backend"],
        ):
            yield [item.data for item, _ in batch], [label for _, label in batch]

    with (
        worker_errors_reported(workers),
        counting_started(batches(), settings, **workers) as counted,
    ):
        yield counted


def check_paths_exist(paths: Sequence[str]) -> None:
    """Fail before any work when a path is wrong, not halfway through the mail."""
    from .mail import EMPTY_PATH, display_source

    for path in paths:
        if path == "-":
            continue
        if not path:
            raise fail(EMPTY_PATH)
        try:
            os.stat(path)
        except FileNotFoundError:
            what = "is a broken symbolic link" if os.path.islink(path) else "does not exist"
            raise fail(f"{display_source(path)} {what}") from None
        except OSError as exc:
            # A folder on the way that may not be searched, a name too long, a loop.
            raise fail(f"{display_source(path)}: {(exc.strerror or str(exc)).lower()}") from None


def cut_warnings(cut: Mapping[str, int], settings: Any, done: str) -> list[dict[str, str]]:
    """Warnings (``kind`` ``cut``) when the tokenizer's limits cut messages: the counts
    and rates cannot show it."""
    warnings = []
    if cut["size"]:
        warnings.append(
            f"{cut['size']:,} messages were larger than {settings.max_bytes:,} bytes; "
            f"only their first {settings.max_bytes:,} bytes were {done}"
        )
    if cut["tokens"]:
        warnings.append(
            f"{cut['tokens']:,} messages reached the cap of {settings.max_tokens:,} tokens; "
            f"the rest of their tokens were not {done}"
        )
    return [{"kind": "cut", "message": message} for message in warnings]


def tokenizer_cuts(
    items: Sequence[MailItem], token_lists: Sequence[Sequence[str]], settings: Any
) -> dict[str, int]:
    """How many messages the tokenizer's limits cut, beside the limits themselves."""
    from .tokens import was_capped

    size_limit = settings.max_bytes
    return {
        "size": sum(len(item.data) > size_limit for item in items) if size_limit else 0,
        "tokens": sum(was_capped(tokens, settings) for tokens in token_lists),
        "max_bytes": size_limit,
        "max_tokens": settings.max_tokens,
    }


def one_line_summary(summary: dict[str, Any]) -> str:
    totals = ", ".join(f"{c['total']:,} {name}" for name, c in summary["classes"].items())
    unknown = summary.get("unknown")
    never_trained = f" ({unknown:,} never trained)" if unknown else ""
    return (
        f"spamnb: learned {summary['learned']:,}, moved {summary['moved']:,}, "
        f"skipped {summary['known']:,} known, forgot {summary['forgotten']:,}{never_trained}; "
        f"model {display_path(summary['model'])} has {totals or 'no'} "
        f"message{'' if sum(c['total'] for c in summary['classes'].values()) == 1 else 's'}, "
        f"{summary['vocabulary']:,} tokens"
    )


def display_path(path: str) -> str:
    from .mail import display_source

    return display_source(path)


def _header_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from .pipe import is_field_name

    if not is_field_name(value):
        raise click.BadParameter(f"{value!r} is not a mail header field name")
    return value


@main.command(short_help="Label messages, or filter one as a mail filter (--pipe).")
@model_option
@click.argument("paths", nargs=-1, metavar="PATH...")
@click.option(
    "-p",
    "--pipe",
    is_flag=True,
    help="Filter one message from stdin to stdout with a verdict header added "
    "(exit 0 spam, 1 ham, 2 unsure, 3 error; on any error the message passes unchanged).",
)
@click.option(
    "--header-name",
    default="X-Spamnb",
    show_default=True,
    callback=_header_name,
    help="Name of the header --pipe adds.",
)
@click.option("--exit-zero", is_flag=True, help="With --pipe, exit 0 for every verdict.")
@click.option(
    "--max-size",
    # At most 15 digits, as the pipe's fast path reads it.
    type=click.IntRange(min=1, max=10**15 - 1),
    default=DEFAULT_MAX_SIZE,
    show_default=True,
    help="With --pipe, hold at most this many bytes: a larger message is scored on its "
    "first bytes (its header says cut=size) and passed on whole.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Under each verdict, the tokens that pushed the message most toward spam and "
    "toward the likeliest other class (ham, of two), and what the tokenizer's limits cut; "
    "for a model with a spam class.",
)
@reader_options
@allow_empty_option("prints nothing")
@tokenizer_options_hidden
@scoring_options
@parallel_options
@json_option
def classify(
    model_path: Path | None,
    paths: tuple[str, ...],
    pipe: bool,
    header_name: str,
    exit_zero: bool,
    max_size: int,
    explain: bool,
    mail_format: str | None,
    recursive: bool,
    allow_empty: bool,
    scoring: dict[str, Any],
    workers: dict[str, Any],
    as_json: bool,
) -> None:
    """Label messages: one line each, `LABEL<TAB>SPAM-PROBABILITY<TAB>MESSAGE`.

    MESSAGE is the message's file (mbox: FILE:N), or its Message-ID when read from
    standard input ('-'; '-' itself when it has none).  The probability is that of
    the class 'spam' (for models without one, that of the predicted class).

    With --pipe it is a mail filter for procmail or maildrop instead.
    """
    if pipe:
        if paths:
            raise fail("--pipe reads one message from standard input; give no PATH")
        # The filter scores with the model's own settings, and its output is the mail.
        unused = [
            f"--{name.replace('_', '-')}" for name, value in scoring.items() if value is not None
        ]
        unused += [
            flag
            for flag, given in (
                ("--json", as_json),
                ("--explain", explain),
                ("--allow-empty", allow_empty),
            )
            if given
        ]
        if unused:
            raise fail(f"{', '.join(unused)} cannot be used with --pipe")
        filter_pipe(model_path, header_name, exit_zero, max_size, sys.stdin.buffer)
    # The filter's own options, which labelling would ignore: whoever gives one
    # expects a header or an exit status that never comes (review 43).
    context = click.get_current_context()
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("header_name", "exit_zero", "max_size")
        if context.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    ]
    if given:
        raise fail(f"{', '.join(given)} {'works' if len(given) == 1 else 'work'} only with --pipe")
    if not paths:
        raise fail("give messages to classify: PATH... ('-' for standard input), or --pipe")
    # Labels with the model's own settings come from its scoring table when that is
    # current (see load_table_scorer): the same scores without loading the model.
    table_only = not explain and all(value is None for value in scoring.values())
    scorer = load_table_scorer(model_path) if table_only else None
    spam_filter: SpamFilter | None = None
    if scorer is None:
        spam_filter, _ = load_filter(model_path)
        problem = spam_filter.scoring_problem()
        if problem is not None:
            raise fail(problem)
        apply_scoring_options(spam_filter, scoring)
        if explain and spam_filter.positive_class() is None:
            has = ", ".join(spam_filter.classes)
            raise fail(f"--explain needs a model with a spam class (it has {has})")
    check_stdin_once(paths)
    check_paths_exist(paths)

    # Messages are read, counted and scored a batch at a time (one sparse product, or
    # one search of the table, each), so a folder of any size takes memory for a batch,
    # not for the folder.
    labeller = scorer if scorer is not None else spam_filter
    assert labeller is not None
    counted_batches = mail_in_workers(
        (
            item
            for item, _ in iter_labelled(
                [("", p) for p in paths], mail_format, recursive, allow_empty=allow_empty
            )
        ),
        labeller.settings,
        workers,
        vocabulary=spam_filter.vocabulary if spam_filter is not None else None,
        scorer=scorer,
    )
    with progress_bar("Classifying", None, prints_meanwhile=True) as advance:
        for items, counted in counted_batches:
            if scorer is not None:
                print_verdicts(scorer, items, *counted.scored_by(scorer), as_json)
                advance(len(items))
                continue
            assert spam_filter is not None
            X = counted.in_vocabulary(spam_filter.vocabulary, grow=False)
            explanations = None
            if explain:
                from .counts import cut_flags

                sizes = [len(item.data) for item in items]
                by_size, by_tokens = cut_flags(sizes, counted.lengths, spam_filter.settings)
                tokens = counted.lengths
                explanations = [
                    {
                        "bytes": sizes[row],
                        "tokens": int(tokens[row]),
                        "cut": {"size": bool(by_size[row]), "tokens": bool(by_tokens[row])},
                        **spam_filter.explain(X[row]),
                    }
                    for row in range(len(items))
                ]
            scores = spam_filter.score_matrix(X)
            print_verdicts(spam_filter, items, *scores, as_json, explanations)
            advance(len(items))


@contextmanager
def worker_errors_reported(workers: Mapping[str, Any]) -> Iterator[None]:
    """A worker process's death, Dask missing, or a Dask scheduler that cannot be
    reached, as a one-line error."""
    from .parallel import DASK_BATCH_SECONDS, DaskMissing, DaskUnusable, WorkerDied

    try:
        yield
    except (DaskMissing, DaskUnusable, WorkerDied) as exc:
        raise fail(str(exc)) from None
    except TimeoutError:
        if workers["backend"] != "dask":
            raise
        raise fail(
            f"the Dask cluster did not return a batch within {DASK_BATCH_SECONDS} s "
            "(every worker gone, or the cluster overloaded?)"
        ) from None
    except OSError as exc:
        if workers["backend"] != "dask":
            raise
        raise fail(f"cannot reach the Dask scheduler {workers['scheduler']}: {exc}") from None


def mail_in_workers(
    items: Iterable[MailItem], settings: TokenizerSettings, workers: Mapping[str, Any], **work: Any
) -> Iterator[tuple[list[MailItem], BatchCounts]]:
    """``items`` in batches, each with what ``work`` asks of the workers (see
    ``parallel.counted_in_order``), already started: any workers are forked by now, so
    call this before a progress bar starts its thread."""
    from .parallel import batches_for, counted_in_order, started

    def results() -> Iterator[tuple[list[MailItem], BatchCounts]]:
        batches = batches_for(
            items,
            lambda item: len(item.data),
            settings,
            jobs=workers["jobs"],
            backend=workers["backend"],
        )
        with worker_errors_reported(workers):
            yield from counted_in_order(
                batches, lambda batch: [item.data for item in batch], settings, **work, **workers
            )

    return started(results())


def print_verdicts(
    spam_filter: SpamFilter | TableScorer,
    items: Sequence[MailItem],
    proba: Any,
    log_odds: Any,
    lengths: Any,
    as_json: bool,
    explanations: Sequence[dict[str, Any]] | None = None,
) -> None:
    from .mail import display_source, message_id

    predicted = spam_filter.predict_labels(proba)
    if log_odds is not None:
        score_logit = spam_filter.calibration.decision(log_odds, lengths)
        spam_score = spam_filter.calibration.score(log_odds, lengths)
        verdicts = spam_filter.calibration.verdicts(spam_score)
    positive = spam_filter.positive_class()
    classes = spam_filter.classes
    for row, item in enumerate(items):
        label = predicted[row]
        shown = proba[row, classes.index(positive if positive else label)]
        identifier = message_id(item.data) if item.source == "-" else None
        where = identifier or display_source(item.source)
        if as_json:
            record = {
                "source": item.source,
                "message_id": message_id(item.data),
                "label": label,
                "spam_probability": float(shown) if positive else None,
                "probabilities": {c: float(p) for c, p in zip(classes, proba[row], strict=True)},
                "log_odds": float(log_odds[row]) if log_odds is not None else None,
                "spam_score": float(spam_score[row]) if log_odds is not None else None,
                "spam_score_logit": float(score_logit[row]) if log_odds is not None else None,
                "verdict": verdicts[row] if log_odds is not None else None,
            }
            if explanations is not None:
                record["explanation"] = explanations[row]
            print_json(record)
        else:
            click.echo(f"{label}\t{shown:.4f}\t{where}")
            if explanations is not None:
                for line in explanation_lines(explanations[row], spam_filter):
                    click.echo(f"    {line}")


def explanation_lines(explanation: Mapping[str, Any], spam_filter: SpamFilter) -> list[str]:
    """--explain's lines under a verdict; tokens come from the mail, so they are shown
    escaped: a token must not be able to move the cursor or recolour the terminal."""
    settings = spam_filter.settings
    lines = []
    if explanation["cut"]["size"]:
        lines.append(
            f"cut: only the first {settings.max_bytes:,} of its {explanation['bytes']:,} "
            "bytes were read"
        )
    if explanation["cut"]["tokens"]:
        lines.append(f"cut: its tokens stop at the cap of {settings.max_tokens:,}")
    # Against the one class: with three or more, the verdict's log-odds are of spam
    # against all the rest, which these tokens do not add up to.
    lines.append(
        f"{explanation['tokens']:,} tokens, {explanation['known_tokens']:,} known to the "
        f"model; log-odds {explanation['log_odds']:+.2f} (spam against "
        f"{explanation['against']})"
    )
    if abs(explanation["other_terms"]) >= 0.005:
        lines.append(
            f"from no token: {explanation['other_terms']:+.2f} (the class prior; with "
            "bernoulli, the words it lacks)"
        )
    for key, toward in (("toward_spam", "spam"), ("toward_other", explanation["against"])):
        shown = ", ".join(
            f"{printable(entry['token'])} {entry['log_odds']:+.2f}" for entry in explanation[key]
        )
        lines.append(f"toward {toward}: {shown or '(none)'}")
    return lines


@main.command(cls=MultiPathCommand)
@model_option
@labelled_path_options
@reader_options
@scoring_options
@click.option(
    "--test-size",
    type=FiniteRange(0, 1, min_open=True, max_open=True),
    help="Split the mail (stratified), train a new model on the rest, test on this share.",
)
@click.option(
    "--folds",
    type=click.IntRange(min=2),
    help="Cross-validate instead: K stratified folds, each scored by a model trained on the "
    "other K-1.",
)
@click.option(
    "--online",
    is_flag=True,
    help="The TREC online protocol: classify each message in order, then train on it.",
)
@click.option(
    "--index",
    "index_path",
    type=_GivenPath("the index file's path"),
    help="With --online: a TREC index file (lines 'spam PATH', paths relative to it) giving "
    "the labels and the order.",
)
@click.option(
    "--order",
    type=click.Choice(("name", "date")),
    help="With --online and --spam/--ham: file names in natural order (Enron-Spam's "
    "numbered 0001.1999-12-10.farmer.ham.txt) or the Date header.  [default: name]",
)
@click.option(
    "--compare",
    "compare_text",
    metavar="SET,SET...",
    help="Run option sets on the same folds and test the difference (McNemar), e.g. "
    "'boolean,multinomial' or 'boolean k=0.01,bernoulli k=1,no-pairs'.",
)
@click.option(
    "--learning-curve",
    is_flag=True,
    help="Also accuracy and ROC AUC against the number of training messages, per event model.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(readable=False),
    callback=_output_file,
    help="Write a self-contained HTML report with the tables and plots (needs spamnb[report]).",
)
@click.option(
    "--predictions",
    "predictions_path",
    type=click.Path(readable=False),
    callback=_output_file,
    help="Write each tested message's verdict as TSV (see the README for the columns).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the split or the folds.",
)
@parallel_options
@json_option
def evaluate(
    model_path: Path | None,
    spam: tuple[str, ...],
    ham: tuple[str, ...],
    label: tuple[str, ...],
    mail_format: str | None,
    recursive: bool,
    scoring: dict[str, Any],
    test_size: float | None,
    folds: int | None,
    online: bool,
    index_path: Path | None,
    order: str | None,
    compare_text: str | None,
    learning_curve: bool,
    report_path: Path | None,
    predictions_path: Path | None,
    seed: int,
    workers: dict[str, Any],
    as_json: bool,
) -> None:
    """Measure accuracy on labelled mail.

    With a model (-m) it scores all the given mail.  With --test-size it splits the
    mail, trains a new model on one part and reports on the other, never looking at
    the test part while training.  With --folds K it cross-validates: every message
    is scored by a model trained on the other folds, and the report pools them.  With
    --online it replays the mail in order, as a filter meets it: each message is
    classified, then trained on.
    """
    protocols = [
        name
        for name, given in (
            ("-m/--model", model_path is not None),
            ("--test-size", test_size is not None),
            ("--folds", folds is not None),
            ("--online", online),
        )
        if given
    ]
    if len(protocols) > 1:
        raise fail(f"{' and '.join(protocols)} are different ways to test; give one of them")
    if index_path is not None and not online:
        raise fail("--index gives the order of --online; add --online")
    if order is not None and not online:
        raise fail("--order gives the order of --online; add --online")
    if order is not None and index_path is not None:
        raise fail("--index gives the order itself; leave out --order")
    if online and scoring.get("mistake_weight") is not None:
        raise fail(
            "the online protocol scores with the Naive Bayes alone (each message is a "
            "training run of one class, which never starts the mistake table); leave out "
            "--mistake-weight"
        )
    option_sets = None if compare_text is None else parse_option_sets(compare_text, scoring)
    if option_sets and (model_path is not None or online):
        raise fail(
            "--compare trains its own models on folds or a split; use --folds or --test-size"
        )
    if option_sets and folds is None and test_size is None:
        folds = 5
    if model_path is not None and learning_curve:
        raise fail("--learning-curve trains its own models; leave out -m/--model")
    pairs = labelled_sources(spam, ham, label)
    if index_path is not None:
        if pairs:
            raise fail("--index names the messages and their labels; leave out --spam/--ham")
        pairs = index_sources(index_path)
    if not pairs:
        raise fail("give labelled mail: --spam PATH..., --ham PATH...")
    if report_path is not None:
        check_report_dependency()
    spam_filter: SpamFilter | None = None
    rescored = False  # a model scored with options other than its own
    if model_path is not None or not (protocols or option_sets):
        if model_path is None and not os.path.lexists(resolve_model_path(None)):
            # Most likely a protocol left out, not a model to be trained first.
            raise fail(
                f"no model at {resolve_model_path(None)}: give --test-size, --folds or "
                "--online to train and test on this mail, or -m MODEL to test a model"
            )
        # Load the model before reading any mail: a wrong -m should fail at once.
        spam_filter, path = load_filter(model_path)
        if problem := spam_filter.forgotten_class_problem():
            # Its verdicts are certainties of the classes with mail: no test of a filter.
            raise fail(problem)
        scored_as = spam_filter.scored_as()
        apply_scoring_options(spam_filter, scoring)
        rescored = spam_filter.scored_as() != scored_as
    inputs = [p for _, p in pairs] + [str(p) for p in (index_path,) if p is not None]
    if spam_filter is not None:
        inputs += [str(path), f"{path}.table"]
    for option, output in (("--predictions", predictions_path), ("--report", report_path)):
        if output is not None and (given := output_among_inputs(output, inputs)):
            if os.path.realpath(output) == os.path.realpath(given):
                where = "over"
            else:
                where = "over a file in" if os.path.exists(output) else "into"
            raise fail(f"{option} {output} would write {where} {given}, which this run reads")
    if (
        predictions_path is not None
        and report_path is not None
        and open_descriptor(predictions_path) is None
        and os.path.realpath(predictions_path) == os.path.realpath(report_path)
    ):
        # The report was written last, over the predictions (review 20).
        raise fail(f"--predictions and --report both name {predictions_path}")
    items, labels = read_labelled(pairs, mail_format, recursive)
    copies = {"copies": 0, "relabelled": 0}
    if spam_filter is None and not online:
        items, labels, copies = without_copies(items, labels, "evaluate")
    try:
        report, scored, trained, token_lists = run_evaluation(
            items,
            labels,
            spam_filter,
            scoring,
            test_size=test_size,
            folds=folds,
            online=online,
            order="index" if index_path is not None else order or "name",
            option_sets=option_sets,
            seed=seed,
            workers=workers,
        )
        if spam_filter is not None:
            # Scores on mail the model learnt are no test of it: say how much there is.
            in_model = sum(spam_filter.label_of(item.data) is not None for item in items)
            report["protocol"] = {
                "mode": "model",
                "model": str(path),
                "train_n": int(spam_filter.model.class_counts.sum()),
                "in_model": in_model,
                "description": f"All {len(items):,} messages scored with the model {path}.",
            }
        report["protocol"].update(trained.scoring_settings())
        if online:
            # Each message is a training run of one class, so the table never starts.
            report["protocol"]["mistake_weight"] = 0.0
        curve_problem = ""
        if learning_curve or (report_path is not None and spam_filter is None):
            curve_lists, curve_labels = token_lists, labels
            if online:
                # The online run meets copies as mail arrives; the curve is a split,
                # where a message must not be tested on a model trained on its copy.
                from .evaluation import first_copies
                from .mail import message_digest

                kept, curve_labels, _ = first_copies(
                    [message_digest(item.data) for item in items], labels
                )
                curve_lists = [token_lists[i] for i in kept]
            try:
                report["learning_curve"] = learning_curve_rows(
                    curve_lists, curve_labels, trained, test_size, seed
                )
            except ValueError as exc:
                if learning_curve:
                    raise ValueError(f"the learning curve's own split: {exc}") from None
                # Drawn only because a report was asked for: the rest of it stands.
                curve_problem = str(exc)
    except ValueError as exc:
        raise fail(f"cannot evaluate: {exc}") from None
    from .evaluation import (
        copies_warning,
        in_model_warning,
        order_warning,
        report_warnings,
        score_warnings,
        top_odds_section,
    )

    top_odds = top_odds_section(trained)
    if top_odds:
        report["top_odds"] = top_odds
    report["cut"] = tokenizer_cuts(items, token_lists, trained.settings)
    report["copies"] = copies
    # Of the tested messages (a split's test part): one error moves their rates.
    tested = report_warnings(scored.labels, top_odds, intervals="intervals" in report)
    report["warnings"] = tested + cut_warnings(report["cut"], trained.settings, "used")
    if warning := copies_warning(copies):
        report["warnings"].append(warning)
    if warning := in_model_warning(report["protocol"].get("in_model", 0), len(items)):
        report["warnings"].append(warning)
    if online and (warning := order_warning(scored.labels, report["protocol"]["order"])):
        report["warnings"].append(warning)
    report["warnings"] += score_warnings(report, rescored=rescored)
    if curve_problem:
        report["warnings"].append(
            {
                "kind": "learning-curve",
                "message": f"the report has no learning curve: {curve_problem}",
            }
        )
    if predictions_path is not None:
        write_predictions(predictions_path, items, scored)
    if report_path is not None:
        write_report(report_path, report)
    if as_json:
        print_json(report)
        return
    for warning in report["warnings"]:
        warn(warning["message"])
    from .report import evaluation_report as render

    stdout_console().print(render(report), crop=False)


def run_evaluation(
    items: Sequence[MailItem],
    labels: list[str],
    spam_filter: SpamFilter | None,
    scoring: Mapping[str, Any],
    *,
    test_size: float | None,
    folds: int | None,
    online: bool,
    order: str,
    option_sets: Sequence[Any] | None,
    seed: int,
    workers: Mapping[str, Any],
) -> tuple[dict[str, Any], Any, SpamFilter, list[list[str]]]:
    """The chosen protocol: its report, the tested messages' outcomes, a filter
    trained as the protocol trains (for the top-odds tables and the settings shown)
    and the token lists it read (by ``workers``, see tokenize_with_progress)."""
    from .evaluation import (
        compare_option_sets,
        evaluate_folds,
        evaluate_model,
        evaluate_online,
        evaluate_split,
    )
    from .filter import SpamFilter

    def new_filter(extra: Mapping[str, Any] | None = None) -> Callable[[], SpamFilter]:
        def make() -> SpamFilter:
            made = SpamFilter()
            apply_scoring_options(made, scoring)
            if extra:
                apply_scoring_options(made, extra)
            return made

        return make

    if spam_filter is not None:
        token_lists = tokenize_with_progress(spam_filter, items, "Scoring", workers)
        report, scored = evaluate_model(spam_filter, token_lists, labels)
        return report, scored, spam_filter, token_lists
    if option_sets:
        tokenized: dict[Any, list[list[str]]] = {}

        def tokens_for(option_set: Any) -> list[list[str]]:
            # Sets of the same tokenizer share one reading of the mail: by the settings
            # each set makes, with the options outside --compare and the defaults.
            made = new_filter(option_set.options)()
            if made.settings not in tokenized:
                tokenized[made.settings] = tokenize_with_progress(
                    made, items, f"Reading ({option_set.name})", workers
                )
            return tokenized[made.settings]

        for option_set in option_sets:
            # Before the Comparing bar starts its thread: the workers may be forked.
            tokens_for(option_set)
        with progress_bar("Comparing", len(labels) * len(option_sets)) as advance:
            runs, compare = compare_option_sets(
                option_sets,
                tokens_for,
                labels,
                lambda option_set: new_filter(option_set.options),
                folds=folds,
                test_size=test_size,
                seed=seed,
                on_step=advance,
            )
        report, scored = runs[0]
        report["compare"] = compare
        first = tokens_for(option_sets[0])
        trained = train_on_all(new_filter(option_sets[0].options)(), first, labels)
        return report, scored, trained, first
    settings = new_filter()()
    token_lists = tokenize_with_progress(settings, items, "Reading", workers)
    if test_size is not None:
        report, scored, trained = evaluate_split(token_lists, labels, test_size, seed, new_filter())
        return report, scored, trained, token_lists
    if folds is not None:
        with progress_bar("Cross-validating", len(labels)) as advance:
            report, scored = evaluate_folds(
                token_lists, labels, folds, seed, new_filter(), on_step=advance
            )
    else:
        message_order = online_order(items, order)
        with progress_bar("Online", len(labels)) as advance:
            report, scored = evaluate_online(
                token_lists, labels, message_order, settings, order, on_step=advance
            )
    return report, scored, train_on_all(settings, token_lists, labels), token_lists


def train_on_all(
    spam_filter: SpamFilter, token_lists: Sequence[Sequence[str]], labels: Sequence[str]
) -> SpamFilter:
    spam_filter.train_tokens(token_lists, labels)
    return spam_filter


def online_order(items: Sequence[MailItem], order: str) -> Any:
    import numpy as np

    from .online import order_by_date, order_by_name

    if order == "index":
        return np.arange(len(items))
    if order == "date":
        from .mail import date_header

        return order_by_date([date_header(item.data) for item in items])
    return order_by_name([item.source for item in items])


def output_among_inputs(output: Path, inputs: Sequence[str]) -> str | None:
    """The input that writing ``output`` would replace: a file given, one inside a
    folder given, or the model or its table; None if none.  A mistyped --predictions
    had replaced the model evaluated, or a message of the mail."""
    if open_descriptor(output) is not None:
        return None  # standard output or a descriptor, no file
    target = os.path.realpath(output)
    for given in inputs:
        if given == "-":
            continue
        where = os.path.realpath(given)
        if target == where or target.startswith(where.rstrip(os.sep) + os.sep):
            return given
    return None


def index_sources(index_path: Path) -> list[tuple[str, str]]:
    """The (label, path) pairs of a TREC index file, paths relative to its folder."""
    from .online import parse_trec_index

    try:
        text = index_path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise fail(f"cannot read the index {index_path}: {exc.strerror or exc}") from None
    try:
        entries = parse_trec_index(text)
    except ValueError as exc:
        raise fail(f"{index_path}: {exc}") from None
    if not entries:
        raise fail(f"{index_path} lists no messages")
    base = index_path.parent
    return [(label, str(base / relative)) for label, relative in entries]


def learning_curve_rows(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    trained: SpamFilter,
    test_size: float | None,
    seed: int,
) -> list[dict[str, Any]]:
    from .filter import SpamFilter
    from .scores import stratified_split
    from .tuning import learning_curve

    def new_filter() -> SpamFilter:
        made = SpamFilter(settings=trained.settings)
        for name in ("event_model", "alpha", "min_count", "max_features", "selection"):
            setattr(made.model, name, getattr(trained.model, name))
        made.mistakes.weight = trained.mistakes.weight
        return made

    train_idx, test_idx = stratified_split(labels, test_size or 0.3, seed)
    return learning_curve(
        token_lists,
        labels,
        train_idx,
        test_idx,
        alpha=trained.model.alpha,
        seed=seed,
        new_filter=new_filter,
    )


def write_predictions(path: Path, items: Sequence[MailItem], scored: Any) -> None:
    """One line per tested message, in the order scored: position, source, true and
    predicted label, spam probability, ranking score and calibrated spam score."""
    from .mail import display_source

    spam_probability = scored.spam_probability()
    lines = ["position\tsource\tlabel\tpredicted\tspam_probability\tdecision\tspam_score"]
    for row, index in enumerate(scored.indices):
        cells = [
            str(row + 1),
            display_source(items[index].source),
            scored.labels[row],
            scored.predicted[row],
        ]
        for values in (spam_probability, scored.decision, scored.score):
            # Every digit the number has (repr's shortest form that reads back the same
            # float): six significant digits wrote every score above 0.9999995 as 1,
            # where tune's cut-offs have six decimals (review 20).
            cells.append("" if values is None else repr(float(values[row])))
        lines.append("\t".join(cells))
    write_text_atomically(path, "\n".join(lines) + "\n")


def check_report_dependency() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise fail("--report draws with matplotlib: pip install matplotlib (spamnb's report extra)")


def write_report(path: Path, report: dict[str, Any]) -> None:
    from .html_report import ReportDependencyError, render_html

    try:
        page = render_html(finite_or_null(report))
    except ReportDependencyError as exc:
        raise fail(str(exc)) from None
    write_text_atomically(path, page)


# The names by which a shell user means an open descriptor of this process.
OPEN_DESCRIPTORS = {"/dev/stdout": 1, "/dev/stderr": 2}
DESCRIPTOR_PATH = re.compile(r"/(?:dev|proc/self)/fd/([0-9]{1,9})")


def open_descriptor(path: Path) -> int | None:
    """The descriptor ``path`` names (``/dev/stdout``, ``/dev/fd/3``), if it names one.

    Opened by name, they are the wrong thing twice over: under a pipe, Linux resolves
    /dev/stdout to "pipe:[N]", which no file is, and under ``> file`` the rename of an
    atomic write put a new file over the one the shell had opened, and the rest of
    the output (the report itself) was lost.
    """
    text = os.fspath(path)
    if text in OPEN_DESCRIPTORS:
        return OPEN_DESCRIPTORS[text]
    match = DESCRIPTOR_PATH.fullmatch(text)
    return int(match.group(1)) if match else None


def write_to_descriptor(descriptor: int, data: bytes) -> None:
    """``data`` written at the descriptor's own position, after what Python buffered
    for the same stream."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def write_text_atomically(path: Path, text: str) -> None:
    """Write next to the target and rename, so a reader never sees half a file.

    A symlink is followed and its target replaced, keeping its permissions (a new file
    is private: what it reports comes from the user's mail), and a device or a FIFO is
    written to as it is, never replaced by a file.  ``/dev/stdout``, ``/dev/stderr`` and
    ``/dev/fd/N`` are written through the descriptor this process already has (see
    :func:`open_descriptor`).  File names that are not UTF-8 are written as their bytes.
    """
    import stat
    import tempfile

    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file name made
        data = text.encode("utf-8", "backslashreplace")
    descriptor = open_descriptor(path)
    if descriptor is not None:
        try:
            write_to_descriptor(descriptor, data)
        except BrokenPipeError:
            raise  # the reader went away: click ends the command quietly (review 20)
        except OSError as exc:
            raise fail(f"cannot write {path}: {exc.strerror or exc}") from None
        return
    target = Path(os.path.realpath(path))
    try:
        try:
            mode = target.stat().st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            with open(target, "wb") as out:
                out.write(data)
            return
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(descriptor, "wb") as out:
                if mode is not None:  # else private (mkstemp's 0600), as a new model is
                    os.fchmod(out.fileno(), stat.S_IMODE(mode))
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None


# Words of a --compare set other than key=value pairs.
PAIR_WORDS = {
    "pairs": ("word_pairs", True),
    "no-pairs": ("word_pairs", False),
    "cjk-pairs": ("cjk_pairs", True),
    "no-cjk-pairs": ("cjk_pairs", False),
}
SET_KEYS = {
    "k": ("alpha", float),
    "alpha": ("alpha", float),
    "min-count": ("min_count", int),
    "max-features": ("max_features", int),
    "select": ("selection", str),
    "mistakes": ("mistake_weight", float),
}


def parse_option_sets(text: str, scoring: Mapping[str, Any]) -> list[Any]:
    """`--compare` sets: comma-separated; each is words such as `boolean`, `k=0.1`,
    `min-count=2`, `max-features=50000`, `select=df`, `mistakes=0`, `pairs` or
    `no-pairs`, `cjk-pairs` or `no-cjk-pairs`, over the options ``scoring`` given
    outside them."""
    from .evaluation import OptionSet
    from .filter import SpamFilter

    sets = []
    for part in text.split(","):
        # "+" joins words as a blank does (no quoting needed), but not as a number's
        # sign: "k=+1" is k of +1 (split there, the value was named "k="; review 43),
        # and "k=1e+2" is 100.
        words = [word for word in re.split(r"\s+|(?<![\d.][eE])(?<!=)\+", part) if word]
        if not words:
            raise fail(f"--compare: empty option set in {text!r}")
        options: dict[str, Any] = {}
        for word in words:
            key, equals, value = word.partition("=")
            if not equals:
                if word in EVENT_MODELS:
                    name, given = "event_model", word
                elif word in PAIR_WORDS:
                    name, given = PAIR_WORDS[word]
                else:
                    raise fail(
                        f"--compare: unknown option {word!r}; use an event model "
                        f"({', '.join(EVENT_MODELS)}), {', '.join(PAIR_WORDS)} or "
                        f"KEY=VALUE with KEY one of {', '.join(SET_KEYS)}"
                    )
                if name in options:
                    # The last would win silently, and the set's name would promise both.
                    what = PAIR_SETTINGS.get(name, name.replace("_", " "))
                    raise fail(f"--compare: {part.strip()!r} gives the {what} twice")
                options[name] = given
                continue
            if key not in SET_KEYS:
                raise fail(f"--compare: unknown option {key!r}; use one of {', '.join(SET_KEYS)}")
            name, convert = SET_KEYS[key]
            if name in options:
                raise fail(f"--compare: {part.strip()!r} gives {key!r} twice")
            if not value:
                raise fail(f"--compare: {part.strip()!r}: {key}= needs a value right after the '='")
            try:
                converted = convert(value)
            except ValueError:
                raise fail(f"--compare: {word!r} is not a valid {key}") from None
            if name == "alpha" and not (math.isfinite(converted) and 0 < converted <= 1e6):
                raise fail(f"--compare: {word!r}: k must be a number > 0")
            if name in ("min_count",) and converted < 1:
                raise fail(f"--compare: {word!r}: min-count must be 1 or more")
            if name == "max_features" and converted < 0:
                raise fail(f"--compare: {word!r}: max-features must be 0 (all) or more")
            if name == "mistake_weight" and not 0 <= converted <= 1:
                raise fail(f"--compare: {word!r}: the mistake table's weight is from 0 to 1")
            if name == "selection" and converted not in FEATURE_SELECTIONS:
                raise fail(f"--compare: {word!r}: select is one of {', '.join(FEATURE_SELECTIONS)}")
            options[name] = converted
        sets.append(OptionSet(" ".join(words), tuple(options.items())))
    if len(sets) < 2:
        raise fail("--compare needs at least two option sets, separated by commas")
    # By what each set scores with, not by its words: 'k=1' and 'alpha=1', or 'boolean'
    # and 'boolean k=0.01' where 0.01 is k anyway, would be compared with themselves.
    named: dict[tuple, str] = {}
    for option_set in sets:
        made = SpamFilter()
        apply_scoring_options(made, scoring)
        apply_scoring_options(made, option_set.options)
        settings = made.scored_as()
        if settings in named:
            if named[settings] == option_set.name:
                raise fail("--compare: the same option set is given twice")
            raise fail(
                f"--compare: {named[settings]!r} and {option_set.name!r} are the same settings"
            )
        named[settings] = option_set.name
    return sets


def filter_pipe(
    model_path: Path | None, header_name: str, exit_zero: bool, max_size: int, stdin: Any
) -> None:
    from .pipe import run

    sys.exit(
        run(
            stdin,
            sys.stdout.buffer,
            sys.stderr,
            resolve_model_path(model_path),
            header_name=header_name,
            exit_zero=exit_zero,
            max_size=max_size,
            trust=trusting(),
        )
    )


# tune's grid defaults, spelt out so that building the CLI does not import numpy (a
# test keeps them in step with the tuning module's).
TUNE_EVENT_MODELS = "multinomial,boolean,bernoulli"
TUNE_ALPHAS = "1,0.1,0.01,0.001"
TUNE_MAX_FEATURES = "0,50000"
TUNE_FP_RATES = "0,0.001,0.002,0.005,0.01"


def comma_list(convert: Callable[[str], Any]) -> Callable[..., tuple[Any, ...]]:
    """A click callback: values given as a comma list, by repeating the option, or both."""

    def callback(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> tuple:
        parsed = []
        for value in values:
            for part in value.split(","):
                if not part.strip():
                    continue
                try:
                    parsed.append(convert(part.strip()))
                except ValueError as exc:
                    raise click.BadParameter(f"{part.strip()!r}: {exc}") from None
        if not parsed:
            raise click.BadParameter("give at least one value")
        return tuple(dict.fromkeys(parsed))

    return callback


def _event_model(text: str) -> str:
    if text not in EVENT_MODELS:
        raise ValueError(f"not one of {', '.join(EVENT_MODELS)}")
    return text


def _smoothing(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and 0 < value <= 1e6):
        raise ValueError("k must be a number > 0 (and at most 1e6)")
    return value


def _vocabulary_size(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be 0 (every token) or more")
    return value


def _fp_rate(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError("a false-positive rate is a share in [0, 1), e.g. 0.001")
    return value


@main.command(cls=MultiPathCommand, short_help="Choose the event model, k and vocabulary size.")
@click.option("--ham", multiple=True, metavar="PATH...", help="Good mail (as for train).")
@click.option("--spam", multiple=True, metavar="PATH...", help="Spam (as for train).")
@reader_options
@click.option(
    "--folds",
    type=click.IntRange(min=2),
    default=5,
    show_default=True,
    help="Cross-validation folds of the tuning mail.",
)
@click.option(
    "--test-size",
    type=FiniteRange(0, 1, min_open=True, max_open=True),
    help="First set aside this share (stratified) as a test part: tune on the rest only, "
    "then test the chosen setting on it once.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the folds and the test split.",
)
@click.option(
    "--event-models",
    multiple=True,
    default=(TUNE_EVENT_MODELS,),
    show_default=True,
    callback=comma_list(_event_model),
    help="Event models to try (comma list).",
)
@click.option(
    "--alphas",
    multiple=True,
    default=(TUNE_ALPHAS,),
    show_default=True,
    callback=comma_list(_smoothing),
    help="Smoothing strengths k to try (comma list).",
)
@click.option(
    "--max-features",
    multiple=True,
    default=(TUNE_MAX_FEATURES,),
    show_default=True,
    callback=comma_list(_vocabulary_size),
    help="Vocabulary sizes to try, the most informative tokens (comma list; 0: every token).",
)
@click.option(
    "--fp-rate",
    "fp_rates",
    multiple=True,
    default=(TUNE_FP_RATES,),
    show_default=True,
    callback=comma_list(_fp_rate),
    help="Target false-positive rates of the cut-off table (comma list or repeated).",
)
@tokenizer_options_bundle
@parallel_options
@json_option
def tune(
    spam: tuple[str, ...],
    ham: tuple[str, ...],
    mail_format: str | None,
    recursive: bool,
    folds: int,
    test_size: float | None,
    seed: int,
    event_models: tuple[str, ...],
    alphas: tuple[float, ...],
    max_features: tuple[int, ...],
    fp_rates: tuple[float, ...],
    tokenizer: dict[str, Any],
    workers: dict[str, Any],
    as_json: bool,
) -> None:
    """Choose the event model, smoothing k and vocabulary size by cross-validation.

    Every setting of the grid is scored by K-fold cross-validation (one model per
    fold, re-scored under each setting); the one with the fewest errors wins, ties
    going to fewer false positives, then the higher ROC AUC, then the earlier
    setting.  For the chosen setting it then prints the spam cut-off that keeps to
    each target false-positive rate, and the spam recall it buys.  With --test-size
    the test part is set aside first and used once, to test the choice.

    \b
    Example:
      spamnb tune --spam ~/Maildir/.Junk --ham ~/Maildir --test-size 0.3
    """
    from .evaluation import copies_warning
    from .filter import SpamFilter
    from .scores import stratified_split
    from .tuning import make_grid, tuning_warnings
    from .tuning import tune as tune_grid

    if not spam or not ham:
        raise fail("tune needs both kinds of mail: --spam PATH... and --ham PATH...")
    items, labels = read_labelled(labelled_sources(spam, ham, ()), mail_format, recursive)
    items, labels, copies = without_copies(items, labels, "tune")
    try:
        grid = make_grid(event_models, alphas, max_features)
    except ValueError as exc:
        raise fail(str(exc)) from None
    # The mail is read as a model made with these tokenizer options reads it.
    reader = SpamFilter()
    reader.settings = fresh_settings(tokenizer)
    token_lists = tokenize_with_progress(reader, items, "Reading", workers)
    # Progress in messages scored: each setting scores every tuning message once.
    tuned = len(labels)
    try:
        if test_size is not None:
            tuned = len(stratified_split(labels, test_size, seed)[0])
    except ValueError as exc:
        raise fail(f"cannot tune: {exc}") from None
    try:
        with progress_bar("Tuning", tuned * len(grid)) as advance:
            result = tune_grid(
                token_lists,
                labels,
                grid,
                folds=folds,
                seed=seed,
                test_size=test_size,
                fp_rates=fp_rates,
                on_step=advance,
            )
    except ValueError as exc:
        # The counts in it are of what tuning was left with, not of what was given.
        left = f" the {tuned:,} messages left after the test part" if test_size else ""
        raise fail(f"cannot tune{left}: {exc}") from None
    warnings = [
        warning
        for warning in (
            copies_warning(copies),
            *tuning_warnings(result, [labels[i] for i in result.tuned_on]),
        )
        if warning
    ]
    tuned_n, test_n = len(result.tuned_on), len(result.test_indices)
    read_with = new_tokenizer_options(tokenizer)
    description = (
        f"Tuned by {folds}-fold stratified cross-validation (seed {seed}) on {tuned_n:,} "
        "messages"
        + (f" read with{read_with}" if read_with else "")
        + (
            f"; the other {test_n:,} (test share {test_size:g}) were set aside first and "
            "used once, to test the chosen setting."
            if test_size is not None
            else "."
        )
    )
    report = {
        "protocol": {
            "folds": folds,
            "seed": seed,
            "test_size": test_size,
            "tuned_n": tuned_n,
            "test_n": test_n,
            "tokenizer": reader.settings.to_dict(),
            "description": description,
        },
        "grid": [
            {**{k: v for k, v in row.items() if k != "n"}, "chosen": position == result.chosen}
            for position, row in enumerate(result.rows)
        ],
        "chosen": {
            **result.setting.to_dict(),
            "train_options": result.setting.train_options() + read_with,
        },
        "cutoffs": result.cutoffs,
        "test": result.test,
        "copies": copies,
        "warnings": warnings,
    }
    if as_json:
        print_json(report)
        return
    for warning in warnings:
        warn(warning["message"])
    from .report import tuning_report

    stdout_console().print(tuning_report(report), crop=False)  # see tuning_report


@main.command("top-odds", short_help="Show the tokens with the highest odds ratios.")
@model_option
@click.option(
    "-n",
    "count",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Tokens in each table.",
)
@click.option(
    "--min-count",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Leave out tokens seen fewer times than this in the two classes' training mail "
    "(in messages; occurrences for the multinomial model).",
)
@click.option("--positive", default="spam", show_default=True, help="First class of the ratio.")
@click.option("--negative", default="ham", show_default=True, help="Second class of the ratio.")
@json_option
def top_odds(
    model_path: Path | None,
    count: int,
    min_count: int,
    positive: str,
    negative: str,
    as_json: bool,
) -> None:
    """Show the tokens with the highest odds ratios P(w|spam)/P(w|ham), and the reverse.

    Beside each ratio, the factor the token multiplies a message's odds by when it is
    scored (with the mistake table's share, as classify --explain weighs it), and how
    often the token was seen per class.
    """
    if positive == negative:
        raise fail(f"--positive and --negative are both {positive!r}; give two classes")
    spam_filter, _ = load_filter(model_path)
    try:
        towards_positive, towards_negative = spam_filter.top_odds(
            positive, negative, count, min_count
        )
    except ValueError as exc:
        raise fail(str(exc)) from None
    if not towards_positive and not towards_negative:
        # The model's own --min-count and --max-features may leave nothing to show.
        lower = "; a lower --min-count shows rarer ones" if min_count > 1 else ""
        warn(f"no token the model scores was seen {min_count:,} times or more{lower}")
    if as_json:
        print_json(
            {
                "positive": positive,
                "negative": negative,
                "towards_positive": towards_positive,
                "towards_negative": towards_negative,
            }
        )
        return
    from .report import top_odds_tables

    stdout_console().print(
        top_odds_tables(positive, negative, towards_positive, towards_negative), crop=False
    )


@main.command(short_help="Add up models trained separately.")
@click.argument("output", type=MODEL_PATH)
@click.argument("models", nargs=-1, required=True, type=MODEL_PATH)
@trust_option
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@json_option
def merge(output: Path, models: tuple[Path, ...], force: bool, as_json: bool) -> None:
    """Add up models trained separately: OUTPUT holds the counts of every MODEL.

    Naive Bayes counts add, so models trained per folder, per shard or per user
    merge into the model one run over all their mail would have made.  The models
    must share tokenizer settings.  The merge scores with the first model's settings
    but the smallest of the mistake-table weights, and keeps the calibration of the
    model fitted on the most mail among those that score so (a later training refits
    it only as it refits any calibration: see README).
    """
    from .merge import calibration_left_unfitted, merge_filters
    from .store import (
        ModelFileError,
        load,
        model_status,
        refuse_to_replace_a_non_model,
        save,
        training_lock,
    )

    if len(models) < 2:
        raise fail("give at least two models to merge")

    def refuse_to_replace() -> None:
        try:
            status = model_status(output)
        except ModelFileError:
            status = None  # the write below says what is wrong with the path
        if status is not None and stat.S_ISDIR(status.st_mode):
            raise fail(f"{output} is a folder; give the file to write the merged model to")
        if status is not None and not force:
            raise fail(f"{output} exists; use --force to replace it")
        if status is not None:
            try:
                refuse_to_replace_a_non_model(output)
            except ModelFileError as exc:
                raise fail(str(exc)) from None

    refuse_to_replace()
    refuse_an_unusable_folder(output, output)
    real_paths = [os.path.realpath(model) for model in models]
    if os.path.realpath(output) in real_paths:
        raise fail(f"{output} is also one of the models; write the merge to a new file")
    for position, real in enumerate(real_paths):
        if real in real_paths[:position]:
            raise fail(f"{models[position]} is given twice; each model is added once")
    filters = []
    for model in models:
        try:
            filters.append(load(model, trust=trusting()))
        except ModelFileError as exc:
            raise fail(str(exc)) from None
        warn_if_old_tokenizer(model, filters[-1].settings.version)
    try:
        merged = merge_filters(filters)
    except ValueError as exc:
        raise fail(f"cannot merge: {exc}") from None
    try:
        with training_lock(output, trust=trusting(), on_wait=waiting_notice(output)):
            # Again under the lock: a trainer may have made OUTPUT meanwhile, and a
            # merge would replace what it learnt.
            refuse_to_replace()
            raise_if_interrupted()
            size = save(merged, output)
    except ModelFileError as exc:
        raise fail(str(exc)) from None
    forgotten_class_warning(merged)
    if calibration_left_unfitted(filters, merged):
        warn(
            "the merged model's spam score is not calibrated: every calibrated model "
            "scores otherwise than the merge (its event model, k, min-count, vocabulary "
            "cut-off or mistake weight: model 1's settings, the smallest weight); the "
            "next training with spam and ham fits it"
        )
    summary = {
        "model": str(output),
        "merged": [str(model) for model in models],
        "classes": {
            name: int(count)
            for name, count in zip(merged.classes, merged.model.class_counts, strict=True)
        },
        "vocabulary": merged.model.tokens_seen(),
        "model_bytes": size,
    }
    if as_json:
        print_json(summary)
        return
    totals = ", ".join(f"{count:,} {name}" for name, count in summary["classes"].items())
    click.echo(
        f"spamnb: merged {len(models)} models into {display_path(str(output))}: "
        f"{totals} messages, {summary['vocabulary']:,} tokens"
    )


@main.command()
@model_option
@json_option
def info(model_path: Path | None, as_json: bool) -> None:
    """Describe a model file."""
    from .store import FORMAT_NAME, FORMAT_VERSION
    from .table import table_arrays

    spam_filter, path = load_filter(model_path)
    model = spam_filter.model
    details = {
        "path": str(path),
        "format": FORMAT_NAME,
        "format_version": spam_filter.read_format or FORMAT_VERSION,
        "spamnb_version": spam_filter.written_by,
        "created": spam_filter.created,
        "updated": spam_filter.updated,
        "classes": spam_filter.classes,
        "messages": {
            c: int(n) for c, n in zip(spam_filter.classes, model.class_counts, strict=True)
        },
        "vocabulary": spam_filter.model.tokens_seen(),
        "tokenizer_version": spam_filter.settings.version,
        "tokenizer": spam_filter.settings.to_dict(),
        "cutoffs": {
            "ham": spam_filter.calibration.ham_cutoff,
            "spam": spam_filter.calibration.spam_cutoff,
            "set_by_hand": spam_filter.calibration.chosen_cutoffs,
            "fitted_on": spam_filter.calibration.fitted_on,
        },
        "event_model": model.event_model,
        "alpha": model.alpha,
        "min_count": model.min_count,
        "max_features": model.max_features,
        "selection": model.selection,
        "bytes": os.path.getsize(path),
        # No table is written for a model the pipe cannot score through one: "missing"
        # and its advice to train again said the wrong thing.
        "pipe_table": "unusable" if table_arrays(spam_filter) is None else pipe_table_state(path),
        "mistake_table": {
            "weight": spam_filter.mistakes.weight,
            "in_use": bool(spam_filter.mistake_weight()),
            "messages": len(spam_filter.mistake_copies),
            "copies": sum(spam_filter.mistake_copies.values()),
        },
    }
    if as_json:
        print_json(details)
        return
    from .report import info_table

    stdout_console().print(info_table(details), crop=False)


def pipe_table_state(model_path: Path) -> str:
    """The state of the scoring table the pipe filter reads (table.TABLE_STATES), every
    block checked: anything but "current" makes the pipe load the whole model."""
    from .paths import table_path
    from .table import open_table

    real = os.path.realpath(model_path)
    table, state = open_table(real, table_path(real), trust=trusting())
    if state == "current" and table is not None:
        try:
            table.check_all()
        except ValueError:
            return "damaged"
    return state
