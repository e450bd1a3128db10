"""Platt scaling of log-odds and the unsure band."""

from __future__ import annotations

import math

import numpy as np
import pytest
from corpus_fixtures import assert_same_calibration, sample_messages

from spamnb.calibration import Calibration, choose_cutoffs, fit_platt
from spamnb.filter import SpamFilter
from spamnb.mistakes import MistakeTable
from spamnb.pipe import verdict_and_score, verdict_of


def test_platt_recovers_a_known_logistic_map():
    rng = np.random.default_rng(3)
    log_odds = rng.normal(0, 40, size=20000)
    # The true probability of spam is sigmoid(0.05 * s - 0.5): overconfident log-odds.
    truth = 1 / (1 + np.exp(-(0.05 * log_odds - 0.5)))
    is_spam = rng.random(20000) < truth
    slope, intercept = fit_platt(log_odds, is_spam)
    assert slope == pytest.approx(0.05, rel=0.1)
    assert intercept == pytest.approx(-0.5, abs=0.1)


def test_platt_stays_finite_on_separable_data():
    log_odds = np.array([-50.0, -30, -20, 20, 40, 60])
    slope, intercept = fit_platt(log_odds, log_odds > 0)
    assert np.isfinite(slope) and np.isfinite(intercept) and slope > 0
    score = Calibration(slope, intercept).score(log_odds)
    # Smoothed targets: with 3 of each class no score is pushed past 4/5 or below 1/5.
    assert score.max() < 0.9 and score.min() > 0.1


def platt_loss(log_odds: np.ndarray, is_spam: np.ndarray, slope: float, intercept: float) -> float:
    n_pos, n_neg = int(is_spam.sum()), int((~is_spam).sum())
    target = np.where(is_spam, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    z = slope * log_odds + intercept
    return float(np.sum(np.logaddexp(0.0, z) - target * z))


@pytest.mark.parametrize("shift", [-40.0, -4.0, 0.0, 4.0, 40.0, 400.0])
def test_platt_fit_does_not_depend_on_where_the_scores_sit(shift: float) -> None:
    # Overlapping classes whose scores sit far from 0 relative to their spread made
    # plain Newton steps from slope 1 overshoot to a slope of 1e10 (a 0/1 map).
    log_odds = np.array([0.0, 1, 2, 1, 2, 3]) + shift
    is_spam = np.array([False, False, False, True, True, True])
    slope, intercept = fit_platt(log_odds, is_spam)
    assert slope == pytest.approx(0.70402, abs=1e-4)
    assert slope * shift + intercept == pytest.approx(-1.05603, abs=1e-4)
    # And it is the minimum: no nearby map has a lower loss.
    best = platt_loss(log_odds, is_spam, slope, intercept)
    for da, db in [(1e-3, 0), (-1e-3, 0), (0, 1e-3), (0, -1e-3)]:
        assert platt_loss(log_odds, is_spam, slope + da, intercept + db - da * shift) > best


def test_platt_on_imbalanced_overlapping_scores_is_the_minimum():
    rng = np.random.default_rng(5)
    log_odds = np.r_[rng.normal(-9, 1.5, 3000), rng.normal(-6, 2, 40)]
    is_spam = np.r_[np.zeros(3000, bool), np.ones(40, bool)]
    slope, intercept = fit_platt(log_odds, is_spam)
    best = platt_loss(log_odds, is_spam, slope, intercept)
    for da, db in [(1e-3, 0), (-1e-3, 0), (0, 1e-2), (0, -1e-2)]:
        assert platt_loss(log_odds, is_spam, slope + da, intercept + db) > best
    score = Calibration(slope, intercept).score(log_odds)
    # At the minimum the scores add up to the smoothed targets (40 at 41/42, 3,000
    # at 1/3,002): the intercept's first-order condition.
    assert score.sum() == pytest.approx(40 * 41 / 42 + 3000 / 3002, rel=1e-6)


def test_platt_on_scores_all_alike_gives_the_base_rate():
    slope, intercept = fit_platt(np.full(5, 2.0), np.array([False, False, False, True, True]))
    assert slope == 0.0
    # The mean of the smoothed targets: two spam at 3/4, three ham at 1/5.
    assert 1 / (1 + np.exp(-intercept)) == pytest.approx((2 * 3 / 4 + 3 / 5) / 5)
    # Alike to rounding (a spread of 5e-12 at 10): no slope either, however long it runs.
    nearly = np.array([10, 10 + 5e-12] * 4)
    for iterations in (50, 200):
        assert fit_platt(nearly, np.array([False, True] * 4), iterations)[0] == 0.0


def test_platt_never_fits_a_falling_map():
    # Held-out spam below held-out ham (a model worse than chance): the unconstrained
    # fit has a negative slope, which would turn every verdict around.
    rng = np.random.default_rng(11)
    log_odds = np.r_[rng.normal(3, 1, 200), rng.normal(-3, 1, 100)]
    is_spam = np.r_[np.zeros(200, bool), np.ones(100, bool)]
    slope, intercept = fit_platt(log_odds, is_spam)
    assert slope == 0.0
    # The flat map at the smoothed base rate, the least loss a map that does not
    # fall can have here.
    rate = (100 * 101 / 102 + 200 / 202) / 300
    assert 1 / (1 + np.exp(-intercept)) == pytest.approx(rate)
    best = platt_loss(log_odds, is_spam, slope, intercept)
    for da, db in [(1e-3, 0), (0, 1e-3), (0, -1e-3)]:
        assert platt_loss(log_odds, is_spam, slope + da, intercept + db) > best


def test_platt_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        fit_platt(np.array([1.0, 2.0]), np.array([True, True]))


def test_platt_leaves_out_infinite_log_odds():
    # An unsmoothed model (k=0) scores a message with a word one class never had as
    # -inf or inf; one such score must not decide the fit of all the others (review 18).
    log_odds = np.array([-1.0, 0.5, 0.2, 1.0, 2.0, -0.3])
    is_spam = np.array([False, False, True, True, True, False])
    finite = fit_platt(log_odds, is_spam)
    with_infinite = fit_platt(np.r_[log_odds, -np.inf, np.inf], np.r_[is_spam, False, True])
    assert with_infinite == finite


def held_out_scores(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """2,000 ham and 1,000 spam scores, mostly at their own ends; then all scores and
    which are spam."""
    rng = np.random.default_rng(seed)
    ham = rng.beta(1, 8, size=2000)
    spam = rng.beta(8, 1, size=1000)
    scores = np.concatenate([ham, spam])
    is_spam = np.concatenate([np.zeros(2000, bool), np.ones(1000, bool)])
    return ham, spam, scores, is_spam


def test_cutoffs_bound_the_error_rates():
    ham, spam, scores, is_spam = held_out_scores(5)
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam, 0.005, 0.01)
    assert ham_cutoff < spam_cutoff
    assert (ham >= spam_cutoff).sum() <= 10  # 0.5% of 2,000 ham
    assert (spam <= ham_cutoff).sum() <= 10  # 1% of 1,000 spam


def test_the_default_cutoffs_let_through_at_most_two_in_a_thousand_ham():
    ham, spam, scores, is_spam = held_out_scores(6)
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam)
    assert (ham >= spam_cutoff).sum() == 4  # 0.2% of 2,000 ham: the lowest such cut
    assert (spam <= ham_cutoff).sum() <= 10  # 1% of 1,000 spam


def test_the_default_ham_cutoff_calls_at_most_one_percent_of_spam_ham():
    # README: the ham cut-off is the highest that calls at most 1% of the spam ham. Of
    # 100 spam one may score at or below it, not two (with 10 ham the unsure-ham bound,
    # from 100 ham, does not raise it) (review 18).
    spam = np.linspace(0.2, 0.99, 100)
    scores = np.r_[spam, np.full(10, 0.01)]
    is_spam = np.r_[np.ones(100, bool), np.zeros(10, bool)]
    ham_cutoff, _ = choose_cutoffs(scores, is_spam)
    assert ham_cutoff == np.nextafter(spam[1], -np.inf)
    assert (spam <= ham_cutoff).sum() == 1


def test_spam_that_reads_like_ham_does_not_make_most_ham_unsure():
    # 3% of the spam scores among the ham, as short texts' spam does: the spam bound
    # alone would put the ham cut-off under most ham.
    ham, spam, scores, is_spam = held_out_scores(7)
    spam[:30] = ham[:30] / 10
    scores = np.concatenate([ham, spam])
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam)
    unsure_ham = ((ham > ham_cutoff) & (ham < spam_cutoff)).sum()
    assert unsure_ham <= 100  # 5% of 2,000 ham
    assert (ham > ham_cutoff).sum() == 100
    assert (spam <= ham_cutoff).sum() > 10  # the spam bound gave way


def test_the_bounds_allow_whole_messages_below_the_rate():
    # 1,234 ham at 0.2% is 2.468 messages: 2 may score above the spam cut-off, not 3;
    # with 2,000 ham the rate made a whole number, which floor and ceiling agree on.
    rng = np.random.default_rng(8)
    ham, spam = rng.beta(1, 8, size=1234), rng.beta(8, 1, size=700)
    scores = np.concatenate([ham, spam])
    is_spam = np.concatenate([np.zeros(1234, bool), np.ones(700, bool)])
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam)
    assert (ham >= spam_cutoff).sum() == 2
    assert (spam <= ham_cutoff).sum() <= 7  # 1% of 700 spam


@pytest.mark.parametrize(("n_ham", "unsure_bound"), [(99, False), (100, True)])
def test_the_unsure_ham_bound_starts_at_a_hundred_held_out_ham(n_ham, unsure_bound):
    # Every spam among the ham's scores, so that the spam bound alone would leave all
    # the ham unsure; from 100 ham (5% of them: 5 messages) the second bound holds.
    ham = np.linspace(0.01, 0.4, n_ham)
    spam = np.r_[np.full(5, 0.001), np.linspace(0.9, 0.999, 95)]
    scores = np.concatenate([ham, spam])
    is_spam = np.concatenate([np.zeros(n_ham, bool), np.ones(100, bool)])
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam)
    unsure = int(((ham > ham_cutoff) & (ham < spam_cutoff)).sum())
    assert (unsure == 5) if unsure_bound else (unsure > 90)


def test_a_score_of_099_is_always_spam():
    # Five ham at 0.995 would put the 0.2% bound's cut-off above them (0.995): the
    # cut-off stays at 0.99, the bound missed, as documented.
    rng = np.random.default_rng(9)
    ham = np.r_[rng.beta(1, 8, size=995), np.full(5, 0.995)]
    spam = rng.beta(8, 1, size=500)
    scores = np.concatenate([ham, spam])
    is_spam = np.concatenate([np.zeros(1000, bool), np.ones(500, bool)])
    assert choose_cutoffs(scores, is_spam)[1] == 0.99


def test_ham_scoring_under_0001_is_ham_whatever_spam_scores_lower():
    # The ham cut-off is kept at 0.001 or more: one spam scoring 0.00001 would
    # otherwise pull it under every ham scoring below 0.001, and they would all be
    # Unsure (review 18).
    ham = np.array([2e-4, 5e-4, 8e-4])
    scores = np.r_[ham, 1e-5, 0.9, 0.95]
    is_spam = np.r_[np.zeros(3, bool), np.ones(3, bool)]
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam)
    assert (ham_cutoff, spam_cutoff) == (0.001, 0.5)
    assert [verdict_of(score, ham_cutoff, spam_cutoff) for score in ham] == ["Ham"] * 3


def test_platt_on_many_well_separated_scores_is_the_minimum():
    # Classes far apart and of unequal sizes: plain Newton steps ran to a loss of 1e10
    # or more (a 0/1 map) in 2% of such draws (draw 29 among these), where the line
    # search stops at the minimum.
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n_ham, n_spam = rng.integers(20, 300, size=2)
        centre, gap, spread = rng.uniform(-100, 100), rng.uniform(1, 200), rng.uniform(0, 20)
        log_odds = np.r_[
            rng.normal(centre - gap / 2, spread, n_ham),
            rng.normal(centre + gap / 2, spread, n_spam),
        ]
        is_spam = np.r_[np.zeros(n_ham, bool), np.ones(n_spam, bool)]
        slope, intercept = fit_platt(log_odds, is_spam)
        best = platt_loss(log_odds, is_spam, slope, intercept)
        # No worse than the flat map at the base rate, which ignores the scores.
        rate = (n_spam + 1) / (n_spam + 2) * n_spam / len(is_spam) + n_ham / (n_ham + 2) / len(
            is_spam
        )
        assert best <= platt_loss(log_odds, is_spam, 0.0, float(np.log(rate / (1 - rate))))
        for da, db in [(1e-4, 0), (-1e-4, 0), (0, 1e-2), (0, -1e-2)]:
            assert platt_loss(log_odds, is_spam, slope + da, intercept + db) > best - 1e-9


def test_a_few_held_out_ham_keep_the_spam_bound():
    # 8 of each: 5% of the ham is no message, and the highest ham would set the cut-off.
    ham = np.array([0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.2, 0.45])
    spam = np.array([0.3, 0.6, 0.8, 0.9, 0.95, 0.97, 0.99, 0.999])
    scores = np.concatenate([ham, spam])
    is_spam = np.concatenate([np.zeros(8, bool), np.ones(8, bool)])
    ham_cutoff, _ = choose_cutoffs(scores, is_spam)
    assert ham_cutoff < 0.3  # below the lowest spam: at most 1% of it called ham


@pytest.mark.parametrize(
    "n_ham, n_spam", [(150, 50), (50, 150), (30, 30), (3, 400), (4, 2000), (3000, 2)]
)
def test_a_flat_score_leaves_every_message_unsure(n_ham, n_spam):
    # Held-out spam below held-out ham: fit_platt's flat map gives every message the
    # base rate, which the bounds alone had called Ham, spam too, where ham is more.
    # Past 99 spam to a ham the base rate is above 0.99, and the spam cut-off's bound
    # of 0.99 called every message Spam (review 27); past 1,000 ham to a spam, the ham
    # cut-off's bound of 0.001 called every one Ham.
    rng = np.random.default_rng(2)
    log_odds = np.r_[rng.normal(3, 1, n_ham), rng.normal(-3, 1, n_spam)]
    is_spam = np.r_[np.zeros(n_ham, bool), np.ones(n_spam, bool)]
    slope, intercept = fit_platt(log_odds, is_spam)
    fitted = Calibration(slope, intercept)
    scores = fitted.score(log_odds)
    ham_cutoff, spam_cutoff = choose_cutoffs(scores, is_spam)
    verdicts = Calibration(slope, intercept, ham_cutoff, spam_cutoff).verdicts(scores)
    assert set(verdicts) == {"unsure"}
    # The pipe works the score out with math.exp, which can differ from numpy's in the
    # last digits: it must say Unsure too (review 11: one ulp either side did not).
    calibration = {"slope": slope, "intercept": intercept, "length_exponent": 0.0}
    calibration |= {"ham_cutoff": ham_cutoff, "spam_cutoff": spam_cutoff}
    for score in (
        float(scores[0]),
        math.nextafter(float(scores[0]), 0),
        math.nextafter(float(scores[0]), 1),
    ):
        assert verdict_of(score, ham_cutoff, spam_cutoff) == "Unsure"
    assert verdict_and_score(1.0, 1.0, calibration)[0] == "Unsure"


def test_batch_verdicts_meet_the_cutoffs_as_the_pipe_does():
    # At or above the spam cut-off is spam, at or below the ham cut-off ham (pipe.py's
    # verdict_and_score); no score is no verdict, where the pipe passes mail unmarked.
    calibration = Calibration(ham_cutoff=0.2, spam_cutoff=0.9)
    scores = np.array([0.9, 0.8999, 0.2, 0.2001, 1.0, 0.0, np.nan])
    assert calibration.verdicts(scores) == ["spam", "unsure", "ham", "unsure", "spam", "ham", None]


def test_verdicts_match_the_calibrated_score():
    calibration = Calibration(slope=0.05, intercept=0.1, ham_cutoff=0.2, spam_cutoff=0.9)
    verdicts = []
    for log_odds in (-200.0, -30.0, 0.0, 45.0, 80.0, 2000.0, -2000.0):
        verdict, score = verdict_and_score(log_odds, 50.0, calibration.to_dict())
        assert score == pytest.approx(float(calibration.score(np.array([log_odds]))[0]))
        verdicts.append(verdict)
    assert verdicts == ["Ham", "Ham", "Unsure", "Spam", "Spam", "Spam", "Ham"]


def test_length_normalisation_divides_the_evidence_and_keeps_its_sign():
    calibration = Calibration(slope=1.0, intercept=0.0, length_exponent=0.75)
    log_odds = np.array([-80.0, 80.0, 8.0, 0.0])
    lengths = np.array([16.0, 16.0, 1.0, 100.0])
    z = calibration.decision(log_odds, lengths)
    assert z == pytest.approx([-10.0, 10.0, 8.0, 0.0])
    # The pipe filter's plain-float arithmetic agrees with the array version.
    scores = calibration.score(log_odds, lengths)
    for lo, length, expected in zip(log_odds, lengths, scores, strict=True):
        _, score = verdict_and_score(float(lo), float(length), calibration.to_dict())
        assert score == pytest.approx(float(expected))
    # Lengths below one (no known token) count as one rather than blowing up.
    assert calibration.decision(np.array([3.0]), np.array([0.0])) == pytest.approx([3.0])


def test_train_calibrates_log_odds_divided_by_length_to_the_three_quarters(sample_maildir):
    # README: x is the log-odds divided by L^0.75, the exponent that ranked mail best in
    # cross-validation (calibration.py); the model stores it and scores by it (review 18).
    spam_filter, token_lists, labels = sample_tokens(sample_maildir)
    assert spam_filter.fit_calibration(token_lists, labels)
    calibration = spam_filter.calibration
    assert calibration.length_exponent == 0.75
    _, log_odds, lengths = spam_filter.score_tokens(token_lists)
    x = log_odds / np.maximum(lengths, 1) ** 0.75
    expected = 1 / (1 + np.exp(-(calibration.slope * x + calibration.intercept)))
    np.testing.assert_allclose(calibration.score(log_odds, lengths), expected, rtol=1e-12)


def test_calibrations_stored_before_the_exponent_keep_their_raw_map():
    old = Calibration.from_dict({"slope": 0.5, "intercept": 0.0})
    assert old.length_exponent == 0.0
    assert old.decision(np.array([10.0]), np.array([100.0])) == pytest.approx([5.0])


def sample_tokens(sample_maildir) -> tuple[SpamFilter, list[list[str]], list[str]]:
    """A new filter trained on the sample corpus (30 spam, then 30 ham), and its input.

    Its mistake table is off: these tests are about the Naive Bayes's own held-out
    scores (test_mistakes.py holds the table's share out)."""
    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter(mistakes=MistakeTable(weight=0.0))
    token_lists = spam_filter.tokenize(messages)
    spam_filter.train_tokens(token_lists, labels)
    return spam_filter, token_lists, labels


def test_fit_calibration_on_held_out_folds(sample_maildir):
    spam_filter, token_lists, labels = sample_tokens(sample_maildir)
    before = spam_filter.model.token_counts.copy()
    assert spam_filter.fit_calibration(token_lists, labels)
    # Scoring held-out folds must not change the model's counts.
    assert np.array_equal(spam_filter.model.token_counts, before)
    calibration = spam_filter.calibration
    assert calibration.fitted_on == 60
    assert calibration.slope > 0 and 0 <= calibration.ham_cutoff < calibration.spam_cutoff <= 1
    # Too few messages of a class: the old calibration stays.
    assert not spam_filter.fit_calibration(token_lists[:1], labels[:1])
    assert spam_filter.calibration == calibration


def test_a_small_batch_keeps_the_calibration_of_a_larger_one(sample_maildir):
    spam_filter, tokens, labels = sample_tokens(sample_maildir)
    assert spam_filter.fit_calibration(tokens, labels)
    fitted = spam_filter.calibration
    few = [0, 1, 30, 31]  # two spam, two ham
    assert not spam_filter.fit_calibration([tokens[i] for i in few], [labels[i] for i in few])
    assert spam_filter.calibration == fitted


def test_the_calibration_does_not_follow_the_reading_order(sample_maildir):
    # Without digests (as evaluate and tune call it) the folds are dealt by content.
    messages, labels = sample_messages(sample_maildir)
    token_lists = SpamFilter().tokenize(messages)
    calibrations = []
    for order in (np.arange(len(labels)), np.random.default_rng(5).permutation(len(labels))):
        spam_filter = SpamFilter()
        tokens = [token_lists[i] for i in order]
        ordered_labels = [labels[i] for i in order]
        copies = spam_filter.train_tokens(tokens, ordered_labels)
        assert spam_filter.fit_calibration(tokens, ordered_labels, mistake_copies=copies)
        calibrations.append(spam_filter.calibration)
    assert calibrations[0].fitted_on == len(labels)
    assert_same_calibration(calibrations[0], calibrations[1])


def test_words_no_other_message_has_leave_its_calibration_score_alone(monkeypatch):
    # Held out, such words are unknown, as a new message's unknown words are: they
    # must not count in its length either.
    token_lists = [["cheap", "pills", "offer", f"s{i % 3}"] for i in range(12)]
    token_lists += [["meeting", "notes", "friday", f"h{i % 3}"] for i in range(12)]
    labels = ["spam"] * 12 + ["ham"] * 12
    digests = [f"{i:04d}" for i in range(24)]
    scores = []

    def recording_fit(normalised_scores, is_spam):
        scores.append(np.array(normalised_scores))
        return fit_platt(normalised_scores, is_spam)

    monkeypatch.setattr("spamnb.filter.fit_platt", recording_fit)
    for extra in ([], [f"unique{i}" for i in range(40)]):
        lists = [*token_lists[:-1], token_lists[-1] + extra]
        spam_filter = SpamFilter()
        spam_filter.mistakes.weight = 0.0
        spam_filter.train_tokens(lists, labels)
        assert spam_filter.fit_calibration(lists, labels, digests=digests)
    assert scores[1][-1] == pytest.approx(scores[0][-1], rel=1e-9)
