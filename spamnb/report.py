"""The report stage: rich renderables for people, built from the plain dicts that
``--json`` prints.  Nothing here prints; the CLI decides where output goes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from . import HAM
from .words import decimals, p_value_text, printable, rest_of_mail

__all__ = [
    "cross_validation_report",
    "evaluation_report",
    "info_table",
    "printable",
    "top_odds_tables",
    "training_summary",
    "tuning_report",
]


# The longest word a folded column is sized for when a table cannot fit: a class label
# or an event model's name ("boolean") stays whole, a path or token folds.
_SHORT_WORD = 10


def _longest_word(*texts: object) -> int:
    """The cells the longest word of the Texts among ``texts`` takes (1 if none)."""
    words = [cell_len(w) for text in texts if isinstance(text, Text) for w in text.plain.split()]
    return max(words, default=1)


def _column_word(column: Column, *, header_only: bool = False) -> int:
    return _longest_word(column.header, *(() if header_only else column.cells))


class _Table(Table):
    """A table whose numbers are never broken inside a word.

    rich narrows a table too wide for the terminal by folding its widest columns, and
    numbers with them: a tune cut-off shown as "0.77665" over "7" was a number to copy
    into train.  Where rich's layout would do that, this table gives each column of
    numbers (``whole``: the right-aligned ones and ranges such as "0.50-0.55") a fixed
    width, the longest word of its cells (_add_row records it), lets their headers and
    the other columns fold, and when that does not fit with the others' words of up to
    ten cells whole, runs past the terminal's edge rather than break a number.
    Anywhere else the layout is rich's own.
    """

    whole: frozenset[int] = frozenset()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self._would_break_a_number(console, options):
            yield from super().__rich_console__(console, options)
            return
        widths = [column.width for column in self.columns]
        # Measured without the terminal's bound, which Measurement.get clamps to.
        unbounded = options.update(max_width=1 << 16)
        try:
            # The first that fits: numbers as wide as their headers' words and the
            # other columns' words whole (up to ten cells), then the numbers' headers
            # folded to three cells, then the other columns folded too.
            for header_words, other_words in ((_SHORT_WORD, _SHORT_WORD), (3, _SHORT_WORD), (3, 1)):
                for index, column in enumerate(self.columns):
                    words = min(header_words, _column_word(column, header_only=True))
                    if index in self.whole:
                        column.width = max(column.min_width or 1, words)
                    else:
                        column.width = min(other_words, _column_word(column))
                least = Measurement.get(console, unbounded, self).minimum
                if least <= options.max_width:
                    break
            for index, (column, width) in enumerate(zip(self.columns, widths, strict=True)):
                if index not in self.whole:
                    column.width = width
            yield from super().__rich_console__(
                console, options.update(max_width=max(options.max_width, least))
            )
        finally:
            for column, width in zip(self.columns, widths, strict=True):
                column.width = width

    def _would_break_a_number(self, console: Console, options: ConsoleOptions) -> bool:
        try:
            # rich's own layout, by the steps Table.__rich_console__ takes.
            room = options.update_width(options.max_width - self._extra_width)
            given = self._calculate_column_widths(console, room)
            padding = [self._get_padding_width(index) for index in range(len(self.columns))]
        except AttributeError:  # a rich that lays tables out otherwise: assume it would
            return True
        if sum(given) > room.max_width:
            # Wider than the room: the terminal's edge would cut the last columns.
            return True
        return any(
            given[index] - padding[index] < (self.columns[index].min_width or 0)
            for index in self.whole
        )


def _table(
    title: str, *columns: str, right: Iterable[str] = (), whole: Iterable[str] = ()
) -> _Table:
    """A table of ``columns``; those in ``right`` (numbers) are right-aligned, and
    they and those in ``whole`` are never broken inside a word (see _Table)."""
    table = _Table(
        title=Text(printable(title)), box=box.SIMPLE_HEAD, title_justify="left", title_style="bold"
    )
    right = set(right)
    unbroken = right | set(whole)
    table.whole = frozenset(i for i, column in enumerate(columns) if column in unbroken)
    for column in columns:
        # Fold rather than cut: a path or token shown with an ellipsis is useless.
        table.add_column(
            Text(column), justify="right" if column in right else "left", overflow="fold"
        )
    return table


def _add_row(table: _Table, *cells: str | RenderableType, style: str | None = None) -> None:
    # Cells hold paths, labels and tokens from the user's mail: never read them as
    # markup, nor pass on the terminal's control sequences a token may carry (a
    # Subject can colour the screen, or worse).
    texts = [Text(printable(cell)) if isinstance(cell, str) else cell for cell in cells]
    for index in table.whole:
        if index < len(texts) and isinstance(texts[index], Text):
            # The width a number needs whole (see _Table): a value such as "90.00% (54
            # of 60)" may still break between its words.
            column = table.columns[index]
            column.min_width = max(column.min_width or 0, _longest_word(texts[index]))
    table.add_row(*texts, style=style)


def _percent(value: float | None) -> str:
    if value is None:
        return "n/a"
    pct = 100 * value
    return f"{pct:.{decimals(pct, 2, ends=(0.0, 100.0))}f}%"


def _number(value: float | None, digits: int = 4) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.{decimals(value, digits)}f}"


def human_size(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def training_summary(summary: dict[str, Any]) -> Table:
    table = _table(
        f"Model {summary['model']}",
        "class",
        "trained now",
        "in model",
        right=("trained now", "in model"),
    )
    for label, counts in summary["classes"].items():
        _add_row(table, label, f"{counts['trained']:,}", f"{counts['total']:,}")
    table.add_section()
    for key, what in (
        ("known", "already known, skipped"),
        ("moved", "moved to another class"),
        ("forgotten", "forgotten"),
        ("unknown", "not known, not forgotten"),
    ):
        if summary.get(key):
            _add_row(table, what, f"{summary[key]:,}", "")
    _add_row(table, "vocabulary", "", f"{summary['vocabulary']:,} tokens")
    _add_row(table, "model size", "", human_size(summary["model_bytes"]))
    return table


def info_table(info: dict[str, Any]) -> Table:
    table = _table("Model", "property", "value")
    _add_row(table, "path", info["path"])
    _add_row(table, "format", f"{info['format']} version {info['format_version']}")
    _add_row(table, "written by", f"spamnb {info['spamnb_version']}")
    _add_row(table, "created", info["created"])
    _add_row(table, "updated", info["updated"])
    for label, count in info["messages"].items():
        _add_row(table, f"messages: {label}", f"{count:,}")
    _add_row(table, "vocabulary", f"{info['vocabulary']:,} tokens")
    _add_row(table, "tokenizer", _tokenizer_text(info))
    cutoffs = info.get("cutoffs")
    if cutoffs is not None and "spam" not in info["messages"]:
        # The spam score's band: a model without spam has no such score (review 48).
        _add_row(table, "cut-offs", "none: the model has no spam class")
    elif cutoffs is not None:
        if cutoffs["set_by_hand"]:
            how = "set by hand"
        elif cutoffs.get("fitted_on"):
            how = f"chosen on {cutoffs['fitted_on']:,} held-out messages"
        elif len(info["messages"]) >= 2:
            how = "defaults: the spam score is not calibrated yet"
        else:
            how = "defaults"
        _add_row(
            table,
            "cut-offs",
            f"ham at or below {cutoffs['ham']:.6g}, spam at or above {cutoffs['spam']:.6g} ({how})",
        )
    _add_row(
        table,
        "scoring",
        f"{info['event_model']}, alpha={info['alpha']:g}, min-count={info['min_count']}"
        + (
            f", {info['max_features']:,} tokens by {info['selection']}"
            if info.get("max_features")
            else ""
        ),
    )
    mistakes = info.get("mistake_table")
    if mistakes is not None:
        _add_row(table, "mistake table", _mistake_table_text(mistakes, info["event_model"]))
    _add_row(table, "size", human_size(info["bytes"]))
    state = info.get("pipe_table")
    if state is not None:
        _add_row(table, "pipe table", _pipe_table_text(state, info))
    return table


def _pipe_table_text(state: str, info: dict[str, Any]) -> str:
    messages: dict[str, int] = info.get("messages") or {}
    if state == "unusable" and "spam" not in messages:
        return _PIPE_REFUSES.format(why="a spam class")
    others = sum(count for label, count in messages.items() if label != "spam")
    if state == "unusable" and not (messages["spam"] and others):
        return _PIPE_REFUSES.format(why="spam and other mail")
    return _PIPE_TABLE_STATES.get(state, state)


def _tokenizer_text(info: dict[str, Any]) -> str:
    text = f"version {info['tokenizer_version']}"
    settings = info.get("tokenizer")
    if not settings:
        return text
    text += (
        f": words of {settings['min_word_length']} to {settings['max_word_length']} characters"
        + (", word pairs" if settings["word_pairs"] else "")
        + (", Chinese and Japanese as pairs of characters" if settings.get("cjk_pairs") else "")
    )
    if settings["max_bytes"]:
        text += f", the first {settings['max_bytes']:,} bytes"
    if settings["max_tokens"]:
        text += f", at most {settings['max_tokens']:,} tokens"
    return text


def _mistake_table_text(mistakes: dict[str, Any], event_model: str) -> str:
    held = f"{mistakes['messages']:,} messages, {mistakes['copies']:,} copies"
    if mistakes["in_use"]:
        return f"{held}, weight {mistakes['weight']:g}"
    if not mistakes["weight"]:
        return "off (a model from before it, or trained with --mistake-weight 0)"
    if event_model != "boolean":
        return f"{held}; not used with the {event_model} model"
    return (
        "not in use until a training run brings mail of every class it holds none of "
        "(of those the model has mail of)"
    )


# What `info` says of the scoring table: all but "current" cost the pipe filter the
# whole model's load on every message, until the next `train` (known mail is skipped,
# and the model and its table are written again).
_RETRAIN = "; the pipe loads the whole model (slower) until the next train rewrites it"
_PIPE_TABLE_STATES = {
    "current": "current",
    "missing": "missing" + _RETRAIN,
    "other_version": "from another spamnb version" + _RETRAIN,
    "stale": "made for another write of the model file (copied, restored or replaced since)"
    + _RETRAIN,
    "damaged": "damaged" + _RETRAIN,
    "untrusted": "not used: another user's, or others may write it (the pipe loads the model)",
    "unusable": "none for this model (weights of certainty, as with k=0): --pipe loads "
    "the whole model",
}
# "unusable" for a model the pipe refuses whole (review 48: info said it would load it).
_PIPE_REFUSES = (
    "none: --pipe refuses a model without {why} (status 3, which the procmail recipe "
    "defers); train it with some"
)


def _with_count(value: float | None, count: int | None, of: int | None) -> str:
    """A rate and the counts it comes from: with 1,245 ham, one error is 0.08%."""
    if value is None:
        return "n/a"
    if count is None or of is None:
        return _percent(value)
    return f"{_percent(value)} ({count:,} of {of:,})"


def _interval(row: dict[str, Any] | None) -> str:
    if not row:
        return ""
    return f"[{_percent(row['low'])}, {_percent(row['high'])}]"


def _summary_table(report: dict[str, Any]) -> Table:
    intervals = report.get("intervals") or {}
    other = rest_of_mail(report["classes"])
    table = _table("Summary", "measure", "value", "95% interval", right=("value", "95% interval"))
    _add_row(table, "test messages", f"{report['n']:,}", "")
    accuracy = intervals.get("accuracy")
    _add_row(
        table,
        "accuracy",
        _with_count(
            report["accuracy"],
            accuracy and accuracy["count"],
            accuracy and accuracy["of"],
        ),
        _interval(accuracy),
    )
    _add_row(
        table,
        f"baseline (always '{report['baseline_class']}')",
        _percent(report["baseline_accuracy"]),
        "",
    )
    for key, what in (
        ("ham_misclassification", f"{other} called spam (hm)"),
        ("spam_misclassification", f"spam called {other} (sm)"),
    ):
        row = intervals.get(key)
        if row:
            _add_row(
                table,
                what,
                _with_count(row["value"], row["count"], row["of"]),
                _interval(row) if row["value"] is not None else "",
            )
    trec = report.get("trec")
    if trec:
        # A rate of 0 has no logit: lam then adds 0.5 to each count (see trec_measures).
        corrected = " (0.5 added to each count)" if trec.get("lam_corrected") else ""
        _add_row(table, "lam (logistic average)", _percent(trec["lam"]) + corrected, "")
    _add_row(table, "ROC AUC", _number(report["roc_auc"]), "")
    if trec and trec.get("one_minus_roca") is not None:
        _add_row(table, "1 - ROC AUC (1-ROCA)", _percent(trec["one_minus_roca"]), "")
    _add_row(table, "expected calibration error", _number(report["calibration"]["ece"]), "")
    _add_row(table, "Brier score", _number(report["calibration"]["brier"]), "")
    score = report.get("spam_score")
    if score:
        band = f"{score['ham_cutoff']:.3f}-{score['spam_cutoff']:.3f}"
        unsure = score["unsure"]
        table.add_section()
        _add_row(table, "calibrated spam score: ECE", _number(score["calibration"]["ece"]), "")
        _add_row(table, "calibrated spam score: Brier", _number(score["calibration"]["brier"]), "")
        _add_row(
            table,
            f"unsure (score {band})",
            f"{unsure['spam']:,} spam, {unsure['ham']:,} {other}",
            "",
        )
        _add_row(
            table,
            f"{other} called spam at the cut-off",
            f"{score['false_positives_at_cutoff']:,}",
            "",
        )
        _add_row(
            table,
            f"spam called {other} at the cut-off",
            f"{score['false_negatives_at_cutoff']:,}",
            "",
        )
    return table


def _confusion_table(report: dict[str, Any]) -> Table:
    classes = report["confusion_matrix"]["classes"]
    table = _table(
        "Confusion matrix (rows: true class, columns: predicted)",
        "true \\ predicted",
        *classes,
        right=classes,
    )
    for label, row in zip(classes, report["confusion_matrix"]["rows"], strict=True):
        _add_row(table, label, *(f"{count:,}" for count in row))
    return table


def _per_class_table(report: dict[str, Any]) -> Table:
    columns = ("precision", "recall", "F1", "messages")
    table = _table("Per class", "class", *columns, right=columns)
    for label, row in report["per_class"].items():
        _add_row(
            table,
            label,
            _percent(row["precision"]),
            _percent(row["recall"]),
            _percent(row["f1"]),
            f"{row['support']:,}",
        )
    return table


BAR_WIDTH = 24
# Eighths of a block, so that bars read without colour and still show small steps.
_EIGHTHS = " ▏▎▍▌▋▊▉"


class _Bar:
    """A horizontal bar of ``fraction`` of ``width`` cells, padded to ``width``: in
    blocks and eighths of one, or in "#" on a terminal whose encoding lacks them (a
    Latin-1 locale, where rich draws the tables' lines in ASCII too)."""

    def __init__(self, fraction: float, width: int) -> None:
        self.fraction = max(0.0, min(1.0, fraction))
        self.width = width

    def text(self, ascii_only: bool) -> str:
        if ascii_only:
            return ("#" * round(self.fraction * self.width)).ljust(self.width)
        full, part = divmod(round(self.fraction * self.width * 8), 8)
        return ("█" * full + (_EIGHTHS[part] if part else "")).ljust(self.width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Scaled to the cells it is given: cut to them, 92% and 100% drew the same bar
        # on a narrow terminal (review 35).
        width = max(1, min(self.width, options.max_width))
        yield Text(_Bar(self.fraction, width).text(options.ascii_only), no_wrap=True)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, self.width)


def _bar(fraction: float, width: int) -> _Bar:
    return _Bar(fraction, width)


def _reliability_table(calibration: dict[str, Any], title: str) -> Table:
    """A reliability diagram as bars: per confidence bin, the share of predictions
    that were right, beside the confidence the model claimed."""
    columns = ("observed", "claimed", "messages")
    table = _table(
        title, "confidence", "observed accuracy", *columns, right=columns, whole=("confidence",)
    )
    for row in calibration["bins"]:
        if not row["count"]:
            continue
        _add_row(
            table,
            f"{row['lower']:.1f}-{row['upper']:.1f}",
            _bar(row["accuracy"], BAR_WIDTH),
            _percent(row["accuracy"]),
            _percent(row["mean_confidence"]),
            f"{row['count']:,}",
        )
    return table


def _calibration_table(report: dict[str, Any]) -> Table:
    return _reliability_table(
        report["calibration"],
        "Calibration of the posterior: the confidence of the predicted class against how "
        "often it was right",
    )


def _histogram_table(histogram: dict[str, Any], other: str) -> Table:
    """Each class's scores per bin, bars on a log scale so a handful of errors show
    beside thousands of right calls; ``other`` names the side the JSON calls ham."""
    counts = {other if label == HAM else label: row for label, row in histogram["counts"].items()}
    classes = list(counts)
    width = 14
    most = max((max(row) for row in counts.values()), default=0)
    scale = math.log1p(most) or 1.0
    columns: list[str] = []
    for label in classes:
        columns += [label, f"{label} n"]
    table = _table(
        f"Histogram of the {histogram['score']} per class (bar length: log scale)",
        "score",
        *columns,
        right=[f"{label} n" for label in classes],
        whole=("score",),
    )
    edges = histogram["edges"]
    for position in range(len(edges) - 1):
        cells = [f"{edges[position]:.2f}-{edges[position + 1]:.2f}"]
        for label in classes:
            count = counts[label][position]
            cells += [_bar(math.log1p(count) / scale, width), f"{count:,}"]
        _add_row(table, *cells)
    return table


def _learning_curve_table(rows: Sequence[dict[str, Any]]) -> Table:
    models = list(dict.fromkeys(row["event_model"] for row in rows))
    sizes = list(dict.fromkeys(row["train_n"] for row in rows))
    cell = {(row["train_n"], row["event_model"]): row for row in rows}
    table = _table(
        "Learning curve: accuracy / ROC AUC on the same test part, by training messages",
        "trained on",
        *models,
        right=["trained on", *models],
    )
    for size in sizes:
        cells = [f"{size:,}"]
        for model in models:
            row = cell.get((size, model))
            cells.append(f"{_percent(row['accuracy'])} / {_number(row['roc_auc'])}" if row else "")
        _add_row(table, *cells)
    return table


def _compare_tables(compare: dict[str, Any], classes: Sequence[str]) -> list[RenderableType]:
    columns = ("accuracy", "95% interval", "FP", "FN", "ROC AUC")
    other = rest_of_mail(classes)
    sets = _table(
        f"Option sets on the same test messages (FP: {other} called spam, FN: spam called {other})",
        "set",
        *columns,
        right=columns,
    )
    for row in compare["sets"]:
        intervals = row.get("intervals") or {}
        _add_row(
            sets,
            row["name"],
            _percent(row["accuracy"]),
            _interval(intervals.get("accuracy")),
            "n/a" if row["false_positives"] is None else f"{row['false_positives']:,}",
            "n/a" if row["false_negatives"] is None else f"{row['false_negatives']:,}",
            _number(row["roc_auc"]),
        )
    sets.add_section()
    _add_row(
        sets,
        f"baseline (always '{compare['baseline_class']}')",
        _percent(compare["baseline_accuracy"]),
        "",
        "",
        "",
        "",
    )
    columns = ("only A right", "only B right", "p-value")
    pairs = _table(
        "McNemar's test on the paired verdicts (exact binomial; a small p-value: the "
        "difference is unlikely to be chance)",
        "A",
        "B",
        *columns,
        right=columns,
    )
    for row in compare["pairs"]:
        _add_row(
            pairs,
            row["a"],
            row["b"],
            f"{row['a_only']:,}",
            f"{row['b_only']:,}",
            p_value_text(row["p_value"], row.get("log10_p_value"), 3),
        )
    return [sets, pairs]


def _extra_parts(report: dict[str, Any]) -> list[RenderableType]:
    """The sections every protocol may add: curves, histogram, comparison."""
    parts: list[RenderableType] = []
    score = report.get("spam_score")
    if score:
        parts.append(
            _reliability_table(
                score["calibration"],
                "Reliability of the calibrated spam score (what the pipe filter writes)",
            )
        )
    if report.get("score_histogram"):
        parts.append(_histogram_table(report["score_histogram"], rest_of_mail(report["classes"])))
    if report.get("learning_curve"):
        parts.append(_learning_curve_table(report["learning_curve"]))
    if report.get("compare"):
        parts += _compare_tables(report["compare"], report["classes"])
    return parts


def _description(protocol: dict[str, Any]) -> Text:
    """What was measured, in a sentence: it names the user's paths, so it is escaped."""
    return Text(printable(protocol["description"]), style="italic")


def evaluation_report(report: dict[str, Any]) -> RenderableType:
    if report.get("per_fold"):
        return cross_validation_report(report)
    parts: list[RenderableType] = []
    protocol = report.get("protocol")
    if protocol:
        parts.append(_description(protocol))
    parts += [
        _summary_table(report),
        _confusion_table(report),
        _per_class_table(report),
        _calibration_table(report),
        *_extra_parts(report),
    ]
    return Group(*parts)


def cross_validation_report(report: dict[str, Any]) -> RenderableType:
    """evaluate --folds: the split report's tables on the pooled out-of-fold predictions,
    the calibrated score against each fold's own unsure band, and accuracy per fold."""
    # Each fold has its own band, which the split report's one-band rows cannot show.
    pooled = {key: value for key, value in report.items() if key != "spam_score"}
    parts: list[RenderableType] = [
        _description(report["protocol"]),
        _summary_table(pooled),
    ]
    if report.get("spam_score"):
        parts.append(
            _pooled_spam_score_table(report["spam_score"], rest_of_mail(report["classes"]))
        )
    parts += [
        _fold_table(report),
        _confusion_table(report),
        _per_class_table(report),
        _calibration_table(report),
        *_extra_parts(report),
    ]
    return Group(*parts)


def _pooled_spam_score_table(score: dict[str, Any], other: str) -> Table:
    table = _table(
        "Calibrated spam score (each message against its fold model's unsure band)",
        "measure",
        "value",
        right=("value",),
    )
    _add_row(table, "ECE", _number(score["calibration"]["ece"]))
    _add_row(table, "Brier score", _number(score["calibration"]["brier"]))
    unsure = score["unsure"]
    _add_row(
        table, "unsure (bands: per fold)", f"{unsure['spam']:,} spam, {unsure['ham']:,} {other}"
    )
    _add_row(
        table, f"{other} called spam at the cut-off", f"{score['false_positives_at_cutoff']:,}"
    )
    _add_row(
        table, f"spam called {other} at the cut-off", f"{score['false_negatives_at_cutoff']:,}"
    )
    return table


def _fold_table(report: dict[str, Any]) -> Table:
    bands = report["spam_score"]["folds"] if report.get("spam_score") else None
    columns = ["trained on", "tested on", "accuracy"] + (["unsure band"] if bands else [])
    table = _table("Per fold", "fold", *columns, right=columns)
    for position, row in enumerate(report["per_fold"]):
        cells = [str(row["fold"]), f"{row['train_n']:,}", f"{row['n']:,}"]
        cells.append(_percent(row["accuracy"]))
        if bands:
            cells.append(
                f"{bands[position]['ham_cutoff']:.3f}-{bands[position]['spam_cutoff']:.3f}"
            )
        _add_row(table, *cells)
    table.add_section()
    spread = report["fold_accuracy"]
    mean = f"{_percent(spread['mean'])} ± {_percent(spread['std'])}"
    _add_row(table, "mean ± sd", "", "", mean, *([""] if bands else []))
    return table


def _rate(value: float) -> str:
    # Target rates such as 0.1% or 0.05% must not round to a neighbour.
    return f"{100 * value:g}%"


def _share(count: int, total: int) -> str:
    return f"{count:,} of {total:,}"


def _tokens(max_features: int) -> str:
    return "all" if not max_features else f"{max_features:,}"


def tuning_report(report: dict[str, Any]) -> RenderableType:
    """spamnb tune: every setting tried, the one chosen, its spam cut-offs and (with a
    held-out test part) how the choice did on the test part."""
    protocol = report["protocol"]
    parts: list[RenderableType] = [_description(protocol)]
    columns = ("k", "tokens", "accuracy", "FP", "FN", "errors", "ROC AUC")
    grid = _table(
        f"Settings tried ({protocol['folds']}-fold cross-validation of {protocol['tuned_n']:,} "
        "messages; FP: ham called spam, FN: spam called ham; * chosen)",
        "",
        "model",
        *columns,
        right=columns,
    )
    for row in report["grid"]:
        cells = [
            "*" if row["chosen"] else "",
            row["event_model"],
            f"{row['alpha']:g}",
            _tokens(row["max_features"]),
            _percent(row["accuracy"]),
            f"{row['false_positives']:,}",
            f"{row['false_negatives']:,}",
            f"{row['errors']:,}",
            _number(row["roc_auc"]),
        ]
        _add_row(grid, *cells, style="bold" if row["chosen"] else None)
    parts.append(grid)
    chosen = report["chosen"]
    parts.append(
        Text(
            f"Chosen: {chosen['event_model']}, k={chosen['alpha']:g}, "
            f"{_tokens(chosen['max_features'])} tokens (fewest errors; ties go to fewer "
            "false positives, then the higher ROC AUC, then the earlier row)."
        )
    )
    # Never wrapped: a command cut mid-option at 80 columns breaks when pasted.
    parts.append(
        Text(
            f"Train with it: spamnb train {chosen['train_options']}",
            no_wrap=True,
            overflow="ignore",
        )
    )
    # The line then holds tokenizer options (those unlike the defaults), which a model
    # takes only when it is created: pasted onto an existing one it is refused.
    from .tokens import DEFAULT_SETTINGS

    other_tokenizer = report["protocol"]["tokenizer"] != DEFAULT_SETTINGS.to_dict()
    parts.append(
        Text(
            "(the model keeps them; its tokenizer options need train --new)."
            if other_tokenizer
            else "(the model keeps them)."
        )
    )
    test = report.get("test")
    cutoff_columns = ["target FP rate", "cut-off", "ham at/above", "spam recall"]
    if test:
        cutoff_columns += ["test: ham at/above", "test: spam recall"]
    cutoffs = _table(
        "Spam cut-offs for a target false-positive rate (calibrated spam score of the chosen "
        "setting, cross-validated)",
        *cutoff_columns,
        right=cutoff_columns,
    )
    for position, row in enumerate(report["cutoffs"]):
        cells = [
            _rate(row["fp_rate"]),
            "none" if row["cutoff"] is None else f"{row['cutoff']:g}",
            _share(row["ham_above"], row["ham"]),
            _percent(row["spam_recall"]),
        ]
        if test:
            on_test = test["cutoffs"][position]
            cells += [
                _share(on_test["ham_above"], on_test["ham"]),
                _percent(on_test["spam_recall"]),
            ]
        _add_row(cutoffs, *cells)
    parts += [
        cutoffs,
        Text(
            "Apply one with: spamnb train --spam-cutoff X (with --ham-cutoff at or below it "
            "if the model's ham cut-off is higher)."
        ),
    ]
    if test:
        parts.append(
            Text(
                f"The held-out test part: {test['n']:,} messages never used for tuning, "
                "scored once by the chosen setting trained on all the tuning mail.",
                style="italic",
            )
        )
        table = _table("Held-out test part", "measure", "value", right=("value",))
        _add_row(table, "accuracy", _percent(test["accuracy"]))
        _add_row(table, "false positives", f"{test['false_positives']:,}")
        _add_row(table, "false negatives", f"{test['false_negatives']:,}")
        _add_row(table, "ROC AUC", _number(test["roc_auc"]))
        parts.append(table)
    return Group(*parts)


def top_odds_tables(
    positive: str, negative: str, towards_positive: Sequence[dict], towards_negative: Sequence[dict]
) -> RenderableType:
    tables = []
    for first, second, rows in (
        (positive, negative, towards_positive),
        (negative, positive, towards_negative),
    ):
        table = _table(
            f"Tokens that point to {first}: odds ratio P(w|{first})/P(w|{second}) from the "
            "counts, the factor each multiplies a message's odds by when scored (the mistake "
            "table's share included), and how often each token was seen per class",
            "token",
            "odds ratio",
            "as scored",
            first,
            second,
            right=("odds ratio", "as scored", first, second),
        )
        for row in rows:
            _add_row(
                table,
                row["token"],
                _odds(row["log_odds_ratio"]),
                _odds(row["weight"]),
                f"{row['counts'][first]:,}",
                f"{row['counts'][second]:,}",
            )
        tables.append(table)
    return Group(*tables)


def _odds(log_ratio: float) -> str:
    if abs(log_ratio) > 700:  # beyond what a float holds; only unsmoothed models get here
        return f"e^{log_ratio:.0f}"
    ratio = math.exp(log_ratio)
    if ratio < 0.1:
        # A weight that points the other way than the counts' ratio (see top_odds).
        return f"{ratio:.2g}"
    return f"{ratio:,.1f}" if ratio < 1e6 else f"{ratio:.2e}"
