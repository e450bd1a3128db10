"""The TREC spam track's online protocol ("immediate feedback"), and message orders for it.

Messages are taken in a fixed order; each is classified by a model trained on every
message before it, then its true label is trained.  Rebuilding the Naive Bayes
log-probabilities for each message costs O(vocabulary), which over thousands of
messages and a vocabulary of 10^5-10^6 tokens is far too slow, so the counts here are
kept incrementally and each message costs O(its own tokens), plus the number of
distinct document counts per class for the Bernoulli model.  The scores are those of
:class:`spamnb.model.NaiveBayes` trained on the preceding messages: same event model,
smoothing, vocabulary cut-off and the same floating-point formulas term by term, so
they differ only by the order in which sums are added.

The order helpers are pure functions of names, index text or Date header values; the
CLI reads the files.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .calibration import LENGTH_EXPONENT, normalised
from .filter import DEFAULT_ALPHA, DEFAULT_EVENT_MODEL
from .model import EVENT_MODELS
from .scores import log_odds_against_rest, log_posteriors, predicted_labels

__all__ = [
    "OnlineResult",
    "name_order_key",
    "online_run",
    "order_by_date",
    "order_by_name",
    "parse_trec_index",
]

# Room for this many vocabulary columns at first; arrays double when full, so growth
# costs O(1) amortised per new token.
_INITIAL_COLUMNS = 1024


@dataclass
class OnlineResult:
    """Every message's scores, each from a model trained on the messages before it."""

    classes: list[str]
    """In order of first appearance in the labels."""
    predicted: list[str]
    """Each message's most probable class; exact ties never go to the positive class."""
    proba: np.ndarray
    """(n, classes) posteriors, columns in ``classes`` order."""
    log_odds: np.ndarray | None
    """log P(positive|x) - log P(rest|x); None without a positive class and another."""
    lengths: np.ndarray
    """Occurrences of the tokens the model scored (``NaiveBayes.evidence_lengths``)."""
    decision: np.ndarray | None
    """``log_odds / max(length, 1) ** LENGTH_EXPONENT``, the ranking score."""


class _IncrementalNaiveBayes:
    """Naive Bayes counts that score and learn one message at a time.

    Alongside the counts it keeps what ``NaiveBayes`` would otherwise recompute from
    the whole vocabulary for every message: which columns are active and how many,
    per-class totals over the active columns (multinomial and boolean), and for the
    Bernoulli model a histogram per class of the document counts of active columns,
    from which the sum of log(1 - p) over all active columns follows in
    O(distinct counts).
    """

    def __init__(self, n_classes: int, event_model: str, alpha: float, min_count: int) -> None:
        self.event_model = event_model
        self.alpha = alpha
        self.threshold = max(min_count, 1)
        self.index: dict[str, int] = {}
        self.n_classes = n_classes
        self.class_counts = np.zeros(n_classes, dtype=np.float64)
        # Occurrences over all classes decide whether a column is active, whatever the
        # event model counts (as in NaiveBayes.active_features).
        self.occurrences = np.zeros(_INITIAL_COLUMNS, dtype=np.float64)
        # The per-class counts the event model's probabilities come from.
        self.counts = np.zeros((n_classes, _INITIAL_COLUMNS), dtype=np.float64)
        self.n_active = 0
        self.active_totals = np.zeros(n_classes, dtype=np.float64)
        # histogram[c, v]: active columns that v messages of class c contain.
        self.histogram = np.zeros((n_classes, 16), dtype=np.int64)

    @property
    def by_presence(self) -> bool:
        return self.event_model != "multinomial"

    def columns(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Distinct columns of the message's tokens and their occurrences.

        Tokens new to the model get columns now: with no occurrences counted yet they
        are inactive, so they are not scored, just as a token outside NaiveBayes's
        vocabulary is not.
        """
        index = self.index
        # Counting first (in C) leaves the Python-level work to the distinct tokens.
        counted = Counter(tokens)
        new = [token for token in counted if token not in index]
        index.update(zip(new, range(len(index), len(index) + len(new)), strict=True))
        self._reserve(len(index))
        columns = np.fromiter(map(index.__getitem__, counted), dtype=np.intp, count=len(counted))
        occurrences = np.fromiter(counted.values(), dtype=np.float64, count=len(counted))
        return columns, occurrences

    def _reserve(self, n_columns: int) -> None:
        capacity = len(self.occurrences)
        if n_columns <= capacity:
            return
        while capacity < n_columns:
            capacity *= 2
        extra = capacity - len(self.occurrences)
        self.occurrences = np.concatenate([self.occurrences, np.zeros(extra)])
        self.counts = np.hstack([self.counts, np.zeros((self.n_classes, extra))])

    def class_log_prior(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.class_counts) - np.log(max(self.class_counts.sum(), 1))

    def joint_log_likelihood(
        self, columns: np.ndarray, occurrences: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """log P(c) + log P(message|c) per class, and the evidence length."""
        active = self.occurrences[columns] >= self.threshold
        columns = columns[active]
        length = float(occurrences[active].sum())
        x = np.ones(len(columns)) if self.by_presence else occurrences[active]
        counts = self.counts[:, columns]
        if self.event_model == "bernoulli":
            jll = self._bernoulli_log_likelihood(counts)
        else:
            jll = self._multinomial_log_likelihood(counts, x)
        jll = jll + self.class_log_prior()
        # NaiveBayes leaves a class without messages at -inf through its prior, but
        # unsmoothed (alpha=0) its likelihood is 0/0 and the sum NaN; no messages
        # means impossible either way.
        jll[self.class_counts == 0] = -np.inf
        return jll, length

    def _multinomial_log_likelihood(self, counts: np.ndarray, x: np.ndarray) -> np.ndarray:
        alpha = self.alpha
        denominator = self.active_totals + alpha * self.n_active
        with np.errstate(divide="ignore", invalid="ignore"):
            log_prob = np.log(counts + alpha) - np.log(denominator)[:, None]
        jll = log_prob @ x
        # Unsmoothed, a class with no counts in the active columns has P(w|c) = 0/0
        # (NaN in NaiveBayes); its every count is zero, and a zero count is an
        # impossible word at alpha=0, so a message with scored tokens is impossible.
        jll[(denominator == 0) & (len(x) > 0)] = -np.inf
        return jll

    def _bernoulli_log_likelihood(self, doc_counts: np.ndarray) -> np.ndarray:
        # The formulas of NaiveBayes._bernoulli_parts, so that a word at p = 1
        # unsmoothed is "certain" by exactly the same test.
        log_p, log_not_p = self._bernoulli_logs(doc_counts, np.arange(self.n_classes)[:, None])
        certain = np.isneginf(log_not_p)
        log_not_p[certain] = 0.0
        present = (log_p - log_not_p).sum(axis=1)
        absent, n_certain = self._absent_sums()
        jll = present + absent
        # A message lacking a word every message of the class had is impossible there.
        jll[certain.sum(axis=1) < n_certain] = -np.inf
        return jll

    def _bernoulli_logs(
        self, doc_counts: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """log p and log(1 - p) for document counts of the classes in ``rows``."""
        totals = self.class_counts[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_p = np.log(doc_counts + self.alpha) - np.log(totals + 2 * self.alpha)
            log_not_p = np.log(totals - doc_counts + self.alpha) - np.log(totals + 2 * self.alpha)
        return log_p, log_not_p

    def _absent_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """Per class: the sum of log(1 - p) over active columns that are not certain,
        and the number of certain ones."""
        rows, values = np.nonzero(self.histogram)
        columns = self.histogram[rows, values].astype(np.float64)
        _, log_not_p = self._bernoulli_logs(values.astype(np.float64), rows)
        certain = np.isneginf(log_not_p)
        terms = columns * np.where(certain, 0.0, log_not_p)
        absent = np.bincount(rows, weights=terms, minlength=self.n_classes)
        n_certain = np.bincount(rows, weights=columns * certain, minlength=self.n_classes)
        return absent, n_certain

    def learn(self, columns: np.ndarray, occurrences: np.ndarray, row: int) -> None:
        """Count one message of class ``row``."""
        was_active = self.occurrences[columns] >= self.threshold
        self.occurrences[columns] += occurrences
        now_active = self.occurrences[columns] >= self.threshold
        activated = columns[now_active & ~was_active]
        kept = columns[was_active]
        increments = np.ones(len(columns)) if self.by_presence else occurrences
        self.class_counts[row] += 1
        if self.event_model == "bernoulli":
            self._grow_histogram(int(self.class_counts[row]))
            # Columns already active move up one bucket in this class's histogram.
            before = self.counts[row, kept].astype(np.intp)
            np.subtract.at(self.histogram[row], before, 1)
            np.add.at(self.histogram[row], before + 1, 1)
        self.counts[row, columns] += increments
        if self.event_model != "bernoulli":
            self.active_totals[row] += increments[was_active].sum()
            # A newly active column brings every class's counts into the totals,
            # including counts from messages before it became active.
            self.active_totals += self.counts[:, activated].sum(axis=1)
        else:
            for c in range(self.n_classes):
                np.add.at(self.histogram[c], self.counts[c, activated].astype(np.intp), 1)
        self.n_active += len(activated)

    def _grow_histogram(self, largest_count: int) -> None:
        width = self.histogram.shape[1]
        if largest_count < width:
            return
        while width <= largest_count:
            width *= 2
        extra = np.zeros((self.n_classes, width - self.histogram.shape[1]), dtype=np.int64)
        self.histogram = np.hstack([self.histogram, extra])


def online_run(
    token_lists: Sequence[Sequence[str]],
    labels: Sequence[str],
    *,
    event_model: str = DEFAULT_EVENT_MODEL,
    alpha: float = DEFAULT_ALPHA,
    min_count: int = 1,
    positive: str = "spam",
    on_step: Callable[[int], None] | None = None,
    classes: Sequence[str] | None = None,
) -> OnlineResult:
    """Classify each message with a model trained on all before it, then train it.

    ``classes`` orders the result's columns, and so breaks ties between other classes
    than ``positive`` (the first message's, before any is learnt); by default the
    order in which the stream brings them.

    The scores equal those of ``NaiveBayes(event_model=..., alpha=..., min_count=...)``
    trained with the preceding messages, wherever NaiveBayes defines them.  Where it
    does not (its posteriors are NaN), this defines them:

    * A message that every class finds impossible, which is always the first message
      (no class has a message yet) and unsmoothed (alpha=0) can be others, has
      uniform posteriors and log-odds 0, and is predicted as a class other than
      ``positive``: no evidence must not call mail spam.
    * Unsmoothed, a class with messages but no counts in the active vocabulary
      (0/0 probabilities) finds any message with scored tokens impossible, as a
      zero count makes a word impossible at alpha=0.

    alpha=0 is otherwise handled as NaiveBayes does, for every event model (a
    Bernoulli word every message of a class had makes its absence impossible).
    Classes seen so far beside unseen ones give the unseen ones probability 0, so
    log-odds may be infinite.  ``on_step(1)`` is called after each message.
    """
    if event_model not in EVENT_MODELS:
        raise ValueError(f"unknown event model {event_model!r}; use one of {EVENT_MODELS}")
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"the smoothing strength alpha must be a finite number >= 0, not {alpha}")
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, not {min_count}")
    if len(token_lists) != len(labels):
        raise ValueError(f"{len(token_lists)} messages but {len(labels)} labels")
    if len(labels) < 1:
        raise ValueError("the online protocol needs at least one message")
    classes = list(dict.fromkeys(labels) if classes is None else dict.fromkeys(classes))
    if not set(labels) <= set(classes):
        raise ValueError(f"labels {sorted(set(labels) - set(classes))} are not among the classes")
    row_of = {label: row for row, label in enumerate(classes)}
    model = _IncrementalNaiveBayes(len(classes), event_model, float(alpha), int(min_count))
    jll = np.empty((len(labels), len(classes)))
    lengths = np.empty(len(labels))
    for i, (tokens, label) in enumerate(zip(token_lists, labels, strict=True)):
        columns, occurrences = model.columns(tokens)
        jll[i], lengths[i] = model.joint_log_likelihood(columns, occurrences)
        model.learn(columns, occurrences, row_of[label])
        if on_step is not None:
            on_step(1)

    no_evidence = np.all(np.isneginf(jll), axis=1)
    proba = np.exp(log_posteriors(jll))
    proba[no_evidence] = 1.0 / len(classes)
    log_odds = decision = None
    if positive in row_of and len(classes) > 1:
        log_odds = log_odds_against_rest(jll, row_of[positive])
        log_odds[no_evidence] = 0.0
        decision = normalised(log_odds, lengths, LENGTH_EXPONENT)
    predicted = predicted_labels(proba, classes, positive)
    return OnlineResult(classes, predicted, proba, log_odds, lengths, decision)


# --------------------------------------------------------------------------- message order


def parse_trec_index(text: str) -> list[tuple[str, str]]:
    """(label, path) pairs of a TREC index (``spam ../data/inmail.1`` a line), in order.

    Labels are lower-cased; the path is the rest of the line, stripped, so it may hold
    spaces.  Blank lines are skipped; a line with a label and no path, a label that is
    not printable text, or a path with a NUL byte, is an error.
    """
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split(None, 1)
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"line {number} of the index is not 'LABEL PATH': {line.strip()!r}")
        if not fields[0].isprintable():
            # As --label names must be: a class name is shown in reports and figures.
            raise ValueError(f"line {number} of the index has a label that is not printable text")
        if "\0" in fields[1]:
            # No file name can hold one, and os.stat raises ValueError, not OSError.
            raise ValueError(f"line {number} of the index has a NUL byte in its path")
        entries.append((fields[0].lower(), fields[1].strip()))
    return entries


_DIGITS = re.compile(r"(\d+)")


def name_order_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key for delivery order by file name: natural order, numbers as numbers.

    Enron-Spam numbers its messages in the order they are meant to arrive
    (``0001.1999-12-10.farmer.ham.txt``, ``0006.2003-12-18.GP.spam.txt``), interleaving
    ham and spam; ordering by the dates in the names instead would put every Enron1
    ham (1999-2001) before every spam (2003-2005), and the online run would never meet
    a ham after its first spam.  Names that begin with a date sort by it too.
    """
    # re.split with a group alternates text and digit runs, so equal positions of two
    # keys always hold the same type; the name itself breaks ties such as 01 and 1.
    parts = _DIGITS.split(name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def order_by_name(names: Sequence[str]) -> np.ndarray:
    """Indices of ``names`` in :func:`name_order_key` order of their base names (stable)."""
    keys = [name_order_key(os.path.basename(name)) for name in names]
    return np.asarray(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.intp)


def _parse_date(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    # RFC 2822's -0000 ("zone unknown") parses naive; UTC is the only sensible guess.
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


def order_by_date(dates: Sequence[str | None]) -> np.ndarray:
    """Indices of messages in order of their Date header values (stable for equal times).

    Times in different zones compare as instants; a date without a zone counts as
    UTC.  Missing or unparseable dates go after every dated message, in their given
    order.
    """
    parsed = [_parse_date(value) for value in dates]
    dated = sorted((i for i, when in enumerate(parsed) if when is not None), key=parsed.__getitem__)
    undated = [i for i, when in enumerate(parsed) if when is None]
    return np.asarray(dated + undated, dtype=np.intp)
