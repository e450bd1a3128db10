"""How sure the evaluation numbers are: intervals for rates, paired tests between filters.

A test part of a few hundred messages gives error rates whose last digit is noise, and
two filters scored on the same messages differ on only a handful of them.  These pure
functions say how much: the Wilson interval of a proportion and McNemar's paired test.
Results are plain JSON-able values (no NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from .scores import _as_bool

__all__ = ["accuracy_with_interval", "mcnemar", "rates_with_intervals", "wilson_interval"]


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer count, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def _z(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    # Also rejects NaN, and a confidence so near 1 that its quantile's level rounds to 1.
    if not (0.0 < float(confidence) < 1.0 and 0.5 + float(confidence) / 2.0 < 1.0):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927) for a binomial proportion ``successes / n``.

    The bounds are the two proportions p for which the observed proportion is z standard
    errors sqrt(p(1-p)/n) away, z the two-sided normal quantile of ``confidence``:

        (p_hat + z^2/2n -/+ z sqrt(p_hat(1-p_hat)/n + z^2/4n^2)) / (1 + z^2/n)

    Unlike the textbook p_hat +/- z sqrt(p_hat(1-p_hat)/n) it never leaves [0, 1] and does
    not collapse to a zero-width interval at 0 or n successes, which is exactly where a spam
    filter's false-positive count usually is.  With n = 0 nothing is known: (0.0, 1.0).
    """
    k = _count(successes, "successes")
    total = _count(n, "n")
    if k > total:
        raise ValueError(f"successes ({k}) cannot exceed n ({total})")
    z = _z(confidence)
    if total == 0:
        return 0.0, 1.0
    p = k / total
    z2 = z * z
    denominator = 1.0 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / total + z2 / (4 * total * total)) / denominator
    # At the edges the bound is exactly 0 or 1 in exact arithmetic; rounding would leave a
    # tiny nonzero value (or one just outside [0, 1]) that reads as a real bound.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == total else min(1.0, centre + half)
    return low, high


def mcnemar(
    correct_a: Sequence[bool] | np.ndarray, correct_b: Sequence[bool] | np.ndarray
) -> dict[str, Any]:
    """McNemar's test of two classifiers scored on the same messages.

    ``correct_a[i]`` and ``correct_b[i]`` say whether each got message i right (booleans or
    0/1).  Only the messages exactly one of them got right carry information about which is
    better: ``a_only`` (b in McNemar's table) and ``b_only`` (c).  Under the null hypothesis
    that both err equally often, each such message is a fair coin, so ``p_value`` is the
    exact two-sided binomial test of b successes in b + c trials at 1/2; the normal
    approximation behind the chi-square is poor for the handful of disagreements a spam
    filter comparison usually has.  ``statistic`` is that chi-square anyway, with Edwards'
    continuity correction, max(|b - c| - 1, 0)^2 / (b + c), None when b + c = 0 (the two
    never disagree; ``p_value`` is then 1.0).  ``log10_p_value`` is the p-value's
    base-10 logarithm, there when ``p_value`` is too small for a float and reads 0.
    """
    a = _as_bool(correct_a, "correct_a")
    b_arr = _as_bool(correct_b, "correct_b")
    if len(a) != len(b_arr):
        raise ValueError(
            f"correct_a and correct_b differ in length ({len(a)} vs {len(b_arr)}); "
            "a paired test needs both classifiers' results on the same messages"
        )
    b = int(np.sum(a & ~b_arr))
    c = int(np.sum(~a & b_arr))
    discordant = b + c
    if discordant == 0:
        statistic: float | None = None
        p_value, log10_p_value = 1.0, 0.0
    else:
        statistic = max(abs(b - c) - 1, 0) ** 2 / discordant
        p_value, log10_p_value = _fair_coin_p_value(b, discordant)
    return {
        "a_only": b,
        "b_only": c,
        "both": int(np.sum(a & b_arr)),
        "neither": int(np.sum(~a & ~b_arr)),
        "statistic": statistic,
        "p_value": p_value,
        "log10_p_value": log10_p_value,
        "test": "exact binomial",
    }


def _fair_coin_p_value(heads: int, tosses: int) -> tuple[float, float]:
    """The exact two-sided p-value of ``heads`` in ``tosses`` of a fair coin, and its
    base-10 logarithm: the chance of an outcome no likelier, which for this symmetric
    binomial is both tails from min(heads, tosses - heads) out.

    In whole numbers, so exact until the final division (which Python rounds
    correctly): scipy.stats' binomtest gave the same values, and importing scipy.stats
    cost `evaluate` 0.6 s.  The shorter of the two tails and the middle is summed, and
    each sum is quadratic in the tosses (0.15 s at 50,000).  The logarithm is taken of
    the whole numbers too: past about 1,100 lopsided tosses the p-value is below the
    smallest float and the division gives 0, which no test can give."""
    tail = min(heads, tosses - heads)
    middle = tosses - 2 * tail - 1  # the outcomes likelier than ``heads``
    if middle < 0:
        return 1.0, 0.0
    if tail + 1 <= middle:
        summed, first = tail + 1, 0
    else:
        summed, first = middle, tail + 1
    total, ways = 0, math.comb(tosses, first)
    for i in range(first, first + summed):
        total += ways
        ways = ways * (tosses - i) // (i + 1)
    outcomes = 2**tosses
    chance = min(outcomes, 2 * total) if first == 0 else outcomes - total
    return chance / outcomes, math.log10(chance) - tosses * math.log10(2)


def _rate(count: int, of: int, confidence: float) -> dict[str, Any]:
    low, high = wilson_interval(count, of, confidence)
    return {
        # No messages of the kind: the rate is undefined, not 0.
        "value": count / of if of else None,
        "low": low,
        "high": high,
        "count": count,
        "of": of,
    }


def accuracy_with_interval(correct: int, n: int, confidence: float = 0.95) -> dict[str, Any]:
    """The accuracy ``correct`` of ``n`` with its Wilson interval, as
    :func:`rates_with_intervals` gives it: for mail without a spam class, where the
    misclassification rates have no sides."""
    _z(confidence)
    return _rate(_count(correct, "correct"), _count(n, "n"), confidence)


def rates_with_intervals(
    tp: int,
    fp: int,
    tn: int,
    fn: int,
    confidence: float = 0.95,
    correct: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Accuracy and both misclassification rates, each with its Wilson interval.

    Spam is the positive class.  Keys: ``accuracy`` (``correct`` of all, by default tp
    + tn), ``ham_misclassification`` (fp of the ham, fp + tn) and
    ``spam_misclassification`` (fn of the spam, fn + tp); each ``{"value", "low",
    "high", "count", "of"}``, with ``value`` None and the interval (0, 1) when ``of`` is
    0.  With three classes or more, "ham" is all mail but spam, and tp + tn counts a
    message of one such class called another as right: ``correct`` is then the number
    the accuracy is of.
    """
    tp, fp = _count(tp, "tp"), _count(fp, "fp")
    tn, fn = _count(tn, "tn"), _count(fn, "fn")
    right = tp + tn if correct is None else _count(correct, "correct")
    if right > tp + tn:
        raise ValueError(f"correct ({right}) cannot exceed tp + tn ({tp + tn})")
    _z(confidence)  # validate once, before any of the three
    return {
        "accuracy": _rate(right, tp + fp + tn + fn, confidence),
        "ham_misclassification": _rate(fp, fp + tn, confidence),
        "spam_misclassification": _rate(fn, fn + tp, confidence),
    }
