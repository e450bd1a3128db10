"""The tuning core: cross-validated scores, the grid, the choice rule and the cut-offs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from corpus_fixtures import synthetic_corpus

from spamnb.filter import SpamFilter
from spamnb.scores import roc_auc, stratified_folds
from spamnb.tuning import (
    Setting,
    TuneResult,
    best_row,
    cross_validate,
    cutoffs_on,
    fp_rate_cutoffs,
    grid_rows,
    make_grid,
    tune,
    tuning_warnings,
)


def corpus(n_spam: int = 24, n_ham: int = 30, seed: int = 7) -> tuple[list[list[str]], list[str]]:
    return synthetic_corpus(n_spam, n_ham, seed)


SMALL_GRID = make_grid(["multinomial", "boolean", "bernoulli"], [1.0, 0.01], [0, 4])


def direct_row(token_lists, labels, setting: Setting, folds: int, seed: int) -> dict:
    """One setting the slow, obvious way: a new filter per fold, trained and calibrated
    under that setting from the start."""
    predicted = np.empty(len(labels), dtype=object)
    decision = np.zeros(len(labels))
    score = np.zeros(len(labels))
    for train, test in stratified_folds(labels, folds, seed):
        spam_filter = SpamFilter()
        setting.apply(spam_filter.model)
        train_tokens = [token_lists[i] for i in train]
        train_labels = [labels[i] for i in train]
        copies = spam_filter.train_tokens(train_tokens, train_labels)
        spam_filter.fit_calibration(train_tokens, train_labels, mistake_copies=copies)
        proba, log_odds, lengths = spam_filter.score_tokens([token_lists[i] for i in test])
        predicted[test] = spam_filter.predict_labels(proba)
        decision[test] = spam_filter.calibration.decision(log_odds, lengths)
        score[test] = spam_filter.calibration.score(log_odds, lengths)
    truth = np.asarray(labels, dtype=object)
    is_spam = truth == "spam"
    return {
        "accuracy": float(np.mean(predicted == truth)),
        "false_positives": int((~is_spam & (predicted == "spam")).sum()),
        "false_negatives": int((is_spam & (predicted == "ham")).sum()),
        "roc_auc": roc_auc(is_spam, decision),
        "score": score,
    }


def test_grid_rows_agree_with_training_each_setting_from_scratch():
    token_lists, labels = corpus()
    results = cross_validate(token_lists, labels, 4, 3, SMALL_GRID)
    rows = grid_rows(results)
    assert len(rows) == len(SMALL_GRID)
    for setting, row, result in zip(SMALL_GRID, rows, results, strict=True):
        expected = direct_row(token_lists, labels, setting, 4, 3)
        assert row["event_model"] == setting.event_model
        assert row["alpha"] == setting.alpha
        assert row["max_features"] == setting.max_features
        assert row["false_positives"] == expected["false_positives"], setting
        assert row["false_negatives"] == expected["false_negatives"], setting
        assert row["errors"] == row["false_positives"] + row["false_negatives"]
        assert row["accuracy"] == pytest.approx(expected["accuracy"])
        assert row["roc_auc"] == pytest.approx(expected["roc_auc"])
        # The calibrated scores too: each setting refits each fold's calibration.
        np.testing.assert_allclose(result.score, expected["score"], rtol=1e-9)
    # The grid is worth searching only if its settings disagree.
    assert len({(r["errors"], r["roc_auc"]) for r in rows}) > 1


def test_every_message_is_scored_by_a_fold_model_that_never_saw_it():
    token_lists, labels = corpus()
    made: list[SpamFilter] = []

    def new_filter() -> SpamFilter:
        made.append(SpamFilter())
        return made[-1]

    (result,) = cross_validate(
        token_lists, labels, 5, 1, [Setting("boolean", 0.01)], new_filter=new_filter
    )
    assert len(made) == 5
    seen_as_test = np.zeros(len(labels), dtype=int)
    for number, (train, test) in enumerate(result.folds):
        vocabulary = made[number].vocabulary
        assert all(token_lists[i][-1] not in vocabulary for i in test)
        assert all(token_lists[i][-1] in vocabulary for i in train)
        assert (result.fold[test] == number).all()
        seen_as_test[test] += 1
        # Each fold's calibration is fitted on its own training part only.
        assert result.calibrations[number].fitted_on == len(train)
    assert (seen_as_test == 1).all()


def test_fold_accuracies_pool_to_the_overall_accuracy():
    token_lists, labels = corpus()
    (result,) = cross_validate(token_lists, labels, 3, 0, [Setting("multinomial", 1.0)])
    sizes = [len(test) for _train, test in result.folds]
    pooled = np.average(result.fold_accuracies(), weights=sizes)
    assert pooled == pytest.approx(result.summary()["accuracy"])


def test_without_a_spam_class_there_is_no_spam_score():
    token_lists, labels = corpus()
    other = ["junk" if label == "spam" else "work" for label in labels]
    (result,) = cross_validate(token_lists, other, 3, 0)
    assert result.decision is None and result.score is None
    assert set(result.predicted) <= {"junk", "work"}
    assert result.summary()["false_positives"] is None


def test_tune_never_uses_the_test_part():
    token_lists, labels = corpus()
    result = tune(token_lists, labels, SMALL_GRID, folds=3, seed=2, test_size=0.3)
    tuned, test = set(result.tuned_on.tolist()), set(result.test_indices.tolist())
    assert not tuned & test
    assert tuned | test == set(range(len(labels)))
    # The final model learnt the tuning part and nothing of the test part.
    vocabulary = result.final_filter.vocabulary
    assert all(token_lists[i][-1] not in vocabulary for i in test)
    assert int(result.final_filter.model.class_counts.sum()) == len(tuned)

    # Tuning on the tuning part alone gives the very same table, choice and cut-offs...
    alone = tune(
        [token_lists[i] for i in result.tuned_on],
        [labels[i] for i in result.tuned_on],
        SMALL_GRID,
        folds=3,
        seed=2,
    )
    assert alone.rows == result.rows
    assert alone.chosen == result.chosen
    assert alone.cutoffs == result.cutoffs
    assert alone.test is None
    # ...and so does any other test part: only the test numbers may change.
    scrambled = [
        ["free", "prize", "cheap"] if i in test and labels[i] == "ham" else tokens
        for i, tokens in enumerate(token_lists)
    ]
    again = tune(scrambled, labels, SMALL_GRID, folds=3, seed=2, test_size=0.3)
    assert again.rows == result.rows
    assert again.chosen == result.chosen
    assert again.test["false_positives"] >= result.test["false_positives"]
    assert again.test != result.test


def test_the_test_numbers_are_the_chosen_setting_trained_on_the_tuning_part():
    token_lists, labels = corpus()
    result = tune(token_lists, labels, SMALL_GRID, folds=3, seed=4, test_size=0.4)
    spam_filter = SpamFilter()
    result.setting.apply(spam_filter.model)
    tune_tokens = [token_lists[i] for i in result.tuned_on]
    tune_labels = [labels[i] for i in result.tuned_on]
    copies = spam_filter.train_tokens(tune_tokens, tune_labels)
    spam_filter.fit_calibration(tune_tokens, tune_labels, mistake_copies=copies)
    proba, _, _ = spam_filter.score_tokens([token_lists[i] for i in result.test_indices])
    predicted = spam_filter.predict_labels(proba)
    truth = [labels[i] for i in result.test_indices]
    assert result.test["n"] == len(truth)
    assert result.test["errors"] == sum(p != t for p, t in zip(predicted, truth, strict=True))
    assert len(result.test["cutoffs"]) == len(result.cutoffs)


def test_the_final_filter_is_calibrated_as_train_would_on_the_tuning_part():
    # The cut-off table holds calibrated scores; the test part's rows must apply them
    # to calibrated scores, as a model trained with those options would give, not to
    # the raw length-normalised posterior (review 18).
    token_lists, labels = corpus()
    setting = Setting("boolean", 0.01, 0)
    result = tune(token_lists, labels, [setting], folds=3, seed=0, test_size=0.3)
    spam_filter = SpamFilter()
    setting.apply(spam_filter.model)
    tune_tokens = [token_lists[i] for i in result.tuned_on]
    tune_labels = [labels[i] for i in result.tuned_on]
    copies = spam_filter.train_tokens(tune_tokens, tune_labels)
    spam_filter.fit_calibration(tune_tokens, tune_labels, mistake_copies=copies)
    assert spam_filter.calibration.fitted_on == len(result.tuned_on)
    assert result.final_filter.calibration == spam_filter.calibration
    _, log_odds, lengths = spam_filter.score_tokens([token_lists[i] for i in result.test_indices])
    is_spam = np.array([labels[i] == "spam" for i in result.test_indices])
    scores = spam_filter.calibration.score(log_odds, lengths)
    assert result.test["cutoffs"] == cutoffs_on(result.cutoffs, scores, is_spam)


def test_the_cutoff_table_is_the_chosen_settings_not_the_first():
    # The table is for the setting tune recommends; the first setting of the grid
    # (here a poor one) scores the mail otherwise (review 18).
    token_lists, labels = synthetic_corpus(100, 100, 7)
    poor, good = Setting("multinomial", 1000.0, 1), Setting("boolean", 0.01, 0)
    both = tune(token_lists, labels, [poor, good], folds=3, seed=0)
    assert both.chosen == 1
    good_alone = tune(token_lists, labels, [good], folds=3, seed=0)
    poor_alone = tune(token_lists, labels, [poor], folds=3, seed=0)
    assert good_alone.cutoffs != poor_alone.cutoffs
    assert both.cutoffs == good_alone.cutoffs


def test_tune_needs_spam_and_ham():
    token_lists, labels = corpus()
    with pytest.raises(ValueError, match="spam and ham"):
        tune(token_lists, ["spam" if x == "spam" else "work" for x in labels], SMALL_GRID)


def test_best_row_rule():
    def row(errors, fp, auc):
        return {"errors": errors, "false_positives": fp, "roc_auc": auc}

    # Fewest errors first, whatever the false positives and AUC.
    assert best_row([row(5, 0, 0.99), row(4, 4, 0.90)]) == 1
    # Equal errors: fewer false positives.
    assert best_row([row(4, 3, 0.99), row(4, 1, 0.90)]) == 1
    # Equal errors and false positives: the higher AUC; a missing AUC is the lowest.
    assert best_row([row(4, 1, 0.95), row(4, 1, 0.97), row(4, 1, None)]) == 1
    assert best_row([row(4, 1, None), row(4, 1, 0.5)]) == 1
    # A full tie: the earlier row.
    assert best_row([row(2, 1, 0.9), row(2, 1, 0.9)]) == 0
    with pytest.raises(ValueError):
        best_row([])


def test_tune_chooses_by_the_rule():
    token_lists, labels = corpus()
    result = tune(token_lists, labels, SMALL_GRID, folds=3, seed=0)
    ranked = sorted(
        range(len(result.rows)),
        key=lambda i: (
            result.rows[i]["errors"],
            result.rows[i]["false_positives"],
            -result.rows[i]["roc_auc"],
            i,
        ),
    )
    assert result.chosen == ranked[0]
    assert result.setting == SMALL_GRID[ranked[0]]


def test_cutoffs_on_hand_made_scores():
    scores = np.array([0.1, 0.2, 0.3, 0.9, 0.5, 0.8, 0.95, 0.99])
    is_spam = np.array([False] * 4 + [True] * 4)
    rows = fp_rate_cutoffs(scores, is_spam, [0.0, 0.25, 0.5, 0.7])
    # Rate 0: no ham may be at or above, so just above the highest ham, 0.9.
    assert rows[0]["cutoff"] == 0.900001
    assert (rows[0]["ham_above"], rows[0]["spam_caught"]) == (0, 2)
    assert rows[0]["spam_recall"] == 0.5
    # 25% of 4 ham: one may be above, so just above the second highest, 0.3.
    assert rows[1]["cutoff"] == 0.300001
    assert (rows[1]["ham_above"], rows[1]["spam_recall"]) == (1, 1.0)
    # 50%: two may be above; 70% of 4 is 2.8, still two.
    assert rows[2]["cutoff"] == rows[3]["cutoff"] == 0.200001
    assert rows[3]["ham_above"] == 2
    assert rows[0]["ham"] == 4 and rows[0]["spam"] == 4
    assert [row["fp_rate"] for row in rows] == [0.0, 0.25, 0.5, 0.7]


def test_a_score_exactly_at_a_cutoff_is_above_it_on_the_test_part():
    # As classify files it: Spam at or above the spam cut-off.
    rows = cutoffs_on([{"fp_rate": 0.0, "cutoff": 0.5}], np.array([0.5, 0.5, 0.4]),
                      np.array([True, False, False]))  # fmt: skip
    assert (rows[0]["spam_caught"], rows[0]["ham_above"]) == (1, 1)


def test_cutoffs_with_tied_ham_allow_fewer_than_the_rate():
    scores = np.array([0.5, 0.5, 0.5, 0.1, 0.7, 0.4])
    is_spam = np.array([False, False, False, False, True, True])
    (row,) = fp_rate_cutoffs(scores, is_spam, [0.5])
    # Two of four ham may be above, but three tie at 0.5: the cut-off must pass all three.
    assert row["cutoff"] == 0.500001
    assert row["ham_above"] == 0
    assert row["spam_caught"] == 1


def test_cutoffs_are_exact_decimals_above_the_ham():
    # A ham score just below a grid point, and one on it: never a cut-off at or below it.
    scores = np.array([0.12345649999, 0.7, 0.9])
    is_spam = np.array([False, True, True])
    (row,) = fp_rate_cutoffs(scores, is_spam, [0.0])
    assert row["cutoff"] == 0.123457
    assert float(f"{row['cutoff']:g}") == row["cutoff"]
    (row,) = fp_rate_cutoffs(np.array([0.25, 0.7]), np.array([False, True]), [0.0])
    assert row["cutoff"] == 0.250001


def test_ham_scoring_one_leaves_no_cutoff():
    (row,) = fp_rate_cutoffs(np.array([1.0, 0.2, 1.0]), np.array([False, False, True]), [0.0])
    assert row["cutoff"] is None
    assert row["spam_recall"] == 0.0
    assert row["ham_above"] == 0


def test_a_cutoff_of_exactly_one_is_kept_and_catches_spam_scoring_one():
    # Ham at 0.9999995 leaves 1.0 as the lowest cut-off above it: it stops that ham
    # and still catches spam scoring 1 (only ham scoring 1 leaves no cut-off) (review 18).
    (row,) = fp_rate_cutoffs(np.array([0.9999995, 1.0]), np.array([False, True]), [0.0])
    assert (row["cutoff"], row["spam_caught"], row["ham_above"]) == (1.0, 1, 0)


def test_mail_scoring_exactly_the_cutoff_counts_as_at_or_above_it():
    # Cut-offs are applied as "score >= cut-off" (classify's Spam rule): the table's
    # counts of ham filed and spam caught must count a score equal to it (review 18).
    scores = np.array([0.1, 0.3, 0.300001, 0.9])
    (row,) = fp_rate_cutoffs(scores, np.array([False, False, True, True]), [0.0])
    assert (row["cutoff"], row["spam_caught"]) == (0.300001, 2)
    scores = np.array([0.2, 0.200001, 0.9])
    (row,) = fp_rate_cutoffs(scores, np.array([False, False, True]), [0.5])
    assert (row["cutoff"], row["ham_above"]) == (0.200001, 1)


def test_cutoff_errors():
    with pytest.raises(ValueError, match="both"):
        fp_rate_cutoffs(np.array([0.1, 0.2]), np.array([True, True]), [0.0])
    with pytest.raises(ValueError, match="rate"):
        fp_rate_cutoffs(np.array([0.1, 0.2]), np.array([True, False]), [1.0])


def test_make_grid_order_and_checks():
    grid = make_grid(["boolean", "multinomial"], [1.0, 0.1, 1.0], [0])
    assert grid == [
        Setting("boolean", 1.0, 0),
        Setting("boolean", 0.1, 0),
        Setting("multinomial", 1.0, 0),
        Setting("multinomial", 0.1, 0),
    ]
    for bad in (
        (["poisson"], [1.0], [0]),
        (["boolean"], [0.0], [0]),
        (["boolean"], [math.inf], [0]),
        (["boolean"], [1.0], [-1]),
        ([], [1.0], [0]),
    ):
        with pytest.raises(ValueError):
            make_grid(*bad)


def test_setting_round_trips_through_a_model():
    spam_filter = SpamFilter()
    Setting("bernoulli", 0.5, 300).apply(spam_filter.model)
    assert spam_filter.model.max_features == 300
    assert Setting.of(spam_filter.model) == Setting("bernoulli", 0.5, 300)
    Setting("boolean", 0.01, 0).apply(spam_filter.model)
    assert spam_filter.model.max_features is None
    assert Setting("boolean", 0.01, 0).train_options() == (
        "--event-model boolean --alpha 0.01 --max-features 0 --min-count 1 --mistake-weight 0.5"
    )
    # k as measured, not rounded to six digits; the ranking only when tokens are cut.
    assert Setting("bernoulli", 0.0123456789, 300).train_options() == (
        "--event-model bernoulli --alpha 0.0123456789 --max-features 300 --min-count 1"
        " --mistake-weight 0.5 --select ig"
    )


def test_a_target_rate_allows_exactly_floor_rate_times_ham():
    # 0.009 * 3000 is 26.999999999999996 in floating point: one ham too few allowed.
    scores = np.linspace(0, 1, 3_100)
    is_spam = np.zeros(3_100, dtype=bool)
    is_spam[-100:] = True
    (row,) = fp_rate_cutoffs(scores, is_spam, [0.009])
    assert (row["ham"], row["ham_above"]) == (3_000, 27)
    # Rates given as numpy floats work the same.
    (row,) = fp_rate_cutoffs(scores, is_spam, np.array([0.009]))
    assert row["ham_above"] == 27


def test_the_baseline_warning_breaks_ties_as_evaluate_does():
    from spamnb.tuning import TuneResult, tuning_warnings

    labels = ["spam", "ham"] * 30
    result = TuneResult(
        settings=[],
        rows=[{"accuracy": 0.5}],
        chosen=0,
        cutoffs=[],
        tuned_on=np.arange(60),
        test_indices=np.arange(0),
    )
    (warning,) = [w for w in tuning_warnings(result, labels) if w["kind"] == "baseline"]
    # Even classes: the first by name, as majority_baseline (and so evaluate) names it.
    assert "always saying 'ham' (50.00%)" in warning["message"]


@pytest.mark.parametrize(("n_spam", "small"), [(199, True), (200, False)])
def test_a_class_of_200_messages_is_not_too_small(n_spam, small):
    # README: results are likely misleading with fewer than 200 messages of a class, the
    # bound evaluate warns by; tune must not warn at exactly 200 (review 18).
    labels = ["spam"] * n_spam + ["ham"] * 300
    result = TuneResult(
        settings=[Setting("boolean", 0.01)],
        rows=[{"accuracy": 0.99}],
        chosen=0,
        cutoffs=[],
        tuned_on=np.arange(len(labels)),
        test_indices=np.arange(0),
    )
    kinds = [warning["kind"] for warning in tuning_warnings(result, labels)]
    assert ("small-class" in kinds) is small
