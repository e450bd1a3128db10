"""``spamnb evaluate --report FILE.html``: the evaluation report as one self-contained page.

The page is built from the same plain dict that ``evaluate --json`` prints. It needs no
network to view: the CSS and the one small script are inline, and each figure is an SVG made
with matplotlib and embedded as a ``data:`` URI. A Content-Security-Policy in the page forbids
every other source of scripts, styles and images; it cannot stop a page navigating away (a
``<meta http-equiv=refresh>`` in the body), so escaping is what keeps text from mail inert.

matplotlib is an optional dependency (the ``report`` extra) and is imported only
inside :func:`render_html`, so the filter's own commands never pay for it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import HAM, __version__
from .words import decimals, p_value_text, printable, rest_of_mail

__all__ = ["FIGURE_IDS", "ReportDependencyError", "render_html"]

# The id of every figure the page can hold, in page order; a figure whose data is missing
# from the report is left out.
FIGURE_IDS = ("fig-roc", "fig-reliability", "fig-histogram", "fig-learning-curve")

# Okabe-Ito colours: told apart by colour-blind readers and in greyscale print.
SPAM_COLOUR = "#D55E00"
HAM_COLOUR = "#0072B2"
SERIES_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

# Typographic dashes and signs, spelt as escapes so the source stays plain ASCII.
DASH = "\u2013"
TIMES = "\u00d7"

PROTOCOL_TITLES = {
    "model": "Scored with a trained model",
    "split": "Train/test split",
    "folds": "Cross-validation",
    "online": "Online evaluation",
}

# rcParams for the figures. fonttype "none" keeps text as SVG text (smaller, selectable); the
# fixed hash salt makes the SVG ids, and so the whole page, the same on every run.
PLOT_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "spamnb-report",
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "legend.fontsize": 8.5,
}

FIGSIZE = (6.4, 4.3)


class ReportDependencyError(RuntimeError):
    """The HTML report needs matplotlib, an optional dependency that is not installed."""


def render_html(report: Mapping[str, Any]) -> str:
    """The evaluation report ``report`` (as ``spamnb evaluate --json`` prints it) as one
    self-contained HTML5 page.

    Only ``n``, ``classes``, ``accuracy``, ``baseline_class``, ``baseline_accuracy``,
    ``roc_auc``, ``confusion_matrix``, ``per_class`` and ``calibration`` are required; every
    other section of the page appears only when its key is in the report. Raises
    :class:`ReportDependencyError` when matplotlib is not installed.
    """
    matplotlib, figure_class = _load_matplotlib()
    # rc_context changes matplotlib's global settings for the duration: fine for a CLI that
    # renders one report, and the Figure objects themselves are never shared.
    with matplotlib.rc_context(PLOT_STYLE):
        figures = _figures(report, figure_class)
    body = "\n".join(
        part
        for part in (
            _header(report),
            _contents(report, figures),
            _warnings(report),
            _summary(report),
            _confusion(report),
            _per_class(report),
            _figure_section(figures),
            _compare(report),
            _per_fold(report),
            _top_odds(report),
            _footer(),
        )
        if part
    )
    return _page("spamnb evaluation report", body)


# --------------------------------------------------------------------------- dependencies


def _load_matplotlib() -> tuple[Any, Any]:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ReportDependencyError(
            "the HTML report needs matplotlib: pip install matplotlib (spamnb's report extra)"
        ) from exc
    # Figure without pyplot never touches a GUI backend or pyplot's global figure list.
    return matplotlib, Figure


# --------------------------------------------------------------------------- formatting


def _esc(value: Any) -> str:
    # Labels, tokens and messages come from the user's mail and folders: always text,
    # with what a browser would act on or hide (a right-to-left override, a control
    # character) shown as its escape, as the terminal report shows it.
    return html.escape(printable(str(value)), quote=True)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _pct(value: Any) -> str:
    if not _finite(value):
        return "—"
    pct = 100 * value
    # Spam filters live at rates like 0.08%: two decimals alone would round them to nothing.
    if 0 < abs(pct) < 0.1:
        return f"{pct:.2g}%"
    return f"{pct:.{decimals(pct, 2, ends=(0.0, 100.0))}f}%"


def _num(value: Any, digits: int = 4) -> str:
    return f"{value:.{decimals(value, digits)}f}" if _finite(value) else "—"


def _count(value: Any) -> str:
    return f"{int(value):,}" if _finite(value) else "—"


def _rate(value: Any, count: Any = None, total: Any = None) -> str:
    """'0.08% (1 of 1,245)': a rate is only trusted with the counts it was made from."""
    text = _pct(value)
    if _finite(count) and _finite(total):
        text += f" ({_count(count)} of {_count(total)})"
    return _esc(text)


def _interval_text(interval: Mapping[str, Any] | None) -> str:
    if not interval or not (_finite(interval.get("low")) and _finite(interval.get("high"))):
        return ""
    return _esc(f"{_pct(interval['low'])} {DASH} {_pct(interval['high'])}")


def _plain(text: Any) -> str:
    """Text for matplotlib: a '$' would otherwise start mathtext, and a token such as
    '$$$ cash' could garble the figure or fail to render."""
    return printable(str(text)).replace("$", r"\$")


def _section(section_id: str, title: str, content: str) -> str:
    return f'<section id="{section_id}">\n<h2>{_esc(title)}</h2>\n{content}\n</section>'


def _table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    numeric: Iterable[int] = (),
    caption: str = "",
    row_headers: bool = True,
) -> str:
    """An HTML table; headers are plain text, cells are already-escaped HTML."""
    numeric = set(numeric)

    def cls(column: int) -> str:
        return ' class="num"' if column in numeric else ""

    head = "".join(
        f'<th scope="col"{cls(column)}>{_esc(header)}</th>' for column, header in enumerate(headers)
    )
    lines = []
    for row in rows:
        cells = []
        for column, cell in enumerate(row):
            if column == 0 and row_headers:
                cells.append(f'<th scope="row">{cell}</th>')
            else:
                cells.append(f"<td{cls(column)}>{cell}</td>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    caption_html = f"<caption>{caption}</caption>" if caption else ""
    return (
        f"<table>{caption_html}<thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(lines)
        + "\n</tbody></table>"
    )


# --------------------------------------------------------------------------- counts


def _ham_count(report: Mapping[str, Any]) -> int | None:
    """How many test messages are ham, from whichever key has it."""
    trec = report.get("trec") or {}
    if _finite(trec.get("ham")):
        return int(trec["ham"])
    confusion = report.get("confusion")
    if confusion:
        return int(confusion["fp"]) + int(confusion["tn"])
    negative = (report.get("top_odds") or {}).get("negative", "ham")
    row = (report.get("per_class") or {}).get(negative)
    return int(row["support"]) if row else None


def _correct_count(report: Mapping[str, Any]) -> int | None:
    matrix = report.get("confusion_matrix")
    if not matrix:
        return None
    return sum(int(row[i]) for i, row in enumerate(matrix["rows"]))


def _misclassification(report: Mapping[str, Any], side: str) -> tuple[Any, Any, Any]:
    """(rate, count, total) of ham called spam (side 'ham') or spam called ham ('spam'):
    TREC's figures when the report has them, else the spam-positive confusion counts."""
    trec = report.get("trec")
    if trec and f"{side}_misclassification" in trec:
        return (
            trec[f"{side}_misclassification"],
            trec.get(f"{side}_misclassified"),
            trec.get(side),
        )
    interval = (report.get("intervals") or {}).get(f"{side}_misclassification")
    if interval:
        return interval.get("value"), interval.get("count"), interval.get("of")
    confusion = report.get("confusion")
    if not confusion:
        return None, None, None
    wrong, right = ("fp", "tn") if side == "ham" else ("fn", "tp")
    total = int(confusion[wrong]) + int(confusion[right])
    return (confusion[wrong] / total if total else None), confusion[wrong], total


# --------------------------------------------------------------------------- sections


def _header(report: Mapping[str, Any]) -> str:
    protocol = report.get("protocol") or {}
    mode = protocol.get("mode")
    heading = PROTOCOL_TITLES.get(mode, str(mode)) if mode else ""
    if mode == "folds" and protocol.get("folds"):
        heading += f" ({protocol['folds']} folds)"
    parts = ["<header>", "<h1>spamnb evaluation report</h1>"]
    if heading:
        parts.append(f'<p class="mode">{_esc(heading)}</p>')
    if protocol.get("description"):
        parts.append(f'<p class="description">{_esc(protocol["description"])}</p>')
    # The mode and the description are shown above as prose.
    settings = [
        (key, value) for key, value in protocol.items() if key not in ("description", "mode")
    ]
    if settings:
        items = "".join(
            f"<dt>{_esc(key.replace('_', ' '))}</dt><dd>{_esc(_setting(value))}</dd>"
            for key, value in settings
        )
        parts.append(f'<dl class="protocol">{items}</dl>')
    parts.append("</header>")
    return "\n".join(parts)


def _setting(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _contents(report: Mapping[str, Any], figures: Sequence[_Figure]) -> str:
    # In-page links only: they keep a long report navigable without any script.
    links = [("summary", "Summary"), ("confusion", "Confusion matrix"), ("per-class", "Per class")]
    if figures:
        links.append(("figures", "Figures"))
    if report.get("compare"):
        links.append(("compare", "Comparison"))
    if report.get("per_fold"):
        links.append(("per-fold", "Per fold"))
    if report.get("top_odds"):
        links.append(("top-odds", "Top odds"))
    items = " ".join(f'<a href="#{anchor}">{_esc(text)}</a>' for anchor, text in links)
    return f'<nav aria-label="Contents">{items}</nav>'


def _warnings(report: Mapping[str, Any]) -> str:
    warnings = report.get("warnings")
    if not warnings:
        return ""
    items = "\n".join(
        f"<li><strong>{_esc(warning.get('kind', 'warning'))}</strong>: "
        f"{_esc(warning.get('message', ''))}</li>"
        if isinstance(warning, Mapping)
        else f"<li>{_esc(warning)}</li>"
        for warning in warnings
    )
    return (
        '<section id="warnings" class="warnings" role="alert">\n'
        f"<h2>Warnings ({len(warnings)})</h2>\n<ul>\n{items}\n</ul>\n</section>"
    )


def _summary(report: Mapping[str, Any]) -> str:
    intervals = report.get("intervals") or {}
    trec = report.get("trec") or {}
    # Cells of these rows are HTML: the class name comes from the user (--label, an
    # index), and went in raw (review 13: a label of <meta http-equiv=refresh ...>
    # made the page leave for another address).
    other = _esc(rest_of_mail(report.get("classes", ())))
    rows: list[tuple[str, str, str, str]] = []

    accuracy = intervals.get("accuracy")
    if accuracy:
        value = _rate(
            accuracy.get("value", report["accuracy"]), accuracy.get("count"), accuracy.get("of")
        )
    else:
        value = _rate(report["accuracy"], _correct_count(report), report["n"])
    rows.append(("Accuracy", value, _interval_text(accuracy), "messages given their true class"))

    baseline = report["baseline_class"]
    online = (report.get("protocol") or {}).get("mode") == "online"
    where = "of the whole stream" if online else "in training"
    baseline_support = (report.get("per_class") or {}).get(baseline, {}).get("support")
    rows.append(
        (
            "Majority baseline",
            _rate(report["baseline_accuracy"], baseline_support, report["n"]),
            "",
            _esc(f"always answering '{baseline}', the commonest class {where}"),
        )
    )
    rows.append(
        (
            "ROC AUC",
            _esc(_num(report.get("roc_auc"))),
            "",
            f"chance that a random spam scores above a random {other}",
        )
    )
    one_minus_roca = trec.get("one_minus_roca")
    if one_minus_roca is None and _finite(report.get("roc_auc")):
        one_minus_roca = 1 - report["roc_auc"]
    if one_minus_roca is not None:
        rows.append(
            (
                "1-ROCA%",
                _esc(_pct(one_minus_roca)),
                "",
                "area above the ROC curve (TREC); lower is better",
            )
        )
    for side, label, meaning in (
        ("ham", "hm%", f"{other} misclassified as spam: false positives"),
        ("spam", "sm%", f"spam misclassified as {other}: false negatives"),
    ):
        rate, count, total = _misclassification(report, side)
        if rate is not None:
            interval = intervals.get(f"{side}_misclassification")
            rows.append((label, _rate(rate, count, total), _interval_text(interval), meaning))
    if "lam" in trec:
        meaning = "logistic average of hm% and sm% (TREC)"
        if trec.get("lam_corrected"):
            # A zero rate has an infinite logit, so lam was taken with 0.5 added to each cell.
            meaning += "; a rate is 0, so 0.5 was added to each count first"
        rows.append(("lam%", _esc(_pct(trec["lam"])), "", _esc(meaning)))
    calibration = report["calibration"]
    rows.append(
        (
            "ECE",
            _esc(_num(calibration.get("ece"))),
            "",
            "expected calibration error of the posterior: confidence against accuracy",
        )
    )
    rows.append(
        (
            "Brier score",
            _esc(_num(calibration.get("brier"))),
            "",
            "mean squared error of the posterior",
        )
    )
    rows += _spam_score_rows(report)
    table = _table(
        ("Measure", "Value", "95% interval (Wilson)", "What it is"),
        rows,
        numeric=(1, 2),
        caption=_esc(f"On {report['n']:,} test messages.")
        + (" Intervals are 95% Wilson score intervals." if intervals else ""),
    )
    return _section("summary", "Summary", table)


def _spam_score_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    score = report.get("spam_score")
    if not score:
        return []
    other_name = rest_of_mail(report.get("classes", ()))
    other = _esc(other_name)  # these rows' labels and meanings are HTML
    rows = []
    calibration = score.get("calibration") or {}
    if calibration:
        rows.append(
            (
                "Calibrated score: ECE",
                _esc(_num(calibration.get("ece"))),
                "",
                "calibration error of the spam score the filter acts on",
            )
        )
        rows.append(
            (
                "Calibrated score: Brier",
                _esc(_num(calibration.get("brier"))),
                "",
                "mean squared error of that score",
            )
        )
    unsure = score.get("unsure")
    if unsure:
        if _finite(score.get("ham_cutoff")) and _finite(score.get("spam_cutoff")):
            band = (
                f"scored between the cut-offs {score['ham_cutoff']:.3f} "
                f"and {score['spam_cutoff']:.3f}"
            )
        else:
            band = "scored inside the unsure band (each fold's own band)"
        rows.append(
            (
                "Unsure",
                _esc(
                    f"{_count(unsure.get('spam'))} spam, {_count(unsure.get('ham'))} {other_name}"
                ),
                "",
                _esc(f"messages {band}, left for a person to judge"),
            )
        )
    for key, label, meaning in (
        (
            "false_positives_at_cutoff",
            _esc(f"{other_name[:1].upper()}{other_name[1:]} at the spam cut-off"),
            f"{other} scored as sure spam",
        ),
        ("false_negatives_at_cutoff", "Spam at the ham cut-off", f"spam scored as sure {other}"),
    ):
        if key in score:
            rows.append((label, _esc(_count(score[key])), "", meaning))
    return rows


def _confusion(report: Mapping[str, Any]) -> str:
    matrix = report["confusion_matrix"]
    classes = [str(name) for name in matrix["classes"]]
    rows = [[int(count) for count in row] for row in matrix["rows"]]
    column_totals = [sum(column) for column in zip(*rows, strict=True)]
    body = []
    for index, (name, row) in enumerate(zip(classes, rows, strict=True)):
        cells = [
            f'<span class="{"hit" if column == index else "miss"}">{_count(count)}</span>'
            for column, count in enumerate(row)
        ]
        body.append([_esc(name), *cells, _count(sum(row))])
    body.append(["total", *(_count(total) for total in column_totals), _count(sum(column_totals))])
    numeric = range(1, len(classes) + 2)
    table = _table(
        ("true \\ predicted", *classes, "total"),
        body,
        numeric=numeric,
        caption="Rows: the true class; columns: the class the filter gave.",
    )
    confusion = report.get("confusion")
    if confusion:
        table += (
            '\n<p class="note">With spam as the positive class: '
            + ", ".join(
                f"{label} {_count(confusion[key])}"
                for key, label in (
                    ("tp", "true positives"),
                    ("fp", "false positives"),
                    ("tn", "true negatives"),
                    ("fn", "false negatives"),
                )
                if key in confusion
            )
            + ".</p>"
        )
    return _section("confusion", "Confusion matrix", table)


def _per_class(report: Mapping[str, Any]) -> str:
    rows = [
        (
            _esc(name),
            _esc(_pct(row.get("precision"))),
            _esc(_pct(row.get("recall"))),
            _esc(_pct(row.get("f1"))),
            _count(row.get("support")),
        )
        for name, row in report["per_class"].items()
    ]
    table = _table(("Class", "Precision", "Recall", "F1", "Messages"), rows, numeric=(1, 2, 3, 4))
    return _section("per-class", "Per class", table)


def _compare(report: Mapping[str, Any]) -> str:
    compare = report.get("compare")
    if not compare:
        return ""
    parts = []
    sets = compare.get("sets") or []
    if sets:
        rows = []
        for entry in sets:
            intervals = entry.get("intervals") or {}
            accuracy = intervals.get("accuracy") or {}
            rows.append(
                (
                    _esc(entry.get("name", "")),
                    _rate(entry.get("accuracy"), accuracy.get("count"), accuracy.get("of")),
                    _interval_text(accuracy),
                    _count(entry.get("errors")),
                    _set_error_cell(
                        entry, "false_positives", intervals.get("ham_misclassification")
                    ),
                    _set_error_cell(
                        entry, "false_negatives", intervals.get("spam_misclassification")
                    ),
                    _esc(_num(entry.get("roc_auc"))),
                )
            )
        parts.append(
            _table(
                (
                    "Set",
                    "Accuracy",
                    "95% interval",
                    "Errors",
                    "False positives",
                    "False negatives",
                    "ROC AUC",
                ),
                rows,
                numeric=range(1, 7),
            )
        )
    pairs = compare.get("pairs") or []
    if pairs:
        rows = [
            (
                _esc(pair.get("a", "")),
                _esc(pair.get("b", "")),
                _count(pair.get("a_only")),
                _count(pair.get("b_only")),
                _esc(_p_value(pair.get("p_value"), pair.get("log10_p_value"))),
            )
            for pair in pairs
        ]
        parts.append(
            _table(
                ("A", "B", "Only A right", "Only B right", "p-value"),
                rows,
                numeric=(2, 3, 4),
                caption=(
                    "McNemar's test on the same messages: only the messages exactly one of the "
                    "pair got right tell them apart; a small p-value says the difference is "
                    "unlikely to be chance."
                ),
                row_headers=False,
            )
        )
    return _section("compare", "Comparison", "\n".join(parts)) if parts else ""


def _set_error_cell(entry: Mapping[str, Any], key: str, interval: Any) -> str:
    if interval:
        return _rate(interval.get("value"), interval.get("count"), interval.get("of"))
    return _count(entry.get(key))


def _p_value(value: Any, log10_value: Any = None) -> str:
    if not _finite(value):
        return "—"
    if value < 0.001:
        return p_value_text(value, log10_value if _finite(log10_value) else None, 2)
    return f"{value:.3f}"


def _per_fold(report: Mapping[str, Any]) -> str:
    folds = report.get("per_fold")
    if not folds:
        return ""
    # Cross-validation fits one unsure band per fold model; show it beside its fold.
    bands = (report.get("spam_score") or {}).get("folds") or []
    with_bands = len(bands) == len(folds)
    rows = []
    for position, fold in enumerate(folds):
        n = fold.get("n")
        correct = (
            round(fold["accuracy"] * n) if _finite(n) and _finite(fold.get("accuracy")) else None
        )
        row = [
            _esc(fold.get("fold", position + 1)),
            _count(fold.get("train_n")),
            _count(n),
            _rate(fold.get("accuracy"), correct, n),
        ]
        if with_bands:
            band = bands[position]
            row.append(
                _esc(f"{_num(band.get('ham_cutoff'), 3)} {DASH} {_num(band.get('spam_cutoff'), 3)}")
            )
        rows.append(row)
    spread = report.get("fold_accuracy")
    if spread:
        rows.append(
            ["mean ± sd", "", "", _esc(f"{_pct(spread.get('mean'))} ± {_pct(spread.get('std'))}")]
            + ([""] if with_bands else [])
        )
    headers = ["Fold", "Trained on", "Tested on", "Accuracy"] + (
        ["Unsure band"] if with_bands else []
    )
    table = _table(headers, rows, numeric=range(1, len(headers)))
    return _section("per-fold", "Per fold", table)


def _top_odds(report: Mapping[str, Any]) -> str:
    odds = report.get("top_odds")
    if not odds:
        return ""
    positive = str(odds.get("positive", "spam"))
    negative = str(odds.get("negative", "ham"))
    tables = []
    for key, towards in (("towards_positive", positive), ("towards_negative", negative)):
        entries = odds.get(key) or []
        if not entries:
            continue
        classes = [positive, negative]
        for entry in entries:
            classes += [name for name in entry.get("counts", {}) if name not in classes]
        rows = [
            (
                str(rank),
                f'<code class="token">{_esc(entry.get("token", ""))}</code>',
                _esc(_num(entry.get("log_odds_ratio"), 2)),
                *(_count(entry.get("counts", {}).get(name, 0)) for name in classes),
            )
            for rank, entry in enumerate(entries, start=1)
        ]
        tables.append(
            f'<div class="odds"><h3>{_esc(f"Towards {towards}")}</h3>'
            + _table(
                ("#", "Token", "log odds ratio", *(f"in {name}" for name in classes)),
                rows,
                numeric=(0, *range(2, len(classes) + 3)),
            )
            + "</div>"
        )
    if not tables:
        return ""
    intro = (
        '<p class="note">The tokens whose counts most favour one class, as natural-log odds '
        "ratios, with how many training messages of each class held them.</p>"
    )
    return _section(
        "top-odds", "Top odds", intro + '\n<div class="pair">' + "\n".join(tables) + "</div>"
    )


def _footer() -> str:
    return (
        f"<footer>Made by spamnb {_esc(__version__)}. The page loads nothing from outside.</footer>"
    )


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class _Figure:
    """One rendered figure: its page id, caption (HTML), alt text and SVG source."""

    figure_id: str
    caption: str
    alt: str
    svg: str
    data: str = ""  # an optional HTML table of the plotted numbers


def _figures(report: Mapping[str, Any], figure_class: Any) -> list[_Figure]:
    builders: dict[str, Callable[[Mapping[str, Any], Any], _Figure | None]] = {
        "fig-roc": _roc_figure,
        "fig-reliability": _reliability_figure,
        "fig-histogram": _histogram_figure,
        "fig-learning-curve": _learning_curve_figure,
    }
    figures = [builders[figure_id](report, figure_class) for figure_id in FIGURE_IDS]
    return [figure for figure in figures if figure is not None]


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    # No date or creator: the same report gives the same page, byte for byte.
    figure.savefig(
        buffer,
        format="svg",
        metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
    )
    text = buffer.getvalue()
    # The XML prolog and DOCTYPE name a DTD by URL; an <img> never needs them.
    return text[text.index("<svg") :]


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _figure_section(figures: Sequence[_Figure]) -> str:
    if not figures:
        return ""
    cells = []
    for figure in figures:
        # <img> rather than inline <svg>: matplotlib's ids and its global '*' style rule would
        # clash between figures and leak into the page, and an image can run no script.
        cell = (
            f'<div class="cell"><figure class="chart" id="{figure.figure_id}">'
            f'<img src="{_data_uri(figure.svg)}" alt="{_esc(figure.alt)}">'
            f"<figcaption>{figure.caption}</figcaption></figure>"
        )
        if figure.data:
            cell += f"<details><summary>The numbers</summary>{figure.data}</details>"
        cells.append(cell + "</div>")
    return _section("figures", "Figures", '<div class="figures">\n' + "\n".join(cells) + "\n</div>")


def _class_colour(name: str, index: int) -> str:
    return {"spam": SPAM_COLOUR, "ham": HAM_COLOUR}.get(
        name, SERIES_COLOURS[(index + 2) % len(SERIES_COLOURS)]
    )


def _roc_figure(report: Mapping[str, Any], figure_class: Any) -> _Figure | None:
    roc = report.get("roc")
    if not roc:
        return None
    points = [
        (fpr, tpr)
        for fpr, tpr in zip(roc.get("fpr") or [], roc.get("tpr") or [], strict=False)
        if _finite(fpr) and _finite(tpr)
    ]
    if not points:
        return None
    n_ham = _ham_count(report)
    other = rest_of_mail(report.get("classes", ()))
    positive_fprs = [fpr for fpr, _ in points if fpr > 0]
    floor = 1 / (2 * n_ham) if n_ham else min(positive_fprs, default=2e-3) / 2
    # The curve starts at (0, 0); a log axis has no zero, so zero FPR is drawn at the floor,
    # half of the smallest non-zero rate the test set could show.
    fprs = [max(floor, fpr) for fpr, _ in [(0.0, 0.0), *points]]
    tprs = [tpr for _, tpr in [(0.0, 0.0), *points]]

    figure = figure_class(figsize=FIGSIZE, layout="constrained")
    axes = figure.add_subplot()
    chance = [floor * (1 / floor) ** (step / 100) for step in range(101)]
    axes.plot(chance, chance, color="#9a9a9a", linestyle=":", linewidth=1, label="chance")
    auc = report.get("roc_auc")
    label = f"ROC, AUC {auc:.4f}" if _finite(auc) else "ROC"
    axes.plot(fprs, tprs, color=SPAM_COLOUR, linewidth=1.8, label=label)
    axes.axvline(floor, color="#6b6b6b", linewidth=0.8, linestyle="--")
    axes.annotate(
        "no false positives",
        (floor, 0.02),
        xytext=(4, 0),
        textcoords="offset points",
        fontsize=7.5,
        color="#4d4d4d",
        rotation=90,
        va="bottom",
    )
    confusion = report.get("confusion")
    if confusion and n_ham and confusion["tp"] + confusion["fn"]:
        point_fpr = max(floor, confusion["fp"] / n_ham)
        point_tpr = confusion["tp"] / (confusion["tp"] + confusion["fn"])
        axes.plot(
            [point_fpr],
            [point_tpr],
            marker="o",
            markersize=7,
            color="#000000",
            linestyle="none",
            label="the filter's decisions",
        )
    axes.set_xscale("log")
    # Rates as percentages, as hm% is quoted, rather than as powers of ten.
    decades = [10.0**-power for power in range(0, 12) if 10.0**-power >= floor / 1.6]
    axes.set_xticks(decades, labels=[f"{100 * decade:g}%" for decade in decades])
    axes.set_xlim(floor / 1.6, 1.05)
    axes.set_ylim(-0.01, 1.01)
    axes.set_xlabel(f"false positive rate: {_plain(other)} called spam (log scale)")
    axes.set_ylabel("true positive rate: spam caught")
    axes.set_title("ROC curve")
    axes.legend(loc="lower right")
    svg = _svg(figure)
    caption = (
        "ROC curve, spam as the positive class. The false-positive axis is logarithmic, where "
        "a spam filter's useful range lies; a rate of zero is drawn at "
        f"1/(2 {TIMES} {n_ham:,} {other}) = {_pct(floor)}."
        if n_ham
        else "ROC curve with a logarithmic false-positive axis; zero is drawn at the left edge."
    )
    return _Figure(
        "fig-roc",
        _esc(caption),
        "ROC curve: true positive rate against false positive rate on a log scale",
        svg,
    )


def _bins_with_counts(calibration: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        row
        for row in calibration.get("bins") or []
        if row.get("count") and _finite(row.get("mean_confidence")) and _finite(row.get("accuracy"))
    ]


def _count_ticks(axes: Any, largest: int) -> None:
    """Plain counts (1, 10, 100) on a log axis: '10^2' makes a reader do arithmetic.
    Below ten, 1, 2 and 5 too, where 1 alone would leave the axis without a scale."""
    ticks = [10**power for power in range(0, len(str(max(1, int(largest)))))]
    if len(ticks) == 1:
        ticks += [tick for tick in (2, 5) if tick <= largest]
    axes.set_yticks(ticks, labels=[f"{tick:,}" for tick in ticks])
    axes.minorticks_off()


def _reliability_figure(report: Mapping[str, Any], figure_class: Any) -> _Figure | None:
    series = [("Naive Bayes posterior", report.get("calibration") or {}, "o", SERIES_COLOURS[0])]
    score_calibration = (report.get("spam_score") or {}).get("calibration")
    if score_calibration:
        series.append(("calibrated spam score", score_calibration, "s", SERIES_COLOURS[2]))
    series = [entry for entry in series if _bins_with_counts(entry[1])]
    if not series:
        return None

    all_bins = [row for _, calibration, _, _ in series for row in _bins_with_counts(calibration)]
    left = min(row["lower"] for row in all_bins)
    bottom = min(left, *(row["accuracy"] for row in all_bins))
    figure = figure_class(figsize=(FIGSIZE[0], FIGSIZE[1] + 0.9), layout="constrained")
    top_axes, count_axes = figure.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": (3, 1.3)}
    )
    top_axes.plot(
        [left, 1], [left, 1], color="#9a9a9a", linestyle=":", linewidth=1, label="perfect"
    )
    width = min(row["upper"] - row["lower"] for row in all_bins) / (len(series) + 0.5)
    for position, (name, calibration, marker, colour) in enumerate(series):
        rows = _bins_with_counts(calibration)
        top_axes.plot(
            [row["mean_confidence"] for row in rows],
            [row["accuracy"] for row in rows],
            marker=marker,
            color=colour,
            linewidth=1.4,
            label=f"{name} (ECE {_num(calibration.get('ece'), 3)})",
        )
        offset = (position - (len(series) - 1) / 2) * width
        bars = count_axes.bar(
            [(row["lower"] + row["upper"]) / 2 + offset for row in rows],
            [row["count"] for row in rows],
            width=width,
            color=colour,
            alpha=0.8,
        )
        count_axes.bar_label(
            bars, labels=[f"{row['count']:,}" for row in rows], fontsize=7, padding=1
        )
    # A little room past 1.0: the top bin's points sit right on it.
    top_axes.set_xlim(left - 0.01, 1.02)
    top_axes.set_ylim(bottom - 0.03, 1.03)
    top_axes.set_ylabel("observed accuracy")
    top_axes.set_title("Reliability: confidence against accuracy")
    top_axes.legend(loc="best")
    count_axes.set_yscale("log")
    _count_ticks(count_axes, max(row["count"] for row in all_bins))
    count_axes.set_ylim(0.7, max(row["count"] for row in all_bins) * 6)
    count_axes.set_ylabel("messages")
    count_axes.set_xlabel("confidence in the predicted class (bin mean)")
    data = _table(
        ("Series", "Bin", "Messages", "Mean confidence", "Accuracy"),
        [
            (
                _esc(name),
                _esc(f"{row['lower']:.2f} {DASH} {row['upper']:.2f}"),
                _count(row["count"]),
                _esc(_pct(row["mean_confidence"])),
                _esc(_pct(row["accuracy"])),
            )
            for name, calibration, _, _ in series
            for row in _bins_with_counts(calibration)
        ],
        numeric=(2, 3, 4),
    )
    caption = (
        "Reliability diagram: in each confidence bin, the mean confidence against the share "
        "that was right; points under the dotted line are over-confident. The bars below "
        "count the messages per bin (log scale)."
    )
    return _Figure(
        "fig-reliability",
        caption,
        "Reliability diagram: mean confidence against observed accuracy per bin, with counts",
        _svg(figure),
        data,
    )


def _histogram_figure(report: Mapping[str, Any], figure_class: Any) -> _Figure | None:
    histogram = report.get("score_histogram")
    if not histogram or not histogram.get("counts") or not histogram.get("edges"):
        return None
    edges = [float(edge) for edge in histogram["edges"]]
    other = rest_of_mail(report.get("classes", ()))
    counts = {
        other if name == HAM else str(name): [int(count) for count in values]
        for name, values in histogram["counts"].items()
        if len(values) == len(edges) - 1
    }
    if not counts:
        return None
    score_name = str(histogram.get("score") or "score")
    figure = figure_class(figsize=FIGSIZE, layout="constrained")
    axes = figure.add_subplot()
    spam_score = report.get("spam_score") or {}
    ham_cutoff, spam_cutoff = spam_score.get("ham_cutoff"), spam_score.get("spam_cutoff")
    if "calibrated" in score_name and _finite(ham_cutoff) and _finite(spam_cutoff):
        axes.axvspan(ham_cutoff, spam_cutoff, color="#efefef", label="unsure band", zorder=0)
    # Zero counts sit on the floor of the log axis rather than vanishing to minus infinity.
    floor = 0.5
    for index, (name, values) in enumerate(counts.items()):
        colour = _class_colour(name, index)
        heights = [count if count > 0 else floor for count in values]
        axes.stairs(heights, edges, baseline=floor, fill=True, alpha=0.25, color=colour)
        axes.stairs(
            heights,
            edges,
            baseline=floor,
            color=colour,
            linewidth=1.6,
            label=f"{_plain(name)} ({sum(values):,})",
        )
    axes.set_yscale("log")
    _count_ticks(axes, max(max(values) for values in counts.values()))
    axes.set_ylim(floor, max(max(values) for values in counts.values()) * 2)
    axes.set_xlim(edges[0], edges[-1])
    axes.set_xlabel(_plain(score_name))
    axes.set_ylabel("messages (log scale)")
    axes.set_title(f"Distribution of the {_plain(score_name)}, per true class")
    axes.legend(loc="best")
    names = list(counts)
    data = _table(
        ("Bin", *names),
        [
            (
                _esc(f"{edges[i]:.2f} {DASH} {edges[i + 1]:.2f}"),
                *(_count(counts[name][i]) for name in names),
            )
            for i in range(len(edges) - 1)
        ],
        numeric=range(1, len(names) + 1),
    )
    caption = (
        f"How the {score_name} falls for each true class, counted in bins on a log scale so a "
        "single misplaced message still shows."
    )
    return _Figure(
        "fig-histogram",
        _esc(caption),
        f"Histogram of the {score_name} per class",
        _svg(figure),
        data,
    )


def _learning_curve_figure(report: Mapping[str, Any], figure_class: Any) -> _Figure | None:
    curve = [row for row in report.get("learning_curve") or [] if _finite(row.get("train_n"))]
    if not curve:
        return None
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for row in curve:
        by_model.setdefault(str(row.get("event_model", "model")), []).append(row)
    has_auc = any(_finite(row.get("roc_auc")) for row in curve)
    figure = figure_class(figsize=(FIGSIZE[0], FIGSIZE[1]), layout="constrained")
    panels = figure.subplots(1, 2 if has_auc else 1, sharex=True, squeeze=False)[0]
    metrics = [("accuracy", "accuracy")] + ([("roc_auc", "ROC AUC")] if has_auc else [])
    sizes = sorted({int(row["train_n"]) for row in curve})
    for axes, (key, label) in zip(panels, metrics, strict=True):
        for index, (model, rows) in enumerate(by_model.items()):
            rows = sorted(rows, key=lambda row: row["train_n"])
            axes.plot(
                [row["train_n"] for row in rows],
                [row[key] if _finite(row.get(key)) else math.nan for row in rows],
                marker="o",
                markersize=4,
                color=SERIES_COLOURS[index % len(SERIES_COLOURS)],
                label=_plain(model),
            )
        axes.set_xscale("log")
        axes.set_title(f"{label} on the test messages")
        axes.set_xlabel("training messages (log scale)")
    # Label the sizes actually trained on; log-axis decades would hide them.
    if len(sizes) <= 8:
        panels[0].set_xticks(sizes, labels=[f"{size:,}" for size in sizes])
        panels[0].minorticks_off()
        for axes in panels[1:]:
            axes.minorticks_off()
        for axes in panels:
            axes.tick_params(axis="x", labelrotation=45)
    panels[0].legend(title="event model", loc="lower right")
    data = _table(
        ("Trained on", "Event model", "Accuracy", "ROC AUC", "False positives", "False negatives"),
        [
            (
                _count(row["train_n"]),
                _esc(row.get("event_model", "")),
                _esc(_pct(row.get("accuracy"))),
                _esc(_num(row.get("roc_auc"))),
                _count(row.get("false_positives")),
                _count(row.get("false_negatives")),
            )
            for row in sorted(curve, key=lambda row: (str(row.get("event_model")), row["train_n"]))
        ],
        numeric=(0, 2, 3, 4, 5),
    )
    caption = (
        "Learning curve: test accuracy"
        + (" and ROC AUC" if has_auc else "")
        + " as the training set grows, one line per event model (log scale of training size)."
    )
    mode = (report.get("protocol") or {}).get("mode")
    if mode in ("folds", "online"):
        # Its numbers are of another test than the rest of the page's.
        caption += (
            " It comes from a stratified split of its own (30% held out), not from the "
            + ("cross-validation" if mode == "folds" else "online run")
            + " the rest of this page reports."
        )
    return _Figure(
        "fig-learning-curve",
        _esc(caption),
        "Learning curve: accuracy and ROC AUC against the number of training messages",
        _svg(figure),
        data,
    )


# --------------------------------------------------------------------------- page

STYLE = """
:root { color-scheme: light; --fg: #1c1c1c; --muted: #5b5b5b; --line: #d5d9de; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: #fff; max-width: 1180px; margin: 0 auto; padding: 1.2rem 1.5rem; }
h1 { font-size: 1.65rem; margin: 0 0 .2rem; }
h2 { font-size: 1.2rem; margin: 1.8rem 0 .6rem; padding-bottom: .2rem;
  border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: .4rem 0; }
.mode { font-weight: 600; margin: 0; }
.description { margin: .2rem 0 .6rem; }
dl.protocol { display: flex; flex-wrap: wrap; gap: .15rem 1.2rem; margin: 0; font-size: .88rem;
  color: var(--muted); }
dl.protocol dt { font-weight: 600; }
dl.protocol dt::after { content: ":"; }
dl.protocol dd { margin: 0 0 0 -.9rem; }
nav { margin: .9rem 0; font-size: .9rem; }
nav a { margin-right: .9rem; }
.warnings { border: 2px solid #b54708; background: #fff6e5; border-radius: 6px;
  padding: .3rem 1.1rem .5rem; margin: 1rem 0; }
.warnings h2 { color: #93370d; border: 0; margin: .5rem 0 .2rem; }
.warnings ul { margin: .2rem 0; padding-left: 1.2rem; }
table { border-collapse: collapse; margin: .3rem 0 1rem; font-size: .92rem; }
th, td { padding: .28rem .65rem; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
thead th { border-bottom: 2px solid #9aa3ad; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
caption { caption-side: bottom; text-align: left; color: var(--muted); font-size: .85rem;
  padding-top: .3rem; }
.hit { font-weight: 700; }
.note, figcaption { color: var(--muted); font-size: .88rem; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr));
  gap: 1.4rem 2rem; }
figure { margin: 0; }
figure img { display: block; width: 100%; height: auto; }
details { font-size: .88rem; margin-top: .3rem; }
summary { cursor: pointer; color: var(--muted); }
.pair { display: flex; flex-wrap: wrap; gap: 0 2.5rem; }
code.token { background: #f2f3f5; padding: 0 .25rem; border-radius: 3px; word-break: break-all; }
.odds td:nth-child(2) { max-width: 22rem; }
footer { margin-top: 2.5rem; color: var(--muted); font-size: .8rem; }
"""

# Runs first, in <head>, so no error can happen before it listens. It counts errors (and
# Content-Security-Policy refusals), then on load checks that every figure decoded, leaving
# the results in the DOM for a headless browser to read: <body data-figures="4/4"
# data-errors="0">.
SCRIPT = """
(function () {
  "use strict";
  var errors = 0;
  function countError() {
    errors += 1;
    if (document.body) { document.body.setAttribute("data-errors", String(errors)); }
  }
  window.addEventListener("error", countError, true);
  document.addEventListener("securitypolicyviolation", countError);
  window.addEventListener("load", function () {
    var figures = document.querySelectorAll("figure.chart");
    var loaded = 0;
    figures.forEach(function (figure) {
      var image = figure.querySelector("img");
      var ok = Boolean(image && image.complete && image.naturalWidth > 0);
      figure.setAttribute("data-loaded", ok ? "yes" : "no");
      if (ok) { loaded += 1; }
    });
    document.body.setAttribute("data-figures", loaded + "/" + figures.length);
    document.body.setAttribute("data-errors", String(errors));
  });
})();
"""


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def _page(title: str, body: str) -> str:
    # Only this exact script and style may run, images only from data: URIs, and nothing may
    # be fetched: hostile text that slipped through escaping could still do nothing.
    policy = "; ".join(
        (
            "default-src 'none'",
            "img-src data:",
            f"style-src {_csp_hash(STYLE)}",
            f"script-src {_csp_hash(SCRIPT)}",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n'
        '<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(policy)}">\n'
        f"<script>{SCRIPT}</script>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="spamnb">\n'
        f"<title>{_esc(title)}</title>\n"
        f"<style>{STYLE}</style>\n"
        "</head>\n<body>\n"
        f"{body}\n"
        "</body>\n</html>\n"
    )
