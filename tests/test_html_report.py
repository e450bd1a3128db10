"""spamnb.html_report: the self-contained HTML report of `spamnb evaluate --report`, checked
as markup and as a real headless Chromium shows it."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import Elements, browser_dom, find_chromium, png_size, screenshot

from spamnb.html_report import FIGURE_IDS, ReportDependencyError, render_html

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = Path(__file__).with_name("report_sample.json")
SCREENSHOT = ROOT / "build" / "report-screenshot.png"

# What evaluate always reports; every other key is optional.
BASICS = (
    "n",
    "classes",
    "accuracy",
    "baseline_class",
    "baseline_accuracy",
    "roc_auc",
    "confusion",
    "confusion_matrix",
    "per_class",
    "calibration",
    "protocol",
)

# Strings from hostile mail in the fixture, which must reach the page only as text.
HOSTILE = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "<script>alert(3)</script>",
    "<i>markup</i>",
    "<b>bold</b>",
    "<\u03b1=1>",
)


def sample_report() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def basics_only() -> dict[str, Any]:
    report = sample_report()
    return {key: report[key] for key in BASICS}


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(sample_report())


def figure_svgs(page: str) -> dict[str, str]:
    """figure id -> the SVG text of its image."""
    found = re.findall(
        r'<figure class="chart" id="([^"]+)"><img src="data:image/svg\+xml;base64,([^"]+)"', page
    )
    return {figure_id: base64.b64decode(data).decode("utf-8") for figure_id, data in found}


# --------------------------------------------------------------------------- the markup


def test_full_report_has_every_section_and_figure_in_order(page):
    ids = Elements(page).ids()
    for section in ("warnings", "summary", "confusion", "per-class", "figures"):
        assert section in ids
    for section in ("compare", "per-fold", "top-odds"):
        assert section in ids
    assert [i for i in ids if i.startswith("fig-")] == list(FIGURE_IDS)
    assert page.startswith("<!DOCTYPE html>")
    # Each figure is an <img> with alt text and a caption.
    for figure_id in FIGURE_IDS:
        match = re.search(rf'<figure class="chart" id="{figure_id}">(.*?)</figure>', page, re.S)
        assert match, figure_id
        assert re.search(r'<img src="data:image/svg\+xml;base64,[^"]+" alt="[^"]+">', match[1])
        assert re.search(r"<figcaption>.+</figcaption>", match[1], re.S)


def test_figures_are_svg_with_text_kept_as_text(page):
    svgs = figure_svgs(page)
    assert list(svgs) == list(FIGURE_IDS)
    for svg in svgs.values():
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
        assert "<script" not in svg
        assert "<text" in svg  # svg.fonttype "none": labels are text, not glyph paths
    assert "false positive rate" in svgs["fig-roc"]
    assert "calibrated spam score" in svgs["fig-reliability"]
    assert "bernoulli" in svgs["fig-learning-curve"]


def test_rates_carry_their_counts_and_intervals(page):
    assert "0.08% (1 of 1,245)" in page  # hm%
    assert "2.50% (25 of 1,000)" in page  # sm%
    assert "98.84% (2,219 of 2,245)" in page  # accuracy
    assert "55.46% (1,245 of 2,245)" in page  # the majority baseline
    assert "1.70% \u2013 3.66%" in page  # sm%'s Wilson interval
    assert "98.66% (443 of 449)" in page  # a fold
    for label in ("1-ROCA%", "hm%", "sm%", "lam%", "ECE", "Brier score", "ROC AUC"):
        assert f'<th scope="row">{label}</th>' in page


def test_hostile_text_from_mail_is_escaped(page):
    for text in HOSTILE:
        assert text not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert "&lt;not a tag&gt;" in page  # the protocol description
    # The page's own script is the only one.
    assert len(Elements(page).all("script")) == 1
    assert len(Elements(page).all("img")) == len(FIGURE_IDS)


def _with_classes(report: dict[str, Any], spam: str, other: str) -> dict[str, Any]:
    """The sample report with its classes renamed, everywhere the report names them."""
    text = json.dumps(report)
    for old, new in (('"spam"', json.dumps(spam)), ('"ham"', json.dumps(other))):
        text = text.replace(old, new)
    return json.loads(text)


def test_a_hostile_class_name_reaches_the_page_only_as_text():
    # The other class's name went raw into five cells of the summary (review 13):
    # a label "<meta http-equiv=refresh ...>" from --label or an index made the page
    # leave for another address, and "<!--" hid the rest of the page.
    hostile = '<meta http-equiv="refresh" content="0;url=http://127.0.0.1/x"><!--'
    page = render_html(_with_classes(sample_report(), "spam", hostile))
    assert '<meta http-equiv="refresh"' not in page and "<!--" not in page
    assert [a.get("http-equiv") for a in Elements(page).all("meta")].count("refresh") == 0
    assert "&lt;meta http-equiv=&quot;refresh&quot;" in page
    assert len(Elements(page).all("table")) == len(
        Elements(render_html(sample_report())).all("table")
    )


def test_characters_a_browser_would_act_on_are_shown_as_escapes():
    # A right-to-left override showed the token "\u202egnp.exe" as "exe.png" (review 13).
    report = sample_report()
    report["top_odds"]["towards_positive"][0]["token"] = "\u202egnp.exe"
    page = render_html(_with_classes(report, "spam", "h\x01am"))
    assert "\u202e" not in page and "\x01" not in page
    assert "\\u202egnp.exe" in page and "h\\x01am" in page


def test_page_references_nothing_outside_itself(page):
    elements = Elements(page)
    for attrs in elements.all("img"):
        assert attrs["src"].startswith("data:image/svg+xml;base64,")
    for attrs in elements.all("a"):
        assert attrs["href"].startswith("#")
    for _, attrs in elements.tags:
        for name in ("src", "href", "action", "srcset", "poster", "formaction"):
            value = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:|//|file:)", value, re.I), (name, value)
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    for svg in figure_svgs(page).values():
        assert not re.search(r'href="(?!#)', svg)  # only references inside the SVG itself
    # The page forbids every source but its own inline script, style and data: images.
    (policy,) = [
        attrs["content"]
        for attrs in elements.all("meta")
        if attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert "default-src 'none'" in policy and "img-src data:" in policy


def test_a_report_of_only_the_basics_leaves_the_optional_sections_out():
    page = render_html(basics_only())
    ids = Elements(page).ids()
    for section in ("summary", "confusion", "per-class", "figures", "fig-reliability"):
        assert section in ids
    for section in ("warnings", "compare", "per-fold", "top-odds"):
        assert section not in ids
    for figure_id in ("fig-roc", "fig-histogram", "fig-learning-curve"):
        assert figure_id not in ids
    # Without TREC's figures, hm% and sm% come from the spam-positive confusion counts.
    assert "0.08% (1 of 1,245)" in page
    assert "lam%" not in page
    assert "calibrated spam score" not in page


def test_each_optional_key_brings_its_own_section():
    for key, element_id in (
        ("warnings", "warnings"),
        ("roc", "fig-roc"),
        ("score_histogram", "fig-histogram"),
        ("learning_curve", "fig-learning-curve"),
        ("compare", "compare"),
        ("per_fold", "per-fold"),
        ("top_odds", "top-odds"),
    ):
        report = basics_only()
        report[key] = sample_report()[key]
        assert element_id in Elements(render_html(report)).ids(), key


def test_cross_validation_shows_each_folds_unsure_band(page):
    assert "Unsure band" in page
    assert "each fold&#x27;s own band" in page
    # Without one band for the whole test set, the histogram shades none.
    assert "unsure band" not in figure_svgs(page)["fig-histogram"]


def test_a_split_reports_one_unsure_band_and_shades_it():
    report = sample_report()
    del report["per_fold"], report["fold_accuracy"]
    del report["spam_score"]["folds"]
    report["spam_score"].update(ham_cutoff=0.35, spam_cutoff=0.7)
    report["protocol"] = {"mode": "split", "description": "Trained on some, tested on the rest."}
    page = render_html(report)
    assert "between the cut-offs 0.350 and 0.700" in page
    assert "unsure band" in figure_svgs(page)["fig-histogram"]
    assert "Train/test split" in page


def test_a_corrected_lam_says_so():
    report = sample_report()
    report["trec"]["lam_corrected"] = True
    assert "0.5 was added to each count" in render_html(report)


def test_a_report_without_a_spam_class_still_renders():
    # Three classes and no 'spam': no confusion counts, no ROC AUC, no hm%/sm%.
    classes = ["a", "b", "c"]
    report = {
        "n": 6,
        "classes": classes,
        "accuracy": 0.5,
        "baseline_class": "a",
        "baseline_accuracy": 1 / 3,
        "roc_auc": None,
        "confusion_matrix": {"classes": classes, "rows": [[1, 1, 0], [0, 1, 1], [1, 0, 1]]},
        "per_class": {
            name: {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2} for name in classes
        },
        "calibration": {
            "ece": 0.1,
            "brier": 0.2,
            "bins": [
                {"lower": 0.3, "upper": 0.4, "count": 2, "mean_confidence": 0.35, "accuracy": 0.0},
                {"lower": 0.6, "upper": 0.7, "count": 4, "mean_confidence": 0.65, "accuracy": 0.75},
            ],
        },
    }
    page = render_html(report)
    assert "50.00% (3 of 6)" in page
    assert '<th scope="row">hm%</th>' not in page
    assert list(figure_svgs(page)) == ["fig-reliability"]


def test_dollar_signs_in_labels_are_drawn_as_text_not_math():
    # matplotlib would read "$x$" as mathtext; labels come from the user's folders.
    report = basics_only()
    report["score_histogram"] = {
        "edges": [0.0, 0.5, 1.0],
        "counts": {"$spam$": [1, 9], "ham": [8, 2]},
        "score": "p $x$",
    }
    svg = figure_svgs(render_html(report))["fig-histogram"]
    assert "$spam$" in svg and "p $x$" in svg


def test_the_same_report_gives_the_same_page(page):
    assert render_html(sample_report()) == page


def test_missing_matplotlib_is_a_report_dependency_error(monkeypatch):
    # None in sys.modules makes the import fail as if matplotlib were not installed.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(
        ReportDependencyError, match=re.escape("pip install matplotlib (spamnb's report extra)")
    ):
        render_html(basics_only())
    assert issubclass(ReportDependencyError, RuntimeError)


def test_the_core_commands_do_not_import_matplotlib():
    # A fresh interpreter: this test process has long since imported matplotlib.
    code = (
        "import json, sys\n"
        "import spamnb.cli\n"
        "after_cli = 'matplotlib' in sys.modules\n"
        "import spamnb.html_report\n"
        "print(json.dumps([after_cli, 'matplotlib' in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(result.stdout) == [False, False]


# --------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def browser_view(binary: str, tmp_path: Path, page: str) -> Elements:
    """The DOM as headless Chromium left it after loading ``page`` from a file."""
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    return browser_dom(binary, tmp_path / "profile", path)


def test_chromium_shows_every_figure_without_errors(chromium, tmp_path, page):
    dom = browser_view(chromium, tmp_path, page)
    (body,) = dom.all("body")
    assert body.get("data-figures") == f"{len(FIGURE_IDS)}/{len(FIGURE_IDS)}"
    assert body.get("data-errors") == "0"
    loaded = {attrs["id"]: attrs.get("data-loaded") for attrs in dom.all("figure")}
    assert loaded == dict.fromkeys(FIGURE_IDS, "yes")

    # A screenshot as a build artefact, for a person to look at.
    screenshot(chromium, tmp_path / "profile", tmp_path / "report.html", SCREENSHOT)
    assert png_size(SCREENSHOT) == (1200, 3000)
    assert SCREENSHOT.stat().st_size > 50_000  # a blank page of that size is a few KB


def test_the_browser_check_notices_a_figure_that_fails(chromium, tmp_path, page):
    # Corrupt one figure's data: the page must report it rather than pass silently.
    broken = page.replace(
        'src="data:image/svg+xml;base64,', 'src="data:image/svg+xml;base64,AAAA', 1
    )
    dom = browser_view(chromium, tmp_path, broken)
    (body,) = dom.all("body")
    assert body.get("data-figures") == f"{len(FIGURE_IDS) - 1}/{len(FIGURE_IDS)}"
    assert int(body.get("data-errors") or 0) >= 1
    assert [attrs["id"] for attrs in dom.all("figure") if attrs.get("data-loaded") == "no"] == [
        FIGURE_IDS[0]
    ]


def test_a_number_short_of_its_bound_is_never_rounded_to_it():
    # A precision of 99.996% shown as 100.00%, or an AUC of 0.99996 as 1.0000, hid an error.
    from spamnb.html_report import _num, _pct
    from spamnb.report import _number, _percent

    for percent in (_pct, _percent):
        assert percent(0.99996) == "99.996%"
        assert (percent(1.0), percent(0.5), percent(0.123456)) == ("100.00%", "50.00%", "12.35%")
    for number in (_num, _number):
        assert number(0.99996) == "0.99996"
        assert (number(1.0), number(0.5), number(0.000004)) == ("1.0000", "0.5000", "0.000004")


def test_a_learning_curve_beside_another_protocol_says_where_it_comes_from(page):
    assert "stratified split of its own (30% held out), not from the cross-validation" in page
    report = sample_report()
    report["protocol"] = {**report["protocol"], "mode": "split"}
    assert "split of its own" not in render_html(report)
    report["protocol"]["mode"] = "online"
    online = render_html(report)
    assert "not from the online run" in online and "commonest class of the whole stream" in online


class _Axes:
    """What _count_ticks asks of matplotlib's axes."""

    def set_yticks(self, ticks: list[int], labels: list[str]) -> None:
        self.ticks, self.labels = ticks, labels

    def minorticks_off(self) -> None:
        pass


@pytest.mark.parametrize(
    ("largest", "ticks"),
    [(1, [1]), (4, [1, 2]), (9, [1, 2, 5]), (10, [1, 10]), (2500, [1, 10, 100, 1000])],
)
def test_count_axes_have_a_scale_even_below_ten(largest, ticks):
    # Below ten the log axis had the tick 1 alone (review 13).
    from spamnb.html_report import _count_ticks

    axes = _Axes()
    _count_ticks(axes, largest)
    assert axes.ticks == ticks
    assert axes.labels == [f"{tick:,}" for tick in ticks]


def test_a_class_name_is_escaped_once_in_the_roc_caption():
    # Escaped inside a caption that is escaped whole, "R&D" read "R&amp;D" (review 15).
    page = render_html(_with_classes(sample_report(), "spam", "R&D <team>"))
    (caption,) = [
        c
        for c in re.findall(r"<figcaption>(.*?)</figcaption>", page, re.S)
        if c.startswith("ROC curve, spam as the positive class")
    ]
    assert "R&amp;D &lt;team&gt;" in caption and "&amp;amp;" not in caption


def test_figure_text_shows_reordering_characters_as_escapes():
    from spamnb.html_report import _plain

    assert _plain("cash$\u202egnp.exe") == "cash\\$\\u202egnp.exe"
