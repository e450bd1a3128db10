"""`spamnb tune` on the sample corpus, with small grids so it stays quick."""

from __future__ import annotations

import math

import pytest
from cli_helpers import assert_one_line_error, run, run_json

from spamnb import cli, tuning
from spamnb.store import load

SMALL = ("--event-models", "boolean,multinomial", "--alphas", "1,0.01", "--max-features", "0")


def mail(sample_maildir):
    return ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")


def rank(row_and_position):
    position, row = row_and_position
    return (row["errors"], row["false_positives"], -row["roc_auc"], position)


def test_json_has_every_setting_and_chooses_by_the_rule(sample_maildir):
    report = run_json("tune", *mail(sample_maildir), *SMALL, "--folds", "3", "--seed", "1")
    assert set(report) == {"protocol", "grid", "chosen", "cutoffs", "test", "copies", "warnings"}
    # With --json the caveats are in the object, where a script reads them.
    assert [w["kind"] for w in report["warnings"]] == ["small-class"]
    assert report["copies"] == {"copies": 0, "relabelled": 0}
    assert report["test"] is None
    assert report["protocol"]["tuned_n"] == 60
    assert report["protocol"]["test_n"] == 0
    assert (report["protocol"]["folds"], report["protocol"]["seed"]) == (3, 1)
    grid = report["grid"]
    tried = [(row["event_model"], row["alpha"], row["max_features"]) for row in grid]
    assert tried == [
        ("boolean", 1.0, 0),
        ("boolean", 0.01, 0),
        ("multinomial", 1.0, 0),
        ("multinomial", 0.01, 0),
    ]
    for row in grid:
        assert set(row) >= {"accuracy", "false_positives", "false_negatives", "errors", "roc_auc"}
        assert row["errors"] == row["false_positives"] + row["false_negatives"]
        assert row["accuracy"] == pytest.approx(1 - row["errors"] / 60)
    assert [row["chosen"] for row in grid].count(True) == 1
    best_position, best = min(enumerate(grid), key=rank)
    assert best["chosen"]
    chosen = report["chosen"]
    assert (chosen["event_model"], chosen["alpha"], chosen["max_features"]) == tried[best_position]
    assert chosen["train_options"] == (
        f"--event-model {chosen['event_model']} --alpha {chosen['alpha']!r} --max-features 0"
        " --min-count 1 --mistake-weight 0.5"
    )


def test_cutoff_table_keeps_to_each_target_rate(sample_maildir):
    report = run_json(
        "tune", *mail(sample_maildir), *SMALL, "--fp-rate", "0.1", "--fp-rate", "0,0.05"
    )
    cutoffs = report["cutoffs"]
    assert [row["fp_rate"] for row in cutoffs] == [0.1, 0.0, 0.05]
    for row in cutoffs:
        assert (row["ham"], row["spam"]) == (30, 30)
        assert row["ham_above"] <= math.floor(row["fp_rate"] * row["ham"])
        assert row["spam_recall"] == pytest.approx(row["spam_caught"] / row["spam"])
        assert row["cutoff"] is None or 0 < row["cutoff"] <= 1
    by_rate = {row["fp_rate"]: row for row in cutoffs}
    # Allowing more false positives can only lower the cut-off and catch more spam.
    assert by_rate[0.1]["cutoff"] <= by_rate[0.0]["cutoff"]
    assert by_rate[0.1]["spam_recall"] >= by_rate[0.0]["spam_recall"]


def test_test_size_tunes_on_the_rest_and_tests_once(sample_maildir):
    report = run_json("tune", *mail(sample_maildir), *SMALL, "--test-size", "0.3", "--seed", "2")
    protocol = report["protocol"]
    assert protocol["test_size"] == 0.3
    assert protocol["tuned_n"] + protocol["test_n"] == 60
    assert protocol["test_n"] == 18  # 30% of 30 of each class
    test = report["test"]
    assert test["n"] == 18
    assert test["accuracy"] == pytest.approx(
        1 - (test["false_positives"] + test["false_negatives"]) / 18
    )
    assert 0 <= test["roc_auc"] <= 1
    assert [row["fp_rate"] for row in test["cutoffs"]] == [r["fp_rate"] for r in report["cutoffs"]]
    assert all(row["ham"] + row["spam"] == 18 for row in test["cutoffs"])
    # The cross-validation saw only the tuning part.
    for row in report["grid"]:
        assert row["accuracy"] == pytest.approx(1 - row["errors"] / protocol["tuned_n"])


def test_human_output(sample_maildir):
    result = run("tune", *mail(sample_maildir), *SMALL, "--test-size", "0.3")
    assert result.exit_code == 0, result.output
    for text in (
        "Settings tried",
        "multinomial",
        "spamnb train --event-model",
        "Spam cut-offs",
        "--spam-cutoff",
        "Held-out test part",
    ):
        assert text in result.stdout
    chosen_lines = [line for line in result.stdout.splitlines() if line.strip().startswith("*")]
    assert len(chosen_lines) == 1
    # 21 messages a class tuned on (30 less the test part): one error is 4.76 points.
    assert "only 21 ham messages" in result.stderr
    assert "4.76 percentage points" in result.stderr


def test_errors(sample_maildir):
    assert_one_line_error(run("tune", "--spam", sample_maildir / "spam"), "--ham")
    assert_one_line_error(
        run("tune", *mail(sample_maildir), *SMALL, "--folds", "61"), "cannot tune", "61"
    )
    for option, value in (
        ("--alphas", "0"),
        ("--alphas", "x"),
        ("--event-models", "poisson"),
        ("--max-features", "-3"),
        ("--fp-rate", "1"),
        ("--folds", "1"),
    ):
        result = run("tune", *mail(sample_maildir), option, value)
        assert result.exit_code == 2, (option, value, result.output)
        assert option in result.stderr


def test_cli_defaults_are_the_tuning_modules():
    def numbers(text):
        return tuple(float(part) for part in text.split(","))

    assert tuple(cli.TUNE_EVENT_MODELS.split(",")) == tuning.DEFAULT_EVENT_MODELS
    assert numbers(cli.TUNE_ALPHAS) == tuning.DEFAULT_ALPHAS
    assert numbers(cli.TUNE_MAX_FEATURES) == tuning.DEFAULT_MAX_FEATURES
    assert numbers(cli.TUNE_FP_RATES) == tuning.DEFAULT_FP_RATES


def test_the_suggested_command_is_never_wrapped(sample_maildir):
    # At 80 columns it was cut before its last value, and pasted it failed.
    grid = ["--event-models", "bernoulli", "--alphas", "0.001", "--max-features", "0"]
    args = ["tune", "-j", "1", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    options = run_json(*args, *grid)["chosen"]["train_options"]
    command = f"Train with it: spamnb train {options}"
    assert len(command) > 80
    assert command in run(*args, *grid).stdout.splitlines()


def test_the_printed_options_give_a_model_the_settings_tune_measured(tmp_path, sample_maildir):
    # A model made with other scoring options kept them, and scored with a setting no
    # row of the grid had measured.
    model = tmp_path / "m.joblib"
    made = run(
        "train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham",
        "--min-count", "2", "--mistake-weight", "0", "--select", "df",
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    grid = ["--event-models", "boolean", "--alphas", "0.01", "--max-features", "300"]
    args = ["tune", "-j", "1", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    options = run_json(*args, *grid)["chosen"]["train_options"].split()
    assert run("train", "-m", model, *options).exit_code == 0
    described = load(model).model
    assert (described.min_count, described.selection, described.max_features) == (1, "ig", 300)
    assert load(model).mistakes.weight == 0.5


def test_tune_reads_the_mail_with_the_tokenizer_options_it_is_given(
    tmp_path, sample_maildir, monkeypatch
):
    read_with = []
    real = cli.tokenize_with_progress

    def recorded(spam_filter, *args, **kwargs):
        read_with.append(spam_filter.settings)
        return real(spam_filter, *args, **kwargs)

    monkeypatch.setattr(cli, "tokenize_with_progress", recorded)
    grid = ["--event-models", "boolean", "--alphas", "0.01", "--max-features", "0"]
    args = ["tune", "-j", "1", *mail(sample_maildir), *grid]
    plain = run_json(*args, "--word-pairs")
    assert read_with.pop().to_dict() == plain["protocol"]["tokenizer"]
    assert plain["protocol"]["tokenizer"]["cjk_pairs"] == 0
    # Options that are the defaults are not printed; the others are, for train --new.
    assert plain["chosen"]["train_options"].endswith("--mistake-weight 0.5")
    paired = run_json(*args, "--cjk-pairs", "--no-word-pairs", "--max-bytes", "0")
    settings = read_with.pop()
    assert (settings.cjk_pairs, settings.word_pairs, settings.max_bytes) == (1, 0, 0)
    assert paired["protocol"]["tokenizer"] == settings.to_dict()
    options = paired["chosen"]["train_options"]
    assert options.endswith(" --no-word-pairs --cjk-pairs --max-bytes 0")
    assert (
        "read with --no-word-pairs --cjk-pairs --max-bytes 0" in paired["protocol"]["description"]
    )
    # The report says that the line needs train --new (pasted on a model it is refused).
    shown = " ".join(run(*args, "--cjk-pairs").stdout.split())
    assert "its tokenizer options need train --new" in shown
    assert "need train --new" not in " ".join(run(*args).stdout.split())
    # The printed options make a model of that tokenizer.
    model = tmp_path / "m.joblib"
    assert (
        run("train", "--new", "-m", model, *mail(sample_maildir), *options.split()).exit_code == 0
    )
    assert load(model).settings == settings


def test_tune_warns_as_evaluate_folds_does(tmp_path, sample_maildir):
    # Two spam among many ham: the chosen row was exactly always-ham, and most folds
    # had no spam score calibrated, and tune said only that a class was small.
    spam = tmp_path / "spam"
    spam.mkdir()
    for source in sorted((sample_maildir / "spam" / "cur").iterdir())[:2]:
        (spam / source.name).write_bytes(source.read_bytes())
    report = run_json(
        "tune", "-j", "1", "--spam", spam, "--ham", sample_maildir / "ham", "--folds", "2",
        "--event-models", "boolean", "--alphas", "0.01", "--max-features", "0", "--json",
    )  # fmt: skip
    kinds = {warning["kind"] for warning in report["warnings"]}
    assert "uncalibrated" in kinds
    chosen = next(row for row in report["grid"] if row["chosen"])
    assert ("baseline" in kinds) == (chosen["accuracy"] <= 30 / 32)


def test_a_tiny_k_is_tuned_as_any_other(sample_maildir):
    # Bernoulli at k=1e-20 held certainties, its scores were NaN, and tune refused it;
    # worked out from the counts, its weights are finite (review 20).
    args = ["tune", "-j", "1", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    report = run_json(*args, "--alphas", "1e-20,0.01", "--event-models", "bernoulli")
    tiny = next(row for row in report["grid"] if row["alpha"] == 1e-20)
    assert tiny["roc_auc"] is not None and 0.5 < tiny["roc_auc"] <= 1
