"""The learning curve: nested stratified training samples, each scored under every event
model, agreeing with filters trained the obvious way."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
from corpus_fixtures import sample_messages, synthetic_corpus

from spamnb.calibration import LENGTH_EXPONENT, normalised
from spamnb.filter import DEFAULT_ALPHA, SpamFilter
from spamnb.model import EVENT_MODELS
from spamnb.scores import roc_auc, stratified_split
from spamnb.tuning import _nested_order, learning_curve

ROW_KEYS = {"train_n", "event_model", "accuracy", "roc_auc", "false_positives", "false_negatives"}


def synthetic(n_spam: int, n_ham: int, seed: int = 3) -> tuple[list[list[str]], list[str]]:
    return synthetic_corpus(n_spam, n_ham, seed)


def sample_corpus(sample_maildir) -> tuple[list[list[str]], list[str]]:
    messages, labels = sample_messages(sample_maildir)
    return SpamFilter().tokenize(messages), labels


def direct(token_lists, labels, train, test, event_model: str, max_features=None) -> dict:
    """A new filter trained on ``train`` (in that order) under ``event_model`` from the start."""
    spam_filter = SpamFilter()
    spam_filter.model.event_model = event_model
    spam_filter.model.alpha = DEFAULT_ALPHA
    spam_filter.model.max_features = max_features
    spam_filter.train_tokens([token_lists[i] for i in train], [labels[i] for i in train])
    proba, log_odds, lengths = spam_filter.score_tokens([token_lists[i] for i in test])
    truth = np.asarray([labels[i] for i in test], dtype=object)
    predicted = np.asarray(spam_filter.predict_labels(proba), dtype=object)
    return {
        "accuracy": float(np.mean(truth == predicted)),
        "roc_auc": roc_auc(truth == "spam", normalised(log_odds, lengths, LENGTH_EXPONENT)),
        "false_positives": int(((truth == "ham") & (predicted == "spam")).sum()),
        "false_negatives": int(((truth == "spam") & (predicted == "ham")).sum()),
    }


def recording_factory():
    """A new_filter that keeps the filters it made (their models are the ones trained)."""
    made: list[SpamFilter] = []

    def new_filter() -> SpamFilter:
        made.append(SpamFilter())
        return made[-1]

    return new_filter, made


def check_curve(token_lists, labels, train, test, sizes=None):
    new_filter, made = recording_factory()
    steps: list[int] = []
    rows = learning_curve(
        token_lists, labels, train, test, sizes, new_filter=new_filter, on_step=steps.append
    )
    sizes_seen = list(dict.fromkeys(row["train_n"] for row in rows))
    # Increasing sizes, every event model at each, in order: rows = sizes x event models.
    assert sizes_seen == sorted(sizes_seen)
    assert len(set(sizes_seen)) == len(sizes_seen)
    assert [row["event_model"] for row in rows] == list(EVENT_MODELS) * len(sizes_seen)
    assert [row["train_n"] for row in rows] == [n for n in sizes_seen for _ in EVENT_MODELS]
    assert all(set(row) == ROW_KEYS for row in rows)
    assert json.loads(json.dumps(rows, allow_nan=False)) == rows
    assert steps == [len(test)] * len(rows)
    # One filter per size, trained on exactly that many messages.
    assert len(made) == len(sizes_seen)
    models = [f.model for f in made]
    assert [int(m.class_counts.sum()) for m in models] == sizes_seen
    # Nested: each sample's counts are within the next one's (one vocabulary for all).
    for small, large in pairwise(models):
        assert small.token_counts.shape == large.token_counts.shape
        assert np.all(small.token_counts <= large.token_counts)
        assert np.all(small.doc_counts <= large.doc_counts)
    # Stratified: each sample's class shares are those of the training part, to one message.
    train_counts = Counter(labels[i] for i in train)
    for model, n in zip(models, sizes_seen, strict=True):
        assert model.classes and min(model.class_counts) >= 1
        for label, count in zip(model.classes, model.class_counts, strict=True):
            assert abs(count - n * train_counts[label] / len(train)) <= 1
    # The largest sample is the whole training part: the same numbers as a filter
    # trained on it directly, in the curve's order (the mistake table depends on it).
    assert sizes_seen[-1] == len(train)
    order = np.asarray(train)[_nested_order([labels[i] for i in train], 0)]
    for row in rows[-len(EVENT_MODELS) :]:
        expected = direct(token_lists, labels, order, test, row["event_model"])
        assert row["accuracy"] == expected["accuracy"]
        assert row["false_positives"] == expected["false_positives"]
        assert row["false_negatives"] == expected["false_negatives"]
        assert row["roc_auc"] == pytest.approx(expected["roc_auc"], abs=1e-12)
    return rows


def test_synthetic_default_sizes():
    token_lists, labels = synthetic(90, 150)
    train, test = stratified_split(labels, 0.25, seed=1)
    rows = check_curve(token_lists, labels, train, test)
    assert list(dict.fromkeys(r["train_n"] for r in rows)) == [25, 50, 100, len(train)]


def test_synthetic_given_sizes_are_sorted_and_deduplicated():
    token_lists, labels = synthetic(40, 60)
    train, test = stratified_split(labels, 0.3, seed=2)
    rows = check_curve(token_lists, labels, train, test, sizes=[len(train), 10, 3, 10])
    assert list(dict.fromkeys(r["train_n"] for r in rows)) == [3, 10, len(train)]


def test_the_first_size_holding_every_class_is_a_default_size():
    # One ham among 50: the stratified order puts it 25th, so the sample of 25 is the
    # first to hold both classes and the curve's first point; it must be kept (review 18).
    token_lists, labels = synthetic(60, 60)
    spam = [i for i, label in enumerate(labels) if label == "spam"]
    ham = [i for i, label in enumerate(labels) if label == "ham"]
    train, test = spam[:49] + ham[:1], spam[49:55] + ham[1:7]
    order = np.asarray(train)[_nested_order([labels[i] for i in train], 0)]
    assert [labels[i] for i in order].index("ham") == 24
    rows = learning_curve(token_lists, labels, train, test, event_models=["boolean"])
    assert [row["train_n"] for row in rows] == [25, 50]


def test_sample_corpus(sample_maildir):
    token_lists, labels = sample_corpus(sample_maildir)
    train, test = stratified_split(labels, 0.3, seed=0)
    rows = check_curve(token_lists, labels, train, test)
    assert list(dict.fromkeys(r["train_n"] for r in rows)) == [25, len(train)]
    assert all(row["roc_auc"] is not None for row in rows)


def test_the_order_is_a_seeded_stratified_shuffle():
    labels = ["spam"] * 10 + ["ham"] * 30
    order = _nested_order(labels, seed=5)
    assert sorted(order.tolist()) == list(range(40))
    assert np.array_equal(order, _nested_order(labels, seed=5))
    assert not np.array_equal(order, _nested_order(labels, seed=6))
    for n in range(1, 41):
        spam = sum(labels[i] == "spam" for i in order[:n])
        assert abs(spam - n / 4) <= 1


def test_event_models_and_alpha_are_respected():
    token_lists, labels = synthetic(30, 30)
    train, test = stratified_split(labels, 0.3, seed=0)
    new_filter, made = recording_factory()
    rows = learning_curve(
        token_lists, labels, train, test, [len(train)], ["bernoulli"], alpha=0.5,
        new_filter=new_filter,
    )  # fmt: skip
    assert [row["event_model"] for row in rows] == ["bernoulli"]
    assert made[0].model.alpha == 0.5


def test_size_errors():
    token_lists, labels = synthetic(20, 40)
    train, test = stratified_split(labels, 0.3, seed=0)
    with pytest.raises(ValueError, match="larger than the training part"):
        learning_curve(token_lists, labels, train, test, [len(train) + 1])
    # The first message of the stratified order is ham (two thirds of the mail): one
    # message cannot hold both classes.
    with pytest.raises(ValueError, match="too small to hold every class"):
        learning_curve(token_lists, labels, train, test, [1])
    with pytest.raises(ValueError):
        learning_curve(token_lists, labels, train, test, [])
    with pytest.raises(ValueError):
        learning_curve(token_lists, labels, train, test, [2.5])


def test_input_errors():
    token_lists, labels = synthetic(20, 20)
    train, test = stratified_split(labels, 0.3, seed=0)
    with pytest.raises(ValueError, match="share"):
        learning_curve(token_lists, labels, train, np.append(test, train[0]))
    with pytest.raises(ValueError, match="event model"):
        learning_curve(token_lists, labels, train, test, event_models=["poisson"])
    with pytest.raises(ValueError):
        learning_curve(token_lists, labels, train, test, alpha=0.0)
    with pytest.raises(ValueError):
        learning_curve(token_lists, labels[:-1], train, test)
    only_spam = np.array([i for i in train if labels[i] == "spam"])
    with pytest.raises(ValueError, match="two classes"):
        learning_curve(token_lists, labels, only_spam, test)
    with pytest.raises(ValueError):
        learning_curve(token_lists, labels, train, [])
    used = SpamFilter()
    used.train_tokens([["x"]], ["spam"])
    with pytest.raises(ValueError, match="new, untrained"):
        learning_curve(token_lists, labels, train, test, new_filter=lambda: used)


def test_every_size_equals_a_new_filter_trained_on_its_sample():
    """Also with a cut vocabulary, where ties in information gain go to the token seen
    first: the shared vocabulary must rank a sample's tokens as a filter of its own does."""
    token_lists, labels = synthetic(50, 70, seed=11)
    train, test = stratified_split(labels, 0.3, seed=4)

    def new_filter() -> SpamFilter:
        spam_filter = SpamFilter()
        spam_filter.model.max_features = 6
        return spam_filter

    rows = learning_curve(token_lists, labels, train, test, [4, 9, 30, 60], new_filter=new_filter)
    order = train[_nested_order([labels[i] for i in train], seed=0)]
    for row in rows:
        sample = order[: row["train_n"]]
        expected = direct(token_lists, labels, sample, test, row["event_model"], max_features=6)
        assert row["accuracy"] == expected["accuracy"]
        assert row["false_positives"] == expected["false_positives"]
        assert row["roc_auc"] == pytest.approx(expected["roc_auc"], abs=1e-12)
