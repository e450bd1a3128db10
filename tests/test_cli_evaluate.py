"""`spamnb evaluate`, on the sample corpus and on the real public corpora."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import assert_one_line_error, run, run_json

REQUIRED_KEYS = {
    "n",
    "accuracy",
    "baseline_accuracy",
    "roc_auc",
    "confusion",
    "per_class",
    "calibration",
}


def paths(dirs):
    return [str(d) for d in dirs]


def test_split_report_has_the_documented_keys(sample_maildir):
    report = run_json(
        "evaluate",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        "--test-size",
        "0.3",
        "--seed",
        "3",
    )
    assert set(report) >= REQUIRED_KEYS
    assert set(report["confusion"]) == {"tp", "fp", "tn", "fn"}
    assert sum(report["confusion"].values()) == report["n"]
    assert set(report["calibration"]) >= {"ece", "brier", "bins"}
    assert len(report["calibration"]["bins"]) == 10
    assert sum(b["count"] for b in report["calibration"]["bins"]) == report["n"]
    assert set(report["per_class"]) == {"spam", "ham"}
    assert report["protocol"]["mode"] == "split"
    # 30% of roughly 60 messages, stratified.
    assert 15 <= report["n"] <= 22


def test_split_is_deterministic(sample_maildir):
    args = [
        "evaluate",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        "--test-size",
        "0.5",
    ]
    first = run_json(*args, "--seed", "1")
    again = run_json(*args, "--seed", "1")
    assert again == first


def test_model_mode_agrees_with_classify(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    report = run_json(
        "evaluate", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    lines = run(
        "classify", "-m", model, sample_maildir / "spam", sample_maildir / "ham"
    ).stdout.splitlines()
    truth = ["spam" if "/spam/" in line.split("\t")[2] else "ham" for line in lines]
    predicted = [line.split("\t")[0] for line in lines]
    correct = sum(t == p for t, p in zip(truth, predicted, strict=True))
    assert report["n"] == len(lines)
    assert report["accuracy"] == pytest.approx(correct / len(lines))
    assert report["protocol"]["mode"] == "model"


def test_human_report_shows_baseline_and_tables(sample_maildir):
    result = run(
        "evaluate",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        "--test-size",
        "0.3",
    )
    assert result.exit_code == 0, result.output
    for text in (
        "accuracy",
        "baseline",
        "ROC AUC",
        "Confusion",
        "Calibration",
        "precision",
        "Brier",
    ):
        assert text in result.stdout


def test_errors(tmp_path, sample_maildir):
    assert_one_line_error(
        run(
            "evaluate",
            "--spam",
            sample_maildir / "spam",
            "--test-size",
            "0.3",
            "-m",
            tmp_path / "m.joblib",
        ),
        "--test-size",
    )
    assert_one_line_error(
        run("evaluate", "-m", tmp_path / "absent.joblib", "--spam", sample_maildir / "spam"),
        "absent.joblib",
    )
    assert_one_line_error(
        run(
            "evaluate",
            "--spam",
            tmp_path / "nope",
            "--ham",
            sample_maildir / "ham",
            "--test-size",
            "0.3",
        ),
        "nope",
    )
    # One class of mail: no model was given, so none is to blame.
    assert_one_line_error(
        run("evaluate", "--spam", sample_maildir / "spam", "--test-size", "0.3"),
        "the mail has only the class 'spam'",
    )


def test_no_protocol_and_no_default_model_suggests_a_protocol(
    tmp_path, sample_maildir, monkeypatch
):
    # Mail given without --test-size, --folds or --online is scored by the default
    # model; where there is none, the protocol was most likely forgotten (review 10).
    monkeypatch.delenv("SPAMNB_MODEL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = run("evaluate", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    assert_one_line_error(result, "no model at", "--test-size, --folds or --online", "-m MODEL")


@pytest.mark.parametrize("command", [("evaluate", "--folds", "3"), ("tune",)])
def test_copies_that_leave_one_class_are_named_as_the_cause(tmp_path, sample_maildir, command):
    import shutil

    ham = tmp_path / "ham"
    shutil.copytree(sample_maildir / "spam" / "cur", ham)
    assert_one_line_error(
        run(*command, "--spam", sample_maildir / "spam" / "cur", "--ham", ham),
        f"cannot {command[0]}: every 'spam' message is also filed under another label",
        "leaves only the class 'ham'",
    )


def test_copies_are_used_once_so_none_is_tested_on_its_own_training(tmp_path, sample_maildir):
    import shutil

    spam = tmp_path / "spam"
    shutil.copytree(sample_maildir / "spam" / "cur", spam)
    ham = tmp_path / "ham"
    shutil.copytree(sample_maildir / "ham" / "cur", ham)
    originals = sorted(spam.iterdir())[:3]
    for i, original in enumerate(originals):
        shutil.copy(original, spam / f"copy{i}")
    shutil.copy(sorted(ham.iterdir())[0], spam / "relabelled")
    # 28 spam and 28 ham, each once: the ham filed as spam too counts as ham, the label
    # read last (ham is read after spam), as train counts it.
    for protocol, tested in ((["--folds", "3"], 56), (["--test-size", "0.5"], 28)):
        report = run_json("evaluate", "--spam", spam, "--ham", ham, *protocol)
        assert report["copies"] == {"copies": 4, "relabelled": 1}
        assert report["n"] == tested
        supports = {label: row["support"] for label, row in report["per_class"].items()}
        assert supports == {"spam": tested // 2, "ham": tested // 2}
        warning = [w for w in report["warnings"] if w["kind"] == "copies"]
        assert warning and "4 messages were copies" in warning[0]["message"]
    # train, given the same folders, counts it under the same label.
    from spamnb.store import load

    both = tmp_path / "both.joblib"
    assert run("train", "-m", both, "--spam", spam, "--ham", ham).exit_code == 0
    assert load(both).label_of((spam / "relabelled").read_bytes()) == "ham"
    # A model scores all it is given, copies too.
    model = tmp_path / "m.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    scored = run_json("evaluate", "-m", model, "--spam", spam, "--ham", ham)
    assert scored["n"] == 60 and scored["copies"]["copies"] == 0


def test_a_model_evaluated_on_mail_it_learnt_is_warned_of(tmp_path, sample_maildir):
    model = tmp_path / "m.joblib"
    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    run("train", "-m", model, "--spam", spam / "cur", "--ham", ham / "cur")
    learnt = len(list((spam / "cur").iterdir())) + len(list((ham / "cur").iterdir()))
    report = run_json("evaluate", "-m", model, "--spam", spam, "--ham", ham)
    assert report["protocol"]["in_model"] == learnt < report["n"]
    warning = [w for w in report["warnings"] if w["kind"] == "in-model"]
    assert warning and f"trained on {learnt} of the {report['n']} messages" in warning[0]["message"]
    fresh = run_json("evaluate", "-m", model, "--spam", spam / "new", "--ham", ham / "new")
    assert fresh["protocol"]["in_model"] == 0
    assert "in-model" not in {w["kind"] for w in fresh["warnings"]}


def test_small_class_warnings_count_the_messages_the_rates_are_of(sample_maildir):
    # A split's rates are of its test part: 9 of each class here, not the 30 given.
    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    report = run_json("evaluate", "--spam", spam, "--ham", ham, "--test-size", "0.3")
    assert report["intervals"]["spam_misclassification"]["of"] == 9
    small = [w["message"] for w in report["warnings"] if w["kind"] == "small-class"]
    assert len(small) == 2 and all("only 9 messages" in m and "11.1 percentage" in m for m in small)
    # Folds test every message once: all 30 of a class.
    folds = run_json("evaluate", "--spam", spam, "--ham", ham, "--folds", "3")
    small = [w["message"] for w in folds["warnings"] if w["kind"] == "small-class"]
    assert all("only 30 messages" in m for m in small)


def test_scores_that_mislead_are_warned_of(tmp_path, sample_maildir):
    import shutil

    spam, ham = tmp_path / "spam", tmp_path / "ham"
    shutil.copytree(sample_maildir / "ham" / "cur", ham)
    spam.mkdir()
    for source in sorted((sample_maildir / "spam" / "cur").iterdir())[:3]:
        shutil.copy(source, spam)
    # A training part with one spam: no calibration, and accuracy at the baseline.
    report = run_json("evaluate", "--spam", spam, "--ham", ham, "--test-size", "0.9")
    assert report["spam_score"]["fitted_on"] == 0
    kinds = {w["kind"] for w in report["warnings"]}
    assert {"uncalibrated", "baseline"} <= kinds
    assert report["protocol"]["mistake_weight"] == 0.5
    # A model scored under other options than its own, whose calibration they miss.
    model = tmp_path / "m.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    own = run_json("evaluate", "-m", model, *mail)
    assert not {"uncalibrated", "calibration", "baseline"} & {w["kind"] for w in own["warnings"]}
    other = run_json("evaluate", "-m", model, *mail, "--alpha", "1", "--mistake-weight", "0")
    assert "calibration" in {w["kind"] for w in other["warnings"]}
    assert other["protocol"]["mistake_weight"] == 0


def test_a_spam_score_is_never_fitted_to_fall(sample_maildir):
    # One token and a huge k: each fold model ranks its held-out spam below its ham
    # (ROC AUC 0.43), and a falling map turned the spam score against the verdicts.
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    options = ("--event-model", "bernoulli", "--alpha", "1e6", "--max-features", "1")
    report = run_json("evaluate", *mail, "--folds", "5", *options)
    slopes = [fold["slope"] for fold in report["spam_score"]["folds"]]
    assert slopes == [0.0] * 5
    flat = [w["message"] for w in report["warnings"] if w["kind"] == "flat-score"]
    assert flat == [
        "5 of 5 folds' spam scores were fitted flat: held-out spam scored no higher than "
        "held-out ham, so the score cannot rank mail (the scoring options, or too little "
        "mail that tells the classes apart, are the likely cause)"
    ]


def split_report(corpus: dict) -> dict:
    """evaluate --json on the 70/30 stratified split with seed 0, as the issues measure."""
    return run_json(
        "evaluate",
        "--spam",
        *paths(corpus["spam"]),
        "--ham",
        *paths(corpus["ham"]),
        "--test-size",
        "0.3",
        "--seed",
        "0",
    )


@pytest.mark.corpus
def test_spamassassin_split_meets_the_accuracy_targets(real_corpus):
    report = split_report(real_corpus("spamassassin"))
    assert report["n"] == 1814
    assert report["per_class"]["ham"]["support"] == 1245
    assert report["baseline_accuracy"] == pytest.approx(1245 / 1814)
    # Issue 4's defaults (99.12% and 0.9998 when chosen); issue 4 asks for 99.3% in the end.
    assert report["accuracy"] >= 0.99
    assert report["confusion"]["fp"] <= 5
    assert report["roc_auc"] >= 0.9995
    # The calibrated spam score, fitted on held-out folds of the training part only.
    score = report["spam_score"]
    assert score["calibration"]["ece"] <= 0.02
    assert score["calibration"]["ece"] < report["calibration"]["ece"]
    assert 0 < score["ham_cutoff"] < score["spam_cutoff"] < 1
    unsure = score["unsure"]["spam"] + score["unsure"]["ham"]
    assert unsure < 0.1 * report["n"]


@pytest.mark.corpus
def test_enron1_split_beats_the_baseline_by_far(real_corpus):
    report = split_report(real_corpus("enron1"))
    assert report["baseline_accuracy"] < 0.75
    # Enron1's 178 copies are left out before the split, so no message is tested on a
    # model trained on its copy: the split is make bench-accuracy's (1,498 test).
    assert report["copies"] == {"copies": 178, "relabelled": 0}
    assert report["n"] == 1498
    assert "copies" in {warning["kind"] for warning in report["warnings"]}
    assert report["accuracy"] >= 0.98
    assert report["roc_auc"] >= 0.998


@pytest.mark.corpus
def test_sms_split_holds_defaults_chosen_on_mail(real_corpus):
    # No default was chosen on the SMS Spam Collection: short texts with one header line.
    report = split_report(real_corpus("sms"))
    # Every SMS read as a message (5,574 in all), 403 copies left out before the split:
    # the benchmark's split.
    assert report["copies"]["copies"] == 403
    assert report["n"] == 1551
    assert report["baseline_accuracy"] == pytest.approx(1355 / 1551)
    # 98.74% and 0.9933 when the corpus was added; scikit-learn's MultinomialNB made
    # 98.58% and 0.9822 on the benchmark's deduplicated split.
    assert report["accuracy"] >= 0.98
    assert report["roc_auc"] >= 0.99


def test_one_class_is_a_clear_error(tmp_path, sample_maildir):
    result = run("evaluate", "--spam", sample_maildir / "spam", "--test-size", "0.3")
    assert_one_line_error(result, "two classes")
    one = tmp_path / "one.joblib"
    run("train", "-m", one, "--spam", sample_maildir / "spam")
    assert_one_line_error(
        run("evaluate", "-m", one, "--spam", sample_maildir / "spam"), "two classes"
    )


def test_model_mode_baseline_comes_from_the_models_counts(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    spam_files = sorted((sample_maildir / "spam" / "cur").iterdir())[:10]
    run("train", "-m", model, "--spam", *spam_files, "--ham", sample_maildir / "ham")
    report = run_json(
        "evaluate", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    # 30 ham against 10 spam in training: the baseline always says ham.
    assert report["baseline_class"] == "ham"
    assert report["baseline_accuracy"] == pytest.approx(0.5)


def folds_report(sample_maildir, *extra: str) -> dict:
    return run_json(
        "evaluate", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham", *extra
    )


def test_folds_pool_every_message_once(sample_maildir):
    report = folds_report(sample_maildir, "--folds", "4", "--seed", "5")
    assert set(report) >= REQUIRED_KEYS | {"per_fold", "fold_accuracy", "spam_score"}
    assert report["n"] == 60
    assert sum(report["confusion"].values()) == 60
    assert report["per_class"]["spam"]["support"] == report["per_class"]["ham"]["support"] == 30
    protocol = report["protocol"]
    assert (protocol["mode"], protocol["folds"], protocol["seed"]) == ("folds", 4, 5)
    assert protocol["event_model"] == "boolean"
    folds = report["per_fold"]
    assert [row["fold"] for row in folds] == [1, 2, 3, 4]
    assert sum(row["n"] for row in folds) == 60
    assert all(row["train_n"] + row["n"] == 60 for row in folds)
    accuracies = [row["accuracy"] for row in folds]
    assert report["fold_accuracy"]["mean"] == pytest.approx(sum(accuracies) / 4)
    mean = report["fold_accuracy"]["mean"]
    spread = (sum((a - mean) ** 2 for a in accuracies) / 3) ** 0.5
    assert report["fold_accuracy"]["std"] == pytest.approx(spread)
    # Equal folds of 15: the pooled accuracy is the mean of the folds'.
    assert report["accuracy"] == pytest.approx(mean)
    assert len(report["spam_score"]["folds"]) == 4
    assert sum(b["count"] for b in report["spam_score"]["calibration"]["bins"]) == 60


def test_folds_are_deterministic_and_take_scoring_options(sample_maildir):
    first = folds_report(sample_maildir, "--folds", "3", "--seed", "2")
    assert folds_report(sample_maildir, "--folds", "3", "--seed", "2") == first
    other = folds_report(
        sample_maildir, "--folds", "3", "--seed", "2", "--event-model", "bernoulli", "--alpha", "1"
    )
    assert (other["protocol"]["event_model"], other["protocol"]["alpha"]) == ("bernoulli", 1.0)
    assert other["per_fold"] != first["per_fold"] or other["roc_auc"] != first["roc_auc"]


def test_folds_human_report(sample_maildir):
    result = run(
        "evaluate",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        "--folds",
        "3",
    )
    assert result.exit_code == 0, result.output
    for text in ("2 of 3 stratified", "Per fold", "mean ± sd", "accuracy", "ROC AUC", "Confusion"):
        assert text in result.stdout


def test_folds_errors(tmp_path, sample_maildir):
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    assert_one_line_error(
        run("evaluate", *mail, "--folds", "3", "--test-size", "0.3"), "--folds", "--test-size"
    )
    assert_one_line_error(
        run("evaluate", *mail, "--folds", "3", "-m", tmp_path / "m.joblib"), "--folds", "-m"
    )
    assert_one_line_error(run("evaluate", *mail, "--folds", "61"), "61")
    assert_one_line_error(
        run("evaluate", "--spam", sample_maildir / "spam", "--folds", "3"), "two classes"
    )
    assert run("evaluate", *mail, "--folds", "1").exit_code == 2


def test_messages_cut_by_the_tokenizer_limits_are_counted(sample_maildir):
    common = ["evaluate", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    common += ["--test-size", "0.3", "--seed", "1"]
    report = run_json(*common)
    assert report["cut"] == {"size": 0, "tokens": 0, "max_bytes": 1_048_576, "max_tokens": 50_000}
    assert not [w for w in report["warnings"] if w["kind"] == "cut"]
    limited = run_json(*common, "--max-tokens", "60", "--max-bytes", "3000")
    sizes = [p.stat().st_size for p in sample_maildir.glob("*/*/*")]
    assert limited["cut"]["size"] == sum(size > 3000 for size in sizes)
    assert 0 < limited["cut"]["tokens"] <= len(sizes)
    assert [w["kind"] for w in limited["warnings"]].count("cut") == 2
    human = run(*common, "--max-tokens", "60")
    assert "reached the cap of 60 tokens" in human.stderr


def test_evaluate_does_not_import_scipy_stats(sample_maildir):
    # It took 0.6 s of the SpamAssassin split's 8.6 s, for a rank sum and a binomial
    # tail that numpy and whole numbers give as exactly.
    probe = (
        "import json, sys\n"
        "from spamnb.entry import main\n"
        "try:\n    main()\n"
        "except SystemExit as exit:\n"
        "    sys.stderr.write(json.dumps(['scipy.stats' in sys.modules, exit.code]))\n"
    )
    arguments = ["evaluate", "--json", "--test-size", "0.3"]
    arguments += ["--spam", str(sample_maildir / "spam"), "--ham", str(sample_maildir / "ham")]
    done = subprocess.run(
        [sys.executable, "-c", probe, *arguments], capture_output=True, check=False, text=True
    )
    assert json.loads(done.stderr.splitlines()[-1]) == [False, 0], done.stderr
    assert 0 < json.loads(done.stdout)["roc_auc"] <= 1


def test_mail_without_a_spam_class_keeps_the_accuracys_interval(sample_maildir):
    # The accuracy has no sides; it lost its interval with the spam rates (review 48).
    report = run_json(
        "evaluate",
        "--label",
        f"news={sample_maildir / 'spam'}",
        "--label",
        f"lists={sample_maildir / 'ham'}",
        "--test-size",
        "0.3",
    )
    assert "confusion" not in report
    [(name, interval)] = report["intervals"].items()
    assert name == "accuracy"
    assert interval["of"] == report["n"] and interval["count"] == round(
        report["accuracy"] * report["n"]
    )
    assert interval["low"] <= report["accuracy"] <= interval["high"] and interval["low"] < 1
