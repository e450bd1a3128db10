"""Honest tuning: cross-validated scores, a grid over scoring settings, spam cut-offs.

Everything here is a pure function of token lists and labels (no I/O, no terminal),
so ``spamnb evaluate --folds`` and ``spamnb tune`` only format what it returns.

Cross-validation scores every message with a model trained on the other folds, whose
calibration is fitted on that model's own training part: no number here ever comes
from a model that saw the message it scores.  A model's state is its counts, so a
grid over event model, smoothing strength and vocabulary size trains one model per
fold and re-scores it under each setting instead of retraining.

The best setting of a grid is the one with the fewest errors; ties go to fewer false
positives (losing good mail is the costly mistake), then to the higher ROC AUC, then
to the setting listed first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from fractions import Fraction
from itertools import product
from typing import Any

import numpy as np
import scipy.sparse as sp

from .calibration import LENGTH_EXPONENT, Calibration, normalised
from .counts import Vocabulary, count_matrix
from .filter import DEFAULT_ALPHA, HAM, SPAM, SpamFilter
from .model import EVENT_MODELS, NaiveBayes
from .scores import roc_auc, stratified_folds, stratified_split

__all__ = [
    "DEFAULT_ALPHAS",
    "DEFAULT_EVENT_MODELS",
    "DEFAULT_FP_RATES",
    "DEFAULT_MAX_FEATURES",
    "OutOfFold",
    "Setting",
    "TuneResult",
    "best_row",
    "cross_validate",
    "fp_rate_cutoffs",
    "grid_rows",
    "learning_curve",
    "make_grid",
    "tune",
    "tuning_warnings",
]

DEFAULT_EVENT_MODELS = EVENT_MODELS
DEFAULT_ALPHAS = (1.0, 0.1, 0.01, 0.001)
# 0 is every token.  One cut besides: each extra size costs a full pass of the grid,
# and ranking 10^5+ tokens by information gain is the slowest part of a re-score.
DEFAULT_MAX_FEATURES = (0, 50_000)
DEFAULT_FP_RATES = (0.0, 0.001, 0.002, 0.005, 0.01)

# Cut-offs are placed on this decimal grid, so that the number printed is exactly the
# cut-off measured (a cut-off rounded down for display would let through the very ham
# it was chosen to stop).
CUTOFF_DECIMALS = 6


@dataclass(frozen=True)
class Setting:
    """One point of the grid; ``max_features`` 0 scores every token, as on the CLI."""

    event_model: str
    alpha: float
    max_features: int = 0

    def apply(self, model: NaiveBayes) -> None:
        model.event_model = self.event_model
        model.alpha = float(self.alpha)
        model.max_features = self.max_features or None

    @classmethod
    def of(cls, model: NaiveBayes) -> Setting:
        return cls(model.event_model, model.alpha, model.max_features or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_model": self.event_model,
            "alpha": self.alpha,
            "max_features": self.max_features,
        }

    def train_options(self) -> str:
        """The `spamnb train` options that give a model this setting, with the other
        scoring options at the values tuning measured them with (a fresh filter's): on
        a model with other ones, the setting alone scored as nothing tuning tried."""
        fresh = SpamFilter()
        options = (
            f"--event-model {self.event_model} --alpha {self.alpha!r} "
            f"--max-features {self.max_features} --min-count {fresh.model.min_count} "
            f"--mistake-weight {fresh.mistakes.weight!r}"
        )
        if self.max_features:
            options += f" --select {fresh.model.selection}"
        return options


def make_grid(
    event_models: Sequence[str], alphas: Sequence[float], max_features: Sequence[int]
) -> list[Setting]:
    """Every combination, event model varying slowest; repeats kept once, in order."""
    for name in event_models:
        if name not in EVENT_MODELS:
            raise ValueError(f"unknown event model {name!r}; use one of {EVENT_MODELS}")
    for alpha in alphas:
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"the smoothing strength must be a finite number > 0, not {alpha}")
    for size in max_features:
        if size < 0:
            raise ValueError(f"max_features must be >= 0 (0: every token), not {size}")
    grid = [Setting(e, float(a), int(m)) for e, a, m in product(event_models, alphas, max_features)]
    if not grid:
        raise ValueError("the grid is empty: give at least one of each setting")
    return list(dict.fromkeys(grid))


@dataclass
class OutOfFold:
    """Every message's scores from the fold model that did not train on it."""

    setting: Setting
    classes: list[str]
    labels: list[str]
    # The fold each message was held out in, and that fold's (train, test) indices.
    fold: np.ndarray
    folds: list[tuple[np.ndarray, np.ndarray]]
    proba: np.ndarray
    predicted: list[str]
    # Without a spam class these three are None.
    log_odds: np.ndarray | None
    lengths: np.ndarray
    decision: np.ndarray | None
    score: np.ndarray | None
    # Each fold model's calibration, fitted on its own training part.
    calibrations: list[Calibration] = field(default_factory=list)

    @property
    def positive(self) -> str | None:
        return SPAM if SPAM in self.classes else None

    def fold_accuracies(self) -> list[float]:
        correct = np.asarray(self.predicted, dtype=object) == np.asarray(self.labels, dtype=object)
        return [float(correct[test].mean()) for _train, test in self.folds]

    def summary(self) -> dict[str, Any]:
        """Accuracy, false positives and negatives (spam positive), errors, ROC AUC."""
        return summarise(self.labels, self.predicted, self.decision, self.positive)


def summarise(
    labels: Sequence[str],
    predicted: Sequence[str],
    decision: np.ndarray | None,
    positive: str | None = SPAM,
) -> dict[str, Any]:
    """The numbers of one grid row; ROC AUC ranks by ``decision`` (None without one)."""
    truth = np.asarray(labels, dtype=object)
    guess = np.asarray(predicted, dtype=object)
    row: dict[str, Any] = {
        "n": len(truth),
        "accuracy": float(np.mean(truth == guess)) if len(truth) else 0.0,
        "errors": int((truth != guess).sum()),
        "false_positives": None,
        "false_negatives": None,
        "roc_auc": None,
    }
    if positive is not None:
        is_spam = truth == positive
        row["false_positives"] = int((~is_spam & (guess == positive)).sum())
        row["false_negatives"] = int((is_spam & (guess != positive)).sum())
        if decision is not None:
            auc = roc_auc(is_spam, decision)
            row["roc_auc"] = auc if math.isfinite(auc) else None
    return row


class _FoldFilter(SpamFilter):
    """A filter that vectorises each token-list object once.

    The grid re-scores the same fold under every setting and refits the calibration
    on the same training part each time; turning tokens into a count matrix is the
    slow part of both and does not depend on the setting.  The vocabulary is fixed
    once the fold is trained, so a cached matrix stays right.
    """

    def vectorise(self, token_lists: Sequence[Sequence[str]]) -> sp.csr_matrix:
        cache = self.__dict__.setdefault("_matrices", [])
        for seen, matrix in cache:
            if seen is token_lists:
                return matrix
        matrix = super().vectorise(token_lists)
        cache.append((token_lists, matrix))
        return matrix


def _fold_filter(new: SpamFilter) -> _FoldFilter:
    if new.model.class_counts.sum():
        raise ValueError("cross-validation needs a new, untrained filter for each fold")
    return _FoldFilter(**{f.name: getattr(new, f.name) for f in fields(new)})


def cross_validate(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    folds: int = 5,
    seed: int = 0,
    settings: Sequence[Setting] | None = None,
    *,
    new_filter: Callable[[], SpamFilter] = SpamFilter,
    on_step: Callable[[int], None] | None = None,
) -> list[OutOfFold]:
    """Stratified ``folds``-fold cross-validated scores, one result per setting.

    Each fold trains one filter from ``new_filter()`` on the other folds, then for
    each setting re-scores its held-out fold and refits its calibration on its own
    training part.  Without ``settings`` it is one run under the new filter's own
    settings.  ``on_step(m)`` is called after each fold and setting with the m
    messages it scored (progress: len(labels) * len(settings) in all).
    """
    labels = list(labels)
    if len(token_lists) != len(labels):
        raise ValueError(f"{len(token_lists)} messages but {len(labels)} labels")
    splits = stratified_folds(labels, folds, seed)
    if settings is None:
        settings = [Setting.of(new_filter().model)]
    if not settings:
        raise ValueError("no settings to cross-validate")
    classes = sorted(set(labels), key=labels.index)
    n = len(labels)
    fold_of = np.empty(n, dtype=np.intp)
    proba = [np.zeros((n, len(classes))) for _ in settings]
    log_odds = [np.zeros(n) for _ in settings]
    lengths = [np.zeros(n) for _ in settings]
    decision = [np.zeros(n) for _ in settings]
    score = [np.zeros(n) for _ in settings]
    calibrations: list[list[Calibration]] = [[] for _ in settings]
    predicted = [np.empty(n, dtype=object) for _ in settings]
    has_spam = SPAM in classes
    for number, (train, test) in enumerate(splits):
        fold_of[test] = number
        spam_filter = _fold_filter(new_filter())
        train_tokens = [token_lists[i] for i in train]
        train_labels = [labels[i] for i in train]
        test_tokens = [token_lists[i] for i in test]
        copies = spam_filter.train_tokens(train_tokens, train_labels)
        # Columns in the order of ``classes``, whatever order the fold met them in.
        columns = [spam_filter.classes.index(c) for c in classes]
        for s, setting in enumerate(settings):
            setting.apply(spam_filter.model)
            if has_spam:
                # From scratch, so a fold too small to calibrate gets the neutral map
                # rather than the previous setting's.
                spam_filter.calibration = Calibration()
                spam_filter.fit_calibration(train_tokens, train_labels, mistake_copies=copies)
            fold_proba, fold_log_odds, fold_lengths = spam_filter.score_tokens(test_tokens)
            proba[s][test] = fold_proba[:, columns]
            predicted[s][test] = spam_filter.predict_labels(fold_proba)
            lengths[s][test] = fold_lengths
            calibrations[s].append(spam_filter.calibration)
            if fold_log_odds is not None:
                log_odds[s][test] = fold_log_odds
                decision[s][test] = spam_filter.calibration.decision(fold_log_odds, fold_lengths)
                score[s][test] = spam_filter.calibration.score(fold_log_odds, fold_lengths)
            if on_step is not None:
                on_step(len(test))
    results = []
    for s, setting in enumerate(settings):
        results.append(
            OutOfFold(
                setting=setting,
                classes=classes,
                labels=labels,
                fold=fold_of,
                folds=splits,
                proba=proba[s],
                predicted=list(predicted[s]),
                log_odds=log_odds[s] if has_spam else None,
                lengths=lengths[s],
                decision=decision[s] if has_spam else None,
                score=score[s] if has_spam else None,
                calibrations=calibrations[s],
            )
        )
    return results


def grid_rows(results: Sequence[OutOfFold]) -> list[dict[str, Any]]:
    """One row per setting: the setting and its cross-validated numbers."""
    return [{**result.setting.to_dict(), **result.summary()} for result in results]


def best_row(rows: Sequence[dict[str, Any]]) -> int:
    """Index of the best row: fewest errors, then fewest false positives, then highest
    ROC AUC (a missing AUC counts as lowest), then the earliest row."""
    if not rows:
        raise ValueError("no rows to choose from")

    def key(position: int) -> tuple[int, int, float, int]:
        row = rows[position]
        auc = row.get("roc_auc")
        return (
            row["errors"],
            row.get("false_positives") or 0,
            -auc if auc is not None and math.isfinite(auc) else math.inf,
            position,
        )

    return min(range(len(rows)), key=key)


def fp_rate_cutoffs(
    scores: np.ndarray,
    is_spam: np.ndarray,
    rates: Sequence[float] = DEFAULT_FP_RATES,
    decimals: int = CUTOFF_DECIMALS,
) -> list[dict[str, Any]]:
    """For each target false-positive rate, the lowest spam cut-off that keeps to it.

    The cut-off is the lowest number on a grid of 10**-decimals at which at most
    ``floor(rate * hams)`` ham scores are at or above it.  Each row gives the target
    ``fp_rate``, the ``cutoff`` (None when ham already scores 1, where no cut-off in
    [0, 1] stops it), the ham at or above it (``ham_above``, of ``ham``), and the spam
    at or above it (``spam_caught`` of ``spam``, as ``spam_recall``).
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(is_spam, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError("scores and is_spam must be one-dimensional and of one length")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    ham, spam = np.sort(s[~y]), s[y]
    if len(ham) == 0 or len(spam) == 0:
        raise ValueError("cut-offs need scores of both spam and ham")
    step = 10**decimals
    rows = []
    for rate in rates:
        if not 0 <= rate < 1:
            raise ValueError(f"a false-positive rate must be in [0, 1), not {rate}")
        # Exactly: 0.009 * 3000 is 26.999999999999996 in floating point.
        allowed = math.floor(Fraction(repr(float(rate))) * len(ham))
        # Everything strictly above the (allowed + 1)-th highest ham score keeps to it.
        highest_stopped = float(ham[-(allowed + 1)])
        k = math.floor(highest_stopped * step)
        while k / step <= highest_stopped:
            k += 1
        cutoff: float | None = k / step if k <= step else None
        caught = int((spam >= cutoff).sum()) if cutoff is not None else 0
        rows.append(
            {
                "fp_rate": float(rate),
                "cutoff": cutoff,
                "ham_above": int((ham >= cutoff).sum()) if cutoff is not None else 0,
                "ham": len(ham),
                "spam_caught": caught,
                "spam": len(spam),
                "spam_recall": caught / len(spam),
            }
        )
    return rows


def cutoffs_on(
    cutoffs: Sequence[dict[str, Any]], scores: np.ndarray, is_spam: np.ndarray
) -> list[dict[str, Any]]:
    """What the given cut-offs do on other scored mail (the held-out test part)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(is_spam, dtype=bool)
    rows = []
    for row in cutoffs:
        cutoff = row["cutoff"]
        above = s >= cutoff if cutoff is not None else np.zeros(len(s), dtype=bool)
        spam = int(y.sum())
        caught = int((above & y).sum())
        rows.append(
            {
                "fp_rate": row["fp_rate"],
                "cutoff": cutoff,
                "ham_above": int((above & ~y).sum()),
                "ham": int((~y).sum()),
                "spam_caught": caught,
                "spam": spam,
                "spam_recall": caught / spam if spam else 0.0,
            }
        )
    return rows


@dataclass
class TuneResult:
    """What ``tune`` tried and chose, and, with a test part, how the choice did on it."""

    settings: list[Setting]
    rows: list[dict[str, Any]]
    chosen: int
    cutoffs: list[dict[str, Any]]
    # Indices into the messages given: those tuning used, and the held-out test part.
    tuned_on: np.ndarray
    test_indices: np.ndarray
    # With a test part: the chosen setting's numbers on it, and the filter trained
    # on all of ``tuned_on`` that produced them.
    test: dict[str, Any] | None = None
    final_filter: SpamFilter | None = None
    # The chosen setting's fold models whose spam score had too few messages of a
    # class to be calibrated on, of all its fold models.
    uncalibrated_folds: int = 0
    folds: int = 0

    @property
    def setting(self) -> Setting:
        return self.settings[self.chosen]


def tune(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    settings: Sequence[Setting],
    *,
    folds: int = 5,
    seed: int = 0,
    test_size: float | None = None,
    fp_rates: Sequence[float] = DEFAULT_FP_RATES,
    on_step: Callable[[int], None] | None = None,
) -> TuneResult:
    """Cross-validate every setting, choose the best, and find its spam cut-offs.

    With ``test_size`` a stratified test part is set aside first: tuning sees only
    the rest, then one filter is trained on all the rest with the chosen setting and
    tested on the test part, once.  Needs spam and ham (and no other class).
    """
    labels = list(labels)
    if set(labels) != {SPAM, HAM}:
        raise ValueError(f"tuning needs {SPAM} and {HAM} mail, got {sorted(set(labels))}")
    everything = np.arange(len(labels), dtype=np.intp)
    if test_size is None:
        tuned_on, test_indices = everything, everything[:0]
    else:
        tuned_on, test_indices = stratified_split(labels, test_size, seed)
    tune_tokens = [token_lists[i] for i in tuned_on]
    tune_labels = [labels[i] for i in tuned_on]
    results = cross_validate(tune_tokens, tune_labels, folds, seed, settings, on_step=on_step)
    rows = grid_rows(results)
    chosen = best_row(rows)
    best = results[chosen]
    assert best.score is not None  # both classes are there
    cutoffs = fp_rate_cutoffs(best.score, np.asarray(tune_labels) == SPAM, fp_rates)
    result = TuneResult(
        settings=list(settings),
        rows=rows,
        chosen=chosen,
        cutoffs=cutoffs,
        tuned_on=tuned_on,
        test_indices=test_indices,
        uncalibrated_folds=sum(not fit.fitted_on for fit in best.calibrations),
        folds=len(best.calibrations),
    )
    if test_size is not None:
        final = SpamFilter()
        best.setting.apply(final.model)
        copies = final.train_tokens(tune_tokens, tune_labels)
        final.fit_calibration(tune_tokens, tune_labels, mistake_copies=copies)
        test_labels = [labels[i] for i in test_indices]
        proba, log_odds, lengths = final.score_tokens([token_lists[i] for i in test_indices])
        assert log_odds is not None
        is_spam = np.asarray(test_labels) == SPAM
        result.test = {
            **summarise(
                test_labels,
                final.predict_labels(proba),
                final.calibration.decision(log_odds, lengths),
            ),
            "cutoffs": cutoffs_on(cutoffs, final.calibration.score(log_odds, lengths), is_spam),
        }
        result.final_filter = final
    return result


# --------------------------------------------------------------------------- learning curve

# Kept with the learning curve so that this section only adds to the module.

# The smallest training size of the default series, which doubles from here.
LEARNING_CURVE_START = 25


def tuning_warnings(result: TuneResult, tuned_labels: Sequence[str]) -> list[dict[str, str]]:
    """What to doubt in ``result``, tuned on mail of ``tuned_labels``: a class too small
    to tell close settings apart, the chosen setting's accuracy no better than always
    saying the commonest class, and folds whose spam score, which the cut-off table and
    the tie-break rank by, was never calibrated (as evaluate --folds warns)."""
    from collections import Counter

    from .caveats import MIN_CLASS_MESSAGES
    from .evaluation import baseline_warning
    from .scores import majority_baseline

    warnings = []
    counts = Counter(tuned_labels)
    label, count = min(counts.items(), key=lambda pair: (pair[1], pair[0]))
    if count < MIN_CLASS_MESSAGES:
        messages = f"{count:,} {label} message" + ("" if count == 1 else "s")
        warnings.append(
            {
                "kind": "small-class",
                "message": f"only {messages}: one error moves that class's rate by "
                f"{100 / count:.3g} percentage points, so settings a few errors apart are "
                "equal within the folds' noise",
            }
        )
    # Ties between classes go as evaluate's baseline breaks them (the first by name).
    commonest, baseline_accuracy = majority_baseline(tuned_labels, tuned_labels)
    accuracy = result.rows[result.chosen]["accuracy"]
    if warning := baseline_warning(
        accuracy, commonest, baseline_accuracy, of="the chosen setting's accuracy"
    ):
        warnings.append(warning)
    if result.uncalibrated_folds:
        warnings.append(
            {
                "kind": "uncalibrated",
                "message": f"{result.uncalibrated_folds} of {result.folds} folds' spam scores "
                "were not calibrated (too few messages of a class to fit them on): the cut-off "
                "table pools raw probabilities with calibrated scores",
            }
        )
    return warnings


def _nested_order(labels: Sequence[str], seed: int) -> np.ndarray:
    """Positions of ``labels`` in an order every prefix of which keeps the class shares.

    Each class is shuffled, its j-th member of n_c placed at (j + 1/2) / n_c, and all
    merged by that place: a prefix of n then holds round(n * share) of each class, give
    or take one, so taking the first n gives nested stratified samples.
    """
    arr = np.asarray(labels, dtype=object)
    rng = np.random.default_rng(seed)
    members, places, class_numbers = [], [], []
    # Sorted classes and one generator: the order depends on (labels, seed) only.
    for number, label in enumerate(sorted(set(arr.tolist()))):
        idx = rng.permutation(np.flatnonzero(arr == label))
        members.append(idx)
        places.append((np.arange(len(idx)) + 0.5) / len(idx))
        class_numbers.append(np.full(len(idx), number))
    if not members:
        return np.zeros(0, dtype=np.intp)
    merged = np.lexsort((np.concatenate(class_numbers), np.concatenate(places)))
    return np.concatenate(members)[merged].astype(np.intp)


def _index_array(values: Sequence[int] | np.ndarray, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be a one-dimensional list of message indices")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.min() < 0 or arr.max() >= n:
        raise ValueError(f"{name} has indices outside 0..{n - 1}")
    if len(np.unique(arr)) != len(arr):
        raise ValueError(f"{name} lists a message more than once")
    return arr.astype(np.intp)


def learning_curve(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    train_idx: Sequence[int] | np.ndarray,
    test_idx: Sequence[int] | np.ndarray,
    sizes: Sequence[int] | None = None,
    event_models: Sequence[str] = EVENT_MODELS,
    *,
    alpha: float = DEFAULT_ALPHA,
    seed: int = 0,
    new_filter: Callable[[], SpamFilter] = SpamFilter,
    on_step: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Test-part numbers of filters trained on more and more of the training part.

    For each training size n (ascending), one filter from ``new_filter()`` with smoothing
    ``alpha`` is trained on the first n messages of a stratified shuffled order of the
    training part (``seed``), so every sample keeps the class shares and contains the
    smaller ones.  The test part is then scored under each of ``event_models`` (the
    counts serve all three), giving one row per size and event model:
    ``{"train_n", "event_model", "accuracy", "roc_auc", "false_positives",
    "false_negatives"}``.  ROC AUC ranks by the length-normalised log-odds, the ranking
    the filter's calibrated score keeps; no calibration is fitted, as the Naive Bayes
    decision does not depend on it.  Spam is the positive class; without spam in the
    training part ``roc_auc`` and the false counts are None.

    The default sizes are 25, 50, 100, ... below the training part's size, then all of
    it, leaving out sizes too small to hold every class.  A given size larger than the
    training part or too small to hold every class raises ValueError.  ``on_step(m)`` is
    called after each size and event model with the m test messages scored.

    Every message is counted once, against one vocabulary built in the sample order: a
    filter trained on a prefix of it holds the same counts, and ranks tokens (for
    ``max_features``) in the same first-seen order, as a new filter trained on just that
    prefix; the columns of tokens the prefix never saw have no counts, which the model
    treats as tokens it has not seen.
    """
    labels = list(labels)
    if len(token_lists) != len(labels):
        raise ValueError(f"{len(token_lists)} messages but {len(labels)} labels")
    train = _index_array(train_idx, len(labels), "train_idx")
    test = _index_array(test_idx, len(labels), "test_idx")
    if np.intersect1d(train, test).size:
        raise ValueError("the training and test parts share messages")
    for name in event_models:
        if name not in EVENT_MODELS:
            raise ValueError(f"unknown event model {name!r}; use one of {EVENT_MODELS}")
    if not event_models:
        raise ValueError("no event models to score")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"the smoothing strength must be a finite number > 0, not {alpha}")

    order = train[_nested_order([labels[i] for i in train], seed)]
    ordered_labels = [labels[i] for i in order]
    classes = set(ordered_labels)
    if len(classes) < 2:
        has = ", ".join(sorted(classes)) or "none"
        raise ValueError(f"the training part needs two classes, it has {has}")
    seen: set[str] = set()
    smallest = len(order)
    for position, label in enumerate(ordered_labels):
        seen.add(label)
        if len(seen) == len(classes):
            smallest = position + 1
            break

    if sizes is None:
        chosen = []
        size = LEARNING_CURVE_START
        while size < len(order):
            chosen.append(size)
            size *= 2
        chosen = [s for s in chosen if s >= smallest] + [len(order)]
    else:
        for size in sizes:
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
                raise ValueError(f"a training size must be an integer, not {size!r}")
            if size > len(order):
                raise ValueError(
                    f"training size {size} is larger than the training part ({len(order)})"
                )
            if size < smallest:
                raise ValueError(
                    f"training size {size} is too small to hold every class: the stratified "
                    f"sample needs at least {smallest} messages"
                )
        chosen = sorted({int(s) for s in sizes})
        if not chosen:
            raise ValueError("no training sizes given")

    vocabulary = Vocabulary()
    X_train = count_matrix([token_lists[i] for i in order], vocabulary, grow=True)
    test_tokens = [token_lists[i] for i in test]
    test_labels = [labels[i] for i in test]
    X_test = count_matrix(test_tokens, vocabulary, grow=False)

    rows: list[dict[str, Any]] = []
    for size in chosen:
        spam_filter = _fold_filter(new_filter())
        # The vocabulary is only read from here on, so every size can share it.
        spam_filter.vocabulary = vocabulary
        spam_filter.__dict__["_matrices"] = [(test_tokens, X_test)]
        spam_filter.model.alpha = float(alpha)
        spam_filter.model.add_counts(X_train[:size], ordered_labels[:size])
        spam_filter.train_mistakes(X_train[:size], ordered_labels[:size])
        positive = spam_filter.positive_class()
        for event_model in event_models:
            spam_filter.model.event_model = event_model
            proba, log_odds, lengths = spam_filter.score_tokens(test_tokens)
            decision = (
                normalised(log_odds, lengths, LENGTH_EXPONENT) if log_odds is not None else None
            )
            summary = summarise(test_labels, spam_filter.predict_labels(proba), decision, positive)
            rows.append(
                {
                    "train_n": size,
                    "event_model": event_model,
                    "accuracy": summary["accuracy"],
                    "roc_auc": summary["roc_auc"],
                    "false_positives": summary["false_positives"],
                    "false_negatives": summary["false_negatives"],
                }
            )
            if on_step is not None:
                on_step(len(test))
    return rows
