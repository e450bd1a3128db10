"""The evaluation stage: test protocols and everything ``spamnb evaluate`` reports.

Each protocol turns token lists and labels into a :class:`Scored` (every tested
message's verdict and scores) and a report dict, the one ``--json`` prints, the
terminal tables show and the HTML report draws.  Nothing here reads mail or writes
to the terminal; progress is reported through ``on_step`` callbacks.

Protocols:

- a given model scores all the mail;
- a stratified split: train on one part, test on the other;
- stratified k-fold cross-validation, every message scored by a model that never
  saw it;
- the online protocol of the TREC spam track: in a fixed order, each message is
  classified and then trained on (immediate feedback).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from .calibration import FLAT_SCORE
from .filter import HAM, SPAM, SpamFilter
from .scores import calibration as reliability
from .scores import (
    confusion_counts,
    evaluation_report,
    roc_curve,
    stratified_split,
    trec_measures,
)
from .significance import accuracy_with_interval, mcnemar, rates_with_intervals
from .words import class_list

__all__ = [
    "HISTOGRAM_BINS",
    "OptionSet",
    "Scored",
    "band_report",
    "compare_option_sets",
    "copies_warning",
    "evaluate_folds",
    "evaluate_model",
    "evaluate_online",
    "evaluate_split",
    "first_copies",
    "full_report",
    "report_warnings",
    "top_odds_section",
]

# Twenty bins of 0.05: fine enough to show the two classes' humps and the unsure
# middle, few enough to read as text in 80 columns.
HISTOGRAM_BINS = 20
TOP_ODDS_SHOWN = 20

Step = Callable[[int], None] | None


@dataclass
class Scored:
    """The outcome for each tested message, in the order it was scored."""

    indices: np.ndarray  # positions in the mail given to the protocol
    labels: list[str]
    predicted: list[str]
    classes: list[str]
    proba: np.ndarray  # columns in ``classes`` order
    # The ranking score (higher: more spam) and the calibrated spam score in [0, 1];
    # None without a spam class (and the calibrated score also in the online
    # protocol, which has no calibration).
    decision: np.ndarray | None = None
    score: np.ndarray | None = None

    @property
    def positive(self) -> str | None:
        return SPAM if SPAM in self.classes else None

    def spam_probability(self) -> np.ndarray | None:
        if self.positive is None:
            return None
        return self.proba[:, self.classes.index(self.positive)]

    def correct(self) -> np.ndarray:
        return np.asarray(self.predicted, dtype=object) == np.asarray(self.labels, dtype=object)


def full_report(scored: Scored, train_counts: Mapping[str, int] | Sequence[str]) -> dict[str, Any]:
    """The split report's numbers, plus the curves, intervals and TREC measures."""
    report = evaluation_report(
        scored.labels,
        scored.proba,
        scored.classes,
        train_counts,
        positive=scored.positive,
        scores=scored.decision,
    )
    positive = scored.positive
    if positive is None:
        # Only the accuracy has no sides (review 48: it lost its interval too).
        right = int(scored.correct().sum())
        report["intervals"] = {"accuracy": accuracy_with_interval(right, len(scored.labels))}
        return report
    is_spam = np.asarray(scored.labels, dtype=object) == positive
    called_spam = np.asarray(scored.predicted, dtype=object) == positive
    counts = confusion_counts(scored.labels, scored.predicted, positive)
    report["intervals"] = rates_with_intervals(**counts, correct=int(scored.correct().sum()))
    ranking = scored.decision if scored.decision is not None else scored.spam_probability()
    if is_spam.all() or not is_spam.any():
        return report
    report["trec"] = trec_measures(is_spam, called_spam, ranking)
    fpr, tpr, _ = roc_curve(is_spam, ranking)
    report["roc"] = {"fpr": fpr.tolist(), "tpr": tpr.tolist()}
    histogram_of = scored.score if scored.score is not None else scored.spam_probability()
    report["score_histogram"] = score_histogram(
        histogram_of,
        is_spam,
        positive,
        "calibrated spam score" if scored.score is not None else "spam probability",
    )
    return report


def score_histogram(
    score: np.ndarray, is_spam: np.ndarray, positive: str, name: str
) -> dict[str, Any]:
    """Counts of each class's scores in HISTOGRAM_BINS equal bins over [0, 1]."""
    edges = np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1)
    # The last bin is closed so that a score of exactly 1 is counted.
    bins = np.minimum((np.clip(score, 0, 1) * HISTOGRAM_BINS).astype(np.intp), HISTOGRAM_BINS - 1)
    negative = HAM if positive == SPAM else f"not {positive}"
    return {
        "score": name,
        "edges": [round(float(edge), 10) for edge in edges],
        "counts": {
            positive: np.bincount(bins[is_spam], minlength=HISTOGRAM_BINS).tolist(),
            negative: np.bincount(bins[~is_spam], minlength=HISTOGRAM_BINS).tolist(),
        },
    }


def band_report(score: Any, is_spam: Any, ham_cutoff: Any, spam_cutoff: Any) -> dict[str, Any]:
    """The calibrated score's reliability and what its unsure band did; the cut-offs
    may be one number or one per message (cross-validation: each fold model's own)."""
    unsure = (score > ham_cutoff) & (score < spam_cutoff)
    return {
        "calibration": reliability(np.maximum(score, 1 - score), (score >= 0.5) == is_spam),
        "unsure": {"spam": int((unsure & is_spam).sum()), "ham": int((unsure & ~is_spam).sum())},
        "spam_at_cutoff": int((score >= spam_cutoff)[is_spam].sum()),
        "ham_at_cutoff": int((score <= ham_cutoff)[~is_spam].sum()),
        "false_positives_at_cutoff": int((score >= spam_cutoff)[~is_spam].sum()),
        "false_negatives_at_cutoff": int((score <= ham_cutoff)[is_spam].sum()),
    }


def _score_filter(
    spam_filter: SpamFilter, token_lists: Sequence[Sequence[str]], indices: np.ndarray
) -> tuple[Scored, np.ndarray | None, np.ndarray]:
    proba, log_odds, lengths = spam_filter.score_tokens(token_lists)
    scored = Scored(
        indices=indices,
        labels=[],
        predicted=spam_filter.predict_labels(proba),
        classes=list(spam_filter.classes),
        proba=proba,
    )
    if log_odds is not None:
        # Ranked as the filter ranks: by its spam score, not the raw posterior.
        scored.decision = spam_filter.calibration.decision(log_odds, lengths)
        scored.score = spam_filter.calibration.score(log_odds, lengths)
    return scored, log_odds, lengths


def _spam_score_section(spam_filter: SpamFilter, scored: Scored) -> dict[str, Any] | None:
    if scored.score is None or scored.positive is None:
        return None
    calibration = spam_filter.calibration
    is_spam = np.asarray(scored.labels, dtype=object) == scored.positive
    return {
        **calibration.to_dict(),
        **band_report(scored.score, is_spam, calibration.ham_cutoff, calibration.spam_cutoff),
    }


def _check_classes(spam_filter: SpamFilter, labels: Sequence[str]) -> None:
    unknown = sorted(set(labels) - set(spam_filter.classes))
    known = class_list(spam_filter.classes)
    if unknown:
        raise ValueError(f"the model has no class {unknown[0]!r}; it knows {known}")
    if len(spam_filter.classes) < 2:
        raise ValueError(f"the model knows only {known}; evaluate needs two classes")


def evaluate_model(
    spam_filter: SpamFilter, token_lists: Sequence[Sequence[str]], labels: Sequence[str]
) -> tuple[dict[str, Any], Scored]:
    """A trained model scores all the mail."""
    _check_classes(spam_filter, labels)
    scored, _, _ = _score_filter(spam_filter, token_lists, np.arange(len(labels)))
    scored.labels = list(labels)
    # A trained model keeps counts, not labels: its class counts give the baseline.
    train_counts = dict(
        zip(spam_filter.classes, map(int, spam_filter.model.class_counts), strict=True)
    )
    report = full_report(scored, train_counts)
    section = _spam_score_section(spam_filter, scored)
    if section:
        report["spam_score"] = section
    return report, scored


def evaluate_split(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    test_size: float,
    seed: int,
    new_filter: Callable[[], SpamFilter],
) -> tuple[dict[str, Any], Scored, SpamFilter]:
    """Train a new filter on a stratified part, test it on the rest; returns the
    report, the test part's outcomes and the trained filter."""
    if len(set(labels)) < 2:
        raise ValueError(f"the mail has only the class {labels[0]!r}; evaluate needs two classes")
    train_idx, test_idx = stratified_split(labels, test_size, seed)
    spam_filter = new_filter()
    train_tokens = [token_lists[i] for i in train_idx]
    train_labels = [labels[i] for i in train_idx]
    copies = spam_filter.train_tokens(train_tokens, train_labels)
    spam_filter.fit_calibration(train_tokens, train_labels, mistake_copies=copies)
    test_labels = [labels[i] for i in test_idx]
    _check_classes(spam_filter, test_labels)
    scored, _, _ = _score_filter(spam_filter, [token_lists[i] for i in test_idx], test_idx)
    scored.labels = test_labels
    report = full_report(scored, train_labels)
    section = _spam_score_section(spam_filter, scored)
    if section:
        report["spam_score"] = section
    report["protocol"] = {
        "mode": "split",
        "test_size": test_size,
        "seed": seed,
        "train_n": len(train_idx),
        "description": (
            f"Trained on {len(train_idx):,} messages, tested on the other {len(test_idx):,} "
            f"(stratified split, test share {test_size:g}, seed {seed})."
        ),
    }
    return report, scored, spam_filter


def evaluate_folds(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    folds: int,
    seed: int,
    new_filter: Callable[[], SpamFilter],
    on_step: Step = None,
) -> tuple[dict[str, Any], Scored]:
    """Stratified k-fold cross-validation, the out-of-fold predictions pooled."""
    from .tuning import cross_validate

    if len(set(labels)) < 2:
        raise ValueError(f"the mail has only the class {labels[0]!r}; evaluate needs two classes")
    (out_of_fold,) = cross_validate(
        token_lists, labels, folds, seed, new_filter=new_filter, on_step=on_step
    )
    scored = Scored(
        indices=np.arange(len(labels)),
        labels=list(labels),
        predicted=list(out_of_fold.predicted),
        classes=list(out_of_fold.classes),
        proba=out_of_fold.proba,
        decision=out_of_fold.decision,
        score=out_of_fold.score,
    )
    # Stratified folds train on the same class shares as the whole mail.
    report = full_report(scored, labels)
    if out_of_fold.score is not None:
        # Each message against the unsure band of the fold model that scored it.
        calibrations = out_of_fold.calibrations
        report["spam_score"] = {
            "folds": [calibration.to_dict() for calibration in calibrations],
            **band_report(
                out_of_fold.score,
                np.asarray(labels, dtype=object) == out_of_fold.positive,
                np.array([c.ham_cutoff for c in calibrations])[out_of_fold.fold],
                np.array([c.spam_cutoff for c in calibrations])[out_of_fold.fold],
            ),
        }
    accuracies = out_of_fold.fold_accuracies()
    report["per_fold"] = [
        {"fold": number + 1, "n": len(test), "train_n": len(train), "accuracy": accuracy}
        for number, ((train, test), accuracy) in enumerate(
            zip(out_of_fold.folds, accuracies, strict=True)
        )
    ]
    report["fold_accuracy"] = {
        "mean": float(np.mean(accuracies)),
        # The sample standard deviation: the folds are a sample of possible test sets.
        "std": float(np.std(accuracies, ddof=1)),
    }
    report["protocol"] = {
        "mode": "folds",
        "folds": folds,
        "seed": seed,
        "description": (
            f"Each of the {len(labels):,} messages scored by a model trained on the other "
            f"{folds - 1} of {folds} stratified folds (seed {seed}); the report pools them."
        ),
    }
    return report, scored


def evaluate_online(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    order: np.ndarray,
    settings: SpamFilter,
    order_name: str,
    on_step: Step = None,
) -> tuple[dict[str, Any], Scored]:
    """The TREC spam track's online protocol with immediate feedback: in ``order``,
    each message is classified by a model of all the messages before it, then
    trained on.  ``settings`` supplies the event model, k and min_count."""
    from .online import online_run

    model = settings.model
    if model.max_features is not None:
        raise ValueError(
            "the online protocol scores with every token; leave out --max-features "
            "(ranking tokens anew after every message would be far too slow)"
        )
    if len(set(labels)) < 2:
        raise ValueError(f"the mail has only the class {labels[0]!r}; evaluate needs two classes")
    order = np.asarray(order, dtype=np.intp)
    ordered_labels = [labels[i] for i in order]
    # The classes in the order the mail was read, as a split's model has them: the
    # stream's order listed ham first in every table of an Enron1 run (reviews 10, 20),
    # and the first message's tie went to the stream's first class in --predictions
    # and to this order's in the report (review 48).
    classes = list(dict.fromkeys(labels))
    result = online_run(
        [token_lists[i] for i in order],
        ordered_labels,
        event_model=model.event_model,
        alpha=model.alpha,
        min_count=model.min_count,
        on_step=on_step,
        classes=classes,
    )
    scored = Scored(
        indices=order,
        labels=ordered_labels,
        predicted=list(result.predicted),
        classes=classes,
        proba=result.proba,
        decision=result.decision,
    )
    # Before a message, the model has seen only those that came first: the baseline a
    # filter must beat is the majority of the whole stream, which it learns as it goes.
    report = full_report(scored, ordered_labels)
    report["protocol"] = {
        "mode": "online",
        "order": order_name,
        "description": (
            f"Online protocol of the TREC spam track ({order_name} order): each of the "
            f"{len(labels):,} messages classified by a model trained on all the messages "
            "before it, then trained on."
        ),
    }
    return report, scored


def top_odds_section(spam_filter: SpamFilter, count: int = TOP_ODDS_SHOWN) -> dict[str, Any] | None:
    """The tokens that most point to spam and to ham, as ``top-odds --json`` gives them."""
    if SPAM not in spam_filter.classes or HAM not in spam_filter.classes:
        return None
    towards_spam, towards_ham = spam_filter.top_odds(SPAM, HAM, count, min_count=2)
    return {
        "positive": SPAM,
        "negative": HAM,
        "towards_positive": towards_spam,
        "towards_negative": towards_ham,
    }


def report_warnings(
    labels: Sequence[str], top_odds: Mapping[str, Any] | None, *, intervals: bool = True
) -> list[dict[str, str]]:
    """Signs that the numbers may mislead: small or lopsided classes (``labels`` are
    those of the messages the rates are of), and top tokens that tell the mail's
    sources apart rather than its content."""
    from .caveats import data_warnings

    # Per class, so that "three tokens name one server" is counted within one class.
    tokens: dict[str, list[str]] = {}
    if top_odds:
        for side, label in (("towards_positive", "positive"), ("towards_negative", "negative")):
            tokens[top_odds[label]] = [row["token"] for row in top_odds[side]]
    return data_warnings(Counter(labels), tokens, intervals=intervals)


def first_copies(
    digests: Sequence[str], labels: Sequence[str]
) -> tuple[list[int], list[str], dict[str, int]]:
    """The positions of the messages to use, the first copy of each (by digest: the
    Message-ID and body train knows mail by); the label each is used under; and
    ``copies``: how many were left out, and ``relabelled``: how many messages came
    under more than one label.

    A split or cross-validation must not test a message on a model that trained on
    its copy: Enron1's folders hold 178 such copies among 5,172 files.  A message
    under two labels is used under the one read last, as ``train`` counts it, so that
    evaluate and tune measure the model train would build from the same folders.
    """
    first: dict[str, int] = {}
    last_label: dict[str, str] = {}
    labels_seen: dict[str, set[str]] = {}
    for position, (digest, label) in enumerate(zip(digests, labels, strict=True)):
        first.setdefault(digest, position)
        last_label[digest] = label
        labels_seen.setdefault(digest, set()).add(label)
    kept = list(first.values())
    copies = {
        "copies": len(digests) - len(kept),
        "relabelled": sum(len(seen) > 1 for seen in labels_seen.values()),
    }
    return kept, [last_label[digests[i]] for i in kept], copies


def copies_warning(copies: Mapping[str, int]) -> dict[str, str] | None:
    """The report's warning that copies were left out (see :func:`first_copies`)."""
    if not copies["copies"]:
        return None
    relabelled = copies["relabelled"]
    were, them = ("was", "it") if relabelled == 1 else ("were", "them")
    also = (
        f"; {relabelled:,} came under more than one label and {were} used under the one "
        f"read last, as train counts {them}"
        if relabelled
        else ""
    )
    return {
        "kind": "copies",
        "message": f"{copies['copies']:,} messages were copies of others (the same Message-ID, "
        f"or Subject where there is none, and body), and each message was used once{also}",
    }


def in_model_warning(in_model: int, n: int) -> dict[str, str] | None:
    """The report's warning that a model was evaluated on mail it was trained on."""
    if not in_model:
        return None
    share = "all" if in_model == n else f"{in_model:,} of the {n:,}"
    return {
        "kind": "in-model",
        "message": f"the model was trained on {share} messages evaluated; its scores on "
        "them show what it learnt, not how it does on new mail",
    }


def order_warning(ordered_labels: Sequence[str], order_name: str) -> dict[str, str] | None:
    """The online report's warning that its order gives each class's mail in one block,
    which no mailbox does: the filter never meets a class again once it has left it
    (name order reads an mbox so, its messages being named by the box and their number)."""
    runs = 1 + sum(a != b for a, b in pairwise(ordered_labels))
    if runs > len(set(ordered_labels)):
        return None
    blocks = list(dict.fromkeys(ordered_labels))
    # What to do depends on where the order came from: only name order is spamnb's
    # guess; the dates and an index are the mail's own (review 15).
    advice = {
        "name": "give the order the mail arrived in (--order date, or an --index)",
        "date": "the mail's Date fields put each class apart, as no mailbox does",
        "index": "the index lists each class apart, as no mailbox delivers mail",
    }.get(order_name, "")
    return {
        "kind": "order",
        "message": f"in {order_name} order each class's mail comes in one block "
        f"({', then '.join(repr(label) for label in blocks)}), so the online run never "
        f"meets {blocks[0]!r} again once {blocks[1]!r} begins" + (f"; {advice}" if advice else ""),
    }


def baseline_warning(
    accuracy: float, baseline_class: str, baseline_accuracy: float, of: str = "accuracy"
) -> dict[str, str] | None:
    """The warning that ``accuracy`` (``of`` names whose) is no better than always
    saying the commonest class, if it is not."""
    if accuracy > baseline_accuracy:
        return None
    return {
        "kind": "baseline",
        "message": f"{of} {100 * accuracy:.2f}% is no better than always saying "
        f"{baseline_class!r} ({100 * baseline_accuracy:.2f}%)",
    }


def score_warnings(report: Mapping[str, Any], *, rescored: bool = False) -> list[dict[str, str]]:
    """Signs that the scores themselves mislead: accuracy no better than the majority
    baseline; a spam score left uncalibrated (a training part with too few messages of
    a class), or (``rescored``: a model scored with other options than its own)
    calibrated for other options."""
    warnings = []
    if warning := baseline_warning(
        report["accuracy"], report["baseline_class"], report["baseline_accuracy"]
    ):
        warnings.append(warning)
    section = report.get("spam_score")
    if not section:
        return warnings
    fits = section.get("folds") or [section]
    bare = sum(not fit["fitted_on"] and not fit["chosen_cutoffs"] for fit in fits)
    if bare:
        which = (
            "the spam score was"
            if len(fits) == 1
            else f"{bare} of {len(fits)} folds' spam scores were"
        )
        warnings.append(
            {
                "kind": "uncalibrated",
                "message": f"{which} not calibrated (too few messages of a class to fit it on): "
                "the raw probability with the default cut-offs, which the spam score's ECE, "
                "unsure band and counts at the cut-offs are of",
            }
        )
    elif rescored:
        warnings.append(
            {
                "kind": "calibration",
                "message": "the model's spam score was calibrated under its own options, not "
                "these: its ECE, unsure band and counts at the cut-offs are of that calibration",
            }
        )
    flat = sum(bool(fit["fitted_on"]) and fit["slope"] == 0 for fit in fits)
    if flat:
        which = (
            "the spam score was"
            if len(fits) == 1
            else f"{flat} of {len(fits)} folds' spam scores were"
        )
        warnings.append({"kind": "flat-score", "message": f"{which} {FLAT_SCORE}"})
    return warnings


# --------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class OptionSet:
    """One side of ``--compare``: scoring options and the tokenizer's pairs (word pairs,
    Chinese and Japanese pairs)."""

    name: str
    scoring: tuple[tuple[str, Any], ...]

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.scoring)


def compare_option_sets(
    option_sets: Sequence[OptionSet],
    token_lists_for: Callable[[OptionSet], Sequence[Sequence[str]]],
    labels: Sequence[str],
    new_filter_for: Callable[[OptionSet], Callable[[], SpamFilter]],
    *,
    folds: int | None,
    test_size: float | None,
    seed: int,
    on_step: Step = None,
) -> tuple[list[tuple[dict[str, Any], Scored]], dict[str, Any]]:
    """Every option set on the same folds (or the same split), and each later set
    tested against the first: McNemar's test on the paired verdicts."""
    if len(option_sets) < 2:
        raise ValueError("--compare needs at least two option sets")
    runs: list[tuple[dict[str, Any], Scored]] = []
    for option_set in option_sets:
        tokens = token_lists_for(option_set)
        new_filter = new_filter_for(option_set)
        if folds is not None:
            report, scored = evaluate_folds(tokens, labels, folds, seed, new_filter, on_step)
        else:
            assert test_size is not None
            report, scored, _ = evaluate_split(tokens, labels, test_size, seed, new_filter)
            if on_step is not None:
                on_step(len(labels))
        runs.append((report, scored))
    sets = []
    for option_set, (report, scored) in zip(option_sets, runs, strict=True):
        confusion = report.get("confusion", {})
        sets.append(
            {
                "name": option_set.name,
                "options": option_set.options,
                "n": report["n"],
                "accuracy": report["accuracy"],
                "errors": int((~scored.correct()).sum()),
                "false_positives": confusion.get("fp"),
                "false_negatives": confusion.get("fn"),
                "roc_auc": report["roc_auc"],
                "intervals": report.get("intervals"),
            }
        )
    first = runs[0][1]
    pairs = []
    for option_set, (_, scored) in zip(option_sets[1:], runs[1:], strict=True):
        # The same messages in the same order: the protocols are deterministic in seed.
        assert np.array_equal(first.indices, scored.indices)
        pairs.append(
            {
                "a": option_sets[0].name,
                "b": option_set.name,
                **mcnemar(first.correct(), scored.correct()),
            }
        )
    compare = {
        "sets": sets,
        "pairs": pairs,
        "baseline_class": runs[0][0]["baseline_class"],
        "baseline_accuracy": runs[0][0]["baseline_accuracy"],
    }
    return runs, compare
