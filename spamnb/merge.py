"""Merging models trained separately (per shard, per user) into one.

Naive Bayes keeps nothing but counts, and counts add: the sum of two models' counts
is exactly the model trained on both models' mail.  :func:`merge_filters` adds them
up, column by token and row by class, and refuses the merges whose sum would not be
such a model: tokenizers that give the same message other tokens, and messages that
both models counted.

Rules, so that a merge equals training one filter on the models' mail concatenated
in the order the models are given:

- vocabulary: the first model's tokens in its order, then each later model's new
  tokens in its order; this is the first-seen order that training on the
  concatenation gives, so the columns, not just the counts, are the same;
- classes: the union in first-seen order; a class a model lacks has zero counts there;
- scoring settings (event model, smoothing, vocabulary cut-offs): the first
  model's.  Counts do not depend on them, so any choice gives the same counts, and
  the first is the one the caller names first;
- mistake tables (see mistakes.py): summed like the counts, with the record of each
  message's copies, and the smallest weight of the models', so that merging a model
  from before the table, or one trained without it, keeps the table out of scoring
  (its table lacks that model's hard mail).  This is the one part a merge does not
  reproduce exactly: the table depends on what the model knew when each message
  came, so training on all the mail at once would add other copies;
- calibration: of the models that score as the merge does (the settings above), the
  one fitted on the most held-out messages (see ``_calibration``); the first model's
  cut-offs when they were set by hand;
- trained messages: the union, each message under the digest any of the models
  knows it by now (a model another spamnb trained may know it by its older digest,
  see ``SpamFilter.adopt_digests``); created: the earliest; updated: now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

from .calibration import Calibration
from .counts import Vocabulary
from .filter import SpamFilter
from .mistakes import MistakeTable
from .model import NaiveBayes
from .tokens import SWITCHES

__all__ = ["IncompatibleModels", "calibration_left_unfitted", "merge_filters"]


class IncompatibleModels(ValueError):
    """The models cannot be merged into one that training could have produced."""


def merge_filters(filters: Sequence[SpamFilter]) -> SpamFilter:
    """One filter holding the summed counts of ``filters`` (at least two).

    The result equals a single filter trained on all the models' mail, the first
    model's first, and shares no mutable state with the inputs, which are left as
    they were.  Raises :class:`IncompatibleModels` when the tokenizer settings
    differ or a message was trained into two of the models, and ValueError when
    fewer than two models are given.
    """
    filters = list(filters)
    if len(filters) < 2:
        raise ValueError(f"merging needs at least 2 models, got {len(filters)}")
    for position, spam_filter in enumerate(filters, start=1):
        _check_shapes(spam_filter, position)
    _check_settings(filters)
    trained, retired = _merged_trained(filters)

    vocabulary = Vocabulary()
    for spam_filter in filters:
        for token in spam_filter.vocabulary.tokens:
            vocabulary.add(token)
    classes = list(dict.fromkeys(c for f in filters for c in f.classes))
    row_of = {label: row for row, label in enumerate(classes)}

    first = filters[0].model
    model = NaiveBayes(
        event_model=first.event_model,
        alpha=first.alpha,
        min_count=first.min_count,
        max_features=first.max_features,
        selection=first.selection,
    )
    model.classes = classes
    model.class_counts = np.zeros(len(classes), dtype=np.int64)
    model.token_counts = np.zeros((len(classes), len(vocabulary)))
    model.doc_counts = np.zeros((len(classes), len(vocabulary)))
    mistakes = MistakeTable(weight=_merged_weight(filters))
    mistakes.fit_shape(len(classes), len(vocabulary))
    mistake_copies: dict[str, int] = {}
    for spam_filter in filters:
        part = spam_filter.model
        rows = np.array([row_of[label] for label in part.classes], dtype=np.intp)
        # A model's counts may stop short of its vocabulary (columns it never had to
        # grow); the missing columns are zeros, so only the counted ones are added.
        tokens = spam_filter.vocabulary.tokens[: part.n_features]
        columns = np.array([vocabulary.index[t] for t in tokens], dtype=np.intp)
        # Rows and columns are distinct within one model, so += on the fancy index
        # adds every cell once.
        block = np.ix_(rows, columns)
        model.class_counts[rows] += part.class_counts
        model.token_counts[block] += part.token_counts
        model.doc_counts[block] += part.doc_counts
        # A table may stop short of its model's classes and columns, as counts may.
        part_table = spam_filter.mistakes.counts
        height, width = part_table.shape
        mistakes.counts[np.ix_(rows[:height], columns[:width])] += part_table
        mistake_copies.update(spam_filter.mistake_copies)

    # updated and written_by keep their defaults: now, and this spamnb.
    merged = SpamFilter(
        model=model,
        vocabulary=vocabulary,
        settings=filters[0].settings,
        created=_earliest([f.created for f in filters]),
        trained=trained,
        mistakes=mistakes,
        mistake_copies=mistake_copies,
        retired_digests=retired,
        crlf_digests=any(f.crlf_digests for f in filters),
    )
    merged.calibration = _calibration(filters, merged)
    return merged


def _check_shapes(spam_filter: SpamFilter, position: int) -> None:
    # The store refuses such files on loading; a filter built in memory could still
    # be inconsistent, and its counts would then land in the wrong columns.
    model = spam_filter.model
    n_classes = len(model.classes)
    if model.n_features > len(spam_filter.vocabulary) or not (
        model.class_counts.shape == (n_classes,)
        and model.token_counts.shape == model.doc_counts.shape == (n_classes, model.n_features)
    ):
        raise ValueError(
            f"model {position} is inconsistent: its counts do not match its vocabulary"
        )


def _setting(name: str, value: object) -> str:
    """A tokenizer setting in words: word pairs and Chinese and Japanese pairs are on or
    off (the model stores 1 or 0)."""
    if name in SWITCHES:
        return "on" if value else "off"
    return str(value)


def _check_settings(filters: list[SpamFilter]) -> None:
    """Refuse tokenizers that differ: the same token would mean different evidence."""
    first = filters[0].settings
    for position, spam_filter in enumerate(filters[1:], start=2):
        settings = spam_filter.settings
        if settings == first:
            continue
        differences = ", ".join(
            f"{name} {_setting(name, value)} against {_setting(name, getattr(first, name))}"
            for name, value in settings.to_dict().items()
            if value != getattr(first, name)
        )
        raise IncompatibleModels(
            f"model {position} was trained with other tokenizer settings than model 1 "
            f"({differences}); their tokens mean different things, so their counts "
            "cannot be added (retrain one with the other's settings)"
        )


def _merged_trained(filters: list[SpamFilter]) -> tuple[dict[str, str], dict[str, str]]:
    """The union of the trained-message records, and of their retired digests; refuse
    messages in two models.

    A message in two models is in both models' counts, so the sum counts it twice
    (or, with two labels, once in each class).  Taking one copy back out would need
    its tokens, which a model does not keep (only its digest), so the exact merge is
    impossible and the merge is refused instead.  A model that took a message over
    under its digest now remembers the one it had, which a model not trained since
    still knows it by: both are the same message.
    """
    retired: dict[str, str] = {}
    for spam_filter in filters:
        retired.update(spam_filter.live_retired_digests())
    owner: dict[str, int] = {}  # digest -> index of the first model that trained it
    merged: dict[str, str] = {}
    # (earlier, later) model indices -> [messages in both, of which with other labels]
    overlaps: dict[tuple[int, int], list[int]] = {}
    for index, spam_filter in enumerate(filters):
        for held, label in spam_filter.trained.items():
            digest = retired.get(held, held)
            before = owner.get(digest)
            if before is None:
                owner[digest] = index
                merged[digest] = label
                continue
            counts = overlaps.setdefault((before, index), [0, 0])
            counts[0] += 1
            counts[1] += int(merged[digest] != label)
    if overlaps:
        # A pair of two models first.  A model that holds a message twice (its CRLF and
        # LF copies, learnt apart before model format 7) is found out through another
        # model's retired digests, which holds the message too: that pair was named
        # "model 1 and model 1" (review 52).
        (earlier, later), (both, relabelled) = min(
            overlaps.items(), key=lambda item: (item[0][0] == item[0][1], item[0])
        )
        noun = "message was" if both == 1 else "messages were"
        labels = f" ({relabelled} of them with another class)" if relabelled else ""
        more = ", and others in other pairs of models" if len(overlaps) > 1 else ""
        raise IncompatibleModels(
            f"{both} {noun} trained into both model {earlier + 1} and model {later + 1}"
            f"{labels}{more}; merging would count them twice "
            "(forget them from one of the models first)"
        )
    return merged, {old: now for old, now in retired.items() if now in merged}


def _merged_weight(filters: Sequence[SpamFilter]) -> float:
    return min(f.mistakes.weight for f in filters)


def _scoring_alike(filters: Sequence[SpamFilter], merged: SpamFilter) -> list[SpamFilter]:
    """The models whose scores are made as the merged model's are, the mistake table
    counted at the weight each scores with: none where its table lacks a class (a
    model of one class, say), whatever weight it stores.  Compared by the stored
    weights, a merge that scored without the table kept a calibration fitted on scores
    with it (review 28)."""
    target = merged.scored_as(merged.mistake_weight())
    return [f for f in filters if f.scored_as(f.mistake_weight()) == target]


def _calibration(filters: list[SpamFilter], merged: SpamFilter) -> Calibration:
    """Of the models that score as the merge does, the calibration fitted on the most
    held-out messages (the first of equals); none fitted if none of them is.

    A calibration cannot be refitted from counts: it needs messages the model did
    not train on.  The one fitted on the most messages is the least noisy, the
    rule training itself follows (a small batch does not replace a calibration
    fitted on more mail).  One fitted on the scores of another event model, k or
    mistake weight maps other numbers, and would give wrong scores and verdicts
    without a sign, so it is never taken.  Cut-offs go with the calibration they were
    chosen on, except the first model's set by hand, which are kept as training keeps
    them.  The calibration was fitted against fewer counts than the merged model
    has, so it is an approximation until a training run learns as much mail as it
    was fitted on (see SpamFilter.calibration_folds), or train --new on all of it.
    """
    alike = _scoring_alike(filters, merged)
    # max() returns the first of equal maxima, so unfitted models keep model 1's.
    best = max(alike, key=lambda f: f.calibration.fitted_on).calibration if alike else None
    first = filters[0].calibration
    if best is None or not best.fitted_on:
        best = Calibration() if first.fitted_on else first
    if first.chosen_cutoffs:
        best = replace(
            best, ham_cutoff=first.ham_cutoff, spam_cutoff=first.spam_cutoff, chosen_cutoffs=True
        )
    return best


def calibration_left_unfitted(filters: Sequence[SpamFilter], merged: SpamFilter) -> bool:
    """Whether a model's calibration was left out because every calibrated model
    scores otherwise than the ``merged`` model (another event model, k or mistake
    weight)."""
    return any(f.calibration.fitted_on for f in filters) and not any(
        f.calibration.fitted_on for f in _scoring_alike(filters, merged)
    )


def _earliest(stamps: list[str]) -> str:
    """The earliest of the models' creation times, as it was written.

    Compared as times, not as text, since offsets other than UTC do not sort as
    text; a stamp that is not an ISO time (a damaged or foreign file) never wins.
    """

    def when(stamp: str) -> datetime:
        try:
            moment = datetime.fromisoformat(stamp)
        except (TypeError, ValueError):
            return datetime.max.replace(tzinfo=timezone.utc)
        # Stamps are written in UTC; one without an offset is read as UTC too.
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)

    return min(stamps, key=when)
