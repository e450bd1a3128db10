"""The mistake table: CRM114-style training, its share of the scores, and taking back."""

from __future__ import annotations

import copy
import math
import zlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from corpus_fixtures import assert_same_calibration, sample_messages, synthetic_corpus

from spamnb import mistakes as mistakes_module
from spamnb.calibration import LENGTH_EXPONENT
from spamnb.counts import Vocabulary, count_matrix, presence
from spamnb.filter import SpamFilter, message_digest
from spamnb.mail import iter_messages
from spamnb.mistakes import (
    ALPHA,
    MARGIN,
    PASSES,
    MistakeTable,
    block_sums,
    class_rows,
    content_keys,
    content_order,
)
from spamnb.paths import ModelFileError
from spamnb.store import from_payload, to_payload
from spamnb.tokens import tokenize


def one_at_a_time(P: sp.csr_matrix, rows: np.ndarray, n_classes: int, seed: int = 0, order=None):
    """The training loop the slow, obvious way: each message scored from the counts,
    in ``order`` (by default the permutation seeded by ``seed``)."""
    counts = np.zeros((n_classes, P.shape[1]))
    copies = np.zeros(P.shape[0], dtype=np.int64)
    if order is None:
        order = np.random.default_rng(seed).permutation(P.shape[0])
    for _ in range(PASSES):
        added = 0
        for i in order:
            columns = P.indices[P.indptr[i] : P.indptr[i + 1]]
            if not len(columns):
                continue
            seen = counts.sum(axis=0) > 0
            known = columns[seen[columns]]
            if len(known):
                totals = counts[:, seen].sum(axis=1)
                scores = np.log(counts[:, known] + ALPHA).sum(axis=1) - len(known) * np.log(
                    totals + ALPHA * seen.sum()
                )
                others = np.delete(scores, rows[i])
                margin = (scores[rows[i]] - others.max()) / len(known) ** LENGTH_EXPONENT
            else:
                margin = 0.0
            if margin <= MARGIN:
                counts[rows[i], columns] += 1
                copies[i] += 1
                added += 1
        if not added:
            break
    return counts, copies


def counted(token_lists, labels):
    vocabulary = Vocabulary()
    X = count_matrix(token_lists, vocabulary, grow=True)
    classes = list(dict.fromkeys(labels))
    return presence(X), class_rows(classes, labels), classes


def trained_table(token_lists, labels, seed: int = 0):
    """The messages' presence rows, class numbers and classes, and a new table trained
    on them with the copies it took."""
    P, rows, classes = counted(token_lists, labels)
    table = MistakeTable()
    table.fit_shape(len(classes), P.shape[1])
    return P, rows, classes, table, table.train(P, rows, seed=seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_training_equals_scoring_each_message_from_the_counts(seed):
    token_lists, labels = synthetic_corpus(40, 50, seed=seed)
    # A third class, so the margin is taken against the strongest of two others.
    labels = [("news" if i % 7 == 0 else label) for i, label in enumerate(labels)]
    P, rows, classes = counted(token_lists, labels)
    table = MistakeTable()
    table.fit_shape(len(classes), P.shape[1])
    copies = table.train(P, rows, seed=seed)
    expected_counts, expected_copies = one_at_a_time(P, rows, len(classes), seed=seed)
    np.testing.assert_array_equal(copies, expected_copies)
    np.testing.assert_array_equal(table.counts, expected_counts)
    # Messages of a few words never clear a margin of 4 per token^0.75: every pass
    # adds them again.
    assert copies.max() == PASSES


def three_messages() -> sp.csr_matrix:
    """Presence rows of spam {a, b}, ham {c} and spam {a}: walked in this order, the
    first two are added (an empty table, then an unknown word: margin 0), and the
    third's margin is worked out below from README's formula."""
    return presence(count_matrix([["a", "b"], ["c"], ["a"]], Vocabulary(), grow=True))


def margin_of_a(vocabulary_size: int) -> float:
    """The margin of spam {a} against a table of spam {a, b} and ham {c}, smoothed over
    ``vocabulary_size`` tokens: log P(a|spam) - log P(a|ham), over 1 known token."""
    spam = math.log((1 + ALPHA) / (2 + ALPHA * vocabulary_size))
    ham = math.log(ALPHA / (1 + ALPHA * vocabulary_size))
    return spam - ham


def test_a_margin_just_under_four_is_added():
    # README: a copy is added while the table's margin is at most 4. Spam {a} has
    # 3.94 here; with a smaller margin the table would hold less of the hard mail
    # than the margin chosen by cross-validation (review 18).
    assert 3.9 < margin_of_a(3) < 4
    table = MistakeTable()
    table.fit_shape(2, 3)
    copies = table.train(three_messages(), np.array([0, 1, 0]), order=np.arange(3))
    assert copies.tolist() == [1, 1, 1]


def test_a_margin_equal_to_MARGIN_is_added_alone_and_in_a_block(monkeypatch):
    # "At most MARGIN", in both scoring paths: a message with no word the table knows
    # has margin exactly 0, so at MARGIN 0 it is added, whether scored alone (the
    # first two) or in a block after a message the table gets right (review 18).
    monkeypatch.setattr(mistakes_module, "MARGIN", 0.0)
    P = presence(count_matrix([["a"], ["b"], ["a"], ["a"], ["c"]], Vocabulary(), grow=True))
    table = MistakeTable()
    table.fit_shape(2, P.shape[1])
    copies = table.train(P, np.array([0, 1, 0, 0, 1]), order=np.arange(5))
    assert copies.tolist() == [1, 1, 0, 0, 1]


def test_the_margin_after_an_addition_smooths_over_the_tables_tokens(monkeypatch):
    # k|V| with |V| the tokens the table holds (3 after the first two additions), as
    # the slow loop and scoring smooth; one token too many moves every margin, and a
    # message between the two margins would not be added (review 18).
    monkeypatch.setattr(mistakes_module, "MARGIN", (margin_of_a(3) + margin_of_a(4)) / 2)
    table = MistakeTable()
    table.fit_shape(2, 3)
    copies = table.train(three_messages(), np.array([0, 1, 0]), order=np.arange(3))
    assert copies.tolist() == [1, 1, 1]


def test_a_later_run_starts_from_the_tables_tokens(monkeypatch):
    # The same margin when spam {a} comes in a run of its own, after a run that filled
    # the table: each run must start smoothing over the tokens the table already holds
    # (review 18).
    monkeypatch.setattr(mistakes_module, "MARGIN", (margin_of_a(3) + margin_of_a(4)) / 2)
    P = three_messages()
    table = MistakeTable()
    table.fit_shape(2, 3)
    assert table.train(P[:2], np.array([0, 1]), order=np.arange(2)).tolist() == [1, 1]
    assert table.train(P[2:], np.array([0]), order=np.arange(1)).tolist() == [1]


def test_block_sums_equal_the_sparse_product_with_empty_rows_anywhere():
    rng = np.random.default_rng(4)
    P = presence(sp.random(600, 30, density=0.15, format="csr", random_state=4))
    P = sp.csr_matrix(P.toarray() * (rng.random(600) > 0.4)[:, None])  # empty rows
    assert (np.diff(P.indptr) == 0).sum() >= 100
    values = rng.random((30, 3))
    # Spans within one piece of 256 messages and across several.
    for start in [*range(0, 40), 250, 255, 256, 300]:
        for end in [*range(start + 1, start + 40), 511, 512, 513, 600]:
            np.testing.assert_allclose(
                block_sums(P.indices, P.indptr, values, start, end),
                P[start:end] @ values,
                rtol=1e-12,
            )


def test_training_on_real_mail_equals_the_slow_loop(sample_maildir):
    messages, labels = sample_messages(sample_maildir)
    P, rows, classes, table, copies = trained_table([tokenize(m) for m in messages], labels)
    expected_counts, expected_copies = one_at_a_time(P, rows, len(classes))
    np.testing.assert_array_equal(copies, expected_copies)
    np.testing.assert_array_equal(table.counts, expected_counts)


def test_after_training_real_mail_clears_the_margin(sample_maildir):
    messages, labels = sample_messages(sample_maildir)
    P, rows, _classes, table, copies = trained_table([tokenize(m) for m in messages], labels)
    assert 0 < (copies > 0).sum() < len(labels)
    jll = table.joint(P, np.ones(P.shape[1], dtype=bool))
    known = np.asarray(P @ (table.counts.sum(axis=0) > 0).astype(float)).ravel()
    n = np.arange(len(rows))
    margin = (jll[n, rows] - jll[n, 1 - rows]) / np.maximum(known, 1) ** LENGTH_EXPONENT
    assert (margin > MARGIN).all()


def test_held_out_scores_equal_a_table_without_those_copies():
    token_lists, labels = synthetic_corpus(50, 50, seed=5)
    P, rows, _classes, table, copies = trained_table(token_lists, labels)
    usable = np.ones(P.shape[1], dtype=bool)
    usable[::5] = False  # columns the model does not score
    fold = np.arange(0, len(labels), 3)
    held_out = table.held_out_joint(P[fold], rows[fold], copies[fold], usable)
    without = copy.deepcopy(table)
    without.add(P[fold], rows[fold], copies[fold], sign=-1)
    np.testing.assert_allclose(held_out, without.joint(P[fold], usable), rtol=1e-12)
    assert not np.allclose(held_out, table.joint(P[fold], usable))


def test_taking_back_copies_never_added_leaves_no_negative_count():
    # A message forgotten after a tokenizer change takes back words its copies never
    # had: counts stay counts, or log(count + k) of a negative count is NaN and every
    # score with it too (review 18).
    table = MistakeTable()
    table.fit_shape(2, 3)
    table.add(sp.csr_matrix([[1.0, 1.0, 0.0]]), np.array([0]), np.array([1]))
    table.add(sp.csr_matrix([[0.0, 1.0, 1.0]]), np.array([0]), np.array([1]), sign=-1)
    assert table.counts.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def sample_filter(sample_maildir: Path) -> tuple[SpamFilter, list, list, list]:
    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter()
    token_lists = spam_filter.tokenize(messages)
    digests = [message_digest(m) for m in messages]
    spam_filter.learn(token_lists, labels, digests)
    return spam_filter, token_lists, labels, digests


def test_learning_records_copies_and_the_table_scores(sample_maildir):
    spam_filter, token_lists, labels, digests = sample_filter(sample_maildir)
    assert spam_filter.mistake_copies
    assert set(spam_filter.mistake_copies) <= set(spam_filter.trained)
    # The table is its messages' presence rows, each times its copies, by class.
    X = spam_filter.vectorise(token_lists)
    rows = class_rows(spam_filter.classes, labels)
    per_row = np.array([spam_filter.mistake_copies.get(d, 0) for d in digests])
    rebuilt = MistakeTable()
    rebuilt.fit_shape(len(spam_filter.classes), spam_filter.model.n_features)
    rebuilt.add(presence(X), rows, per_row)
    np.testing.assert_array_equal(rebuilt.counts, spam_filter.mistakes.counts)
    # Scores are the mean of the model's and the table's joint log-likelihoods.
    usable = spam_filter.model.active_features()
    expected = 0.5 * spam_filter.model.joint_log_likelihood(X) + 0.5 * rebuilt.joint(
        presence(X), usable
    )
    np.testing.assert_allclose(spam_filter.joint_log_likelihood(X), expected, rtol=1e-12)


def test_forgetting_takes_back_every_copy(sample_maildir):
    spam_filter, token_lists, labels, digests = sample_filter(sample_maildir)
    with_copies = [i for i, d in enumerate(digests) if d in spam_filter.mistake_copies]
    some = with_copies[: len(with_copies) // 2]
    X = spam_filter.vectorise([token_lists[i] for i in some])
    expected = spam_filter.mistakes.counts.copy()
    taken = np.array([spam_filter.mistake_copies[digests[i]] for i in some])
    rows = class_rows(spam_filter.classes, [labels[i] for i in some])
    indicator = sp.csr_matrix((taken, (rows, np.arange(len(some)))), shape=(2, len(some)))
    expected[:, : X.shape[1]] -= (indicator @ presence(X)).toarray()
    spam_filter.forget([token_lists[i] for i in some], [digests[i] for i in some])
    np.testing.assert_array_equal(spam_filter.mistakes.counts, expected)
    assert not set(digests[i] for i in some) & set(spam_filter.mistake_copies)
    spam_filter.forget(token_lists, digests)
    assert not spam_filter.mistakes.counts.any()
    assert spam_filter.mistake_copies == {}
    assert spam_filter.mistake_weight() == 0.0


def test_moving_a_message_takes_its_copies_out_of_the_old_class(sample_maildir):
    spam_filter, token_lists, labels, digests = sample_filter(sample_maildir)
    i = next(i for i, d in enumerate(digests) if d in spam_filter.mistake_copies)
    old = spam_filter.classes.index(labels[i])
    columns = spam_filter.vectorise([token_lists[i]]).indices
    original = spam_filter.mistakes.counts.copy()
    copies = spam_filter.mistake_copies[digests[i]]
    other = "ham" if labels[i] == "spam" else "spam"
    outcome = spam_filter.learn([token_lists[i]], [other], [digests[i]])
    assert outcome["moved"] == 1
    # Now wrong for the table in its new class, it is trained there at once.
    new_copies = spam_filter.mistake_copies[digests[i]]
    assert new_copies >= 1
    expected = original.copy()
    expected[old, columns] -= copies
    expected[spam_filter.classes.index(other), columns] += new_copies
    np.testing.assert_array_equal(spam_filter.mistakes.counts, expected)
    # And forgetting it takes those back as well.
    spam_filter.forget([token_lists[i]], [digests[i]])
    expected[spam_filter.classes.index(other), columns] -= new_copies
    np.testing.assert_array_equal(spam_filter.mistakes.counts, expected)
    assert digests[i] not in spam_filter.mistake_copies


def test_the_table_survives_saving_and_a_format_3_model_loads_with_it_off(sample_maildir, tmp_path):
    spam_filter, token_lists, _, _ = sample_filter(sample_maildir)
    loaded = from_payload(to_payload(spam_filter), tmp_path / "m")
    np.testing.assert_array_equal(loaded.mistakes.counts, spam_filter.mistakes.counts)
    assert loaded.mistake_copies == spam_filter.mistake_copies
    assert loaded.mistakes.weight == spam_filter.mistakes.weight
    np.testing.assert_array_equal(
        loaded.score_tokens(token_lists)[1], spam_filter.score_tokens(token_lists)[1]
    )
    old = to_payload(spam_filter)
    old["format_version"] = 3
    del old["mistakes"]
    plain = from_payload(old, tmp_path / "m")
    assert plain.mistakes.weight == 0.0 and plain.mistake_weight() == 0.0
    without = copy.deepcopy(spam_filter)
    without.mistakes.weight = 0.0
    np.testing.assert_array_equal(
        plain.score_tokens(token_lists)[1], without.score_tokens(token_lists)[1]
    )
    # And a model without the table does not start one: its weight stays 0.
    plain.learn(token_lists[:5], ["ham"] * 5, [f"new message {i}" for i in range(5)])
    assert not plain.mistakes.counts.any()


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: m.update(copies=m["copies"][:-1]),
        lambda m: m.update(copies=-m["copies"]),
        lambda m: m.update(weight=2.0),
        lambda m: m.update(columns=m["columns"][::-1].copy()),
        lambda m: m.update(counts=m["counts"][:1]),
        lambda m: m.update(digests={"strings": ["not trained"] * len(m["copies"])}),
        lambda m: m.update(digests={"strings": ["same"] * len(m["copies"])}),
        lambda m: m.update(counts=m["counts"] * np.nan),
        lambda m: m.update(columns=m["columns"] + 0.5),
    ],
)
def test_a_damaged_table_is_refused(sample_maildir, tmp_path, damage):
    spam_filter, _, _, _ = sample_filter(sample_maildir)
    payload = to_payload(spam_filter)
    damage(payload["mistakes"])
    with pytest.raises(ModelFileError, match="damaged"):
        from_payload(payload, tmp_path / "m")


def test_a_table_state_repeating_a_column_is_refused():
    # Columns are saved strictly increasing; loaded, a repeated one would keep only
    # its last counts (numpy's assignment), so a damaged file would load as another
    # table rather than be refused (review 18).
    state = {"weight": 0.5, "columns": np.array([0, 0]), "counts": np.array([[1, 2], [0, 0]])}
    with pytest.raises(ValueError, match="does not match"):
        MistakeTable.from_state(state, 2, 3)


def test_calibration_holds_the_table_out(sample_maildir):
    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter()
    token_lists = spam_filter.tokenize(messages)
    copies = spam_filter.train_tokens(token_lists, labels)
    assert copies.any()
    assert spam_filter.fit_calibration(token_lists, labels, mistake_copies=copies)
    held_out = spam_filter.calibration
    # Scored as trained, the table's own messages clear its margin: the fit would
    # believe the filter far surer than it is on new mail.
    assert spam_filter.fit_calibration(token_lists, labels)
    in_sample = spam_filter.calibration
    assert in_sample.slope < 0.5 * held_out.slope
    assert 0 < held_out.ham_cutoff < held_out.spam_cutoff < 1


@pytest.mark.parametrize(("min_count", "max_features"), [(1, None), (2, None), (3, None), (1, 60)])
def test_held_out_table_scores_are_those_of_a_filter_without_the_fold(
    sample_maildir, min_count, max_features
):
    # With --min-count 2 a token can be active only by the held-out message's own
    # occurrence; a filter trained without it would not score the token, in its
    # counts or in its table.
    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter()
    spam_filter.model.min_count = min_count
    spam_filter.model.max_features = max_features
    token_lists = spam_filter.tokenize(messages)
    copies = spam_filter.train_tokens(token_lists, labels)
    X = spam_filter.vectorise(token_lists)
    dealt = spam_filter.calibration_folds(X, labels)
    held_out = spam_filter.mistakes_held_out(X, labels, dealt, copies)
    for fold in dealt:
        fold_labels = [labels[i] for i in fold]
        without = copy.deepcopy(spam_filter)
        without.model.add_counts(X[fold], fold_labels, sign=-1)
        without.mistakes.add(
            presence(X[fold]), class_rows(without.classes, fold_labels), copies[fold], sign=-1
        )
        expected = without.mistakes.joint(presence(X[fold]), without.model.active_features())
        assert np.allclose(held_out[fold], expected, rtol=0, atol=1e-9)


def test_the_table_starts_only_with_a_run_that_brings_every_class():
    token_lists, labels = synthetic_corpus(30, 30, seed=8)
    spam = [i for i, label in enumerate(labels) if label == "spam"]
    ham = [i for i, label in enumerate(labels) if label == "ham"]

    def run(spam_filter, rows, tag):
        spam_filter.learn(
            [token_lists[i] for i in rows], [labels[i] for i in rows], [f"{tag}{i}" for i in rows]
        )

    # Spam, then ham, each alone: the ham run against an empty spam row would take
    # nearly every ham message many times over, so neither run starts the table.
    one_at_a_time_classes = SpamFilter()
    run(one_at_a_time_classes, spam[:15], "a")
    run(one_at_a_time_classes, ham[:15], "a")
    assert not one_at_a_time_classes.mistakes.counts.any()
    assert one_at_a_time_classes.mistake_weight() == 0.0
    # A run with both starts it; from then on a run of one class trains it too.
    run(one_at_a_time_classes, spam[15:20] + ham[15:20], "b")
    assert one_at_a_time_classes.mistakes.counts.any(axis=1).all()
    assert one_at_a_time_classes.mistake_weight() == 0.5
    before = one_at_a_time_classes.mistakes.counts.copy()
    run(one_at_a_time_classes, ham[20:], "c")
    assert one_at_a_time_classes.mistakes.counts.sum() > before.sum()
    # A third class joins by a run of its own mail; the table is off until it has some.
    news = SpamFilter()
    run(news, spam + ham, "d")
    news.learn([["news", "letter", "weekly"]] * 3, ["news"] * 3, ["n1", "n2", "n3"])
    assert news.mistakes.counts.shape[0] == 3 and news.mistakes.counts[2].any()
    assert news.mistake_weight() == 0.5


def test_forgetting_every_ham_copy_turns_the_table_off():
    # README: a class with no mail in the table would outvote the others on every rare
    # token, so the table is used only while every class has a row with some (review 18).
    token_lists, labels = synthetic_corpus(30, 30, seed=8)
    digests = [f"d{i}" for i in range(len(labels))]
    spam_filter = SpamFilter()
    spam_filter.learn(token_lists, labels, digests)
    assert spam_filter.mistake_weight() == 0.5
    ham = [
        i for i, d in enumerate(digests) if d in spam_filter.mistake_copies and labels[i] == "ham"
    ]
    spam_filter.forget([token_lists[i] for i in ham], [digests[i] for i in ham])
    ham_row = spam_filter.classes.index("ham")
    assert not spam_filter.mistakes.counts[ham_row].any()
    assert spam_filter.mistakes.counts.any()
    assert spam_filter.mistake_weight() == 0.0


def test_the_table_is_used_with_the_boolean_model_only(sample_maildir):
    spam_filter, token_lists, _, _ = sample_filter(sample_maildir)
    X = spam_filter.vectorise(token_lists)
    for event_model in ("multinomial", "bernoulli"):
        spam_filter.model.event_model = event_model
        assert spam_filter.mistake_weight() == 0.0
        np.testing.assert_array_equal(
            spam_filter.joint_log_likelihood(X), spam_filter.model.joint_log_likelihood(X)
        )


def real_mail(real_corpus, per_folder: int = 150):
    dirs = real_corpus("spamassassin")
    messages, labels = [], []
    for label in ("spam", "ham"):
        for folder in dirs[label]:
            for item in list(iter_messages(folder, "dir"))[:per_folder]:
                messages.append(item.data)
                labels.append(label)
    return messages, labels


@pytest.mark.corpus
def test_on_real_mail_the_table_takes_the_hard_third(real_corpus):
    messages, labels = real_mail(real_corpus)
    token_lists = [tokenize(m) for m in messages]
    P, rows, classes, table, copies = trained_table(token_lists, labels)
    expected_counts, expected_copies = one_at_a_time(P, rows, len(classes))
    np.testing.assert_array_equal(copies, expected_copies)
    np.testing.assert_array_equal(table.counts, expected_counts)
    # About a third of the SpamAssassin training mail when the margin was chosen.
    assert 0.1 < (copies > 0).mean() < 0.7


def table_by_token(spam_filter: SpamFilter) -> dict[tuple[str, str], float]:
    counts = spam_filter.mistakes.counts
    return {
        (spam_filter.classes[row], spam_filter.vocabulary.tokens[column]): float(
            counts[row, column]
        )
        for row, column in zip(*np.nonzero(counts), strict=True)
    }


@pytest.mark.corpus
def test_the_filter_walks_mail_in_an_order_drawn_from_its_content(real_corpus):
    messages, labels = real_mail(real_corpus, per_folder=100)
    token_lists = [tokenize(m) for m in messages]
    digests = [message_digest(m) for m in messages]
    reading_orders = [
        np.arange(len(messages)),
        np.arange(len(messages))[::-1],
        np.random.default_rng(7).permutation(len(messages)),
    ]
    tables, scores, calibrations = [], [], []
    for order in reading_orders:
        spam_filter = SpamFilter()
        spam_filter.learn(
            [token_lists[i] for i in order],
            [labels[i] for i in order],
            [digests[i] for i in order],
        )
        tables.append(table_by_token(spam_filter))
        calibrations.append(spam_filter.calibration)
        jll = spam_filter.joint_log_likelihood(spam_filter.vectorise(token_lists))
        # Classes are numbered as first met; put spam first.
        scores.append(jll[:, [spam_filter.classes.index(c) for c in ("spam", "ham")]])
        assert spam_filter.mistake_copies
    # The same mail read in another order: the same table, token by token, and scores.
    assert tables[0] == tables[1] == tables[2]
    assert calibrations[0].fitted_on == len(messages)
    assert_same_calibration(calibrations[0], calibrations[1])
    assert_same_calibration(calibrations[0], calibrations[2])
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-9)
    np.testing.assert_allclose(scores[0], scores[2], rtol=1e-9)
    # And the walk is the slow loop's in that order.
    P, rows, classes = counted(token_lists, labels)
    table = MistakeTable()
    table.fit_shape(len(classes), P.shape[1])
    tokens = list(dict.fromkeys(t for tokens in token_lists for t in tokens))
    copies = table.train(P, rows, tokens=tokens)
    expected_counts, expected_copies = one_at_a_time(
        P, rows, len(classes), order=content_order(P, tokens)
    )
    np.testing.assert_array_equal(copies, expected_copies)
    np.testing.assert_array_equal(table.counts, expected_counts)


def test_the_content_order_ignores_row_and_column_order_and_message_length():
    X = sp.random(3000, 4000, density=0.02, format="csr", random_state=1)
    tokens = [f"token{i}" for i in range(X.shape[1])]
    order = content_order(X, tokens)
    rng = np.random.default_rng(0)
    row_order, column_order = rng.permutation(X.shape[0]), rng.permutation(X.shape[1])
    shuffled = sp.csr_matrix(X[row_order][:, column_order])
    assert (row_order[content_order(shuffled, [tokens[c] for c in column_order])] == order).all()
    assert not (content_order(X, tokens, seed=1) == order).all()
    place = np.argsort(order)
    assert abs(np.corrcoef(place, np.diff(X.indptr))[0, 1]) < 0.1


def test_with_digests_the_walk_goes_by_content_and_digests_only_break_ties():
    # train has digests and evaluate and tune do not: both must walk the mail by its
    # content, or the same mail would train another table; digests only order
    # messages with the same tokens (review 18).
    X = count_matrix([["a"], ["b"], ["c"], ["a"]], Vocabulary(), grow=True)
    keys = content_keys(X, ["a", "b", "c"]).tolist()
    digests = ["d3", "d2", "d1", "d0"]
    order = content_order(X, ["a", "b", "c"], digests=digests).tolist()
    assert order == sorted(range(4), key=lambda i: (keys[i], digests[i]))
    assert order != [3, 2, 1, 0]  # by digest alone
    # The two "a" messages tie: row 3 (d0) before row 0 (d3).
    assert order.index(3) + 1 == order.index(0)


def test_scoring_reads_a_table_narrower_than_the_vocabulary_without_growing_it():
    token_lists, labels = synthetic_corpus(40, 50, seed=3)
    P, rows, classes, table, _copies = trained_table(token_lists, labels)
    grown = copy.deepcopy(table)
    # The vocabulary then grows (a run that did not train the table): ten new columns.
    wider = sp.hstack([P, sp.csr_matrix(np.ones((P.shape[0], 10)))], format="csr")
    grown.fit_shape(len(classes), wider.shape[1])
    usable = np.ones(wider.shape[1], dtype=bool)
    width_before = table.counts.shape[1]
    np.testing.assert_array_equal(table.active(usable), grown.active(usable))
    np.testing.assert_array_equal(table.log_prob(usable), grown.log_prob(usable))
    np.testing.assert_array_equal(table.joint(wider, usable), grown.joint(wider, usable))
    some = np.arange(0, P.shape[0], 3)
    np.testing.assert_allclose(
        table.held_out_joint(wider[some], rows[some], np.ones(len(some)), usable),
        grown.held_out_joint(wider[some], rows[some], np.ones(len(some)), usable),
    )
    assert table.counts.shape[1] == width_before
    # A third class with mail that the table has no row for: not in use, and saved
    # with an empty row.  A third class without mail asks for no row.
    assert table.has_every_class(np.array([True, True]))
    assert not table.has_every_class(np.array([True, True, True]))
    assert table.has_every_class(np.array([True, True, False]))
    assert not table.has_every_class(np.array([True, False, False]))
    state = table.to_state(3, wider.shape[1])
    assert state["counts"].shape == (3, len(state["columns"])) and not state["counts"][2].any()
    reloaded = MistakeTable.from_state(state, 3, wider.shape[1])
    np.testing.assert_array_equal(reloaded.counts[:2, :width_before], table.counts)


def test_a_message_scored_alone_gets_the_margin_a_block_of_it_gives():
    from spamnb.mistakes import _block_margins, _single_margin, margin_divisors

    # The walk scores a block of one message by a path of its own; every margin must
    # come out as the block path's, to the bit, or the table would depend on how the
    # walk cut its blocks.
    rng = np.random.default_rng(3)
    for n_classes in (2, 3, 4):
        width = 300
        values = np.zeros((width, n_classes + 1))
        live = rng.random(width) < 0.7
        values[live, :n_classes] = np.log(rng.integers(0, 50, (live.sum(), n_classes)) + 0.01)
        values[live, n_classes] = 1.0
        sizes = rng.integers(0, 40, 400)
        sizes[:3] = 0
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        indices = np.concatenate([rng.choice(width, k, replace=False) for k in sizes])
        # Some messages of inactive columns only: no known token, margin 0.
        indices[indptr[3] : indptr[6]] = np.flatnonzero(~live)[: indptr[6] - indptr[3]]
        labels = rng.integers(0, n_classes, len(sizes))
        per_token = rng.random(n_classes) * 5
        divisors = margin_divisors(int(sizes.max()))
        for i in range(len(sizes)):
            block = _block_margins(indices, indptr, values, per_token, labels, divisors, i, i + 1)
            alone = _single_margin(
                indices,
                int(indptr[i]),
                int(indptr[i + 1]),
                values,
                per_token,
                int(labels[i]),
                divisors,
            )
            assert np.float64(alone).tobytes() == block[0].tobytes(), i


def naive_content_keys(X: sp.csr_matrix, tokens, seed: int = 0) -> np.ndarray:
    keys = []
    for row in range(X.shape[0]):
        columns = X.indices[X.indptr[row] : X.indptr[row + 1]]
        keys.append(
            sum(zlib.crc32(tokens[c].encode("utf-8", "surrogatepass"), seed) for c in columns)
        )
    return np.array([key % (1 << 32) for key in keys], dtype=np.uint64)


def test_the_content_order_is_the_naive_one_across_its_chunks_and_empty_rows():
    # Over 4,096 rows and 65,536 columns, so that both loops take several steps, with
    # empty rows on either side of the row chunks' edges.
    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 120, size=9000)
    sizes[[0, 4095, 4096, 4097, 8191, 8192, 8999]] = 0
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    columns = np.concatenate([rng.choice(140_000, size, replace=False) for size in sizes])
    X = sp.csr_matrix((np.ones(len(columns)), columns, indptr), shape=(9000, 140_000))
    tokens = [f"w{i}\udcff" if i % 1000 == 0 else f"w{i}" for i in range(X.shape[1])]
    for seed in (0, 5):
        keys = naive_content_keys(X, tokens, seed)
        np.testing.assert_array_equal(
            content_order(X, tokens, seed), np.argsort(keys, kind="stable")
        )
    # A vocabulary built by counting keeps its tokens' CRCs from seed 0, which give the
    # same order; one that stopped keeping them, or holds tokens added one by one, has
    # none to give.
    vocabulary = Vocabulary()
    vocabulary.numbered(tokens[:70_000])
    vocabulary.numbered(tokens[60_000:])
    crcs = vocabulary.crcs()
    assert vocabulary.tokens == tokens and crcs is not None and crcs.dtype == np.uint32
    np.testing.assert_array_equal(
        content_order(X, tokens, 0, crcs=crcs),
        np.argsort(naive_content_keys(X, tokens, 0), kind="stable"),
    )
    # Given for another seed, they are not used.
    np.testing.assert_array_equal(
        content_order(X, tokens, 5, crcs=crcs), content_order(X, tokens, 5)
    )
    vocabulary.add("another")
    assert vocabulary.crcs() is None
    assert Vocabulary.from_tokens(tokens).crcs() is None
    vocabulary = Vocabulary()
    vocabulary.numbered(tokens[:10])
    vocabulary.stop_keeping_crcs()
    assert vocabulary.crcs() is None
    # Messages with the same tokens are ordered by their digests, not by where they stand.
    twins = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=float))
    order = content_order(twins, ["a", "b", "c"], digests=["z", "a", "m"])
    assert list(order[np.isin(order, [0, 1])]) == [1, 0]
    # A message with no tokens is never added: no copy of it changes its score.
    table = MistakeTable()
    table.fit_shape(2, 3)
    with_empty = sp.vstack([twins, sp.csr_matrix((1, 3))], format="csr")
    copies = table.train(with_empty, np.array([0, 0, 1, 1]), tokens=["a", "b", "c"])
    assert copies[3] == 0 and copies[0] + copies[1] > 0 and copies[2] > 0


def test_scoring_the_filter_never_grows_its_table(sample_maildir):
    from spamnb.table import table_arrays

    spam_filter, token_lists, labels, _digests = sample_filter(sample_maildir)
    # New tokens learnt in a run that does not train the table (weight 0 for it).
    spam_filter.mistakes.weight = 0.0
    spam_filter.learn([["brand-new-token", "another-new-one"]], ["ham"], ["new-digest"])
    spam_filter.mistakes.weight = 0.5
    narrow = spam_filter.mistakes.counts.shape
    assert narrow[1] < spam_filter.model.n_features
    grown = copy.deepcopy(spam_filter)
    grown.mistakes.fit_shape(len(grown.classes), grown.model.n_features)
    X = spam_filter.vectorise([*token_lists, ["brand-new-token"]])
    np.testing.assert_array_equal(
        spam_filter.joint_log_likelihood(X), grown.joint_log_likelihood(X)
    )
    np.testing.assert_array_equal(
        spam_filter.token_weights("spam", "ham"), grown.token_weights("spam", "ham")
    )
    rows = slice(0, len(labels))
    assert spam_filter.fit_calibration_matrix(X[rows], labels)
    assert grown.fit_calibration_matrix(X[rows], labels)
    assert spam_filter.calibration == grown.calibration

    def body(spam_filter):
        return b"".join(array.tobytes() for array in table_arrays(spam_filter)[1])

    assert body(spam_filter) == body(grown)
    to_payload(spam_filter)
    assert spam_filter.mistakes.counts.shape == narrow


def test_the_calibration_takes_its_two_held_out_parts_worked_out_apart(sample_maildir):
    spam_filter, token_lists, labels, digests = sample_filter(sample_maildir)
    X = spam_filter.vectorise(token_lists)
    copies = np.array([spam_filter.mistake_copies.get(d, 0) for d in digests])
    assert copies.any()
    apart = copy.deepcopy(spam_filter)
    assert spam_filter.fit_calibration_matrix(X, labels, mistake_copies=copies, digests=digests)
    dealt = apart.calibration_folds(X, labels, digests=digests)
    assert dealt is not None
    held = apart.model_held_out(X, labels, dealt)
    table = apart.mistakes_held_out(X, labels, dealt, copies)
    assert table is not None
    # The table's share without the copies taken back is another calibration.
    as_trained = apart.mistakes_held_out(X, labels, dealt)
    assert not np.array_equal(table, as_trained)
    assert apart.fit_calibration_matrix(X, labels, model_held_out=held, mistakes_held_out=table)
    assert apart.calibration == spam_filter.calibration
    with pytest.raises(ValueError, match="other messages"):
        apart.fit_calibration_matrix(X, labels, model_held_out=held, mistakes_held_out=table[1:])


def test_a_run_larger_than_the_sample_trains_the_same_table_in_any_order(sample_maildir):
    from spamnb.training import learn_batches

    messages, labels = sample_messages(sample_maildir)
    filters = []
    for order in (np.arange(len(messages)), np.random.default_rng(3).permutation(len(messages))):
        batch = ([messages[i] for i in order], [labels[i] for i in order])
        spam_filter = SpamFilter()
        # A sample of 25 of the 60 messages: which 25 must not depend on the order.
        learn_batches(spam_filter, [batch], sample_size=25)
        filters.append(spam_filter)
    first, second = filters
    assert first.mistake_copies and first.mistake_copies == second.mistake_copies
    assert table_by_token(first) == table_by_token(second)
    # And the same calibration: its folds are dealt by digest, not by position.
    assert first.calibration.fitted_on == 25
    assert_same_calibration(first.calibration, second.calibration)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_class_left_out_of_the_walk_changes_nothing_but_its_own_outvoting(seed):
    # A class the model has no mail of (moving all of a third class's mail leaves one)
    # has an empty row, which would outvote both others on every token it has not
    # seen; left out, the walk takes what a table of the two others takes, copy for
    # copy (reviews 28 to 30: waiting for mail of that class kept the table from ever
    # training again).
    token_lists, labels = synthetic_corpus(40, 50, seed=seed)
    P, rows, classes = counted(token_lists, labels)
    two = MistakeTable()
    two.fit_shape(len(classes), P.shape[1])
    expected = two.train(P, rows, seed=seed)
    three = MistakeTable()
    three.fit_shape(len(classes) + 1, P.shape[1])
    copies = three.train(P, rows, seed=seed, ignored=np.array([False, False, True]))
    np.testing.assert_array_equal(copies, expected)
    np.testing.assert_array_equal(three.counts[:2], two.counts)
    assert not three.counts[2].any()
    # Not left out, the empty row takes its toll.
    unaware = MistakeTable()
    unaware.fit_shape(len(classes) + 1, P.shape[1])
    assert unaware.train(P, rows, seed=seed).sum() > expected.sum()


def test_a_run_after_all_of_a_class_was_forgotten_adds_nothing_against_it():
    # Review 29: a run of spam after all the ham was forgotten walked spam against the
    # empty ham row, and took 417 copies where 132 had been taken before.
    token_lists, labels = synthetic_corpus(40, 50, seed=3)
    digests = [f"m{i}" for i in range(len(labels))]
    spam_filter = SpamFilter()
    first = len(labels) // 2
    spam_filter.learn(token_lists[:first], labels[:first], digests[:first])
    spam_filter.train_mistakes(
        spam_filter.vectorise(token_lists[:first]), labels[:first], digests[:first]
    )
    ham = [i for i in range(first) if labels[i] == "ham"]
    spam_filter.forget([token_lists[i] for i in ham], [digests[i] for i in ham])
    before = spam_filter.mistakes.counts.copy()
    spam_row, ham_row = spam_filter.classes.index("spam"), spam_filter.classes.index("ham")
    assert before[spam_row].any() and not before[ham_row].any()  # its copies went with it
    spam = [i for i in range(first, len(labels)) if labels[i] == "spam"]
    later = [token_lists[i] for i in spam]
    spam_filter.learn(later, ["spam"] * len(spam), [digests[i] for i in spam])
    assert spam_filter.trains_mistakes(["spam"])
    copies = spam_filter.train_mistakes(spam_filter.vectorise(later), ["spam"] * len(spam))
    assert not copies.any()
    np.testing.assert_array_equal(spam_filter.mistakes.counts[:, : before.shape[1]], before)
