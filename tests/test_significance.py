"""Tests for spamnb.significance.

Expected values come from the definitions, worked independently of the implementation: the
Wilson bounds as the roots of the quadratic they solve, binomial p-values summed with
math.comb.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spamnb.significance import mcnemar, rates_with_intervals, wilson_interval
from spamnb.words import p_value_text

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson_by_quadratic(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson bounds are the p with (k/n - p)^2 = z^2 p (1 - p) / n, i.e. the roots of
    (n + z^2) p^2 - (2k + z^2) p + k^2 / n = 0."""
    a = n + z * z
    b = -(2 * k + z * z)
    c = k * k / n
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


# --------------------------------------------------------------------------- Wilson


def test_wilson_81_of_263():
    # The usual worked example: 81 of 263 at 95% is about 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263)
    expected = wilson_by_quadratic(81, 263)
    assert low == pytest.approx(expected[0], abs=1e-12)
    assert high == pytest.approx(expected[1], abs=1e-12)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)


@pytest.mark.parametrize("k, n", [(1, 10), (5, 10), (3, 7), (999, 1000), (2, 3000)])
def test_wilson_matches_the_quadratic(k, n):
    assert wilson_interval(k, n) == pytest.approx(wilson_by_quadratic(k, n), abs=1e-12)


def test_wilson_other_confidence():
    z99 = 2.5758293035489004
    assert wilson_interval(7, 40, 0.99) == pytest.approx(wilson_by_quadratic(7, 40, z99))
    # A higher confidence gives a wider interval.
    low95, high95 = wilson_interval(7, 40, 0.95)
    low99, high99 = wilson_interval(7, 40, 0.99)
    assert low99 < low95 < high95 < high99


def test_wilson_edges_are_exact():
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    # With no successes the upper bound is z^2 / (n + z^2).
    assert high == pytest.approx(Z95**2 / (10 + Z95**2))
    low, high = wilson_interval(10, 10)
    assert high == 1.0
    assert low == pytest.approx(10 / (10 + Z95**2))
    assert wilson_interval(0, 0) == (0.0, 1.0)


@given(st.integers(0, 5000), st.integers(0, 5000))
def test_wilson_is_symmetric_and_in_bounds(a, b):
    k, n = min(a, b), max(a, b)
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low <= k / n <= high
    # Counting failures instead of successes mirrors the interval.
    mirrored = wilson_interval(n - k, n)
    assert mirrored[0] == pytest.approx(1 - high, abs=1e-12)
    assert mirrored[1] == pytest.approx(1 - low, abs=1e-12)


@pytest.mark.parametrize(
    "args",
    [
        (5, 3),
        (-1, 3),
        (1.5, 3),
        (1, 3, 0.0),
        (1, 3, 1.0),
        (1, 3, 1 - 1e-16),  # its quantile's level, 0.5 + c/2, rounds to 1
        (1, 3, float("nan")),
        (True, 3),
    ],
)
def test_wilson_rejects_bad_input(args):
    with pytest.raises(ValueError):
        wilson_interval(*args)


# --------------------------------------------------------------------------- McNemar


def binomial_two_sided(b: int, n: int) -> float:
    """Exact two-sided p-value at 1/2: the probability of outcomes no likelier than b,
    which for the symmetric binomial is both tails beyond min(b, n - b)."""
    low = min(b, n - b)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail) if 2 * low != n else 1.0


def test_mcnemar_constructed_case():
    # 10 messages only A gets right, 2 only B, 30 both, 5 neither.
    a = [True] * 10 + [False] * 2 + [True] * 30 + [False] * 5
    b = [False] * 10 + [True] * 2 + [True] * 30 + [False] * 5
    result = mcnemar(a, b)
    assert result["a_only"] == 10
    assert result["b_only"] == 2
    assert result["both"] == 30
    assert result["neither"] == 5
    # (|10 - 2| - 1)^2 / 12 = 49 / 12
    assert result["statistic"] == pytest.approx(49 / 12)
    # 2 * P(X <= 2), X ~ Bin(12, 1/2) = 2 * (1 + 12 + 66) / 4096 = 158 / 4096
    assert result["p_value"] == pytest.approx(158 / 4096)
    assert result["p_value"] == pytest.approx(binomial_two_sided(10, 12))
    assert result["test"] == "exact binomial"


# The last three sum the likelier middle outcomes instead of the tails.
@pytest.mark.parametrize(
    "b, c", [(0, 5), (1, 6), (3, 3), (7, 2), (20, 9), (40, 35), (51, 50), (80, 100)]
)
def test_mcnemar_p_values(b, c):
    a = [True] * b + [False] * c
    other = [False] * b + [True] * c
    result = mcnemar(a, other)
    assert result["p_value"] == pytest.approx(binomial_two_sided(b, b + c))
    # Swapping the classifiers changes nothing but the sides.
    swapped = mcnemar(other, a)
    assert (swapped["a_only"], swapped["b_only"]) == (c, b)
    assert swapped["p_value"] == pytest.approx(result["p_value"])


def log10_two_sided_by_lgamma(b: int, c: int) -> float:
    """log10 of the two-sided binomial p-value in floats throughout: a log-sum-exp of
    the smaller tail's log binomial coefficients, which never underflows."""
    n, tail = b + c, min(b, c)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(tail + 1)
    ]
    top = max(terms)
    log_tail = top + math.log(sum(math.exp(t - top) for t in terms))
    return (math.log(2) + log_tail - n * math.log(2)) / math.log(10)


@pytest.mark.parametrize("b, c", [(10, 2), (700, 40), (1413, 18), (5000, 3)])
def test_mcnemar_log10_p_value_past_the_floats(b, c):
    # 1,413 against 18 (review 8, Enron1 with one token against all) has p near
    # 10^-389.5: the p-value underflows to 0, its logarithm does not.
    result = mcnemar([True] * b + [False] * c, [False] * b + [True] * c)
    assert result["log10_p_value"] == pytest.approx(log10_two_sided_by_lgamma(b, c), rel=1e-9)
    if result["log10_p_value"] > -300:
        assert math.log10(result["p_value"]) == pytest.approx(result["log10_p_value"])
    else:
        assert result["p_value"] == 0.0
    assert json.dumps(result, allow_nan=False)


def test_p_value_text_writes_an_underflowed_p_value_from_its_logarithm():
    assert p_value_text(0.0386, -1.413, 3) == "0.0386"
    assert p_value_text(0.0, -389.49485, 3) == "3.2e-390"
    assert p_value_text(0.0, -389.49485, 2) == "3.2e-390"
    # A mantissa that rounds up to 10 carries into the exponent.
    assert p_value_text(0.0, -389.00001, 2) == "1e-389"
    assert p_value_text(1.0, 0.0, 3) == "1"


def test_mcnemar_identical_classifiers():
    correct = np.array([True, False, True, True, False])
    result = mcnemar(correct, correct)
    assert result["a_only"] == result["b_only"] == 0
    assert result["statistic"] is None
    assert result["p_value"] == 1.0
    assert json.dumps(result, allow_nan=False)


def test_mcnemar_accepts_zero_one_and_validates():
    assert mcnemar([1, 0, 1], [0, 0, 1])["a_only"] == 1
    with pytest.raises(ValueError, match="length"):
        mcnemar([True, False], [True])
    with pytest.raises(ValueError):
        mcnemar(["spam", "ham"], [True, False])
    with pytest.raises(ValueError):
        mcnemar([0.5, 1.0], [True, False])


# --------------------------------------------------------------------------- rates


def test_rates_with_intervals():
    rates = rates_with_intervals(tp=90, fp=2, tn=100, fn=8)
    assert rates["accuracy"]["value"] == pytest.approx(190 / 200)
    assert (rates["accuracy"]["count"], rates["accuracy"]["of"]) == (190, 200)
    ham = rates["ham_misclassification"]
    assert (ham["count"], ham["of"]) == (2, 102)
    assert ham["value"] == pytest.approx(2 / 102)
    assert (ham["low"], ham["high"]) == pytest.approx(wilson_by_quadratic(2, 102))
    spam = rates["spam_misclassification"]
    assert (spam["count"], spam["of"]) == (8, 98)
    assert (spam["low"], spam["high"]) == pytest.approx(wilson_by_quadratic(8, 98))
    assert json.dumps(rates, allow_nan=False)


def test_rates_without_ham():
    rates = rates_with_intervals(tp=5, fp=0, tn=0, fn=1)
    assert rates["ham_misclassification"] == {
        "value": None,
        "low": 0.0,
        "high": 1.0,
        "count": 0,
        "of": 0,
    }
    assert rates["spam_misclassification"]["value"] == pytest.approx(1 / 6)


def test_rates_reject_bad_counts():
    with pytest.raises(ValueError):
        rates_with_intervals(1, -1, 3, 4)
    with pytest.raises(ValueError):
        rates_with_intervals(1, 2, 3, 4, confidence=95)


def test_accuracy_of_more_classes_counts_the_right_calls_it_is_given():
    # Spam against the rest: 8 other-class messages called "not spam", of which only 5
    # had their own class right.
    rates = rates_with_intervals(tp=4, fp=1, tn=8, fn=2, correct=9)
    assert (rates["accuracy"]["count"], rates["accuracy"]["of"]) == (9, 15)
    assert rates["accuracy"]["low"] <= 9 / 15 <= rates["accuracy"]["high"]
    assert rates["ham_misclassification"]["of"] == 9
    with pytest.raises(ValueError, match="cannot exceed"):
        rates_with_intervals(tp=4, fp=1, tn=8, fn=2, correct=13)
