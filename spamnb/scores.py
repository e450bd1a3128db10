"""Evaluation numbers for ``spamnb evaluate``: splits, baselines, confusion, ROC, calibration.

Everything here is a pure function of arrays (no I/O), so the CLI layer only has to format the
results and the tests can pin every number against hand arithmetic.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "calibration",
    "confusion_counts",
    "confusion_matrix",
    "evaluation_report",
    "log_odds_against_rest",
    "log_posteriors",
    "log_sum_exp",
    "majority_baseline",
    "per_class_report",
    "predicted_columns",
    "predicted_labels",
    "roc_auc",
    "roc_curve",
    "stratified_folds",
    "stratified_split",
    "trec_measures",
]


# --------------------------------------------------------------------------- posteriors

# How much more probable than every other class the positive class must be, as a share
# of its probability, to be predicted (see predicted_columns).  Summing a long message's
# log-probabilities in another order moves its log-odds by around 1e-12; a lead below
# 1e-9 (log-odds within about 4e-9 of even) is no evidence.
TIE_TOLERANCE = 1e-9


def log_sum_exp(values: np.ndarray, axis: int = 1, keepdims: bool = False) -> np.ndarray:
    """log(sum(exp(values))) along ``axis`` without underflow: the largest value is
    taken out first.  A slice of -inf gives -inf.

    Written here rather than taken from scipy.special, whose import cost every
    command a tenth of a second.
    """
    top = np.max(values, axis=axis, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        summed = np.log(np.sum(np.exp(values - top), axis=axis, keepdims=True)) + top
    return summed if keepdims else np.squeeze(summed, axis=axis)


def log_posteriors(jll: np.ndarray) -> np.ndarray:
    """Log posteriors from joint log-likelihoods (messages by classes).

    A row where every class is impossible (-inf, possible only unsmoothed) has no
    posterior; it comes back as NaN rather than as a made-up certainty.
    """
    with np.errstate(invalid="ignore"):
        return jll - log_sum_exp(jll, axis=1, keepdims=True)


def log_odds_against_rest(jll: np.ndarray, column: int) -> np.ndarray:
    """log P(class|x) - log P(any other class|x) for the class of ``column``.

    Long messages push Naive Bayes posteriors to exactly 0 or 1 in floating point,
    which ties them for ranking; the log-odds keep their order (for ROC AUC).
    """
    others = np.delete(jll, column, axis=1)
    with np.errstate(invalid="ignore"):
        return jll[:, column] - log_sum_exp(others, axis=1)


# --------------------------------------------------------------------------- helpers


def _labels(values: Sequence[str] | np.ndarray, name: str) -> np.ndarray:
    """1-D array of labels; object dtype so comparisons are plain string equality."""
    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} differ in length ({len(a)} vs {len(b)})")


def _as_bool(values: np.ndarray | Sequence[Any], name: str) -> np.ndarray:
    """Accept bool or 0/1 numbers; refuse anything else rather than let ``astype(bool)``
    silently turn e.g. label strings into all-True."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if arr.size == 0:
        return arr.astype(bool)
    if np.issubdtype(arr.dtype, np.number) and np.all((arr == 0) | (arr == 1)):
        return arr.astype(bool)
    raise ValueError(f"{name} must be booleans or 0/1 values")


def _as_scores(values: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    # NaN has no place in an ordering; +/-inf do, so they are allowed.
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    return arr


def _class_groups(labels: np.ndarray, seed: int) -> list[np.ndarray]:
    """Indices of each class, shuffled, in sorted class order.

    Sorting the classes and drawing every permutation from one generator keeps the result a
    function of (labels, seed) only, independent of the order in which classes first appear.
    """
    if len(labels) == 0:
        raise ValueError("cannot split an empty label list")
    counts = Counter(labels.tolist())
    too_small = sorted(c for c, n in counts.items() if n < 2)
    if too_small:
        listed = ", ".join(repr(c) for c in too_small)
        raise ValueError(
            f"every class needs at least 2 messages to be split, but {listed} "
            f"{'has' if len(too_small) == 1 else 'have'} only 1"
        )
    rng = np.random.default_rng(seed)
    return [rng.permutation(np.flatnonzero(labels == c)) for c in sorted(counts)]


def _jsonable(value: Any) -> Any:
    """Plain Python types only, with non-finite floats as None, so
    ``json.dumps(..., allow_nan=False)`` always works."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.str_):
        return str(value)
    return value


# --------------------------------------------------------------------------- splitting


def stratified_split(
    labels: Sequence[str], test_size: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified split: ``(train_indices, test_indices)``, both sorted int arrays.

    Per class, ``round(test_size * n_class)`` indices go to test (Python ``round``, so exact
    halves go to the even neighbour), clamped so that both parts get at least one member of
    every class. Raises ValueError if ``test_size`` is not in (0, 1) or a class has fewer than 2
    members.
    """
    if isinstance(test_size, bool) or not isinstance(test_size, numbers.Real):
        raise ValueError(f"test_size must be a number strictly between 0 and 1, got {test_size!r}")
    if not 0.0 < float(test_size) < 1.0:  # also rejects NaN
        raise ValueError(f"test_size must be a number strictly between 0 and 1, got {test_size!r}")
    arr = _labels(labels, "labels")
    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for idx in _class_groups(arr, seed):
        n_test = min(max(round(test_size * len(idx)), 1), len(idx) - 1)
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return (
        np.sort(np.concatenate(train)).astype(np.intp),
        np.sort(np.concatenate(test)).astype(np.intp),
    )


def stratified_folds(
    labels: Sequence[str], k: int, seed: int, order: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` stratified folds ``(train_idx, test_idx)``; every index is a test index exactly once.

    Each class's shuffled members are dealt round-robin onto the folds, continuing where the
    previous class stopped, so each fold holds floor or ceil of ``n_class / k`` of every class
    and fold sizes differ by at most one overall. Every class needs at least 2 members (so it is
    always present in each fold's training part) and ``2 <= k <= len(labels)`` (so no test fold
    is empty).  Given ``order``, a permutation of the indices, each class's members are dealt
    in that order instead of a shuffle drawn from ``seed``: an order drawn from what the
    rows hold makes the folds the same whatever order the rows come in.
    """
    arr = _labels(labels, "labels")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"the number of folds must be an integer, got {k!r}")
    if k < 2:
        raise ValueError(f"the number of folds must be at least 2, got {k}")
    if k > len(arr):
        raise ValueError(f"{k} folds need at least {k} messages, got {len(arr)}")
    groups = _class_groups(arr, seed)
    if order is not None:
        order = np.asarray(order)
        if (
            order.dtype.kind not in "iu"
            or order.shape != arr.shape
            or not np.array_equal(np.sort(order), np.arange(len(arr)))
        ):
            raise ValueError("order must be a permutation of the label indices")
        groups = [order[arr[order] == c] for c in sorted(set(arr.tolist()))]
    order = np.concatenate(groups)
    fold_of = np.empty(len(arr), dtype=np.intp)
    fold_of[order] = np.arange(len(arr)) % k
    everything = np.arange(len(arr), dtype=np.intp)
    return [(everything[fold_of != f], everything[fold_of == f]) for f in range(k)]


# --------------------------------------------------------------------------- counting


def majority_baseline(
    train_labels: Sequence[str] | Mapping[str, int], test_labels: Sequence[str]
) -> tuple[str, float]:
    """The majority class of the training labels and the accuracy of always predicting it on
    the test labels. ``train_labels`` may also be a mapping of class to training count (a
    trained model keeps counts, not labels). Ties in the training counts go to the
    alphabetically first class so the answer does not depend on input order."""
    if isinstance(train_labels, Mapping):
        counts = Counter({str(c): int(n) for c, n in train_labels.items() if n > 0})
    else:
        counts = Counter(_labels(train_labels, "train_labels").tolist())
    test = _labels(test_labels, "test_labels")
    if not counts:
        raise ValueError("train_labels is empty; there is no majority class")
    if len(test) == 0:
        raise ValueError("test_labels is empty; baseline accuracy is undefined")
    top = max(counts.values())
    majority = min(c for c, n in counts.items() if n == top)
    return majority, float(np.mean(test == majority))


def confusion_counts(y_true: Sequence[str], y_pred: Sequence[str], positive: str) -> dict[str, int]:
    """``tp``, ``fp``, ``tn``, ``fn`` with ``positive`` as the positive class, others negative."""
    t = _labels(y_true, "y_true") == positive
    p = _labels(y_pred, "y_pred") == positive
    _same_length(t, p, "y_true", "y_pred")
    return {
        "tp": int(np.sum(t & p)),
        "fp": int(np.sum(~t & p)),
        "tn": int(np.sum(~t & ~p)),
        "fn": int(np.sum(t & ~p)),
    }


def confusion_matrix(
    y_true: Sequence[str], y_pred: Sequence[str], classes: Sequence[str]
) -> np.ndarray:
    """Integer matrix, rows = true class, columns = predicted class, in the order of ``classes``.

    Labels outside ``classes`` raise instead of being dropped, because a silently shrunken
    matrix would make every rate derived from it wrong.
    """
    t = _labels(y_true, "y_true")
    p = _labels(y_pred, "y_pred")
    _same_length(t, p, "y_true", "y_pred")
    cls = list(_labels(classes, "classes"))
    if len(set(cls)) != len(cls):
        raise ValueError(f"classes contains duplicates: {cls}")
    pos = {c: i for i, c in enumerate(cls)}
    unknown = sorted({str(x) for x in np.concatenate([t, p]).tolist() if x not in pos})
    if unknown:
        raise ValueError(f"labels {unknown} are not among classes {cls}")
    ti = np.fromiter((pos[x] for x in t), dtype=np.intp, count=len(t))
    pi = np.fromiter((pos[x] for x in p), dtype=np.intp, count=len(p))
    k = len(cls)
    return np.bincount(ti * k + pi, minlength=k * k).reshape(k, k).astype(np.int64)


def per_class_report(
    y_true: Sequence[str], y_pred: Sequence[str], classes: Sequence[str]
) -> dict[str, dict[str, float | int | None]]:
    """``precision``, ``recall``, ``f1`` (floats) and ``support`` (int, number of true members)
    per class; a ratio whose denominator is zero is None (JSON null, "n/a"), not 0: a class
    never predicted has no precision, and one absent from the test no recall."""
    cm = confusion_matrix(y_true, y_pred, classes)
    report: dict[str, dict[str, float | int | None]] = {}
    for i, c in enumerate(classes):
        tp = int(cm[i, i])
        predicted = int(cm[:, i].sum())
        support = int(cm[i, :].sum())
        # 2tp / (2tp + fp + fn) equals the harmonic mean of precision and recall whenever both
        # are defined, and gives the conventional 0 when tp = 0 without a special case.
        f1_den = predicted + support
        report[str(c)] = {
            "precision": tp / predicted if predicted else None,
            "recall": tp / support if support else None,
            "f1": 2 * tp / f1_den if f1_den else None,
            "support": support,
        }
    return report


# --------------------------------------------------------------------------- ranking


def roc_auc(is_positive: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve, via the Mann-Whitney U statistic.

    A tied (positive, negative) pair counts as half a correct ordering, as average ranks
    would make it. O(n log n). Only the order of ``scores`` matters, so any monotone
    statistic works; log-odds are preferable to probabilities because they do not saturate at
    1.0 and create spurious ties. Returns NaN when only one class is present.
    """
    pos = _as_bool(is_positive, "is_positive")
    s = _as_scores(scores, "scores")
    _same_length(pos, s, "is_positive", "scores")
    n_pos = int(pos.sum())
    n_neg = len(pos) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    # U counts, for each positive, the negatives scored below it, and half those tied
    # with it: per distinct score, as roc_curve counts.  Every term is a whole or half
    # number, so the sum is exact in float64 in any order (below 2**52), as the rank
    # sum of scipy.stats' rankdata was; importing scipy.stats took 0.6 s of evaluate.
    _, inverse = np.unique(s, return_inverse=True)
    inverse = inverse.reshape(-1)
    distinct = int(inverse.max()) + 1
    positives_at = np.bincount(inverse[pos], minlength=distinct)
    negatives_at = np.bincount(inverse[~pos], minlength=distinct)
    below = np.cumsum(negatives_at) - negatives_at
    u = float(np.dot(positives_at, below + 0.5 * negatives_at))
    return u / (n_pos * n_neg)


def roc_curve(
    is_positive: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)``: one point per distinct score, thresholds descending.

    Point i is the rates obtained by calling "positive" every example with score
    ``>= thresholds[i]``, so the last point is always (1, 1). The (0, 0) corner is not listed
    because no actual score produces it; prepend it when plotting or integrating. A rate whose
    class is absent (no negatives for fpr, no positives for tpr) is NaN.
    """
    pos = _as_bool(is_positive, "is_positive")
    s = _as_scores(scores, "scores")
    _same_length(pos, s, "is_positive", "scores")
    uniq, inv = np.unique(s, return_inverse=True)
    inv = inv.reshape(-1)  # numpy 2.0.x returned inv with the input's shape; flatten defensively
    pos_at = np.bincount(inv, weights=pos.astype(float), minlength=len(uniq))
    all_at = np.bincount(inv, minlength=len(uniq)).astype(float)
    tp = np.cumsum(pos_at[::-1])
    fp = np.cumsum(all_at[::-1]) - tp
    n_pos = float(pos.sum())
    n_neg = float(len(pos)) - n_pos
    tpr = tp / n_pos if n_pos else np.full(len(uniq), np.nan)
    fpr = fp / n_neg if n_neg else np.full(len(uniq), np.nan)
    return fpr, tpr, uniq[::-1].copy()


# --------------------------------------------------------------------------- calibration


def calibration(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> dict:
    """Reliability of the probability the model gave its own predicted class.

    ``confidence`` is that probability (in [1/K, 1] for K classes), ``correct`` whether the
    prediction was right. Bins are equal-width over [0, 1], bin b being [b/n, (b+1)/n) and the
    last one closed. Returns ``{"ece", "brier", "bins"}`` where every one of the ``n_bins`` bins
    is listed (empty ones with count 0 and None for mean_confidence and accuracy),
    ``ece = sum_b (n_b / n) * |accuracy_b - mean_confidence_b|`` and
    ``brier = mean((confidence - correct) ** 2)``.

    For two classes that Brier score is the ordinary binary one, ``mean((p_pos - y) ** 2)``:
    when the positive class is predicted, confidence = p_pos and correct = y; otherwise
    confidence = 1 - p_pos and correct = 1 - y, and ``((1 - p) - (1 - y)) ** 2 = (p - y) ** 2``.
    With more classes it is the top-label Brier score, not the multi-class one.
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    conf = np.asarray(confidence, dtype=float)
    if conf.ndim != 1:
        raise ValueError(f"confidence must be one-dimensional, got shape {conf.shape}")
    ok = _as_bool(correct, "correct")
    _same_length(conf, ok, "confidence", "correct")
    if len(conf) == 0:
        raise ValueError("calibration needs at least one prediction")
    # Probabilities rebuilt as exp(log p) can overshoot 1 by an ulp or two; that is rounding,
    # not a caller bug, so a hair of slack is clipped away while real violations still raise.
    if not np.all((conf >= -1e-9) & (conf <= 1.0 + 1e-9)):  # also rejects NaN
        raise ValueError("confidence values must lie in [0, 1]")
    conf = np.clip(conf, 0.0, 1.0)

    n_bins = int(n_bins)
    lowers = np.arange(n_bins) / n_bins
    uppers = np.arange(1, n_bins + 1) / n_bins
    # floor(c * n) can land one bin off from the reported edges b/n through rounding (for
    # some n, (b/n) * n < b), so nudge it to agree exactly with the edges shown to the user.
    b = np.minimum(np.floor(conf * n_bins).astype(np.intp), n_bins - 1)
    b = np.where(conf < lowers[b], b - 1, b)
    b = np.where((b < n_bins - 1) & (conf >= uppers[np.minimum(b, n_bins - 1)]), b + 1, b)

    counts = np.bincount(b, minlength=n_bins)
    conf_sums = np.bincount(b, weights=conf, minlength=n_bins)
    hit_sums = np.bincount(b, weights=ok.astype(float), minlength=n_bins)
    n = len(conf)
    ece = 0.0
    bins: list[dict[str, Any]] = []
    for i in range(n_bins):
        c = int(counts[i])
        mean_conf: float | None = None
        acc: float | None = None
        if c:
            mean_conf = float(conf_sums[i] / c)
            acc = float(hit_sums[i] / c)
            ece += (c / n) * abs(acc - mean_conf)
        bins.append(
            {
                "lower": float(lowers[i]),
                "upper": float(uppers[i]),
                "count": c,
                "mean_confidence": mean_conf,
                "accuracy": acc,
            }
        )
    brier = float(np.mean((conf - ok) ** 2))
    return {"ece": float(ece), "brier": brier, "bins": bins}


# --------------------------------------------------------------------------- report


def predicted_columns(
    proba: np.ndarray, classes: Sequence[str], positive: str | None
) -> np.ndarray:
    """The column of the most probable class in each row; ties never go to ``positive``.

    A message with no evidence either way (all probabilities equal) must not be called
    spam: a false positive costs more than a missed spam.  A tie is a tie up to
    TIE_TOLERANCE: a message whose tokens weigh exactly as much for both classes gets
    log-likelihoods that differ in their last digits, by an amount and in a direction
    that depend on the order they were summed in (the model's sparse product and the
    scoring table's sums disagree there), and that must not decide its label.
    """
    p = np.asarray(proba, dtype=float)
    order = list(range(len(classes)))
    if positive is None or positive not in classes or len(classes) < 2:
        return np.asarray(order)[np.argmax(p[:, order], axis=1)]
    spam = list(classes).index(positive)
    others = [c for c in order if c != spam]
    best_other = np.asarray(others)[np.argmax(p[:, others], axis=1)]
    rows = np.arange(len(p))
    lead = p[:, spam] - p[rows, best_other]
    with np.errstate(invalid="ignore"):  # rows without a posterior (NaN) are not spam
        is_spam = lead > TIE_TOLERANCE * p[:, spam]
    return np.where(is_spam, spam, best_other)


def predicted_labels(proba: np.ndarray, classes: Sequence[str], positive: str | None) -> list[str]:
    """The classes of :func:`predicted_columns`."""
    return [classes[c] for c in predicted_columns(proba, classes, positive)]


def evaluation_report(
    y_true: Sequence[str],
    proba: np.ndarray,
    classes: Sequence[str],
    train_labels: Sequence[str],
    positive: str | None = "spam",
    scores: np.ndarray | None = None,
) -> dict:
    """Everything ``spamnb evaluate --json`` prints, as plain JSON-able Python values.

    Keys: ``n``, ``classes``, ``accuracy``, ``baseline_class``, ``baseline_accuracy``,
    ``roc_auc``, ``confusion`` (only when ``positive`` is one of ``classes``),
    ``confusion_matrix`` (``{"classes", "rows"}``), ``per_class`` and ``calibration``.

    Predictions are ``classes[argmax(proba)]``, ties going against ``positive`` (see
    :func:`predicted_columns`). ``train_labels`` may be labels or class counts. ``roc_auc`` is
    ``positive`` versus the rest, ranked by ``scores`` when given (spamnb passes spam-vs-rest
    log-odds) and by ``proba[:, positive]`` otherwise; it is None when there is no positive
    class or ``y_true`` contains only one side. Any NaN or infinity becomes None.
    """
    truth = _labels(y_true, "y_true")
    cls = [str(c) for c in _labels(classes, "classes")]
    if len(cls) < 2:
        raise ValueError(f"need at least two classes, got {cls}")
    if len(set(cls)) != len(cls):
        raise ValueError(f"classes contains duplicates: {cls}")
    p = np.asarray(proba, dtype=float)
    if p.ndim != 2 or p.shape != (len(truth), len(cls)):
        raise ValueError(
            f"proba must have shape (n, n_classes) = ({len(truth)}, {len(cls)}), got {p.shape}"
        )
    if len(truth) == 0:
        raise ValueError("cannot evaluate on zero examples")
    if not np.all(np.isfinite(p)):
        raise ValueError("proba contains NaN or infinite values")
    unknown = sorted({str(x) for x in truth.tolist()} - set(cls))
    if unknown:
        raise ValueError(f"y_true has labels {unknown} that the model does not know ({cls})")

    top = predicted_columns(p, cls, positive)
    y_pred = np.asarray(cls, dtype=object)[top]
    correct = y_pred == truth
    baseline_class, baseline_accuracy = majority_baseline(train_labels, truth)

    pos_name = positive if positive is not None and positive in cls else None
    auc: float | None = None
    if pos_name is not None:
        if scores is not None:
            s = _as_scores(scores, "scores")
            _same_length(s, truth, "scores", "y_true")
        else:
            s = p[:, cls.index(pos_name)]
        auc = roc_auc(truth == pos_name, s)

    report: dict[str, Any] = {
        "n": len(truth),
        "classes": cls,
        "accuracy": float(np.mean(correct)),
        "baseline_class": str(baseline_class),
        "baseline_accuracy": baseline_accuracy,
        "roc_auc": auc,
    }
    if pos_name is not None:
        report["confusion"] = confusion_counts(truth, y_pred, pos_name)
    report["confusion_matrix"] = {
        "classes": cls,
        "rows": confusion_matrix(truth, y_pred, cls).tolist(),
    }
    report["per_class"] = per_class_report(truth, y_pred, cls)
    report["calibration"] = calibration(p[np.arange(len(truth)), top], correct)
    return _jsonable(report)


# --------------------------------------------------------------------------- TREC spam track


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def trec_measures(
    is_spam: np.ndarray | Sequence[bool],
    predicted_spam: np.ndarray | Sequence[bool],
    scores: np.ndarray | Sequence[float] | None,
) -> dict[str, Any]:
    """The TREC spam track's summary measures (Cormack & Lynam, TREC 2005 Spam Track
    Overview), as fractions rather than the track's percentages.

    Keys: ``ham_misclassification`` (hm: the fraction of ham called spam),
    ``spam_misclassification`` (sm: the fraction of spam called ham), ``lam`` (logistic
    average misclassification, logit^-1((logit(hm) + logit(sm)) / 2)), ``lam_corrected``
    (whether the correction below was applied), ``one_minus_roca`` (1 - ROC AUC, ranked by
    ``scores``), ``accuracy``, and the counts ``ham``, ``spam``, ``ham_misclassified`` and
    ``spam_misclassified``.

    lam is the geometric mean of the two error odds turned back into a rate: halving either
    error rate improves it by the same amount, and, unlike accuracy, it does not reward
    calling everything ham on a corpus that is mostly ham.  Its logits are infinite when hm
    or sm is 0 or 1.  No zero rule of the TREC track's own was found to follow (the CEAS 2007
    challenge, run by the same organiser, always used (errors + 0.5) / (n + 0.5), which still
    fails when every message of a class is wrong), so only in that case both rates that enter
    lam become (errors + 0.5) / (n + 1): the Haldane-Anscombe correction of adding 0.5 to
    every cell of the 2x2 table, usual for the diagnostic odds ratio that lam is equivalent
    to.  Otherwise lam uses hm and sm as they are and lies between them; corrected, it lies
    between the corrected rates.  ``hm``, ``sm`` themselves are never corrected.

    Without ham or without spam, the rate of the missing class and ``lam`` are None; so is
    ``one_minus_roca`` then or when ``scores`` is None.
    """
    truth = _as_bool(is_spam, "is_spam")
    guess = _as_bool(predicted_spam, "predicted_spam")
    _same_length(truth, guess, "is_spam", "predicted_spam")
    if len(truth) == 0:
        raise ValueError("TREC measures need at least one message")
    spam = int(truth.sum())
    ham = len(truth) - spam
    ham_wrong = int((~truth & guess).sum())
    spam_wrong = int((truth & ~guess).sum())
    hm = ham_wrong / ham if ham else None
    sm = spam_wrong / spam if spam else None
    lam: float | None = None
    corrected = False
    if hm is not None and sm is not None:
        if 0.0 < hm < 1.0 and 0.0 < sm < 1.0:
            h, s = hm, sm
        else:
            corrected = True
            h, s = (ham_wrong + 0.5) / (ham + 1), (spam_wrong + 0.5) / (spam + 1)
        mean_logit = (_logit(h) + _logit(s)) / 2.0
        lam = 1.0 / (1.0 + math.exp(-mean_logit))
    one_minus_roca: float | None = None
    if scores is not None:
        s_arr = _as_scores(scores, "scores")
        _same_length(truth, s_arr, "is_spam", "scores")
        auc = roc_auc(truth, s_arr)
        one_minus_roca = 1.0 - auc if math.isfinite(auc) else None
    return {
        "ham_misclassification": hm,
        "spam_misclassification": sm,
        "lam": lam,
        "lam_corrected": corrected,
        "one_minus_roca": one_minus_roca,
        "accuracy": float(np.mean(truth == guess)),
        "ham": ham,
        "spam": spam,
        "ham_misclassified": ham_wrong,
        "spam_misclassified": spam_wrong,
    }
