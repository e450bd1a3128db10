"""Tests for spamnb.scores.

Expected values are worked out by hand from the definitions (arithmetic in the comments) or by
deliberately naive formulas written here, never by the implementation under test.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.scores import (
    calibration,
    confusion_counts,
    confusion_matrix,
    evaluation_report,
    majority_baseline,
    per_class_report,
    predicted_columns,
    roc_auc,
    roc_curve,
    stratified_folds,
    stratified_split,
)

# --------------------------------------------------------------------------- helpers


def brute_force_auc(is_pos: list[bool], scores: list[float]) -> float:
    """Fraction of (positive, negative) pairs ordered correctly, ties counting 1/2."""
    pos = [s for p, s in zip(is_pos, scores, strict=True) if p]
    neg = [s for p, s in zip(is_pos, scores, strict=True) if not p]
    wins = 0.0
    for a in pos:
        for b in neg:
            if a > b:
                wins += 1.0
            elif a == b:
                wins += 0.5
    return wins / (len(pos) * len(neg))


def trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    return float(sum((x[i + 1] - x[i]) * (y[i + 1] + y[i]) / 2 for i in range(len(x) - 1)))


def assert_plain_json(value: object) -> None:
    """Only builtin JSON types, recursively (np.float64 subclasses float, so check exact types)."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str
            assert_plain_json(v)
    elif isinstance(value, list):
        for v in value:
            assert_plain_json(v)
    else:
        assert value is None or type(value) in (str, int, float, bool), (value, type(value))
        if type(value) is float:
            assert math.isfinite(value)


# Labels where every class has at least two members, as the splitters require.
labels_strategy = st.dictionaries(
    st.sampled_from(["ham", "spam", "promo", "social"]),
    st.integers(min_value=2, max_value=30),
    min_size=1,
).flatmap(
    lambda counts: st.permutations([c for c, n in counts.items() for _ in range(n)]),
)


# --------------------------------------------------------------------------- stratified_split


def test_split_hand_counts() -> None:
    labels = ["ham"] * 10 + ["spam"] * 5
    train, test = stratified_split(labels, 0.2, seed=0)
    test_counts = Counter(labels[i] for i in test)
    # ham: round(0.2 * 10) = 2; spam: round(0.2 * 5) = round(1.0) = 1
    assert test_counts == {"ham": 2, "spam": 1}
    assert len(train) == 12


def test_split_rounds_to_the_nearest_count_not_down() -> None:
    # 0.27 of 10 is 2.7: three of each class, where truncating would give two.
    labels = ["a"] * 10 + ["b"] * 10
    _, test = stratified_split(labels, 0.27, seed=0)
    assert Counter(labels[i] for i in test) == {"a": 3, "b": 3}


def test_split_rounding_and_clamping() -> None:
    labels = ["a"] * 2 + ["b"] * 5 + ["c"] * 7
    _, test = stratified_split(labels, 0.1, seed=3)
    counts = Counter(labels[i] for i in test)
    # a: round(0.2) = 0 -> clamped up to 1; b: round(0.5) = 0 -> 1; c: round(0.7) = 1
    assert counts == {"a": 1, "b": 1, "c": 1}
    train, _ = stratified_split(labels, 0.9, seed=3)
    counts = Counter(labels[i] for i in train)
    # test sizes a: round(1.8) = 2 -> clamped to 1; b: round(4.5) = 4 (half to even);
    # c: round(6.3) = 6. Train gets the rest: 1, 1, 1.
    assert counts == {"a": 1, "b": 1, "c": 1}


def test_split_types_sorted_disjoint_covering() -> None:
    labels = ["spam", "ham"] * 20 + ["ham"] * 9
    train, test = stratified_split(labels, 0.25, seed=7)
    for part in (train, test):
        assert isinstance(part, np.ndarray)
        assert np.issubdtype(part.dtype, np.integer)
        assert np.all(np.diff(part) > 0)
    assert set(train.tolist()).isdisjoint(test.tolist())
    assert sorted(train.tolist() + test.tolist()) == list(range(len(labels)))


def test_split_deterministic() -> None:
    labels = ["ham"] * 60 + ["spam"] * 40
    a = stratified_split(labels, 0.3, seed=42)
    b = stratified_split(labels, 0.3, seed=42)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    c = stratified_split(labels, 0.3, seed=43)
    assert not np.array_equal(a[1], c[1])
    # Any sequence type gives the same answer.
    d = stratified_split(tuple(labels), 0.3, seed=42)
    e = stratified_split(np.array(labels), 0.3, seed=42)
    np.testing.assert_array_equal(a[1], d[1])
    np.testing.assert_array_equal(a[1], e[1])


@pytest.mark.parametrize("bad", [0, 0.0, 1, 1.0, -0.2, 1.5, float("nan"), True, "0.2"])
def test_split_rejects_bad_test_size(bad: object) -> None:
    with pytest.raises(ValueError, match="test_size"):
        stratified_split(["a", "a", "b", "b"], bad, seed=0)  # type: ignore[arg-type]


def test_split_rejects_singleton_class() -> None:
    with pytest.raises(ValueError, match="'spam'"):
        stratified_split(["ham", "ham", "ham", "spam"], 0.5, seed=0)
    with pytest.raises(ValueError):
        stratified_split([], 0.5, seed=0)


@settings(max_examples=150, deadline=None)
@given(
    labels=labels_strategy,
    test_size=st.floats(min_value=0.01, max_value=0.99),
    seed=st.integers(0, 2**32 - 1),
)
def test_split_properties(labels: list[str], test_size: float, seed: int) -> None:
    train, test = stratified_split(labels, test_size, seed)
    assert set(train.tolist()).isdisjoint(test.tolist())
    assert sorted(train.tolist() + test.tolist()) == list(range(len(labels)))
    totals = Counter(labels)
    in_test = Counter(labels[i] for i in test)
    in_train = Counter(labels[i] for i in train)
    for cls, n in totals.items():
        # proportion preserved to within one example, and both sides non-empty
        assert abs(in_test[cls] - test_size * n) <= 1
        assert in_test[cls] >= 1
        assert in_train[cls] >= 1


# --------------------------------------------------------------------------- stratified_folds


def test_folds_hand_case() -> None:
    labels = ["a"] * 7 + ["b"] * 5 + ["c"] * 3
    folds = stratified_folds(labels, 4, seed=1)
    assert len(folds) == 4
    # 15 examples over 4 folds -> sizes 4, 4, 4, 3 in some order
    assert sorted(len(te) for _, te in folds) == [3, 4, 4, 4]
    for _, te in folds:
        counts = Counter(labels[i] for i in te)
        # a: 7/4 -> 1 or 2 per fold; b: 5/4 -> 1 or 2; c: 3/4 -> 0 or 1
        assert counts["a"] in (1, 2)
        assert counts["b"] in (1, 2)
        assert counts["c"] in (0, 1)


def test_folds_deterministic() -> None:
    labels = ["ham"] * 30 + ["spam"] * 20
    a = stratified_folds(labels, 5, seed=9)
    b = stratified_folds(labels, 5, seed=9)
    c = stratified_folds(labels, 5, seed=10)
    for (tr1, te1), (tr2, te2) in zip(a, b, strict=True):
        np.testing.assert_array_equal(tr1, tr2)
        np.testing.assert_array_equal(te1, te2)
    assert any(not np.array_equal(x[1], y[1]) for x, y in zip(a, c, strict=True))


def test_folds_dealt_in_a_given_order_follow_the_rows_not_their_places() -> None:
    labels = ["ham"] * 12 + ["spam"] * 8
    order = np.random.default_rng(4).permutation(len(labels))
    folds = stratified_folds(labels, 4, seed=0, order=order)
    # Each class's members go round the folds in the order given.
    hams = [i for i in order if labels[i] == "ham"]
    assert [i for i in hams[::4]] == [i for i in hams if i in set(folds[0][1].tolist())]
    # The same rows in other places: the same rows in each fold.
    moved = np.random.default_rng(5).permutation(len(labels))
    place_of = np.argsort(moved)
    moved_folds = stratified_folds([labels[i] for i in moved], 4, seed=0, order=place_of[order])
    for (_, held_out), (_, moved_held_out) in zip(folds, moved_folds, strict=True):
        assert sorted(moved[moved_held_out].tolist()) == held_out.tolist()
    with pytest.raises(ValueError, match="permutation"):
        stratified_folds(labels, 4, seed=0, order=np.zeros(len(labels), dtype=int))
    with pytest.raises(ValueError, match="permutation"):
        stratified_folds(labels, 4, seed=0, order=order[:-1])
    with pytest.raises(ValueError, match="permutation"):
        stratified_folds(labels, 4, seed=0, order=order.astype(float))


@pytest.mark.parametrize("k", [1, 0, -3, 7, 2.0, True])
def test_folds_reject_bad_k(k: object) -> None:
    with pytest.raises(ValueError, match="folds"):
        stratified_folds(["a", "a", "a", "b", "b", "b"], k, seed=0)  # type: ignore[arg-type]


def test_folds_reject_singleton_class() -> None:
    with pytest.raises(ValueError, match="'b'"):
        stratified_folds(["a", "a", "a", "b"], 2, seed=0)


@settings(max_examples=150, deadline=None)
@given(labels=labels_strategy, k=st.integers(2, 10), seed=st.integers(0, 2**32 - 1))
def test_folds_partition(labels: list[str], k: int, seed: int) -> None:
    k = min(k, len(labels))
    folds = stratified_folds(labels, k, seed)
    assert len(folds) == k
    seen: list[int] = []
    everything = set(range(len(labels)))
    totals = Counter(labels)
    for train, test in folds:
        assert len(test) > 0
        assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
        assert set(train.tolist()) == everything - set(test.tolist())
        seen.extend(test.tolist())
        in_test = Counter(labels[i] for i in test)
        in_train = Counter(labels[i] for i in train)
        for cls, n in totals.items():
            assert in_test[cls] in (n // k, -(-n // k))
            assert in_train[cls] >= 1
    assert sorted(seen) == sorted(everything)
    sizes = [len(te) for _, te in folds]
    assert max(sizes) - min(sizes) <= 1


# --------------------------------------------------------------------------- majority_baseline


def test_majority_baseline_hand() -> None:
    # train: ham 2, spam 1 -> "ham"; test has 3 ham of 4 -> 0.75
    cls, acc = majority_baseline(["ham", "spam", "ham"], ["spam", "ham", "ham", "ham"])
    assert cls == "ham"
    assert acc == pytest.approx(0.75)
    assert type(acc) is float


def test_majority_baseline_tie_goes_to_first_alphabetically() -> None:
    assert majority_baseline(["spam", "ham"], ["spam"]) == ("ham", 0.0)
    assert majority_baseline(["ham", "spam"], ["spam"]) == ("ham", 0.0)


def test_majority_baseline_class_absent_from_test() -> None:
    # "promo" dominates training but never appears in test -> accuracy 0
    assert majority_baseline(["promo"] * 3 + ["ham"], ["ham", "spam"]) == ("promo", 0.0)


def test_majority_baseline_empty_raises() -> None:
    with pytest.raises(ValueError):
        majority_baseline([], ["ham"])
    with pytest.raises(ValueError):
        majority_baseline(["ham"], [])


# --------------------------------------------------------------------------- confusion


def test_confusion_counts_hand() -> None:
    y_true = ["spam", "spam", "ham", "ham", "ham", "spam"]
    y_pred = ["spam", "ham", "ham", "spam", "ham", "spam"]
    # idx 0,5: spam/spam -> tp=2; idx 1: spam/ham -> fn=1; idx 3: ham/spam -> fp=1;
    # idx 2,4: ham/ham -> tn=2
    assert confusion_counts(y_true, y_pred, "spam") == {"tp": 2, "fp": 1, "tn": 2, "fn": 1}
    # swapping the positive class swaps tp<->tn and fp<->fn
    assert confusion_counts(y_true, y_pred, "ham") == {"tp": 2, "fp": 1, "tn": 2, "fn": 1}


def test_confusion_counts_multiclass_negatives() -> None:
    y_true = ["spam", "promo", "ham", "promo"]
    y_pred = ["promo", "ham", "spam", "promo"]
    # spam->promo: fn; promo->ham: tn (both negative); ham->spam: fp; promo->promo: tn
    assert confusion_counts(y_true, y_pred, "spam") == {"tp": 0, "fp": 1, "tn": 2, "fn": 1}


def test_confusion_counts_length_mismatch() -> None:
    with pytest.raises(ValueError, match="length"):
        confusion_counts(["spam"], ["spam", "ham"], "spam")


def test_confusion_matrix_hand() -> None:
    y_true = list("aabbccab")
    y_pred = list("abbbcaac")
    # pairs: aa ab bb bb cc ca aa bc
    # row a: a->a 2, a->b 1, a->c 0; row b: b->b 2, b->c 1; row c: c->a 1, c->c 1
    expected = [[2, 1, 0], [0, 2, 1], [1, 0, 1]]
    cm = confusion_matrix(y_true, y_pred, ["a", "b", "c"])
    assert cm.tolist() == expected
    assert np.issubdtype(cm.dtype, np.integer)
    # class order follows `classes`; an unused class gets an all-zero row and column
    cm2 = confusion_matrix(y_true, y_pred, ["c", "d", "a", "b"])
    assert cm2.tolist() == [[1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 2, 1], [1, 0, 0, 2]]


def test_confusion_matrix_rejects_unknown_labels() -> None:
    with pytest.raises(ValueError, match="not among classes"):
        confusion_matrix(["a", "x"], ["a", "a"], ["a", "b"])
    with pytest.raises(ValueError, match="duplicates"):
        confusion_matrix(["a"], ["a"], ["a", "a"])


def test_per_class_report_hand() -> None:
    rep = per_class_report(list("aabbccab"), list("abbbcaac"), ["a", "b", "c"])
    # from the matrix above: a: tp 2, column sum 3, row sum 3 -> P = R = F1 = 2/3
    # b: tp 2, column 1+2+0 = 3, row 3 -> 2/3 each; c: tp 1, column 0+1+1 = 2, row 2 -> 1/2
    assert rep["a"] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}
    )
    assert rep["b"] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}
    )
    assert rep["c"] == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2})


def test_per_class_report_unequal_precision_recall() -> None:
    rep = per_class_report(["x", "x", "y", "y"], ["x", "y", "y", "y"], ["x", "y"])
    # x: tp 1, predicted 1 -> P = 1, support 2 -> R = 1/2, F1 = 2*1*0.5/1.5 = 2/3
    assert rep["x"] == pytest.approx({"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "support": 2})
    # y: tp 2, predicted 3 -> P = 2/3, R = 1, F1 = 2*(2/3)*1/(5/3) = 0.8
    assert rep["y"] == pytest.approx({"precision": 2 / 3, "recall": 1.0, "f1": 0.8, "support": 2})


def test_per_class_report_undefined_is_none() -> None:
    rep = per_class_report(["a", "a", "b"], ["a", "a", "a"], ["a", "b", "c"])
    # b: never predicted -> precision 0/0 undefined, recall 0/1 = 0, F1 0 (tp = 0)
    assert rep["b"] == {"precision": None, "recall": 0.0, "f1": 0.0, "support": 1}
    # c: never true nor predicted -> everything 0/0, undefined
    assert rep["c"] == {"precision": None, "recall": None, "f1": None, "support": 0}
    for stats in rep.values():
        assert not any(isinstance(v, float) and math.isnan(v) for v in stats.values())
        assert type(stats["support"]) is int


# --------------------------------------------------------------------------- roc_auc


def test_auc_perfect_inverted_and_all_tied() -> None:
    y = np.array([0, 0, 1, 1])
    assert roc_auc(y, np.array([1.0, 2.0, 3.0, 4.0])) == 1.0
    assert roc_auc(y, np.array([4.0, 3.0, 2.0, 1.0])) == 0.0
    assert roc_auc(y, np.full(4, 7.5)) == 0.5


def test_auc_hand_with_tie() -> None:
    is_pos = np.array([True, True, False, False])
    scores = np.array([3.0, 2.0, 2.0, 1.0])
    # pairs (pos, neg): (3,2) 1, (3,1) 1, (2,2) tie 1/2, (2,1) 1 -> 3.5 / 4
    # ranks: 1 -> 1, 2,2 -> 2.5 each, 3 -> 4; U = (4 + 2.5) - 2*3/2 = 3.5
    assert roc_auc(is_pos, scores) == pytest.approx(0.875)


def test_auc_one_class_is_nan() -> None:
    assert math.isnan(roc_auc(np.array([1, 1, 1]), np.array([0.1, 0.5, 0.2])))
    assert math.isnan(roc_auc(np.array([False, False]), np.array([0.1, 0.5])))
    assert math.isnan(roc_auc(np.array([], dtype=bool), np.array([])))


def test_auc_handles_infinite_log_odds() -> None:
    # -inf < 0 < +inf: the one negative sits between the positives -> 1 of 2 pairs correct
    assert roc_auc(np.array([1, 0, 1]), np.array([np.inf, 0.0, -np.inf])) == pytest.approx(0.5)


def test_auc_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="NaN"):
        roc_auc(np.array([1, 0]), np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="0/1"):
        roc_auc(np.array(["spam", "ham"]), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="0/1"):
        roc_auc(np.array([2, 0]), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="length"):
        roc_auc(np.array([1, 0, 1]), np.array([1.0, 0.0]))


scores_strategy = st.one_of(
    st.integers(-3, 3).map(float),  # coarse values, so ties are common
    st.floats(allow_nan=False, allow_infinity=True, width=64),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), scores_strategy), min_size=2, max_size=60).filter(
        lambda pairs: len({p for p, _ in pairs}) == 2
    )
)
def test_auc_matches_pairwise_brute_force(pairs: list[tuple[bool, float]]) -> None:
    is_pos = [p for p, _ in pairs]
    scores = [s for _, s in pairs]
    expected = brute_force_auc(is_pos, scores)
    assert roc_auc(np.array(is_pos), np.array(scores)) == pytest.approx(expected, abs=1e-12)


# Probabilities on a 1/1000 grid: far enough apart that the transform below keeps them distinct
# in floating point (on arbitrary floats any transform can merge neighbours into ties).
grid_probability = st.integers(0, 1000).map(lambda i: i / 1000)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), grid_probability), min_size=2, max_size=40).filter(
        lambda pairs: len({p for p, _ in pairs}) == 2
    )
)
def test_auc_invariant_under_monotone_transform(pairs: list[tuple[bool, float]]) -> None:
    is_pos = np.array([p for p, _ in pairs])
    p = np.array([s for _, s in pairs])
    # shifted log-odds: strictly increasing on [0, 1] and finite at the ends
    log_odds = np.log((p + 0.01) / (1.01 - p))
    assert roc_auc(is_pos, log_odds) == pytest.approx(roc_auc(is_pos, p), abs=1e-12)


# --------------------------------------------------------------------------- roc_curve


def test_roc_curve_hand() -> None:
    is_pos = np.array([1, 0, 1, 0, 1])
    scores = np.array([0.9, 0.8, 0.8, 0.3, 0.1])
    fpr, tpr, thr = roc_curve(is_pos, scores)
    # n_pos = 3, n_neg = 2; predict positive when score >= threshold:
    # >= 0.9: tp 1 fp 0; >= 0.8: tp 2 fp 1; >= 0.3: tp 2 fp 2; >= 0.1: tp 3 fp 2
    np.testing.assert_allclose(thr, [0.9, 0.8, 0.3, 0.1])
    np.testing.assert_allclose(tpr, [1 / 3, 2 / 3, 2 / 3, 1.0])
    np.testing.assert_allclose(fpr, [0.0, 0.5, 1.0, 1.0])
    # area with (0, 0) prepended: 0 + 0.5*(1/3+2/3)/2 + 0.5*(2/3) + 0 = 0.25 + 1/3 = 7/12;
    # pairwise: 0.9 beats both negatives (2), 0.8 ties 0.8 and beats 0.3 (1.5), 0.1 none -> 3.5/6
    area = trapezoid(np.r_[0.0, fpr], np.r_[0.0, tpr])
    assert area == pytest.approx(7 / 12)
    assert roc_auc(is_pos, scores) == pytest.approx(7 / 12)


def test_roc_curve_one_class_rates_are_nan() -> None:
    fpr, tpr, thr = roc_curve(np.array([1, 1]), np.array([0.2, 0.4]))
    assert np.all(np.isnan(fpr))
    np.testing.assert_allclose(tpr, [0.5, 1.0])
    np.testing.assert_allclose(thr, [0.4, 0.2])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(-4, 4).map(float) | st.floats(-1e6, 1e6)),
        min_size=2,
        max_size=60,
    ).filter(lambda pairs: len({p for p, _ in pairs}) == 2)
)
def test_roc_curve_area_equals_auc(pairs: list[tuple[bool, float]]) -> None:
    is_pos = np.array([p for p, _ in pairs])
    scores = np.array([s for _, s in pairs])
    fpr, tpr, thr = roc_curve(is_pos, scores)
    assert len(fpr) == len(tpr) == len(thr) == len(set(scores.tolist()))
    assert np.all(np.diff(thr) < 0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert fpr[-1] == 1.0 and tpr[-1] == 1.0
    area = trapezoid(np.r_[0.0, fpr], np.r_[0.0, tpr])
    assert area == pytest.approx(brute_force_auc(is_pos.tolist(), scores.tolist()), abs=1e-12)


# --------------------------------------------------------------------------- calibration


def test_calibration_hand() -> None:
    conf = np.array([0.95, 0.95, 0.85, 0.55, 0.6])
    correct = np.array([1, 0, 1, 1, 0])
    result = calibration(conf, correct)
    # bin 5 [0.5,0.6): {0.55}, acc 1   -> (1/5)*|1 - 0.55| = 0.09
    # bin 6 [0.6,0.7): {0.6},  acc 0   -> (1/5)*|0 - 0.6|  = 0.12
    # bin 8 [0.8,0.9): {0.85}, acc 1   -> (1/5)*|1 - 0.85| = 0.03
    # bin 9 [0.9,1.0]: {0.95, 0.95}, acc 1/2 -> (2/5)*|0.5 - 0.95| = 0.18
    # ECE = 0.09 + 0.12 + 0.03 + 0.18 = 0.42
    assert result["ece"] == pytest.approx(0.42)
    # Brier: 0.05^2 + 0.95^2 + 0.15^2 + 0.45^2 + 0.6^2
    #      = 0.0025 + 0.9025 + 0.0225 + 0.2025 + 0.36 = 1.49; / 5 = 0.298
    assert result["brier"] == pytest.approx(0.298)
    bins = result["bins"]
    assert len(bins) == 10
    assert [b["count"] for b in bins] == [0, 0, 0, 0, 0, 1, 1, 0, 1, 2]
    assert bins[9] == pytest.approx(
        {"lower": 0.9, "upper": 1.0, "count": 2, "mean_confidence": 0.95, "accuracy": 0.5}
    )
    assert bins[0] == {
        "lower": 0.0,
        "upper": 0.1,
        "count": 0,
        "mean_confidence": None,
        "accuracy": None,
    }
    for i, b in enumerate(bins):
        assert b["lower"] == pytest.approx(i / 10)
        assert b["upper"] == pytest.approx((i + 1) / 10)


def test_calibration_bin_edges() -> None:
    # lower edges belong to their bin, 1.0 belongs to the last (closed) bin
    conf = np.array([0.0, 0.1, 0.3, 0.7, 0.9999, 1.0])
    counts = [b["count"] for b in calibration(conf, np.ones(6, dtype=bool))["bins"]]
    assert counts == [1, 1, 0, 1, 0, 0, 0, 1, 0, 2]


@pytest.mark.parametrize("n_bins", [1, 3, 7, 10, 49, 98, 100])
def test_calibration_edge_values_land_in_their_own_bin(n_bins: int) -> None:
    # b / n_bins is the reported lower edge of bin b, so it must be counted there even when
    # (b / n) * n rounds below b in floating point (e.g. n = 49).
    edges = np.arange(n_bins) / n_bins
    result = calibration(edges, np.zeros(n_bins, dtype=bool), n_bins=n_bins)
    assert [b["count"] for b in result["bins"]] == [1] * n_bins
    for b, edge in zip(result["bins"], edges, strict=True):
        assert b["lower"] == edge
    # And a value just below an edge is in the bin below it: floor(c * n) rounds some
    # of them up (0.8999999999999999 * 10 is 9.0).
    below = np.nextafter(edges[1:], -np.inf)
    if len(below):
        result = calibration(below, np.zeros(len(below), dtype=bool), n_bins=n_bins)
        assert [b["count"] for b in result["bins"]] == [1] * (n_bins - 1) + [0]


def test_calibration_perfectly_calibrated_has_small_ece() -> None:
    rng = np.random.default_rng(20240601)
    n = 200_000
    conf = rng.uniform(0.5, 1.0, size=n)
    correct = rng.random(n) < conf
    result = calibration(conf, correct)
    # sampling noise per populated bin is ~sqrt(0.25 / 40_000) = 0.0025
    assert result["ece"] < 0.01
    # E[(c - Bernoulli(c))^2] = c(1-c); mean over U(0.5,1) = 3/4 - 7/12 = 1/6
    assert result["brier"] == pytest.approx(1 / 6, abs=0.005)


def test_calibration_overconfident_exact() -> None:
    conf = np.full(1000, 0.99)
    correct = np.arange(1000) < 700  # accuracy exactly 0.7
    result = calibration(conf, correct)
    # one bin: |0.7 - 0.99| = 0.29
    assert result["ece"] == pytest.approx(0.29)
    # 0.7*(0.01)^2 + 0.3*(0.99)^2 = 0.00007 + 0.29403 = 0.2941
    assert result["brier"] == pytest.approx(0.2941)


def test_calibration_overconfident_sampled() -> None:
    rng = np.random.default_rng(7)
    conf = np.full(100_000, 0.99)
    correct = rng.random(100_000) < 0.7
    assert calibration(conf, correct)["ece"] == pytest.approx(0.29, abs=0.01)


def test_calibration_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        calibration(np.array([1.2]), np.array([True]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        calibration(np.array([np.nan]), np.array([True]))
    with pytest.raises(ValueError, match="at least one"):
        calibration(np.array([]), np.array([], dtype=bool))
    with pytest.raises(ValueError, match="n_bins"):
        calibration(np.array([0.5]), np.array([True]), n_bins=0)


def test_calibration_tolerates_rounding_above_one() -> None:
    result = calibration(np.array([1.0 + 2e-16]), np.array([True]))
    assert result["bins"][-1]["count"] == 1
    assert result["brier"] == pytest.approx(0.0)


def binary_brier_via_calibration(p_spam: np.ndarray, is_spam: np.ndarray) -> float:
    # The predicted class gets probability max(p, 1-p); the prediction is right when the
    # predicted side matches the truth (p >= 0.5 here means "spam" is predicted).
    predicts_spam = p_spam >= 0.5
    conf = np.where(predicts_spam, p_spam, 1.0 - p_spam)
    return calibration(conf, predicts_spam == is_spam)["brier"]


def test_brier_identity_hand() -> None:
    p = np.array([0.9, 0.4, 0.2, 0.7])
    y = np.array([True, True, False, False])
    # binary: (0.9-1)^2 + (0.4-1)^2 + (0.2-0)^2 + (0.7-0)^2 = 0.01+0.36+0.04+0.49 = 0.9; /4
    # top-label: conf [0.9, 0.6, 0.8, 0.7], correct [1, 0, 1, 0]
    #   -> 0.01 + 0.36 + 0.04 + 0.49, the same four squares
    assert binary_brier_via_calibration(p, y) == pytest.approx(0.225)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.0, 1.0), st.booleans()), min_size=1, max_size=50),
    st.sampled_from([["ham", "spam"], ["spam", "ham"]]),
)
def test_brier_identity_two_classes(pairs: list[tuple[float, bool]], classes: list[str]) -> None:
    p = np.array([q for q, _ in pairs])
    y = np.array([t for _, t in pairs])
    binary = float(np.mean((p - y) ** 2))
    assert binary_brier_via_calibration(p, y) == pytest.approx(binary, abs=1e-12)
    # and through the full report, whichever column order the model uses
    spam_col = classes.index("spam")
    proba = np.empty((len(p), 2))
    proba[:, spam_col] = p
    proba[:, 1 - spam_col] = 1.0 - p
    y_true = ["spam" if t else "ham" for t in y]
    report = evaluation_report(y_true, proba, classes, ["ham", "spam"])
    assert report["calibration"]["brier"] == pytest.approx(binary, abs=1e-12)


# --------------------------------------------------------------------------- evaluation_report

BINARY_KEYS = {
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
}


def test_report_two_classes_hand() -> None:
    classes = ["ham", "spam"]
    y_true = ["spam", "spam", "ham", "ham"]
    p_spam = np.array([0.9, 0.4, 0.2, 0.7])
    proba = np.column_stack([1.0 - p_spam, p_spam])
    report = evaluation_report(y_true, proba, classes, ["ham", "ham", "spam"])
    assert set(report) == BINARY_KEYS
    assert report["n"] == 4
    assert report["classes"] == classes
    # predictions: spam, ham, ham, spam -> right, wrong, right, wrong -> 0.5
    assert report["accuracy"] == pytest.approx(0.5)
    # training majority "ham"; 2 of the 4 test labels are ham
    assert report["baseline_class"] == "ham"
    assert report["baseline_accuracy"] == pytest.approx(0.5)
    # spam scores {0.9, 0.4} vs ham {0.2, 0.7}: 0.9 beats both, 0.4 beats 0.2 -> 3/4
    assert report["roc_auc"] == pytest.approx(0.75)
    assert report["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 1}
    assert report["confusion_matrix"] == {"classes": classes, "rows": [[1, 1], [1, 1]]}
    # each class: tp 1, predicted 2, support 2 -> 0.5 everywhere
    for cls in classes:
        assert report["per_class"][cls] == pytest.approx(
            {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
        )
    # confidences [0.9, 0.6, 0.8, 0.7], correct [1, 0, 1, 0]
    # ECE = (0.1 + 0.6 + 0.2 + 0.7) / 4 = 0.4 (each in its own bin); Brier = 0.9 / 4 = 0.225
    assert report["calibration"]["ece"] == pytest.approx(0.4)
    assert report["calibration"]["brier"] == pytest.approx(0.225)
    assert_plain_json(report)
    json.dumps(report, allow_nan=False)


def test_report_uses_scores_for_auc() -> None:
    classes = ["ham", "spam"]
    y_true = ["spam", "spam", "ham", "ham"]
    p_spam = np.array([0.9, 0.4, 0.2, 0.7])
    proba = np.column_stack([1.0 - p_spam, p_spam])
    log_odds = np.log(p_spam / (1.0 - p_spam))
    report = evaluation_report(y_true, proba, classes, ["ham"], scores=log_odds)
    assert report["roc_auc"] == pytest.approx(0.75)  # same ranking as p_spam
    # reversing the ranking flips every (spam, ham) pair (there are no ties): 1 - 3/4
    report = evaluation_report(y_true, proba, classes, ["ham"], scores=-log_odds)
    assert report["roc_auc"] == pytest.approx(0.25)


def test_report_auc_from_log_odds_survives_saturated_probabilities() -> None:
    # Both probabilities round to 1.0, so ranking by proba ties them (AUC 0.5); the log-odds
    # still order them correctly (AUC 1.0). This is why spamnb passes `scores`.
    classes = ["ham", "spam"]
    proba = np.array([[0.0, 1.0], [0.0, 1.0]])
    y_true = ["spam", "ham"]
    assert evaluation_report(y_true, proba, classes, ["ham"])["roc_auc"] == pytest.approx(0.5)
    report = evaluation_report(y_true, proba, classes, ["ham"], scores=np.array([80.0, 60.0]))
    assert report["roc_auc"] == pytest.approx(1.0)


def test_report_three_classes_hand() -> None:
    classes = ["ham", "promo", "spam"]
    y_true = ["spam", "ham", "promo", "promo", "ham"]
    proba = np.array(
        [
            [0.1, 0.2, 0.7],  # -> spam (right), conf 0.7
            [0.5, 0.3, 0.2],  # -> ham (right), conf 0.5
            [0.2, 0.3, 0.5],  # -> spam (wrong), conf 0.5
            [0.1, 0.8, 0.1],  # -> promo (right), conf 0.8
            [0.3, 0.3, 0.4],  # -> spam (wrong), conf 0.4
        ]
    )
    report = evaluation_report(y_true, proba, classes, ["promo", "promo", "ham", "spam"])
    assert set(report) == BINARY_KEYS
    assert report["n"] == 5
    assert report["accuracy"] == pytest.approx(3 / 5)
    # training majority promo; 2 of 5 test labels are promo
    assert report["baseline_class"] == "promo"
    assert report["baseline_accuracy"] == pytest.approx(2 / 5)
    # spam-vs-rest on proba[:, spam]: positive 0.7 vs negatives 0.2, 0.5, 0.1, 0.4 -> all 4
    assert report["roc_auc"] == pytest.approx(1.0)
    # spam positive: row0 tp; rows 2,4 fp (predicted spam, not spam); rows 1,3 tn
    assert report["confusion"] == {"tp": 1, "fp": 2, "tn": 2, "fn": 0}
    assert report["confusion_matrix"]["rows"] == [[1, 0, 1], [0, 1, 1], [0, 0, 1]]
    # spam: tp 1, predicted 3 -> P 1/3, R 1, F1 = 2/(2+2+0) = 0.5
    assert report["per_class"]["spam"] == pytest.approx(
        {"precision": 1 / 3, "recall": 1.0, "f1": 0.5, "support": 1}
    )
    # bins: 0.4 -> bin 4 (wrong); 0.5, 0.5 -> bin 5 (1 right); 0.7 -> bin 7; 0.8 -> bin 8
    # ECE = (1/5)*0.4 + (2/5)*|0.5 - 0.5| + (1/5)*0.3 + (1/5)*0.2 = 0.08 + 0 + 0.06 + 0.04
    assert report["calibration"]["ece"] == pytest.approx(0.18)
    # Brier = (0.3^2 + 0.5^2 + 0.5^2 + 0.2^2 + 0.4^2) / 5 = (0.09+0.25+0.25+0.04+0.16)/5
    assert report["calibration"]["brier"] == pytest.approx(0.79 / 5)
    assert_plain_json(report)
    json.dumps(report, allow_nan=False)


def test_report_without_positive_class() -> None:
    classes = ["news", "personal", "work"]
    y_true = ["news", "personal", "work"]
    proba = np.eye(3)
    report = evaluation_report(y_true, proba, classes, ["work"])  # default positive "spam"
    assert set(report) == BINARY_KEYS - {"confusion"}
    assert report["roc_auc"] is None
    assert report["accuracy"] == 1.0
    report = evaluation_report(y_true, proba, classes, ["work"], positive=None)
    assert "confusion" not in report
    assert report["roc_auc"] is None
    json.dumps(report, allow_nan=False)


def test_report_single_class_in_truth_gives_none_auc() -> None:
    proba = np.array([[0.2, 0.8], [0.6, 0.4]])
    report = evaluation_report(["spam", "spam"], proba, ["ham", "spam"], ["ham", "spam"])
    assert report["roc_auc"] is None
    assert report["confusion"] == {"tp": 1, "fp": 0, "tn": 0, "fn": 1}
    json.dumps(report, allow_nan=False)


def test_report_ties_never_go_to_the_positive_class() -> None:
    # No evidence either way must not make a false positive, whatever the class order.
    proba = np.array([[0.5, 0.5]])
    for classes in (["spam", "ham"], ["ham", "spam"]):
        report = evaluation_report(["ham"], proba, classes, ["ham"])
        assert report["accuracy"] == 1.0 and report["confusion"]["fp"] == 0
    # Without a positive class, ties go to the earlier class.
    report = evaluation_report(["a"], proba, ["a", "b"], ["a"], positive=None)
    assert report["accuracy"] == 1.0


def test_predicted_columns_three_classes() -> None:
    proba = np.array([[0.4, 0.4, 0.2], [0.1, 0.2, 0.7], [0.3, 0.35, 0.35]])
    assert predicted_columns(proba, ["spam", "ham", "lists"], "spam").tolist() == [1, 2, 1]
    assert predicted_columns(proba, ["spam", "ham", "lists"], None).tolist() == [0, 2, 1]


def test_a_tie_up_to_rounding_is_not_spam() -> None:
    half = 0.5
    rounded_up = np.nextafter(half, 1.0)
    proba = np.array(
        [
            [rounded_up, np.nextafter(half, 0.0)],  # even, summed in another order
            [half + 1e-6, half - 1e-6],  # a lead, however small, that is evidence
            [np.nan, np.nan],  # no posterior
            [1.0, 0.0],
        ]
    )
    assert predicted_columns(proba, ["spam", "ham"], "spam").tolist() == [1, 0, 1, 0]
    # Only the positive class loses ties: without one, the larger probability wins.
    assert predicted_columns(proba[:1], ["spam", "ham"], None).tolist() == [0]
    three = np.array([[0.4 + 1e-17, 0.4, 0.2], [0.2, 0.4 + 1e-17, 0.4]])
    assert predicted_columns(three, ["spam", "ham", "lists"], "spam").tolist() == [1, 1]


def test_majority_baseline_from_counts() -> None:
    assert majority_baseline({"spam": 3, "ham": 5}, ["spam", "ham"]) == ("ham", 0.5)
    assert majority_baseline({"spam": 4, "ham": 4, "x": 0}, ["spam"]) == ("ham", 0.0)


def test_report_rejects_bad_input() -> None:
    good = np.array([[0.3, 0.7]])
    with pytest.raises(ValueError, match="shape"):
        evaluation_report(["spam"], np.array([0.3, 0.7]), ["ham", "spam"], ["ham"])
    with pytest.raises(ValueError, match="shape"):
        evaluation_report(["spam", "ham"], good, ["ham", "spam"], ["ham"])
    with pytest.raises(ValueError, match="does not know"):
        evaluation_report(["promo"], good, ["ham", "spam"], ["ham"])
    with pytest.raises(ValueError, match="NaN"):
        evaluation_report(["spam"], np.array([[np.nan, 0.7]]), ["ham", "spam"], ["ham"])
    with pytest.raises(ValueError, match="length"):
        evaluation_report(["spam"], good, ["ham", "spam"], ["ham"], scores=np.array([1.0, 2.0]))


@settings(max_examples=100, deadline=None)
@given(
    n_classes=st.sampled_from([2, 3]),
    rows=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
    with_scores=st.booleans(),
)
def test_report_always_json_serialisable(
    n_classes: int, rows: int, seed: int, with_scores: bool
) -> None:
    classes = ["ham", "spam", "promo"][:n_classes]
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.ones(n_classes), size=rows)
    y_true = [classes[i] for i in rng.integers(0, n_classes, size=rows)]
    train = [classes[i] for i in rng.integers(0, n_classes, size=5)]
    scores = rng.normal(size=rows) if with_scores else None
    report = evaluation_report(y_true, proba, classes, train, scores=scores)
    assert set(report) == BINARY_KEYS
    assert_plain_json(report)
    text = json.dumps(report, allow_nan=False)
    assert json.loads(text) == report
    assert report["n"] == rows
    assert sum(map(sum, report["confusion_matrix"]["rows"])) == rows
    assert len(report["calibration"]["bins"]) == 10
    assert sum(b["count"] for b in report["calibration"]["bins"]) == rows


# --------------------------------------------------------------------------- TREC measures

from spamnb.scores import trec_measures  # noqa: E402


def inverse_logit_of_mean(p: float, q: float) -> float:
    """logit^-1((logit p + logit q) / 2) = sqrt(odds p * odds q) / (1 + sqrt(...))."""
    odds = math.sqrt(p / (1 - p) * q / (1 - q))
    return odds / (1 + odds)


def test_trec_measures_by_hand():
    is_spam = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    said_spam = [1, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    scores = [0.9, 0.8, 0.7, 0.2, 0.1, 0.1, 0.3, 0.2, 0.1, 0.6]
    m = trec_measures(np.array(is_spam, dtype=bool), np.array(said_spam, dtype=bool), scores)
    assert (m["ham"], m["spam"]) == (6, 4)
    assert (m["ham_misclassified"], m["spam_misclassified"]) == (1, 1)
    assert m["ham_misclassification"] == pytest.approx(1 / 6)
    assert m["spam_misclassification"] == pytest.approx(1 / 4)
    # Odds 1/5 and 1/3: geometric mean 1/sqrt(15), so lam = 1 / (sqrt(15) + 1).
    assert m["lam"] == pytest.approx(1 / (math.sqrt(15) + 1))
    assert m["lam_corrected"] is False
    # Of the 24 spam-ham pairs, spam 0.2 beats three hams at 0.1, ties one at 0.2 and
    # loses to 0.3 and 0.6; the other spams beat every ham: AUC 21.5 / 24.
    assert m["one_minus_roca"] == pytest.approx(2.5 / 24)
    assert m["accuracy"] == pytest.approx(0.8)
    assert json.dumps(m, allow_nan=False)


def test_trec_lam_with_no_ham_errors_uses_the_half_count_correction():
    # 9 ham, none misclassified; 4 spam, one missed.
    is_spam = [False] * 9 + [True] * 4
    said_spam = [False] * 9 + [True, True, True, False]
    m = trec_measures(is_spam, said_spam, None)
    assert m["ham_misclassification"] == 0.0
    assert m["spam_misclassification"] == pytest.approx(0.25)
    # Both rates corrected: 0.5 / 10 and 1.5 / 5.
    assert m["lam"] == pytest.approx(inverse_logit_of_mean(0.05, 0.3))
    assert m["lam_corrected"] is True
    assert m["one_minus_roca"] is None


def test_trec_lam_of_a_perfect_and_of_a_hopeless_filter():
    truth = [False] * 3 + [True] * 7
    perfect = trec_measures(truth, truth, [float(t) for t in truth])
    assert perfect["ham_misclassification"] == perfect["spam_misclassification"] == 0.0
    assert perfect["lam"] == pytest.approx(inverse_logit_of_mean(0.5 / 4, 0.5 / 8))
    assert perfect["one_minus_roca"] == 0.0
    assert perfect["accuracy"] == 1.0
    wrong = [not t for t in truth]
    hopeless = trec_measures(truth, wrong, [float(t) for t in wrong])
    assert hopeless["ham_misclassification"] == hopeless["spam_misclassification"] == 1.0
    assert hopeless["lam"] == pytest.approx(inverse_logit_of_mean(3.5 / 4, 7.5 / 8))
    assert hopeless["one_minus_roca"] == 1.0
    assert json.dumps(hopeless, allow_nan=False)


def test_trec_measures_with_one_class():
    m = trec_measures([True, True], [True, False], [0.9, 0.1])
    assert m["ham_misclassification"] is None
    assert m["spam_misclassification"] == 0.5
    assert m["lam"] is None
    assert m["one_minus_roca"] is None
    assert json.dumps(m, allow_nan=False)


@given(
    st.integers(1, 200),
    st.integers(1, 200),
    st.integers(0, 200),
    st.integers(0, 200),
)
def test_trec_lam_lies_between_the_two_rates(ham, spam, ham_wrong, spam_wrong):
    ham_wrong, spam_wrong = min(ham_wrong, ham), min(spam_wrong, spam)
    is_spam = [False] * ham + [True] * spam
    said = (
        [True] * ham_wrong + [False] * (ham - ham_wrong) + [False] * spam_wrong
        + [True] * (spam - spam_wrong)
    )  # fmt: skip
    m = trec_measures(is_spam, said, None)
    hm, sm = ham_wrong / ham, spam_wrong / spam
    if m["lam_corrected"]:
        hm, sm = (ham_wrong + 0.5) / (ham + 1), (spam_wrong + 0.5) / (spam + 1)
    assert min(hm, sm) - 1e-12 <= m["lam"] <= max(hm, sm) + 1e-12
    assert m["lam_corrected"] == (not (0 < ham_wrong < ham and 0 < spam_wrong < spam))


def test_trec_measures_validate():
    with pytest.raises(ValueError):
        trec_measures([True, False], [True], None)
    with pytest.raises(ValueError):
        trec_measures([True, False], [True, False], [0.5])
    with pytest.raises(ValueError):
        trec_measures([], [], None)
    with pytest.raises(ValueError):
        trec_measures(["spam", "ham"], [True, False], None)
