"""The command line: a thin click layer over the library.

This is the only module that touches the terminal.  Results go to stdout (tables for
people, ``--json``/TSV for scripts); progress and messages go to stderr.  Library
errors become one-line ``click.ClickException`` errors here, at the edge.  Heavy
imports (numpy, scipy, joblib, rich) happen inside the commands that need them, so
starting the program stays cheap.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .pipe import DEFAULT_MAX_SIZE

if TYPE_CHECKING:
    from rich.console import Console

    from .filter import SpamFilter
    from .mail import MailItem

# Options that take several paths each, as in `--spam a b c --ham d`: shells expand
# `--spam ~/Mail/junk/*` to many words, and users expect that to work.
MULTI_PATH_OPTIONS = ("--spam", "--ham", "--label", "--forget")


class MultiPathCommand(click.Command):
    """A command whose MULTI_PATH_OPTIONS accept one or more values after one flag."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_multi_path_options(args))


def spread_multi_path_options(args: Sequence[str]) -> list[str]:
    """Rewrite `--spam a b --ham c` as `--spam a --spam b --ham c` for click.

    A value list ends at the next word that starts with '-' (a lone '-' is stdin, a
    value) or at '--'.
    """
    out: list[str] = []
    current: str | None = None
    for position, arg in enumerate(args):
        if arg == "--":
            out.extend(args[position:])
            return out
        if arg in MULTI_PATH_OPTIONS:
            current = arg
            out.append(arg)
            continue
        flag, equals, _value = arg.partition("=")
        if equals and flag in MULTI_PATH_OPTIONS:
            current = flag
            out.append(arg)
            continue
        if current and (arg == "-" or not arg.startswith("-")):
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


@functools.cache
def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


@functools.cache
def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; otherwise silent."""
    console = stderr_console()
    # Ask the stream itself: rich treats FORCE_COLOR as a terminal, and progress codes
    # must never end up in a redirected log.
    if not sys.stderr.isatty() or total < 50:
        yield lambda n=1: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)


def fail(message: str) -> click.ClickException:
    return click.ClickException(message)


# ---------------------------------------------------------------------------
# Shared options
# ---------------------------------------------------------------------------


def _remember_trust(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta["spamnb.trust_model"] = value


def trusting() -> bool:
    context = click.get_current_context(silent=True)
    return bool(context and context.meta.get("spamnb.trust_model"))


def model_option(func: Callable) -> Callable:
    func = click.option(
        "--trust-model",
        is_flag=True,
        expose_value=False,
        callback=_remember_trust,
        help="Load the model even if another user owns it or others may write it "
        "(loading a model runs code in it).",
    )(func)
    return click.option(
        "-m",
        "--model",
        "model_path",
        type=click.Path(path_type=Path),
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
        help="Also read Maildir++ subfolders of a Maildir.",
    )(func)


def labelled_path_options(func: Callable) -> Callable:
    for option, metavar, help_text in (
        ("--label", "NAME=PATH...", "Messages of class NAME, for models with other classes."),
        ("--ham", "PATH...", "Good mail: files, directories, mbox, Maildir or MH ('-': stdin)."),
        ("--spam", "PATH...", "Spam: files, directories, mbox, Maildir or MH ('-': stdin)."),
    ):
        func = click.option(option, multiple=True, metavar=metavar, help=help_text)(func)
    return func


# The model module's EVENT_MODELS, spelt out so that building the CLI does not import
# numpy and scipy (a test keeps the two in step).
EVENT_MODELS = ("multinomial", "boolean", "bernoulli")
FEATURE_SELECTIONS = ("ig", "df")


def _finite_alpha(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    # k=0 is the unsmoothed MLE, where one word unseen in a class vetoes it outright:
    # no use for filtering mail, so the CLI asks for k > 0 (the library allows 0).
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number")
    return value


SCORING_OPTIONS = ("event_model", "alpha", "min_count", "max_features", "selection", "word_pairs")


def scoring_options(command: Callable) -> Callable:
    """The model's scoring settings, passed to the command as one ``scoring`` dict."""

    @functools.wraps(command)
    def func(*args: Any, **kwargs: Any) -> Any:
        kwargs["scoring"] = {name: kwargs.pop(name) for name in SCORING_OPTIONS}
        return command(*args, **kwargs)

    func = click.option(
        "--word-pairs/--no-word-pairs",
        default=None,
        help="Tokenize pairs of adjacent words too; fixed when a model is created [on].",
    )(func)
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
        type=click.FloatRange(min=0, max=1e6, min_open=True),
        callback=_finite_alpha,
        help="Smoothing strength k > 0: 1 is Laplace, below 1 Lidstone [model's: 0.01].",
    )(func)
    return click.option(
        "--event-model",
        type=click.Choice(EVENT_MODELS),
        help="multinomial counts every occurrence of a token, boolean once per message; "
        "bernoulli scores presence and absence [model's: boolean].",
    )(func)


def json_option(func: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


# ---------------------------------------------------------------------------
# Helpers shared by the commands
# ---------------------------------------------------------------------------


def resolve_model_path(model_path: Path | None) -> Path:
    from .paths import default_model_path

    return model_path if model_path is not None else default_model_path()


def load_filter(model_path: Path | None) -> tuple[SpamFilter, Path]:
    from .store import ModelFileError, load
    from .tokens import TOKENIZER_VERSION

    path = resolve_model_path(model_path)
    try:
        spam_filter = load(path, trust=trusting())
    except ModelFileError as exc:
        raise fail(str(exc)) from None
    if spam_filter.settings.version != TOKENIZER_VERSION:
        warn(
            f"{path} was trained with tokenizer {spam_filter.settings.version}, this spamnb "
            f"tokenizes with {TOKENIZER_VERSION}; retrain it with --new for full accuracy"
        )
    return spam_filter, path


def labelled_sources(
    spam: Sequence[str], ham: Sequence[str], label: Sequence[str]
) -> list[tuple[str, str]]:
    from .filter import HAM, SPAM

    pairs = [(SPAM, path) for path in spam] + [(HAM, path) for path in ham]
    for item in label:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise fail(f"--label expects NAME=PATH, got {item!r}")
        if not name.isprintable():
            raise fail(f"--label names must be printable text, got {name!r}")
        pairs.append((name, path))
    check_stdin_once([path for _, path in pairs])
    return pairs


def check_stdin_once(paths: Sequence[str]) -> None:
    if sum(path == "-" for path in paths) > 1:
        raise fail("standard input ('-') can be given only once")


def message_identity(source: str) -> str:
    """One name per stored message, however its path was spelt (for duplicates)."""
    if source == "-" or os.path.exists(source):
        return os.path.realpath(source) if source != "-" else source
    path, _, key = source.rpartition(":")
    return f"{os.path.realpath(path)}:{key}"


def read_labelled(
    pairs: Sequence[tuple[str, str]], mail_format: str | None, recursive: bool
) -> tuple[list[MailItem], list[str]]:
    """The messages under each labelled path, each stored message once."""
    from .mail import MailSourceError, iter_messages

    items: list[MailItem] = []
    labels: list[str] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    repeated = 0
    for label, path in pairs:
        try:
            for item in iter_messages(
                path,
                mail_format,
                recursive=recursive,
                stdin=sys.stdin.buffer,
                on_skip=lambda where, why: skipped.append(f"{where}: {why}"),
            ):
                identity = message_identity(item.source)
                if identity in seen:
                    if seen[identity] != label:
                        raise fail(f"{item.source} is given as both {seen[identity]} and {label}")
                    repeated += 1
                    continue
                seen[identity] = label
                items.append(item)
                labels.append(label)
        except MailSourceError as exc:
            note = f" ({len(skipped):,} files skipped as not mail)" if skipped else ""
            raise fail(f"{exc}{note}") from None
    if skipped:
        warn(f"skipped {len(skipped):,} files that are not mail, e.g. {skipped[0]}")
    if repeated:
        warn(f"read {repeated:,} messages more than once (overlapping paths); counted once")
    return items, labels


def warn(message: str) -> None:
    """One line on stderr, never wrapped, so scripts can grep it."""
    click.echo(f"Warning: {' '.join(message.split())}", err=True)


def tokenize_with_progress(
    spam_filter: SpamFilter, items: Sequence[MailItem], description: str
) -> list[list[str]]:
    with progress_bar(description, len(items)) as advance:
        return spam_filter.tokenize([item.data for item in items], on_each=advance)


def apply_scoring_options(spam_filter: SpamFilter, scoring: Mapping[str, Any]) -> None:
    """Set the scoring options given on the command line; the rest stay the model's."""
    scoring = dict(scoring)
    word_pairs = scoring.pop("word_pairs", None)
    if word_pairs is not None and int(word_pairs) != spam_filter.settings.word_pairs:
        # The vocabulary was counted with the model's tokenizer: only a model that
        # has counted nothing yet can take another.
        if len(spam_filter.vocabulary):
            state = "on" if spam_filter.settings.word_pairs else "off"
            raise fail(
                f"this model was trained with word pairs {state}; the tokenizer is fixed "
                "when a model is created (train --new starts a new one)"
            )
        spam_filter.settings = spam_filter.settings._replace(word_pairs=int(word_pairs))
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spamnb")
def main() -> None:
    """A Naive Bayes spam filter you train on your own mail folders."""


@main.command(cls=MultiPathCommand)
@model_option
@labelled_path_options
@reader_options
@scoring_options
@click.option(
    "--forget",
    multiple=True,
    metavar="PATH...",
    help="Take these messages back out of the model (they must have been trained).",
)
@click.option(
    "--ham-cutoff",
    type=click.FloatRange(0, 1),
    help="Calibrated spam score at or below which --pipe says Ham [chosen from the data].",
)
@click.option(
    "--spam-cutoff",
    type=click.FloatRange(0, 1),
    help="Calibrated spam score at or above which --pipe says Spam [chosen from the data].",
)
@click.option("--new", is_flag=True, help="Start a new model instead of adding to an existing one.")
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
    as_json: bool,
) -> None:
    """Learn from mail labelled spam or ham.

    Adds to the model's counts when the model exists (unless --new), so you can
    train on new mistakes without retraining from scratch.  Each message is learnt
    once: run it again on the same folders and only new mail is counted; a message
    trained before under the other label is moved.

    \b
    Example:
      spamnb train -m model.joblib --spam ~/Maildir/.Junk --ham ~/Maildir
    """
    from .filter import SpamFilter, message_digest
    from .store import ModelFileError, load, save, training_lock

    pairs = labelled_sources(spam, ham, label)
    check_stdin_once([path for _, path in pairs] + list(forget))
    cutoffs = ham_cutoff is not None or spam_cutoff is not None
    if not pairs and not forget and not cutoffs:
        raise fail("give mail to learn from: --spam PATH..., --ham PATH..., or --forget PATH...")
    items, labels = read_labelled(pairs, mail_format, recursive)
    forgotten_items, _ = read_labelled([("", p) for p in forget], mail_format, recursive)
    path = resolve_model_path(model_path)
    try:
        with training_lock(path):
            # Read, add and write under the lock, so concurrent trainers add up.
            try:
                spam_filter = (
                    SpamFilter() if new or not path.exists() else load(path, trust=trusting())
                )
            except ModelFileError as exc:
                raise fail(f"{exc} (use --new to replace it)") from None
            apply_scoring_options(spam_filter, scoring)
            outcome: dict[str, Any] = {
                "learned": 0,
                "moved": 0,
                "known": 0,
                "forgotten": 0,
                "unknown": 0,
                "by_class": {},
            }
            if forgotten_items:
                tokens = tokenize_with_progress(spam_filter, forgotten_items, "Forgetting")
                digests = [message_digest(item.data) for item in forgotten_items]
                outcome.update(spam_filter.forget(tokens, digests))
            if items:
                tokens = tokenize_with_progress(spam_filter, items, "Learning")
                digests = [message_digest(item.data) for item in items]
                outcome.update(spam_filter.learn(tokens, labels, digests))
            if cutoffs:
                try:
                    spam_filter.choose_cutoffs(ham_cutoff, spam_cutoff)
                except ValueError as exc:
                    raise fail(str(exc)) from None
            size = save(spam_filter, path)
    except ModelFileError as exc:
        raise fail(str(exc)) from None
    by_class = outcome.pop("by_class")
    summary = {
        "model": str(path),
        **outcome,
        "classes": {
            name: {"trained": by_class.get(name, 0), "total": int(total)}
            for name, total in zip(spam_filter.classes, spam_filter.model.class_counts, strict=True)
        },
        "vocabulary": len(spam_filter.vocabulary),
        "model_bytes": size,
    }
    if as_json:
        print_json(summary)
    elif not sys.stdout.isatty():
        # For cron mail and logs: one line, no table.
        click.echo(one_line_summary(summary))
    else:
        from .report import training_summary

        stdout_console().print(training_summary(summary))


def one_line_summary(summary: dict[str, Any]) -> str:
    totals = ", ".join(f"{c['total']:,} {name}" for name, c in summary["classes"].items())
    return (
        f"spamnb: learned {summary['learned']:,}, moved {summary['moved']:,}, "
        f"skipped {summary['known']:,} known, forgot {summary['forgotten']:,}; "
        f"model {display_path(summary['model'])} has {totals or 'no'} messages, "
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


@main.command()
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
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SIZE,
    show_default=True,
    help="With --pipe, pass larger messages through unscored (marked so).",
)
@reader_options
@scoring_options
@json_option
def classify(
    model_path: Path | None,
    paths: tuple[str, ...],
    pipe: bool,
    header_name: str,
    exit_zero: bool,
    max_size: int,
    mail_format: str | None,
    recursive: bool,
    scoring: dict[str, Any],
    as_json: bool,
) -> None:
    """Label messages: one line each, `LABEL<TAB>SPAM-PROBABILITY<TAB>MESSAGE`.

    MESSAGE is the message's file (mbox: FILE:N), or its Message-ID when read from
    standard input ('-').  The probability is that of the class 'spam' (for models
    without one, that of the predicted class).

    With --pipe it is a mail filter for procmail or maildrop instead.
    """
    from .mail import display_source, message_id

    if pipe:
        if paths:
            raise fail("--pipe reads one message from standard input; give no PATH")
        filter_pipe(model_path, header_name, exit_zero, max_size, sys.stdin.buffer)
    if not paths:
        raise fail("give messages to classify: PATH... ('-' for standard input), or --pipe")
    spam_filter, _ = load_filter(model_path)
    if len(spam_filter.classes) < 2:
        raise fail(f"the model knows only {spam_filter.classes}; train at least two classes")
    apply_scoring_options(spam_filter, scoring)
    check_stdin_once(paths)
    items, _ = read_labelled([("", p) for p in paths], mail_format, recursive)
    token_lists = tokenize_with_progress(spam_filter, items, "Classifying")
    proba, log_odds, lengths = spam_filter.score_tokens(token_lists)
    predicted = spam_filter.predict_labels(proba)
    if log_odds is not None:
        score_logit = spam_filter.calibration.decision(log_odds, lengths)
        spam_score = spam_filter.calibration.score(log_odds, lengths)
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
            }
            print_json(record)
        else:
            click.echo(f"{label}\t{shown:.4f}\t{where}")


@main.command(cls=MultiPathCommand)
@model_option
@labelled_path_options
@reader_options
@scoring_options
@click.option(
    "--test-size",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Split the mail (stratified), train a new model on the rest, test on this share.",
)
@click.option(
    "--folds",
    type=click.IntRange(min=2),
    help="Cross-validate instead: K stratified folds, each scored by a model trained on the "
    "other K-1.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the split or the folds.",
)
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
    seed: int,
    as_json: bool,
) -> None:
    """Measure accuracy on labelled mail.

    With a model (-m) it scores all the given mail.  With --test-size it splits the
    mail, trains a new model on one part and reports on the other, never looking at
    the test part while training.  With --folds K it cross-validates: every message
    is scored by a model trained on the other folds, and the report pools them.
    """
    from .filter import SpamFilter
    from .scores import evaluation_report, stratified_split

    pairs = labelled_sources(spam, ham, label)
    if not pairs:
        raise fail("give labelled mail: --spam PATH..., --ham PATH...")
    if test_size is not None and model_path is not None:
        raise fail("--test-size trains its own model; leave out -m/--model")
    if folds is not None and test_size is not None:
        raise fail("--folds and --test-size are two ways to test; give one of them")
    if folds is not None and model_path is not None:
        raise fail("--folds trains its own models; leave out -m/--model")
    if test_size is None and folds is None:
        # Load the model before reading any mail: a wrong -m should fail at once.
        spam_filter, path = load_filter(model_path)
        apply_scoring_options(spam_filter, scoring)
    items, labels = read_labelled(pairs, mail_format, recursive)
    if folds is not None:
        report = cross_validated_report(items, labels, scoring, folds, seed)
        if as_json:
            print_json(report)
            return
        from .report import cross_validation_report

        stdout_console().print(cross_validation_report(report))
        return
    if test_size is None:
        test_tokens = tokenize_with_progress(spam_filter, items, "Scoring")
        test_labels = labels
        # A trained model keeps counts, not labels: its class counts give the baseline.
        train_counts: Mapping[str, int] | Sequence[str] = dict(
            zip(spam_filter.classes, map(int, spam_filter.model.class_counts), strict=True)
        )
        protocol = {
            "mode": "model",
            "model": str(path),
            "train_n": int(spam_filter.model.class_counts.sum()),
        }
        description = f"All {len(items):,} messages scored with the model {path}."
    else:
        spam_filter = SpamFilter()
        apply_scoring_options(spam_filter, scoring)
        try:
            train_idx, test_idx = stratified_split(labels, test_size, seed)
        except ValueError as exc:
            raise fail(str(exc)) from None
        token_lists = tokenize_with_progress(spam_filter, items, "Reading")
        train_counts = [labels[i] for i in train_idx]
        train_tokens = [token_lists[i] for i in train_idx]
        spam_filter.train_tokens(train_tokens, train_counts)
        spam_filter.fit_calibration(train_tokens, train_counts)
        test_tokens = [token_lists[i] for i in test_idx]
        test_labels = [labels[i] for i in test_idx]
        protocol = {
            "mode": "split",
            "test_size": test_size,
            "seed": seed,
            "train_n": len(train_idx),
        }
        description = (
            f"Trained on {len(train_idx):,} messages, tested on the other {len(test_idx):,} "
            f"(stratified split, test share {test_size:g}, seed {seed})."
        )
    unknown = sorted(set(test_labels) - set(spam_filter.classes))
    if unknown:
        raise fail(f"the model has no class {unknown[0]!r}; it knows {spam_filter.classes}")
    if len(spam_filter.classes) < 2:
        raise fail(f"the model knows only {spam_filter.classes}; evaluate needs two classes")
    proba, log_odds, lengths = spam_filter.score_tokens(test_tokens)
    try:
        report = evaluation_report(
            test_labels,
            proba,
            spam_filter.classes,
            train_counts,
            positive=spam_filter.positive_class(),
            # Ranked as the filter ranks: by its spam score, not the raw posterior.
            scores=None
            if log_odds is None
            else spam_filter.calibration.decision(log_odds, lengths),
        )
    except ValueError as exc:
        raise fail(f"cannot evaluate: {exc}") from None
    if log_odds is not None:
        report["spam_score"] = spam_score_report(spam_filter, log_odds, lengths, test_labels)
    protocol.update(description=description, **scoring_settings(spam_filter))
    report["protocol"] = protocol
    if as_json:
        print_json(report)
        return
    from .report import evaluation_report as render

    stdout_console().print(render(report))


def scoring_settings(spam_filter: SpamFilter) -> dict[str, Any]:
    model = spam_filter.model
    return {
        "event_model": model.event_model,
        "alpha": model.alpha,
        "min_count": model.min_count,
        "max_features": model.max_features,
        "selection": model.selection,
        "word_pairs": bool(spam_filter.settings.word_pairs),
    }


def cross_validated_report(
    items: Sequence[MailItem],
    labels: Sequence[str],
    scoring: Mapping[str, Any],
    folds: int,
    seed: int,
) -> dict[str, Any]:
    """evaluate's report on the pooled out-of-fold predictions of K-fold cross-validation."""
    import numpy as np

    from .filter import SpamFilter
    from .scores import evaluation_report
    from .tuning import cross_validate

    def new_filter() -> SpamFilter:
        spam_filter = SpamFilter()
        apply_scoring_options(spam_filter, scoring)
        return spam_filter

    settings = new_filter()
    if len(set(labels)) < 2:
        raise fail(f"the mail has only the class {labels[0]!r}; evaluate needs two classes")
    token_lists = tokenize_with_progress(settings, items, "Reading")
    try:
        with progress_bar("Cross-validating", len(labels)) as advance:
            (out_of_fold,) = cross_validate(
                token_lists, labels, folds, seed, new_filter=new_filter, on_step=advance
            )
        report = evaluation_report(
            labels,
            out_of_fold.proba,
            out_of_fold.classes,
            # Stratified folds train on the same class shares as the whole mail.
            labels,
            positive=out_of_fold.positive,
            scores=out_of_fold.decision,
        )
    except ValueError as exc:
        raise fail(f"cannot evaluate: {exc}") from None
    if out_of_fold.score is not None:
        # Each message against the unsure band of the fold model that scored it.
        calibrations = out_of_fold.calibrations
        report["spam_score"] = {
            "folds": [calibration.to_dict() for calibration in calibrations],
            **band_report(
                out_of_fold.score,
                np.asarray(labels, dtype=object) == out_of_fold.positive,
                np.array([c.ham_cutoff for c in calibrations])[out_of_fold.fold],
                np.array([c.spam_cutoff for c in calibrations])[out_of_fold.fold],
            ),
        }
    accuracies = out_of_fold.fold_accuracies()
    report["per_fold"] = [
        {"fold": number + 1, "n": len(test), "train_n": len(train), "accuracy": accuracy}
        for number, ((train, test), accuracy) in enumerate(
            zip(out_of_fold.folds, accuracies, strict=True)
        )
    ]
    report["fold_accuracy"] = {
        "mean": float(np.mean(accuracies)),
        # The sample standard deviation: the folds are a sample of possible test sets.
        "std": float(np.std(accuracies, ddof=1)),
    }
    report["protocol"] = {
        "mode": "folds",
        "folds": folds,
        "seed": seed,
        "description": (
            f"Each of the {len(labels):,} messages scored by a model trained on the other "
            f"{folds - 1} of {folds} stratified folds (seed {seed}); the report pools them."
        ),
        **scoring_settings(settings),
    }
    return report


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


def spam_score_report(
    spam_filter: SpamFilter, log_odds: Any, lengths: Any, test_labels: Sequence[str]
) -> dict[str, Any]:
    """How well the calibrated spam score and its unsure band did on the test mail."""
    import numpy as np

    calibration = spam_filter.calibration
    score = calibration.score(log_odds, lengths)
    is_spam = np.asarray(test_labels, dtype=object) == spam_filter.positive_class()
    return {
        **calibration.to_dict(),
        **band_report(score, is_spam, calibration.ham_cutoff, calibration.spam_cutoff),
    }


def band_report(score: Any, is_spam: Any, ham_cutoff: Any, spam_cutoff: Any) -> dict[str, Any]:
    """The calibrated score's reliability and what its unsure band did; the cut-offs
    may be one number or one per message (cross-validation: each fold model's own)."""
    import numpy as np

    from .scores import calibration as reliability

    unsure = (score > ham_cutoff) & (score < spam_cutoff)
    return {
        "calibration": reliability(np.maximum(score, 1 - score), (score >= 0.5) == is_spam),
        "unsure": {"spam": int((unsure & is_spam).sum()), "ham": int((unsure & ~is_spam).sum())},
        "spam_at_cutoff": int((score >= spam_cutoff)[is_spam].sum()),
        "ham_at_cutoff": int((score <= ham_cutoff)[~is_spam].sum()),
        "false_positives_at_cutoff": int((score >= spam_cutoff)[~is_spam].sum()),
        "false_negatives_at_cutoff": int((score <= ham_cutoff)[is_spam].sum()),
    }


# tune's grid defaults, spelt out so that building the CLI does not import numpy (a
# test keeps them in step with the tuning module's).
TUNE_EVENT_MODELS = "multinomial,boolean,bernoulli"
TUNE_ALPHAS = "1,0.1,0.01,0.001"
TUNE_MAX_FEATURES = "0,50000"
TUNE_FP_RATES = "0,0.001,0.005,0.01"


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


@main.command(cls=MultiPathCommand)
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
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
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
    from .filter import SpamFilter
    from .scores import stratified_split
    from .tuning import make_grid
    from .tuning import tune as tune_grid

    if not spam or not ham:
        raise fail("tune needs both kinds of mail: --spam PATH... and --ham PATH...")
    items, labels = read_labelled(labelled_sources(spam, ham, ()), mail_format, recursive)
    try:
        grid = make_grid(event_models, alphas, max_features)
    except ValueError as exc:
        raise fail(str(exc)) from None
    token_lists = tokenize_with_progress(SpamFilter(), items, "Reading")
    try:
        # Progress in messages scored: each setting scores every tuning message once.
        tuned = len(labels)
        if test_size is not None:
            tuned = len(stratified_split(labels, test_size, seed)[0])
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
        raise fail(f"cannot tune: {exc}") from None
    tuned_n, test_n = len(result.tuned_on), len(result.test_indices)
    description = (
        f"Tuned by {folds}-fold stratified cross-validation (seed {seed}) on {tuned_n:,} "
        "messages"
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
            "description": description,
        },
        "grid": [
            {**{k: v for k, v in row.items() if k != "n"}, "chosen": position == result.chosen}
            for position, row in enumerate(result.rows)
        ],
        "chosen": {**result.setting.to_dict(), "train_options": result.setting.train_options()},
        "cutoffs": result.cutoffs,
        "test": result.test,
    }
    if as_json:
        print_json(report)
        return
    from .report import tuning_report

    stdout_console().print(tuning_report(report))


@main.command("top-odds")
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
    help="Leave out tokens seen fewer times than this in all training mail.",
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
    """Show the tokens with the highest odds ratios P(w|spam)/P(w|ham), and the reverse."""
    spam_filter, _ = load_filter(model_path)
    try:
        towards_positive, towards_negative = spam_filter.top_odds(
            positive, negative, count, min_count
        )
    except ValueError as exc:
        raise fail(str(exc)) from None
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

    stdout_console().print(top_odds_tables(positive, negative, towards_positive, towards_negative))


@main.command()
@model_option
@json_option
def info(model_path: Path | None, as_json: bool) -> None:
    """Describe a model file."""
    from .store import FORMAT_NAME, FORMAT_VERSION

    spam_filter, path = load_filter(model_path)
    model = spam_filter.model
    details = {
        "path": str(path),
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "spamnb_version": spam_filter.written_by,
        "created": spam_filter.created,
        "updated": spam_filter.updated,
        "classes": spam_filter.classes,
        "messages": {
            c: int(n) for c, n in zip(spam_filter.classes, model.class_counts, strict=True)
        },
        "vocabulary": len(spam_filter.vocabulary),
        "tokenizer_version": spam_filter.settings.version,
        "event_model": model.event_model,
        "alpha": model.alpha,
        "min_count": model.min_count,
        "max_features": model.max_features,
        "selection": model.selection,
        "bytes": os.path.getsize(path),
    }
    if as_json:
        print_json(details)
        return
    from .report import info_table

    stdout_console().print(info_table(details))
