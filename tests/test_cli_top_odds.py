"""`spamnb top-odds`."""

from __future__ import annotations

import json
import math

import pytest
from cli_helpers import assert_one_line_error, run, run_json, train_sample

from spamnb.store import load


def test_top_odds_tables_and_json(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    odds = run_json("top-odds", "-m", model, "-n", "15", "--min-count", "2")
    spammy, hammy = odds["towards_positive"], odds["towards_negative"]
    assert len(spammy) == 15 and len(hammy) == 15
    # Sorted, strongest first, and each side really leans its way.
    ratios = [row["log_odds_ratio"] for row in spammy]
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] > 0
    assert all(row["log_odds_ratio"] > 0 for row in hammy)
    for row in spammy + hammy:
        assert row["counts"]["spam"] + row["counts"]["ham"] >= 2
    # The smoothed ratio, recomputed from the printed counts and the model's totals: the
    # default boolean model counts messages containing a token, smoothed with k=0.01.
    trained = load(model).model
    assert trained.event_model == "boolean"
    counts, k = trained.doc_counts, trained.alpha
    totals = dict(zip(["spam", "ham"], counts.sum(axis=1), strict=True))
    size = counts.shape[1]
    for row in (spammy[0], hammy[0]):
        p_spam = (row["counts"]["spam"] + k) / (totals["spam"] + k * size)
        p_ham = (row["counts"]["ham"] + k) / (totals["ham"] + k * size)
        expected = math.log(p_spam / p_ham)
        assert abs(row["log_odds_ratio"]) == pytest.approx(abs(expected))
    human = run("top-odds", "-m", model, "-n", "5")
    assert human.exit_code == 0
    assert (
        "Tokens that point to spam" in human.stdout and "Tokens that point to ham" in human.stdout
    )


def test_empty_tables_say_why(tmp_path, sample_maildir):
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir)
    result = run("top-odds", "-m", model, "--min-count", "100000", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["towards_positive"] == data["towards_negative"] == []
    assert "a lower --min-count" in result.stderr
    assert "--min-count" not in run("top-odds", "-m", model).stderr
    # The model's own --min-count can hide every token: no lower one helps then.
    run("train", "-m", model, "--min-count", "100000")
    hidden = run("top-odds", "-m", model, "--min-count", "1")
    assert "no token the model scores" in hidden.stderr
    assert "a lower --min-count" not in hidden.stderr


def test_unknown_class(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    assert_one_line_error(run("top-odds", "-m", model, "--positive", "phishing"), "phishing")


def test_each_table_holds_only_tokens_that_point_its_way(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    odds = run_json("top-odds", "-m", model, "-n", "100000", "--min-count", "1")
    spammy, hammy = odds["towards_positive"], odds["towards_negative"]
    assert all(row["log_odds_ratio"] > 0 for row in spammy + hammy)
    # Between them, every token but those the classes share evenly.
    ratios = load(model).model.log_odds_ratios("spam", "ham")
    active = load(model).model.active_features()
    assert len(spammy) == int(((ratios > 0) & active).sum())
    assert len(hammy) == int(((ratios < 0) & active).sum())


def model_of_two(tmp_path, spam: bytes, ham: bytes, *options: str):
    """A model trained on one spam and one ham message."""
    (tmp_path / "spam.eml").write_bytes(spam)
    (tmp_path / "ham.eml").write_bytes(ham)
    model = tmp_path / "model.joblib"
    trained = run(
        "train", "-m", model, "--spam", tmp_path / "spam.eml", "--ham", tmp_path / "ham.eml",
        *options,
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    return model


def test_tokens_cannot_send_the_terminal_control_sequences(tmp_path):
    model = model_of_two(
        tmp_path,
        b"Subject: \x1b[31mred\x1b[0m offer\n\nbuy \x1b]0;title\x07 now\n",
        b"Subject: lunch\n\nsee you at noon\n",
    )
    human = run("top-odds", "-m", model, "-n", "50", "--min-count", "1")
    assert human.exit_code == 0
    assert "\x1b" not in human.stdout and "\x07" not in human.stdout
    assert "\\x1b" in human.stdout


def test_one_class_on_both_sides_is_refused(tmp_path):
    # It printed two empty tables of P(w|ham)/P(w|ham) with status 0.
    model = tmp_path / "any.joblib"
    result = run("top-odds", "-m", model, "--positive", "ham", "--negative", "ham")
    assert_one_line_error(result, "both 'ham'")


def test_min_count_counts_the_two_classes_compared(tmp_path):
    # In a model of three classes, a token of spam and news alike was listed as seen
    # often enough, and tokens of news alone were ranked on the classes' totals.
    bodies = {
        "spam": ["prize offer", "prize offer", "offer", "offer"],
        "ham": ["lunch", "lunch", "lunch"],
        "news": ["prize", "prize", "prize"],
    }
    folders = {}
    for label, texts in bodies.items():
        folder = folders[label] = tmp_path / label
        folder.mkdir()
        for i, text in enumerate(texts):
            (folder / f"{i}.eml").write_bytes(
                f"Message-ID: <{label}{i}@x>\nSubject: s{i}\n\n{text} draft{i}\n".encode()
            )
    model = tmp_path / "model.joblib"
    trained = run(
        "train", "-m", model, "--spam", folders["spam"], "--ham", folders["ham"],
        "--label", f"news={folders['news']}", "--no-word-pairs",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    odds = run_json("top-odds", "-m", model, "-n", "1000", "--min-count", "4")
    rows = odds["towards_positive"] + odds["towards_negative"]
    assert "offer" in [row["token"] for row in rows]
    assert all(row["counts"]["spam"] + row["counts"]["ham"] >= 4 for row in rows)
    assert "prize" not in [row["token"] for row in rows]
    every = run_json("top-odds", "-m", model, "-n", "1000", "--min-count", "1")
    shown = every["towards_positive"] + every["towards_negative"]
    assert all(row["counts"]["spam"] + row["counts"]["ham"] >= 1 for row in shown)


def test_equal_ratios_are_listed_by_their_crc_in_both_tables(tmp_path):
    from spamnb.counts import token_crcs

    model = model_of_two(
        tmp_path,
        b"Subject: s\n\nalpha bravo charlie\n",
        b"Subject: h\n\ndelta echo foxtrot\n",
        "--no-word-pairs",
    )
    odds = run_json("top-odds", "-m", model, "-n", "100", "--min-count", "1")
    for table, words in (
        ("towards_positive", "alpha bravo charlie"),
        ("towards_negative", "delta echo foxtrot"),
    ):
        listed = [row["token"] for row in odds[table] if row["token"] in words.split()]
        crcs = dict(zip(listed, token_crcs(listed).tolist(), strict=True))
        assert listed == sorted(listed, key=lambda token: (crcs[token], token))
        assert len(listed) == 3


def test_the_tokens_listed_do_not_depend_on_the_order_mail_was_read(tmp_path):
    # Two spam folders whose words tie (each seen once, in spam alone): read in either
    # order, the vocabularies differ, and -n 1 cuts through the tie.
    folders = {}
    for name, text in (("a", b"alpha"), ("b", b"bravo"), ("ham", b"delta")):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "1").write_bytes(b"Subject: same\n\n" + text + b"\n")
    tables, vocabularies = [], []
    for order in (("a", "b"), ("b", "a")):
        model = tmp_path / f"{order[0]}.joblib"
        spam = [folders[name] for name in order]
        assert (
            run("train", "--new", "-m", model, "--spam", *spam, "--ham", folders["ham"]).exit_code
            == 0
        )
        vocabularies.append(load(model).vocabulary.tokens)
        odds = run_json("top-odds", "-m", model, "-n", "1", "--min-count", "1")
        tables.append(odds["towards_positive"])
    assert vocabularies[0] != vocabularies[1]
    assert tables[0] == tables[1]
    assert tables[0][0]["token"] in ("alpha", "bravo")


def test_each_tokens_weight_is_what_it_adds_when_scored(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir)
    spam_filter = load(model)
    assert spam_filter.mistake_weight() > 0
    odds = run_json("top-odds", "-m", model, "-n", "5", "--min-count", "2")
    for table, sign in (("towards_positive", 1), ("towards_negative", -1)):
        for row in odds[table]:
            # A message of the token alone, against a message of nothing the model knows.
            _, log_odds, _ = spam_filter.score_tokens([[row["token"]], ["never-seen-token"]])
            with_it, without = log_odds
            assert sign * (with_it - without) == pytest.approx(row["weight"], abs=1e-9)
            # The mistake table's share moves it off the counts' own ratio.
            assert row["weight"] != pytest.approx(row["log_odds_ratio"], abs=1e-3)


def test_a_class_without_mail_is_refused(tmp_path, sample_maildir):
    # Against a class whose mail was all forgotten, every token it never saw had the
    # same ratio, set by the smoothing alone, and top-odds printed the table (review 28).
    model = tmp_path / "model.joblib"
    assert train_sample(model, sample_maildir).exit_code == 0
    forgot = run("train", "-m", model, "--forget", sample_maildir / "spam")
    assert forgot.exit_code == 0, forgot.output
    result = run("top-odds", "-m", model)
    assert_one_line_error(result, "no spam messages left")
