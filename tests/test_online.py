"""The online (TREC immediate-feedback) protocol and the message-order helpers.

The incremental scorer must agree with NaiveBayes retrained from scratch on the
messages before each one, so most tests here rebuild that reference the slow way.
"""

from __future__ import annotations

import numpy as np
import pytest

from spamnb.counts import Vocabulary, count_matrix
from spamnb.filter import SpamFilter
from spamnb.mail import iter_messages
from spamnb.model import NaiveBayes
from spamnb.online import (
    name_order_key,
    online_run,
    order_by_date,
    order_by_name,
    parse_trec_index,
)
from spamnb.tokens import tokenize

EVENT_MODELS = ("multinomial", "boolean", "bernoulli")


def random_stream(
    seed: int, n_messages: int = 60, n_tokens: int = 40, classes: tuple[str, ...] = ("spam", "ham")
) -> tuple[list[list[str]], list[str]]:
    """Messages over a small vocabulary, class-dependent so the counts differ by class."""
    rng = np.random.default_rng(seed)
    labels = [str(c) for c in rng.choice(classes, size=n_messages)]
    # Zipf-like weights give frequent and rare tokens, so min_count cuts some columns
    # and doc counts take many values; each class prefers its own end of the list.
    weights = 1.0 / np.arange(1, n_tokens + 1)
    token_lists = []
    for label in labels:
        p = weights if label == classes[0] else weights[::-1]
        length = int(rng.integers(0, 12))  # some messages are empty
        picks = rng.choice(n_tokens, size=length, p=p / p.sum())
        token_lists.append([f"t{j}" for j in picks])
    return token_lists, labels


def reference(
    token_lists: list[list[str]],
    labels: list[str],
    i: int,
    classes: list[str],
    positive: str = "spam",
    **settings,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Posteriors, log-odds and length of message i from NaiveBayes trained on 0..i-1."""
    vocabulary = Vocabulary()
    X = count_matrix(token_lists[:i], vocabulary, grow=True)
    model = NaiveBayes(classes, **settings)
    model.add_counts(X, labels[:i])
    x = count_matrix([token_lists[i]], vocabulary, grow=False)
    jll = model.joint_log_likelihood(x)
    proba = np.exp(model.normalise(jll))[0]
    return proba, model.log_odds_from_jll(jll, positive)[0], float(model.evidence_lengths(x)[0])


@pytest.mark.parametrize("event_model", EVENT_MODELS)
@pytest.mark.parametrize("alpha", [1.0, 0.01])
@pytest.mark.parametrize("min_count", [1, 2])
def test_matches_naive_bayes_retrained_before_each_message(event_model, alpha, min_count):
    token_lists, labels = random_stream(seed=7)
    settings = {"event_model": event_model, "alpha": alpha, "min_count": min_count}
    result = online_run(token_lists, labels, **settings)
    assert result.classes == list(dict.fromkeys(labels))
    compared = 0
    for i in range(1, len(labels)):
        if set(labels[:i]) != {"spam", "ham"}:
            continue
        proba, log_odds, length = reference(token_lists, labels, i, result.classes, **settings)
        np.testing.assert_allclose(result.proba[i], proba, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(result.log_odds[i], log_odds, rtol=1e-9, atol=1e-9)
        assert result.lengths[i] == length
        compared += 1
    assert compared > 50


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_unsmoothed_matches_where_naive_bayes_is_defined(event_model):
    token_lists, labels = random_stream(seed=3)
    settings = {"event_model": event_model, "alpha": 0.0, "min_count": 2}
    result = online_run(token_lists, labels, **settings)
    assert np.all(np.isfinite(result.proba))
    np.testing.assert_allclose(result.proba.sum(axis=1), 1.0)
    defined = 0
    for i in range(1, len(labels)):
        if set(labels[:i]) != {"spam", "ham"}:
            continue
        proba, log_odds, _ = reference(token_lists, labels, i, result.classes, **settings)
        if np.isnan(proba).any():
            continue
        np.testing.assert_allclose(result.proba[i], proba, rtol=1e-9, atol=1e-9)
        if np.isfinite(log_odds):
            np.testing.assert_allclose(result.log_odds[i], log_odds, rtol=1e-9)
        else:
            assert result.log_odds[i] == log_odds
        defined += 1
    # Unsmoothed, most messages hold a word one class has never had: impossible there.
    assert defined > 20
    assert np.isinf(result.log_odds[1:]).mean() > 0.5


def test_one_message_a_run_never_starts_the_mistake_table():
    # Each message is a run with one class, and the table starts only with a run that
    # brings every class: the online scores are those of the Naive Bayes alone, as a
    # filter learning one message per run gives them.
    token_lists, labels = random_stream(seed=9, n_messages=80)
    result = online_run(token_lists, labels, event_model="boolean", alpha=0.01)
    spam_filter = SpamFilter(model=NaiveBayes(event_model="boolean", alpha=0.01))
    compared = 0
    for i, (tokens, label) in enumerate(zip(token_lists, labels, strict=True)):
        if {"spam", "ham"} <= set(spam_filter.classes):
            _, log_odds, _ = spam_filter.score_tokens([tokens])
            np.testing.assert_allclose(result.log_odds[i], log_odds[0], rtol=1e-9, atol=1e-9)
            compared += 1
        spam_filter.learn([tokens], [label], [f"message {i}"])
    assert compared > 60
    assert not spam_filter.mistakes.counts.any() and spam_filter.mistake_weight() == 0.0


def test_bernoulli_unsmoothed_word_every_message_had():
    # Each spam had "x": unsmoothed, a message without "x" cannot be spam.
    token_lists = [["x", "y"], ["z"], ["w"], ["x"], ["z"]]
    labels = ["spam", "ham", "ham", "spam", "ham"]
    result = online_run(token_lists, labels, event_model="bernoulli", alpha=0.0)
    assert result.log_odds[4] == -np.inf
    assert result.predicted[4] == "ham"
    proba, _, _ = reference(
        token_lists, labels, 4, result.classes, event_model="bernoulli", alpha=0.0
    )
    np.testing.assert_array_equal(proba, [0.0, 1.0])
    np.testing.assert_allclose(result.proba[4], proba)
    # With "x" alone spam is possible again, and ham, which never had "x", is not.
    result = online_run([*token_lists[:4], ["x"]], labels, event_model="bernoulli", alpha=0.0)
    assert result.log_odds[4] == np.inf


def test_vocabulary_and_counts_grow_past_their_first_capacity():
    rng = np.random.default_rng(11)
    labels = [str(c) for c in rng.choice(["spam", "ham"], size=80)]
    # Mostly fresh tokens: thousands of columns, and doc counts up to ~40 per class.
    token_lists = [
        [f"new{i}_{j}" for j in range(40)] + [f"t{j}" for j in rng.integers(0, 30, size=10)]
        for i in range(len(labels))
    ]
    for event_model in EVENT_MODELS:
        settings = {"event_model": event_model, "alpha": 0.1, "min_count": 1}
        result = online_run(token_lists, labels, **settings)
        for i in (40, 79):
            proba, log_odds, length = reference(token_lists, labels, i, result.classes, **settings)
            np.testing.assert_allclose(result.proba[i], proba, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(result.log_odds[i], log_odds, rtol=1e-9, atol=1e-9)
            assert result.lengths[i] == length == 10


def test_first_message_has_no_evidence_and_is_not_called_spam():
    result = online_run([["cheap", "pills"], ["cheap", "pills"]], ["spam", "ham"])
    assert result.predicted[0] == "ham"
    np.testing.assert_array_equal(result.proba[0], [0.5, 0.5])
    assert result.log_odds[0] == 0.0
    assert result.decision[0] == 0.0
    assert result.lengths[0] == 0
    # Only spam seen before the second message: it can only be spam.
    assert result.predicted[1] == "spam"
    assert result.log_odds[1] == np.inf
    assert result.lengths[1] == 2


def test_after_only_ham_the_log_odds_are_minus_infinity():
    result = online_run([["hello"], ["hello", "again"], ["x"]], ["ham", "spam", "ham"])
    assert result.classes == ["ham", "spam"]
    assert result.log_odds[1] == -np.inf
    np.testing.assert_array_equal(result.proba[1], [1.0, 0.0])
    assert result.predicted[:2] == ["ham", "ham"]
    assert not np.isnan(result.proba).any()
    assert not np.isnan(result.log_odds).any()


def test_decision_is_length_normalised_log_odds():
    token_lists, labels = random_stream(seed=5)
    result = online_run(token_lists, labels)
    expected = result.log_odds / np.maximum(result.lengths, 1) ** 0.75
    np.testing.assert_allclose(result.decision, expected)


def test_three_classes_log_odds_are_spam_against_the_rest():
    classes = ("ham", "spam", "news")
    token_lists, labels = random_stream(seed=21, n_messages=70, classes=classes)
    settings = {"event_model": "multinomial", "alpha": 0.5, "min_count": 1}
    result = online_run(token_lists, labels, **settings)
    assert result.classes == list(dict.fromkeys(labels))
    assert result.proba.shape == (70, 3)
    compared = 0
    for i in range(1, len(labels)):
        if set(labels[:i]) != set(classes):
            continue
        proba, log_odds, _ = reference(token_lists, labels, i, result.classes, **settings)
        np.testing.assert_allclose(result.proba[i], proba, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(result.log_odds[i], log_odds, rtol=1e-9, atol=1e-9)
        compared += 1
    assert compared > 50
    best = [result.classes[c] for c in np.argmax(result.proba, axis=1)]
    assert result.predicted[1:] == best[1:]


def test_without_a_spam_class_there_are_no_log_odds():
    result = online_run([["a"], ["b"], ["a"]], ["work", "home", "work"])
    assert result.log_odds is None
    assert result.decision is None
    assert result.predicted[0] == "work"  # no evidence: the first class, nothing is spam
    assert result.predicted[2] == "work"


def test_on_step_is_called_once_per_message():
    steps = []
    online_run([["a"], ["b"], ["c"]], ["spam", "ham", "ham"], on_step=steps.append)
    assert steps == [1, 1, 1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"token_lists": [["a"]], "labels": ["spam"], "event_model": "poisson"}, "event model"),
        ({"token_lists": [["a"], ["b"]], "labels": ["spam"]}, "2 messages but 1 labels"),
        ({"token_lists": [], "labels": []}, "at least one message"),
        ({"token_lists": [["a"]], "labels": ["spam"], "alpha": -1.0}, "alpha"),
        ({"token_lists": [["a"]], "labels": ["spam"], "min_count": 0}, "min_count"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        online_run(**kwargs)


def test_sample_corpus_online_accuracy_beats_the_majority_baseline(sample_maildir):
    messages = [
        (item.data, label)
        for label in ("ham", "spam")
        for item in iter_messages(sample_maildir / label, "maildir")
    ]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(messages))
    token_lists = [tokenize(messages[i][0]) for i in order]
    labels = [messages[i][1] for i in order]
    result = online_run(token_lists, labels)
    truth = np.asarray(labels)
    accuracy = float(np.mean(np.asarray(result.predicted) == truth))
    baseline = max(np.mean(truth == "spam"), np.mean(truth == "ham"))
    assert len(labels) == 60
    assert accuracy > baseline + 0.2
    assert np.all(np.isfinite(result.proba))


# --------------------------------------------------------------------------- message order


def test_parse_trec_index():
    text = "spam ../data/inmail.1\n\nHAM  ../data/inmail.2  \r\n  ham ../data/my mail.3\n"
    assert parse_trec_index(text) == [
        ("spam", "../data/inmail.1"),
        ("ham", "../data/inmail.2"),
        ("ham", "../data/my mail.3"),
    ]
    assert parse_trec_index("") == []


def test_parse_trec_index_names_the_bad_line():
    with pytest.raises(ValueError, match="line 3"):
        parse_trec_index("spam a\n\nham\nspam b\n")
    # A label is a class name, shown in reports and figures: printable, as --label's.
    with pytest.raises(ValueError, match=r"line 2 .* not printable"):
        parse_trec_index("spam a\nh\x01am b\n")


def test_enron_names_sort_by_their_delivery_number():
    # Enron-Spam's numbers interleave the classes; their dates would not (ham 1999-2001,
    # spam 2003-2005 in Enron1).
    names = [
        "0008.2003-12-18.GP.spam.txt",
        "0010.1999-12-14.farmer.ham.txt",
        "0006.2003-12-18.GP.spam.txt",
        "0001.1999-12-10.farmer.ham.txt",
    ]
    assert sorted(names, key=name_order_key) == [
        "0001.1999-12-10.farmer.ham.txt",
        "0006.2003-12-18.GP.spam.txt",
        "0008.2003-12-18.GP.spam.txt",
        "0010.1999-12-14.farmer.ham.txt",
    ]


def test_names_sort_naturally():
    names = ["msg10", "2004-03-01.x.txt", "msg2", "inmail.1", "2003-12-31.y.txt", "inmail.10"]
    assert sorted(names, key=name_order_key) == [
        "2003-12-31.y.txt",
        "2004-03-01.x.txt",
        "inmail.1",
        "inmail.10",
        "msg2",
        "msg10",
    ]


def test_order_by_name_uses_base_names_and_is_stable():
    names = [
        "enron1/spam/0002.2001-05-25.SA_and_HP.spam.txt",
        "enron1/ham/0001.1999-12-10.farmer.ham.txt",
        "a/copy.txt",
        "b/copy.txt",
        "ham/10",
        "ham/9",
    ]
    # Natural order of the base names: 1 before 2, 9 before 10, digits before letters.
    np.testing.assert_array_equal(order_by_name(names), [1, 0, 5, 4, 2, 3])
    assert order_by_name(["b/copy.txt", "a/copy.txt"]).tolist() == [0, 1]
    assert order_by_name([]).tolist() == []


def test_order_by_date_compares_instants_and_puts_undated_last():
    dates = [
        "Tue, 01 Jan 2002 10:30:00 +0200",  # 08:30 UTC
        None,
        "Tue, 01 Jan 2002 09:00:00 +0000",
        "not a date",
        "Tue, 01 Jan 2002 08:00:00 -0000",  # zone unknown: taken as UTC
        "",
        "Mon, 31 Dec 2001 23:00:00 -0500",  # 04:00 UTC on the 1st
    ]
    np.testing.assert_array_equal(order_by_date(dates), [6, 4, 0, 2, 1, 3, 5])


def test_order_by_date_is_stable_for_the_same_instant():
    dates = [
        "Tue, 01 Jan 2002 12:00:00 +0100",
        "Tue, 01 Jan 2002 11:00:00 +0000",
        "Tue, 01 Jan 2002 06:00:00 -0500",
    ]
    np.testing.assert_array_equal(order_by_date(dates), [0, 1, 2])
    np.testing.assert_array_equal(order_by_date(dates[::-1]), [0, 1, 2])
