"""`spamnb evaluate`: the online protocol, --compare, --learning-curve, --predictions,
--report and the documented --json keys, on the sample corpus and the real corpora."""

from __future__ import annotations

import base64
import csv
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import browser_dom, find_chromium, png_size, screenshot
from cli_helpers import assert_one_line_error, run, run_json

ROOT = Path(__file__).resolve().parents[1]


def sample_args(sample_maildir: Path) -> list:
    return ["evaluate", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]


def read_predictions(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def documented_keys() -> set[str]:
    """The top-level keys of evaluate --json that the README's table documents."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### evaluate", 1)[1].split("\n### ", 1)[0]
    keys: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            keys.update(re.findall(r"`([a-z_]+)`", first_cell))
    return keys


def test_every_json_key_is_documented(tmp_path, sample_maildir):
    documented = documented_keys()
    for extra in (
        ["--folds", "3", "--learning-curve"],
        ["--online"],
        ["--test-size", "0.3", "--compare", "boolean,multinomial"],
    ):
        report = run_json(*sample_args(sample_maildir), *extra)
        assert set(report) <= documented, set(report) - documented
    # And the documentation names no key that no protocol ever prints.
    folds = run_json(*sample_args(sample_maildir), "--folds", "3", "--learning-curve")
    compare = run_json(
        *sample_args(sample_maildir), "--folds", "3", "--compare", "boolean,bernoulli"
    )
    assert documented <= set(folds) | set(compare)


@pytest.mark.parametrize(
    "protocol", [["--folds", "3"], ["--test-size", "0.5"], ["--online"], ["--model"]]
)
def test_a_reports_numbers_agree_with_each_other_and_with_its_verdicts(
    tmp_path, sample_maildir, protocol
):
    # Mail in an order where a fold's model meets ham first (its classes then in
    # another order than the report's); each number below was once computed apart.
    import shutil

    first, rest = tmp_path / "first", tmp_path / "rest"
    spam = sorted((sample_maildir / "spam" / "cur").iterdir())
    first.mkdir()
    rest.mkdir()
    shutil.copy(spam[0], first)
    for path in spam[1:]:
        shutil.copy(path, rest)
    mail = ["--spam", first, "--ham", sample_maildir / "ham", "--label", f"spam={rest}"]
    if protocol == ["--model"]:
        model = tmp_path / "m.joblib"
        assert run("train", "-m", model, "--spam", sample_maildir / "spam").exit_code == 0
        assert run("train", "-m", model, "--ham", sample_maildir / "ham").exit_code == 0
        protocol = ["-m", model]
    predictions = tmp_path / "p.tsv"
    report = run_json("evaluate", *mail, *protocol, "--predictions", predictions, "--json")
    rows = read_predictions(predictions)
    assert report["n"] == len(rows)
    right = sum(row["predicted"] == row["label"] for row in rows)
    assert report["accuracy"] == pytest.approx(right / len(rows))
    assert report["trec"]["one_minus_roca"] == pytest.approx(1 - report["roc_auc"])
    fpr, tpr = report["roc"]["fpr"], report["roc"]["tpr"]
    area = sum((fpr[i + 1] - fpr[i]) * (tpr[i + 1] + tpr[i]) / 2 for i in range(len(fpr) - 1))
    assert area == pytest.approx(report["roc_auc"])
    histogram = report["score_histogram"]
    for label, counts in histogram["counts"].items():
        assert len(counts) == len(histogram["edges"]) - 1
        assert sum(counts) == sum(row["label"] == label for row in rows)


def test_online_reports_trec_measures(tmp_path, sample_maildir):
    predictions = tmp_path / "predictions.tsv"
    report = run_json(*sample_args(sample_maildir), "--online", "--predictions", predictions)
    assert report["protocol"]["mode"] == "online"
    assert report["protocol"]["order"] == "name"
    rows = read_predictions(predictions)
    assert len(rows) == report["n"]
    # The first message is classified by an empty model, which never says spam.
    assert rows[0]["predicted"] == "ham"
    ham = [row for row in rows if row["label"] == "ham"]
    spam = [row for row in rows if row["label"] == "spam"]
    trec = report["trec"]
    assert trec["ham_misclassification"] == pytest.approx(
        sum(row["predicted"] == "spam" for row in ham) / len(ham)
    )
    assert trec["spam_misclassification"] == pytest.approx(
        sum(row["predicted"] == "ham" for row in spam) / len(spam)
    )
    assert report["accuracy"] > report["baseline_accuracy"]
    # Its runs of one class never start the mistake table: the settings say so.
    assert report["protocol"]["mistake_weight"] == 0.0


def test_a_mistake_weight_for_the_online_protocol_is_refused(sample_maildir):
    # It was taken and never used, and the report showed it as the weight scored with.
    result = run(*sample_args(sample_maildir), "--online", "--mistake-weight", "0.7")
    assert_one_line_error(result, "online", "--mistake-weight")


def test_online_order_by_name_follows_enron_numbers(tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    names = [
        "0010.2000-01-05.farmer.ham.txt",
        "0002.1999-12-20.farmer.ham.txt",
        "0003.2001-03-01.GP.spam.txt",
        "0001.2000-02-01.GP.spam.txt",
    ]
    for number, name in enumerate(names):
        body = "cheap pills now" if "spam" in name else "meeting notes attached"
        (folder / name).write_bytes(f"Subject: message {number}\n\n{body}\n".encode())
    index = tmp_path / "predictions.tsv"
    spam = [folder / n for n in names if "spam" in n]
    ham = [folder / n for n in names if "ham" in n]
    result = run(
        "evaluate", "--online", "--spam", *spam, "--ham", *ham, "--predictions", index, "--json"
    )
    assert result.exit_code == 0, result.output
    order = [Path(row["source"]).name for row in read_predictions(index)]
    assert order == sorted(names)


def test_online_lists_the_classes_in_the_order_the_mail_was_read(tmp_path):
    # A stream that starts with ham listed ham first in every table, where a split of
    # the same command line lists spam first (reviews 10, 20).
    folder = tmp_path / "mail"
    folder.mkdir()
    for number, kind in enumerate(["ham", "spam", "ham", "spam"], start=1):
        body = "cheap pills now" if kind == "spam" else "meeting notes attached"
        path = folder / f"{number:04d}.2000-01-0{number}.x.{kind}.txt"
        path.write_bytes(f"Subject: message {number}\n\n{body}\n".encode())
    spam = sorted(folder.glob("*spam*"))
    ham = sorted(folder.glob("*ham*"))
    report = run_json("evaluate", "--online", "--spam", *spam, "--ham", *ham)
    assert report["classes"] == report["confusion_matrix"]["classes"] == ["spam", "ham"]
    assert list(report["per_class"]) == ["spam", "ham"]


def test_online_predictions_of_three_classes_are_the_ones_the_report_counts(tmp_path):
    # The first message meets an empty model, where every class ties: --predictions
    # gave it the stream's first class (news) and the report this order's (ham), so
    # the two disagreed on the accuracy (review 48).
    folder = tmp_path / "mail"
    folder.mkdir()
    kinds = ["news", "spam", "ham", "news", "spam", "ham", "ham", "news", "spam"]
    bodies = {"spam": "cheap pills now", "ham": "meeting notes attached", "news": "weekly digest"}
    for number, kind in enumerate(kinds, start=1):
        path = folder / f"{number:04d}.2000-01-0{number}.x.{kind}.txt"
        path.write_bytes(f"Subject: message {number}\n\n{bodies[kind]}\n".encode())
    predictions = tmp_path / "predictions.tsv"
    report = run_json(
        "evaluate",
        "--online",
        "--spam",
        *sorted(folder.glob("*spam*")),
        "--ham",
        *sorted(folder.glob("*ham*")),
        "--label",
        f"news={folder}/0001.2000-01-01.x.news.txt",
        *sorted(folder.glob("*news*"))[1:],
        "--predictions",
        predictions,
    )
    rows = read_predictions(predictions)
    assert rows[0]["label"] == "news" and rows[0]["predicted"] == "ham"
    right = sum(row["label"] == row["predicted"] for row in rows)
    assert report["accuracy"] == right / len(rows)
    matrix = report["confusion_matrix"]
    news = matrix["classes"].index("news")
    assert matrix["rows"][news][matrix["classes"].index("ham")] == sum(
        row["label"] == "news" and row["predicted"] == "ham" for row in rows
    )


def test_online_warns_when_the_order_gives_each_class_in_one_block(tmp_path, sample_maildir):
    # An mbox's messages are named box:N, so name order reads one mbox a class as two
    # blocks, and the run never meets ham after its first spam (review 8).
    import mailbox

    boxes = {}
    for label in ("spam", "ham"):
        boxes[label] = tmp_path / f"{label}.mbox"
        box = mailbox.mbox(boxes[label])
        for path in sorted((sample_maildir / label / "cur").iterdir())[:6]:
            box.add(path.read_bytes())
        box.close()
    blocks = run_json("evaluate", "--online", "--spam", boxes["spam"], "--ham", boxes["ham"])
    (warning,) = [w for w in blocks["warnings"] if w["kind"] == "order"]
    assert "'ham', then 'spam'" in warning["message"]
    assert "--order date" in warning["message"]
    # The sample's Maildir files interleave by name: no warning.
    mixed = run_json(*sample_args(sample_maildir), "--online")
    assert not [w for w in mixed["warnings"] if w["kind"] == "order"]


def test_the_order_warning_advises_by_where_the_order_came_from():
    # --order date was advised to a run given an index, or already in date order
    # (review 15).
    from spamnb.evaluation import order_warning

    blocks = ["spam", "spam", "ham", "ham"]
    assert "--order date" in order_warning(blocks, "name")["message"]
    for order in ("date", "index"):
        assert "--order date" not in order_warning(blocks, order)["message"]
    assert order_warning(["spam", "ham", "spam"], "name") is None


def test_a_p_value_below_the_floats_is_written_from_its_logarithm_in_the_terminal():
    from rich.console import Console

    from spamnb.report import _compare_tables

    row = {"name": "a", "options": {}, "n": 10, "accuracy": 0.9, "errors": 1}
    row |= {"false_positives": 0, "false_negatives": 1, "roc_auc": 0.9, "intervals": {}}
    pair = {"a": "a", "b": "b", "a_only": 1413, "b_only": 18, "p_value": 0.0}
    pair |= {"log10_p_value": -389.49485, "both": 0, "neither": 0, "statistic": 1.0}
    compare = {"baseline_class": "ham", "baseline_accuracy": 0.5}
    compare |= {"sets": [row, {**row, "name": "b"}], "pairs": [{**pair, "test": "x"}]}
    console = Console(width=120, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    for table in _compare_tables(compare, ["spam", "ham"]):
        console.print(table)
    assert "3.2e-390" in console.export_text()


def test_online_with_a_trec_index(tmp_path, sample_maildir):
    data = tmp_path / "data"
    data.mkdir()
    lines = []
    messages = (
        sorted((sample_maildir / "spam" / "cur").iterdir())[:6]
        + sorted((sample_maildir / "ham" / "cur").iterdir())[:6]
    )
    for number, message in enumerate(messages, start=1):
        (data / f"inmail.{number}").write_bytes(message.read_bytes())
        label = "spam" if "/spam/" in str(message) else "ham"
        lines.append(f"{label} ../data/inmail.{number}")
    full = tmp_path / "full"
    full.mkdir()
    (full / "index").write_text("\n".join(lines) + "\n")
    predictions = tmp_path / "p.tsv"
    report = run_json(
        "evaluate", "--online", "--index", full / "index", "--predictions", predictions
    )
    assert report["n"] == 12
    assert report["protocol"]["order"] == "index"
    rows = read_predictions(predictions)
    assert [Path(row["source"]).name for row in rows] == [f"inmail.{n}" for n in range(1, 13)]
    assert [row["label"] for row in rows] == ["spam"] * 6 + ["ham"] * 6


def test_index_errors(tmp_path, sample_maildir):
    missing = run("evaluate", "--online", "--index", tmp_path / "nope")
    assert_one_line_error(missing, "cannot read the index")
    bad = tmp_path / "index"
    bad.write_text("spam\n")
    assert_one_line_error(run("evaluate", "--online", "--index", bad), "line 1")
    # Only an index can give a path a NUL byte, which os.stat refuses with ValueError
    # (a traceback; review 8).
    nul = tmp_path / "nul-index"
    nul.write_bytes(b"ham ok\nspam data/a\x00\n")
    assert_one_line_error(run("evaluate", "--online", "--index", nul), "line 2", "NUL byte")
    no_online = run("evaluate", "--index", bad)
    assert_one_line_error(no_online, "--online")
    both = run(*sample_args(sample_maildir), "--online", "--folds", "3")
    assert_one_line_error(both, "--folds", "--online")
    cut = run(*sample_args(sample_maildir), "--online", "--max-features", "100")
    assert_one_line_error(cut, "--max-features")


def test_compare_runs_the_same_folds_and_tests_the_difference(sample_maildir):
    report = run_json(
        *sample_args(sample_maildir), "--folds", "3", "--compare", "boolean k=0.01,multinomial k=1"
    )
    compare = report["compare"]
    assert [s["name"] for s in compare["sets"]] == ["boolean k=0.01", "multinomial k=1"]
    first, second = compare["sets"]
    assert first["n"] == second["n"] == report["n"]
    # The report around the comparison is the first set's.
    assert report["accuracy"] == first["accuracy"]
    (pair,) = compare["pairs"]
    assert 0.0 <= pair["p_value"] <= 1.0
    # Discordant pairs explain the difference in errors exactly.
    assert second["errors"] - first["errors"] == pair["a_only"] - pair["b_only"]
    for row in compare["sets"]:
        low, high = row["intervals"]["accuracy"]["low"], row["intervals"]["accuracy"]["high"]
        assert low <= row["accuracy"] <= high


def test_compare_reads_the_mail_once_per_tokenizer(sample_maildir, monkeypatch):
    from spamnb import cli

    readings = []
    real = cli.tokenize_with_progress

    def recorded(spam_filter, *args, **kwargs):
        readings.append((spam_filter.settings.word_pairs, spam_filter.settings.cjk_pairs))
        return real(spam_filter, *args, **kwargs)

    monkeypatch.setattr(cli, "tokenize_with_progress", recorded)
    sets = "boolean,multinomial pairs,boolean cjk-pairs,boolean no-pairs"
    report = run_json(*sample_args(sample_maildir), "--folds", "3", "--compare", sets)
    assert len(report["compare"]["sets"]) == 4
    # The two sets of the default tokenizer share a reading (word pairs are on by
    # default); the others have their own.
    assert sorted(readings) == [(0, 0), (1, 0), (1, 1)]
    # Settings given outside --compare are the sets' too.
    readings.clear()
    sets = "boolean,multinomial cjk-pairs,bernoulli no-cjk-pairs"
    run_json(*sample_args(sample_maildir), "--cjk-pairs", "--folds", "3", "--compare", sets)
    assert sorted(readings) == [(1, 0), (1, 1)]


def test_compare_without_a_protocol_uses_five_folds(sample_maildir):
    report = run_json(*sample_args(sample_maildir), "--compare", "boolean,bernoulli")
    assert report["protocol"]["mode"] == "folds"
    assert report["protocol"]["folds"] == 5


def test_compare_errors(sample_maildir):
    for text, fragment in (
        ("boolean", "at least two"),
        ("boolean,fancy", "unknown option 'fancy'"),
        ("boolean,k=zero", "not a valid k"),
        ("boolean,boolean", "twice"),
        ("boolean,,multinomial", "empty option set"),
        # The same settings in other words (review 8): k is alpha, and 0.01 the default k.
        ("k=1,alpha=1", "'k=1' and 'alpha=1' are the same settings"),
        ("boolean,k=0.01 boolean", "are the same settings"),
        # A key given twice in a set kept the last without a word.
        ("k=1 k=2,boolean", "gives 'k' twice"),
        ("boolean multinomial,k=1", "gives the event model twice"),
        ("cjk-pairs no-cjk-pairs,boolean", "gives the Chinese and Japanese pairs twice"),
        ("boolean cjk-pairs,cjk-pairs", "are the same settings"),
        # An empty --compare was ignored, and a "+" sign split from its value (review 43).
        ("", "empty option set"),
        ("boolean,k= 1", "'k= 1': k= needs a value"),
        ("k=+1,k=1", "'k=+1' and 'k=1' are the same settings"),
        ("k=1e+2,k=100", "'k=1e+2' and 'k=100' are the same settings"),
        ("k=2.e+1,k=20", "'k=2.e+1' and 'k=20' are the same settings"),
        ("boolean+min-count=+2,boolean+min-count=2", "are the same settings"),
    ):
        result = run(*sample_args(sample_maildir), "--compare", text)
        assert_one_line_error(result, fragment)


def test_learning_curve_rows(sample_maildir):
    report = run_json(*sample_args(sample_maildir), "--test-size", "0.3", "--learning-curve")
    rows = report["learning_curve"]
    models = {row["event_model"] for row in rows}
    assert models == {"multinomial", "boolean", "bernoulli"}
    sizes = sorted({row["train_n"] for row in rows})
    assert sizes[-1] == report["protocol"]["train_n"]
    for row in rows:
        assert 0 <= row["accuracy"] <= 1


def test_learning_curve_of_an_online_run_leaves_copies_out(tmp_path, sample_maildir):
    # The online run keeps copies (mail arrives twice); its learning curve is a 70/30
    # split, where a copy would be tested on a model trained on its twin.
    import shutil

    spam = tmp_path / "spam"
    shutil.copytree(sample_maildir / "spam" / "cur", spam)
    ham = tmp_path / "ham"
    shutil.copytree(sample_maildir / "ham" / "cur", ham)
    plain = run_json("evaluate", "--spam", spam, "--ham", ham, "--online", "--learning-curve")
    for i, original in enumerate(sorted(ham.iterdir())[:8]):
        shutil.copy(original, ham / f"copy{i}")
    doubled = run_json("evaluate", "--spam", spam, "--ham", ham, "--online", "--learning-curve")
    assert doubled["n"] == plain["n"] + 8
    assert doubled["learning_curve"] == plain["learning_curve"]


def test_three_classes_count_accuracy_as_the_matrix_does(sample_maildir):
    # Spam against the rest counted a message of one other class called another as
    # right, so the accuracy's count and interval were of another number.
    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    args = ["evaluate", "--spam", spam / "cur", "--ham", ham / "cur"]
    args += ["--label", f"news={spam / 'new'}", f"lists={ham / 'new'}", "--online"]
    report = run_json(*args)
    rows = report["confusion_matrix"]["rows"]
    right = sum(rows[i][i] for i in range(len(rows)))
    interval = report["intervals"]["accuracy"]
    assert interval["count"] == right and interval["of"] == report["n"]
    assert interval["low"] <= report["accuracy"] == right / report["n"] <= interval["high"]
    shown = run(*args).stdout
    assert "other mail called spam (hm)" in shown and "ham called spam" not in shown


def test_human_report_fits_80_columns_without_colour(sample_maildir):
    from click.testing import CliRunner

    from spamnb.cli import main

    result = CliRunner().invoke(
        main,
        [str(a) for a in sample_args(sample_maildir)] + ["--folds", "3", "--learning-curve"],
        env={"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b[" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    for title in ("Summary", "Reliability", "Histogram", "Learning curve", "Per fold"):
        assert title in out
    # Warnings go to stderr: this sample has fewer than 200 messages of each class.
    assert "Warning:" in result.stderr


@pytest.mark.parametrize("columns", [40, 52, 64])
def test_no_number_is_broken_on_a_narrow_terminal(sample_maildir, columns):
    # rich folded numbers with the columns it narrowed: tune's cut-off read "0.77665"
    # over "7", and a reliability bin "0.50-0.5" over "5" (review 35).  Every number a
    # wide terminal shows must appear whole on a narrow one.
    from click.testing import CliRunner
    from rich.cells import cell_len

    from spamnb.cli import main, stdout_console

    def shown(args: list[str], width: int) -> str:
        stdout_console.cache_clear()  # kept for the process, with the width it read
        result = CliRunner().invoke(
            main, args, env={"COLUMNS": str(width), "NO_COLOR": "1"}, catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        return result.stdout

    def numbers(args: list[str], width: int) -> list[str]:
        return sorted(re.findall(r"\d[\d.,%-]*", shown(args, width)))

    folders = ["--spam", str(sample_maildir / "spam"), "--ham", str(sample_maildir / "ham")]
    commands = (
        ["evaluate", *folders, "--folds", "3", "--learning-curve"],
        ["tune", *folders, "--alphas", "1,0.01", "--event-models", "boolean", "--test-size", "0.3"],
    )
    try:
        for args in commands:
            assert numbers(args, columns) == numbers(args, 200)
        # Nor does a table run past the edge where it can fit with its numbers whole
        # (only the command to copy is never wrapped).
        if columns >= 64:
            lines = shown(commands[1], columns).splitlines()
            assert all(
                cell_len(line) <= columns for line in lines if not line.startswith("Train with")
            )
    finally:
        stdout_console.cache_clear()  # the next test's console reads its own width


def test_report_is_written(tmp_path, sample_maildir):
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    result = run(*sample_args(sample_maildir), "--folds", "3", "--report", page)
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert "<html" in text.lower()
    for figure in ("fig-roc", "fig-reliability", "fig-histogram", "fig-learning-curve"):
        assert figure in text


def test_report_and_predictions_paths_are_checked_before_the_evaluation(tmp_path, sample_maildir):
    # A path it could not write was found after the whole run, whose results were lost.
    predictions = tmp_path / "p.tsv"
    for report, said in (
        ("", "needs a file name"),
        ("-", "/dev/stdout"),
        (f"{tmp_path}/newdir/", "names a folder"),
        (tmp_path / "nodir" / "r.html", "there is no folder"),
    ):
        result = run(
            *sample_args(sample_maildir), "--test-size", "0.3", "--predictions", predictions,
            "--report", report,
        )  # fmt: skip
        assert_one_line_error(result, said)
        assert not predictions.exists()
        assert not (tmp_path / "newdir").exists()


def test_an_output_that_would_replace_what_the_run_reads_is_refused(tmp_path, sample_maildir):
    # A mistyped --predictions replaced the model evaluated (every piped message then
    # exited 3) or a message of the mail, and said nothing.
    import shutil

    mail = tmp_path / "mail"
    shutil.copytree(sample_maildir, mail)
    model = tmp_path / "m.joblib"
    assert run("train", "-m", model, "--spam", mail / "spam", "--ham", mail / "ham").exit_code == 0
    message = sorted((mail / "spam" / "cur").iterdir())[0]
    kept = {path: path.read_bytes() for path in (model, Path(f"{model}.table"), message)}
    evaluate = ["evaluate", "-m", model, "--spam", mail / "spam", "--ham", mail / "ham"]
    for option in ("--predictions", "--report"):
        for output, said in (
            (model, "over"),
            (Path(f"{model}.table"), "over"),
            (message, f"over a file in {mail / 'spam'}"),
            (mail / "ham" / "new.html", f"into {mail / 'ham'}"),
        ):
            result = run(*evaluate, option, output)
            assert_one_line_error(result, option, f"would write {said}", "which this run reads")
    assert all(path.read_bytes() == data for path, data in kept.items())
    assert not (mail / "ham" / "new.html").exists()
    # Beside them is fine, and so is standard output.
    assert run(*evaluate, "--predictions", tmp_path / "p.tsv").exit_code == 0
    assert run(*evaluate, "--predictions", "/dev/stdout").exit_code == 0


def test_a_report_in_a_folder_that_may_not_be_written_is_refused_first(
    tmp_path, sample_maildir, monkeypatch
):
    # The report is written beside itself and renamed, so its folder must take a new
    # file even when the old report may be written.
    from spamnb import cli

    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "r.html").write_text("old")
    real_access = os.access
    monkeypatch.setattr(
        cli.os,
        "access",
        lambda path, mode: False if os.fspath(path) == str(locked) else real_access(path, mode),
    )
    result = run(*sample_args(sample_maildir), "--test-size", "0.3", "--report", locked / "r.html")
    assert_one_line_error(result, "may not be written")
    assert (locked / "r.html").read_text() == "old"


def test_an_existing_report_keeps_its_permissions_and_a_new_one_is_private(
    tmp_path, sample_maildir
):
    pytest.importorskip("matplotlib")
    shared, link, fresh = tmp_path / "shared.html", tmp_path / "link.html", tmp_path / "new.html"
    shared.write_text("old")
    shared.chmod(0o644)
    link.symlink_to(shared.name)
    for page in (link, fresh):
        result = run(*sample_args(sample_maildir), "--test-size", "0.3", "--report", page)
        assert result.exit_code == 0, result.output
    assert "<html" in shared.read_text(encoding="utf-8").lower() and link.is_symlink()
    assert shared.stat().st_mode & 0o777 == 0o644
    assert fresh.stat().st_mode & 0o777 == 0o600


def test_a_report_without_its_learning_curve_is_still_written(tmp_path, sample_maildir):
    pytest.importorskip("matplotlib")
    # One spam: the online run needs no split, the curve the report adds does.
    spam, ham = tmp_path / "spam", tmp_path / "ham"
    spam.mkdir()
    ham.mkdir()
    for source, folder in zip(
        [*sorted((sample_maildir / "spam" / "cur").iterdir())[:1],
         *sorted((sample_maildir / "ham" / "cur").iterdir())[:2]],
        [spam, ham, ham],
        strict=True,
    ):  # fmt: skip
        (folder / source.name).write_bytes(source.read_bytes())
    page = tmp_path / "r.html"
    args = ["evaluate", "--spam", spam, "--ham", ham, "--online"]
    report = run_json(*args, "--report", page, "--json")
    assert "learning_curve" not in report and page.exists()
    assert [w for w in report["warnings"] if w["kind"] == "learning-curve"]
    # Asked for, its failure is the run's, and says whose split it was.
    assert_one_line_error(run(*args, "--learning-curve"), "learning curve")


def test_a_class_against_spam_is_called_by_its_name(tmp_path, sample_maildir):
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    args = [
        "evaluate",
        "--spam",
        sample_maildir / "spam",
        "--label",
        f"news={sample_maildir / 'ham'}",
    ]
    result = run(*args, "--test-size", "0.3", "--report", page)
    assert result.exit_code == 0, result.output
    assert "news called spam (hm)" in result.stdout
    text = page.read_text(encoding="utf-8")
    # The figures are SVG images inlined as base64, their words kept as SVG text.
    figures = "".join(
        base64.b64decode(data).decode("utf-8")
        for data in re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", text)
    )
    for said in ("news misclassified as spam", "News at the spam cut-off", "9 news"):
        assert said in text, said
    assert "news called spam" in figures
    words = re.sub(r"<style.*?</style>|<script.*?</script>", "", text, flags=re.S) + figures
    assert "ham" not in words.lower().replace("ham cut-off", "")


# --------------------------------------------------------------------------- real corpora


def corpus_args(corpus: dict) -> list:
    return [
        "evaluate",
        "--spam",
        *[str(d) for d in corpus["spam"]],
        "--ham",
        *[str(d) for d in corpus["ham"]],
    ]


@pytest.mark.corpus
def test_spamassassin_ten_folds_with_an_html_report(tmp_path, real_corpus):
    pytest.importorskip("matplotlib")
    page = tmp_path / "spamassassin.html"
    result = run(
        *corpus_args(real_corpus("spamassassin")), "--folds", "10", "--report", page, "--json"
    )
    assert result.exit_code == 0, result.output
    import json

    report = json.loads(result.stdout)
    assert report["n"] == 6046
    assert report["accuracy"] >= 0.99
    assert report["roc_auc"] >= 0.999
    assert len(report["per_fold"]) == 10
    # Every figure loads in a real browser, with no error on the page.
    binary = find_chromium()
    dom = browser_dom(binary, tmp_path / "profile", page)
    (body,) = dom.all("body")
    assert body.get("data-figures") == "4/4"
    assert body.get("data-errors") == "0"
    # The page and its screenshot are kept as build artefacts, for a person to look at.
    build = ROOT / "build"
    build.mkdir(exist_ok=True)
    (build / "spamassassin-report.html").write_bytes(page.read_bytes())
    shot = build / "spamassassin-report.png"
    screenshot(binary, tmp_path / "profile", page, shot, height=6000)
    assert png_size(shot) == (1200, 6000)


@pytest.mark.corpus
def test_spamassassin_online_in_date_order(real_corpus):
    report = run_json(*corpus_args(real_corpus("spamassassin")), "--online", "--order", "date")
    assert report["protocol"]["order"] == "date"
    trec = report["trec"]
    assert trec["ham"] + trec["spam"] == report["n"] == 6046
    # Online learning starts from nothing, yet must end far above the baseline.
    assert report["accuracy"] >= 0.98
    assert trec["lam"] <= 0.02


@pytest.mark.corpus
def test_enron1_online_trec_measures_agree_with_the_predictions(tmp_path, real_corpus):
    predictions = tmp_path / "enron1.tsv"
    report = run_json(*corpus_args(real_corpus("enron1")), "--online", "--predictions", predictions)
    rows = read_predictions(predictions)
    assert len(rows) == report["n"]
    # File-name order is Enron-Spam's delivery order: its numbers, ham and spam interleaved.
    numbers = [int(Path(row["source"]).name.split(".")[0]) for row in rows]
    assert numbers == sorted(numbers)
    labels = [row["label"] for row in rows]
    assert labels[: len(labels) // 2].count("spam") > 0.2 * len(labels) // 2
    # An independent computation of the TREC measures from the written verdicts.
    ham = [row for row in rows if row["label"] == "ham"]
    spam = [row for row in rows if row["label"] == "spam"]
    hm = sum(row["predicted"] != "ham" for row in ham) / len(ham)
    sm = sum(row["predicted"] != "spam" for row in spam) / len(spam)
    trec = report["trec"]
    assert trec["ham_misclassification"] == pytest.approx(hm)
    assert trec["spam_misclassification"] == pytest.approx(sm)
    assert 0 < hm < 1 and 0 < sm < 1

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    expected_lam = 1 / (1 + math.exp(-(logit(hm) + logit(sm)) / 2))
    assert trec["lam"] == pytest.approx(expected_lam)
    assert report["accuracy"] >= 0.95


def test_predictions_follow_a_symlink_and_write_into_a_fifo(tmp_path, sample_maildir):
    import os
    import threading

    target = tmp_path / "real.tsv"
    target.write_text("old\n")
    link = tmp_path / "link.tsv"
    link.symlink_to(target)
    run_json(*sample_args(sample_maildir), "--test-size", "0.3", "--predictions", link)
    assert link.is_symlink()
    assert target.read_text().startswith("position\tsource\tlabel\t")
    # A FIFO (as /dev/stdout may be) is written to, not replaced by a file.
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    run_json(*sample_args(sample_maildir), "--test-size", "0.3", "--predictions", fifo)
    reader.join(timeout=30)
    assert fifo.is_fifo()
    assert received and received[0] == target.read_bytes()


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="needs /dev/stdout")
def test_predictions_to_dev_stdout_join_the_report_in_a_pipe_and_in_a_file(
    tmp_path, sample_maildir
):
    import subprocess
    import sys

    command = [
        sys.executable,
        "-m",
        "spamnb",
        *[str(a) for a in sample_args(sample_maildir)],
        "--test-size",
        "0.3",
        "--predictions",
        "/dev/stdout",
    ]
    # Under a pipe /dev/stdout resolved to "pipe:[N]" and the command failed.
    piped = subprocess.run(command, capture_output=True, check=False)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith(b"position\tsource\tlabel\t")
    assert b"accuracy" in piped.stdout
    # Under "> file" the TSV was renamed over the file and the report was lost.
    out = tmp_path / "out.txt"
    with open(out, "wb") as fh:
        written = subprocess.run(command, stdout=fh, stderr=subprocess.PIPE, check=False)
    assert written.returncode == 0, written.stderr
    assert out.read_bytes() == piped.stdout


def test_predictions_keep_file_names_that_are_not_utf8(tmp_path, sample_maildir):
    import os
    import shutil

    ham = tmp_path / "ham"
    shutil.copytree(sample_maildir / "ham" / "cur", ham)
    first = sorted(ham.iterdir())[0]
    odd = os.fsencode(ham) + b"/bad\xffname"
    os.rename(first, odd)
    predictions = tmp_path / "p.tsv"
    result = run(
        "evaluate",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        ham,
        "--folds",
        "3",
        "--predictions",
        predictions,
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    # As classify prints it: a Python string literal, which os.fsencode(ast.literal_eval(
    # field)) turns back into the name's bytes.
    sources = [row["source"] for row in read_predictions(predictions)]
    assert repr(os.fsdecode(odd)) in sources


def test_predictions_keep_one_line_for_any_file_name(tmp_path, sample_maildir):
    ham = tmp_path / "ham"
    ham.mkdir()
    messages = sorted((sample_maildir / "ham" / "cur").iterdir())
    names = ["cr\rx", "nl\nx", "tab\tx", "sep\u2028x", "plain"]
    for name, message in zip(names, messages, strict=False):
        (ham / name).write_bytes(message.read_bytes())
    predictions = tmp_path / "predictions.tsv"
    spam = sample_maildir / "spam"
    result = run("evaluate", "--online", "--spam", spam, "--ham", ham, "--predictions", predictions)
    assert result.exit_code == 0, result.output
    text = predictions.read_text(encoding="utf-8")
    # Every reader splits it the same way: no separator of any kind inside a row.
    assert len(text.splitlines()) == len(text.split("\n")) - 1 == result_rows(predictions) + 1
    sources = {row["source"] for row in read_predictions(predictions)}
    assert {repr(str(ham / name)) for name in names[:4]} | {str(ham / "plain")} <= sources


def result_rows(path: Path) -> int:
    return len(read_predictions(path))


def test_order_without_online_is_refused(sample_maildir):
    # It was ignored: the folds or the split were drawn as always.
    for protocol in (["--folds", "3"], ["--test-size", "0.3"]):
        result = run(*sample_args(sample_maildir), *protocol, "--order", "date")
        assert_one_line_error(result, "--order", "--online")


def test_predictions_give_every_digit_of_their_numbers(tmp_path, sample_maildir):
    # Six significant digits wrote every score above 0.9999995 as 1, which a cut-off
    # from tune (six decimals) could not be applied to (review 20).
    predictions = tmp_path / "p.tsv"
    result = run(*sample_args(sample_maildir), "--test-size", "0.3", "--predictions", predictions)
    assert result.exit_code == 0
    cells = [
        row[name]
        for row in read_predictions(predictions)
        for name in ("spam_probability", "decision", "spam_score")
    ]
    assert cells and all(repr(float(cell)) == cell for cell in cells)
    assert any(len(cell.lstrip("-0.").replace(".", "")) > 6 for cell in cells)


def test_predictions_and_report_may_not_name_one_file(tmp_path, sample_maildir):
    # The report was written last, over the predictions, without a word (review 20).
    same = tmp_path / "out"
    result = run(
        *sample_args(sample_maildir), "--test-size", "0.3", "--predictions", same,
        "--report", same,
    )  # fmt: skip
    assert_one_line_error(result, "--predictions and --report both name")
    assert not same.exists()


def test_predictions_to_a_reader_that_went_away_end_quietly(sample_maildir):
    # 'Error: cannot write /dev/stdout: Broken pipe', where README says such output
    # ends the command quietly with status 1 (review 20).
    args = [*sample_args(sample_maildir), "--test-size", "0.3", "--predictions", "/dev/stdout"]
    process = subprocess.Popen(
        [sys.executable, "-m", "spamnb", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait() == 1
    assert stderr == b""
