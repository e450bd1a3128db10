"""The report stage: rich renderables for people, built from the plain dicts that
``--json`` prints.  Nothing here prints; the CLI decides where output goes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

__all__ = [
    "evaluation_report",
    "info_table",
    "top_odds_tables",
    "training_summary",
]


def _table(title: str, *columns: str, right: Iterable[str] = ()) -> Table:
    table = Table(title=Text(title), box=box.SIMPLE_HEAD, title_justify="left", title_style="bold")
    right = set(right)
    for column in columns:
        # Fold rather than cut: a path or token shown with an ellipsis is useless.
        table.add_column(
            Text(column), justify="right" if column in right else "left", overflow="fold"
        )
    return table


def _add_row(table: Table, *cells: str | Text) -> None:
    # Cells hold paths, labels and tokens from the user's mail: never read them as markup.
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def _number(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


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
    _add_row(table, "tokenizer", f"version {info['tokenizer_version']}")
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
    _add_row(table, "size", human_size(info["bytes"]))
    return table


def _summary_table(report: dict[str, Any]) -> Table:
    table = _table("Summary", "measure", "value", right=("value",))
    _add_row(table, "test messages", f"{report['n']:,}")
    _add_row(table, "accuracy", _percent(report["accuracy"]))
    _add_row(
        table,
        f"baseline (always '{report['baseline_class']}')",
        _percent(report["baseline_accuracy"]),
    )
    _add_row(table, "ROC AUC", _number(report["roc_auc"]))
    _add_row(table, "expected calibration error", _number(report["calibration"]["ece"]))
    _add_row(table, "Brier score", _number(report["calibration"]["brier"]))
    score = report.get("spam_score")
    if score:
        band = f"{score['ham_cutoff']:.3f}-{score['spam_cutoff']:.3f}"
        unsure = score["unsure"]
        table.add_section()
        _add_row(table, "calibrated spam score: ECE", _number(score["calibration"]["ece"]))
        _add_row(table, "calibrated spam score: Brier", _number(score["calibration"]["brier"]))
        _add_row(
            table,
            f"unsure (score {band})",
            f"{unsure['spam']:,} spam, {unsure['ham']:,} ham",
        )
        _add_row(table, "ham called spam at the cut-off", f"{score['false_positives_at_cutoff']:,}")
        _add_row(table, "spam called ham at the cut-off", f"{score['false_negatives_at_cutoff']:,}")
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


def _calibration_table(report: dict[str, Any]) -> Table:
    columns = ("messages", "mean confidence", "observed accuracy")
    table = _table(
        "Calibration (confidence of the predicted class)", "confidence", *columns, right=columns
    )
    for row in report["calibration"]["bins"]:
        _add_row(
            table,
            f"{row['lower']:.1f}-{row['upper']:.1f}",
            f"{row['count']:,}",
            _percent(row["mean_confidence"]),
            _percent(row["accuracy"]),
        )
    return table


def evaluation_report(report: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    protocol = report.get("protocol")
    if protocol:
        parts.append(Text(protocol["description"], style="italic"))
    parts += [
        _summary_table(report),
        _confusion_table(report),
        _per_class_table(report),
        _calibration_table(report),
    ]
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
            f"Tokens that point to {first}: odds ratio P(w|{first})/P(w|{second}), "
            "and how often each token was seen per class",
            "token",
            "odds ratio",
            first,
            second,
            right=("odds ratio", first, second),
        )
        for row in rows:
            _add_row(
                table,
                row["token"],
                _odds(row["log_odds_ratio"]),
                f"{row['counts'][first]:,}",
                f"{row['counts'][second]:,}",
            )
        tables.append(table)
    return Group(*tables)


def _odds(log_ratio: float) -> str:
    if log_ratio > 700:  # beyond what a float holds; only unsmoothed models get here
        return f"e^{log_ratio:.0f}"
    ratio = math.exp(log_ratio)
    return f"{ratio:,.1f}" if ratio < 1e6 else f"{ratio:.2e}"
