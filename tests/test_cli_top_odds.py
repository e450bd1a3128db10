"""`spamnb top-odds`."""

from __future__ import annotations

import math

import pytest
from cli_helpers import assert_one_line_error, run, run_json

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


def test_unknown_class(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    assert_one_line_error(run("top-odds", "-m", model, "--positive", "phishing"), "phishing")
