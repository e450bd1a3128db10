"""The Naive Bayes maths, checked against posteriors worked out by hand."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import scipy.sparse as sp

from spamnb.counts import Vocabulary, count_matrix, cut_flags, used_columns
from spamnb.model import EVENT_MODELS, NaiveBayes
from spamnb.tokens import TokenizerSettings

# A toy training set small enough to compute every probability on paper.
TRAIN = [
    ("spam", "buy cheap pills"),
    ("spam", "cheap cheap offer"),
    ("ham", "meeting notes today"),
    ("ham", "cheap lunch today today"),
]


def toy(**kwargs) -> tuple[NaiveBayes, Vocabulary]:
    vocabulary = Vocabulary()
    X = count_matrix([text.split() for _, text in TRAIN], vocabulary, grow=True)
    model = NaiveBayes(**kwargs).fit(X, [label for label, _ in TRAIN])
    return model, vocabulary


def vector(vocabulary: Vocabulary, text: str) -> sp.csr_matrix:
    return count_matrix([text.split()], vocabulary, grow=False)


def spam_probability(model: NaiveBayes, vocabulary: Vocabulary, text: str) -> float:
    return float(model.predict_proba(vector(vocabulary, text))[0, model.classes.index("spam")])


def test_multinomial_posterior_matches_hand_computation():
    model, vocabulary = toy(alpha=1.0)
    # |V| = 8 (buy cheap pills offer meeting notes today lunch); 6 spam tokens, 7 ham tokens.
    # P(cheap|spam) = (3+1)/(6+8), P(today|spam) = (0+1)/(6+8)
    # P(cheap|ham)  = (1+1)/(7+8), P(today|ham)  = (3+1)/(7+8); priors 1/2 each.
    spam = 0.5 * (4 / 14) * (1 / 14)
    ham = 0.5 * (2 / 15) * (4 / 15)
    assert spam_probability(model, vocabulary, "cheap today") == pytest.approx(spam / (spam + ham))


def test_bernoulli_posterior_includes_absent_words():
    model, vocabulary = toy(alpha=1.0, event_model="bernoulli")
    # P(w present|c) = (messages of c with w + 1) / (messages of c + 2); 2 messages per class.
    spam_df = {"buy": 1, "cheap": 2, "pills": 1, "offer": 1}
    ham_df = {"meeting": 1, "notes": 1, "today": 2, "cheap": 1, "lunch": 1}
    present = {"cheap", "today"}

    def likelihood(df: dict[str, int]) -> float:
        result = 1.0
        for word in vocabulary.tokens:
            p = (df.get(word, 0) + 1) / 4
            result *= p if word in present else 1 - p
        return result

    spam, ham = 0.5 * likelihood(spam_df), 0.5 * likelihood(ham_df)
    expected = spam / (spam + ham)
    assert spam_probability(model, vocabulary, "cheap today") == pytest.approx(expected)
    # Worked out by hand as well: the absent-word terms make it 1/3, not the 1/2 that
    # the present words alone would give.
    assert expected == pytest.approx(1 / 3)


def test_bernoulli_counts_presence_not_occurrences():
    model, vocabulary = toy(event_model="bernoulli")
    once = spam_probability(model, vocabulary, "cheap today")
    many = spam_probability(model, vocabulary, "cheap cheap cheap cheap today")
    assert once == pytest.approx(many)


def test_zero_count_problem_and_its_smoothing_cure():
    # Unsmoothed (k=0), one word never seen in spam ("today") vetoes spam outright,
    # however spammy the rest of the message is.
    mle, vocabulary = toy(alpha=0.0)
    text = "cheap cheap cheap today"
    assert spam_probability(mle, vocabulary, text) == 0.0
    # Smoothed: spam 0.5*(4/14)^3*(1/14) against ham 0.5*(2/15)^3*(4/15).
    smoothed, _ = toy(alpha=1.0)
    spam, ham = (4 / 14) ** 3 * (1 / 14), (2 / 15) ** 3 * (4 / 15)
    assert spam_probability(smoothed, vocabulary, text) == pytest.approx(spam / (spam + ham))
    assert spam / (spam + ham) > 0.7


def test_alpha_zero_is_maximum_likelihood():
    model, _vocabulary = toy(alpha=0.0)
    expected = model.token_counts / model.token_counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        assert np.allclose(np.exp(model.feature_log_prob()), expected)
    assert np.allclose(np.exp(model.class_log_prior()), [0.5, 0.5])


def test_large_alpha_tends_to_uniform():
    model, vocabulary = toy(alpha=1e9)
    assert np.allclose(np.exp(model.feature_log_prob()), 1 / len(vocabulary))
    # With every word equally likely in both classes, only the prior is left.
    assert spam_probability(model, vocabulary, "cheap pills buy") == pytest.approx(0.5, abs=1e-6)


def test_numbering_adds_new_tokens_in_order_and_keeps_index_and_tokens_in_step():
    from spamnb.counts import LocalCounts, to_vocabulary

    vocabulary = Vocabulary.from_tokens(["a", "b"])
    assert vocabulary.numbered(["b", "c", "a", "c", "d"]).tolist() == [1, 2, 0, 2, 3]
    assert vocabulary.tokens == ["a", "b", "c", "d"]
    assert vocabulary.index == {"a": 0, "b": 1, "c": 2, "d": 3}
    # An error partway leaves what was numbered before it in both.
    with pytest.raises(TypeError):
        vocabulary.numbered(["e", ["not", "a", "token"]])
    assert vocabulary.tokens == ["a", "b", "c", "d", "e"]
    assert vocabulary.add("f") == 5 and vocabulary.index.default_factory is None
    # A batch's tokens are distinct; a repeated one would break its matrix.
    repeated = LocalCounts(["n", "n"], np.ones(2), np.array([0, 1]), np.array([0, 2]))
    with pytest.raises(ValueError, match="distinct"):
        to_vocabulary(repeated, Vocabulary(), grow=True)


def test_prior_follows_class_counts():
    vocabulary = Vocabulary()
    X = count_matrix([["a"], ["a"], ["a"], ["b"]], vocabulary, grow=True)
    model = NaiveBayes(alpha=1.0).fit(X, ["spam", "spam", "spam", "ham"])
    assert np.exp(model.class_log_prior()) == pytest.approx([0.75, 0.25])
    # A message with no known word gets the prior back.
    proba = model.predict_proba(vector(vocabulary, "unknown words"))[0]
    assert list(proba) == pytest.approx([0.75, 0.25])


def test_the_information_gain_cut_of_three_classes_does_not_depend_on_their_order():
    # Each class has one token in one of its five messages: the three gains are equal,
    # so the cut goes by CRC-32.  Summed class row by class row, they differed in the
    # last bit with the order the classes were met, and that noise chose (review 11).
    messages = {label: [f"t_{label} common"] + ["common"] * 4 for label in ("spam", "ham", "x")}

    def kept(order: tuple[str, ...]) -> set[str]:
        texts = [text for label in order for text in messages[label]]
        labels = [label for label in order for _ in messages[label]]
        vocabulary = Vocabulary()
        X = count_matrix([text.split() for text in texts], vocabulary, grow=True)
        model = NaiveBayes(event_model="boolean", max_features=1, selection="ig")
        model.column_tokens = vocabulary.tokens
        model.add_counts(X, labels)
        gain = model.information_gain()
        ones = [gain[vocabulary.index[f"t_{label}"]] for label in order]
        assert ones[0] == ones[1] == ones[2]
        return {vocabulary.tokens[i] for i in np.flatnonzero(model.active_features())}

    orders = [("spam", "ham", "x"), ("ham", "x", "spam"), ("x", "spam", "ham")]
    assert len({frozenset(kept(order)) for order in orders}) == 1


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_long_messages_do_not_underflow(event_model):
    model, vocabulary = toy(event_model=event_model)
    text = " ".join(["cheap pills offer buy"] * 5000)
    # The product of 20,000 probabilities below 1/10 is far below the smallest double.
    assert math.prod([4 / 14] * 20000) == 0.0
    proba = model.predict_proba(vector(vocabulary, text))
    assert np.isfinite(proba).all()
    assert proba.sum() == pytest.approx(1.0)
    log_odds = model.log_odds(vector(vocabulary, text), "spam")
    assert np.isfinite(log_odds).all()
    # Multinomial evidence grows with every occurrence; Bernoulli counts presence once.
    assert log_odds[0] > (100 if event_model == "multinomial" else 1)


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_training_in_pieces_equals_training_at_once(event_model):
    rng = np.random.default_rng(1)
    documents = [[f"w{i}" for i in rng.integers(0, 40, size=12)] for _ in range(30)]
    labels = [["spam", "ham", "other"][i % 3] for i in range(30)]
    whole_vocabulary = Vocabulary()
    whole = NaiveBayes(event_model=event_model).fit(
        count_matrix(documents, whole_vocabulary, grow=True), labels
    )
    pieces_vocabulary = Vocabulary()
    pieces = NaiveBayes(event_model=event_model)
    for start in range(0, 30, 7):
        chunk = documents[start : start + 7]
        pieces.add_counts(
            count_matrix(chunk, pieces_vocabulary, grow=True), labels[start : start + 7]
        )
    assert pieces_vocabulary.tokens == whole_vocabulary.tokens
    assert pieces.classes == whole.classes
    assert np.array_equal(pieces.token_counts, whole.token_counts)
    assert np.array_equal(pieces.doc_counts, whole.doc_counts)
    X = count_matrix(documents, whole_vocabulary, grow=False)
    assert np.allclose(pieces.predict_proba(X), whole.predict_proba(X))


def test_removing_counts_undoes_adding():
    model, vocabulary = toy()
    before = model.token_counts.copy(), model.class_counts.copy()
    extra = count_matrix([["cheap", "offer"]], vocabulary, grow=False)
    model.add_counts(extra, ["spam"])
    model.add_counts(extra, ["spam"], sign=-1)
    assert np.array_equal(model.token_counts, before[0])
    assert np.array_equal(model.class_counts, before[1])


def changed_when_taken_back(learnt, labels, given, given_labels, **kwargs) -> list[bool]:
    vocabulary = Vocabulary()
    model = NaiveBayes().fit(count_matrix(learnt, vocabulary, grow=True), labels)
    X = count_matrix(given, vocabulary, grow=True)  # a move counts with the vocabulary grown
    return model.add_counts(X, given_labels, sign=-1, **kwargs).tolist()


@pytest.mark.parametrize("order", [[0, 1, 2], [1, 2, 0], [2, 0, 1]])
def test_only_the_copies_that_changed_are_found_changed_whatever_their_order(order):
    learnt = [["mailer", "cheap"], ["mailer", "offer"], ["mailer", "deal"], ["meeting"]]
    labels = ["spam", "spam", "spam", "ham"]

    def found(given, **kwargs):
        flags = changed_when_taken_back(
            learnt, labels, [given[i] for i in order], ["spam"] * 3, **kwargs
        )
        return sorted(order[n] for n, flag in enumerate(flags) if flag)

    # Unchanged copies, however many share a token, are not.
    assert found([learnt[0], learnt[1], learnt[2]]) == []
    # A copy that takes back more of a shared token than it put in is the one found,
    # not the unchanged copies taken back beside it (the batch overdraws "mailer").
    assert found([["mailer"] * 4 + ["cheap"], learnt[1], learnt[2]]) == [0]
    assert found([["mailer"] * 2 + ["cheap"], learnt[1], learnt[2]]) == [0]
    # One with a token its class never held (forwarded: a field more) is found by it,
    # and the shortfall of the shared token is its too.
    assert found([["mailer", "mailer", "cheap", "forwarded"], learnt[1], learnt[2]]) == [0]
    # Known changed by the caller (tokens the vocabulary lacks), it is not charged again.
    known = np.zeros(3, dtype=bool)
    known[order.index(0)] = True
    assert found([["mailer", "mailer", "cheap"], learnt[1], learnt[2]], changed=known) == [0]


def test_a_copy_holding_a_word_its_class_never_had_spares_the_unchanged_copy_beside_it():
    # A word the vocabulary knows (from ham) but spam never held marks the forwarded
    # copy as changed, and the shortfall of "mailer" is then its: blaming the unchanged
    # copy too would overstate forget's count of changed messages (review 18).
    learnt = [["mailer", "mailer"], ["meeting"]]
    given = [["mailer", "meeting"], ["mailer", "mailer"]]
    flags = changed_when_taken_back(learnt, ["spam", "ham"], given, ["spam", "spam"])
    assert flags == [True, False]


def test_equal_takers_of_a_short_token_are_counted_as_few_as_the_shortfall():
    # Two messages learnt with one "mailer" each, then one of them forgotten by a
    # changed copy elsewhere: the class holds one, and two unchanged-looking copies
    # take back one each.  One of them must have changed; which cannot be told.
    learnt = [["mailer", "cheap"], ["mailer", "offer"], ["meeting"]]
    vocabulary = Vocabulary()
    model = NaiveBayes().fit(count_matrix(learnt, vocabulary, grow=True), ["spam", "spam", "ham"])
    model.add_counts(count_matrix([["mailer"]], vocabulary, grow=False), ["spam"], sign=-1)
    over = model.add_counts(count_matrix(learnt[:2], vocabulary, grow=False), ["spam"] * 2, -1)
    assert over.tolist() == [True, False]


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_taking_back_tokens_never_added_keeps_the_counts_consistent(event_model: str) -> None:
    # A message forgotten after a tokenizer change can take back tokens it never put
    # in: here the spam row loses its only message but not all of its tokens.
    vocabulary = Vocabulary()
    X = count_matrix([["cheap", "offer"], ["offer", "meeting"]], vocabulary, grow=True)
    model = NaiveBayes(event_model=event_model).fit(X, ["spam", "ham"])
    model.add_counts(X[1], ["spam"], sign=-1)
    assert dict(zip(model.classes, model.class_counts.tolist(), strict=True)) == {
        "spam": 0,
        "ham": 1,
    }
    assert (model.doc_counts <= model.class_counts[:, None]).all()
    assert (model.doc_counts <= model.token_counts).all()
    assert (model.doc_counts >= 0).all()
    log_likelihood = model.joint_log_likelihood(count_matrix([["offer"]], vocabulary, grow=False))
    assert not np.isnan(log_likelihood).any()


def test_forgetting_keeps_a_tokens_messages_within_its_occurrences():
    # Two messages with "a" once, taken back by one copy with "a" twice: the class keeps
    # a message but no "a", so no message holds it. Left at 1, the boolean model's
    # count of "a" would run ahead of its occurrences at the next learning (review 18).
    vocabulary = Vocabulary()
    model = NaiveBayes().fit(count_matrix([["a"], ["a"]], vocabulary, grow=True), ["spam"] * 2)
    model.add_counts(count_matrix([["a", "a"]], vocabulary, grow=False), ["spam"], sign=-1)
    assert (model.class_counts[0], model.token_counts[0, 0], model.doc_counts[0, 0]) == (1, 0, 0)
    model.add_counts(count_matrix([["a"]], vocabulary, grow=False), ["spam"])
    assert (model.token_counts[0, 0], model.doc_counts[0, 0]) == (1, 1)


def test_three_classes():
    vocabulary = Vocabulary()
    docs = [["viagra", "cheap"], ["meeting", "agenda"], ["newsletter", "unsubscribe"]] * 3
    labels = ["spam", "ham", "lists"] * 3
    for event_model in EVENT_MODELS:
        model = NaiveBayes(event_model=event_model).fit(
            count_matrix(docs, vocabulary, grow=True), labels
        )
        X = count_matrix(
            [["newsletter"], ["viagra"], ["agenda", "meeting"]], vocabulary, grow=False
        )
        assert model.predict(X) == ["lists", "spam", "ham"]
        assert np.allclose(model.predict_proba(X).sum(axis=1), 1.0)


def test_min_count_ignores_rare_tokens():
    model, vocabulary = toy(min_count=2)
    # Only cheap (4) and today (3) occur twice or more; everything else carries no weight.
    assert model.active_features().sum() == 2
    with_rare = spam_probability(model, vocabulary, "cheap pills buy")
    assert with_rare == pytest.approx(spam_probability(model, vocabulary, "cheap"))
    # The denominator counts active tokens only: P(cheap|spam) = (3+1)/(3+2).
    column = vocabulary.index["cheap"]
    assert math.exp(model.feature_log_prob()[0, column]) == pytest.approx(4 / 5)


def test_log_odds_ratios():
    model, vocabulary = toy()
    ratios = model.log_odds_ratios("spam", "ham")
    column = vocabulary.index["cheap"]
    assert ratios[column] == pytest.approx(math.log((4 / 14) / (2 / 15)))


def test_state_round_trip():
    model, vocabulary = toy(event_model="bernoulli", alpha=0.5, min_count=2)
    copy = NaiveBayes.from_state(model.to_state())
    X = vector(vocabulary, "cheap today lunch")
    assert np.array_equal(copy.predict_proba(X), model.predict_proba(X))


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="event model"):
        NaiveBayes(event_model="gaussian")
    with pytest.raises(ValueError, match="alpha"):
        NaiveBayes(alpha=-1)


def test_unsmoothed_bernoulli_handles_certain_words():
    # alpha=0 makes "a" certain in spam (p=1) and impossible in ham (p=0), and "c" the
    # reverse; "b" is in half the messages of each class.
    vocabulary = Vocabulary()
    docs = [["a", "b"], ["a"], ["c"], ["c", "b"]]
    X = count_matrix(docs, vocabulary, grow=True)
    model = NaiveBayes(event_model="bernoulli", alpha=0.0).fit(X, ["spam", "spam", "ham", "ham"])
    jll = model.joint_log_likelihood(count_matrix([["a", "b"], ["b"]], vocabulary, grow=False))
    # {a, b} in spam: P(a)=1 * P(b)=1/2 * P(no c)=1, prior 1/2 -> 1/4; in ham P(a)=0.
    assert jll[0, 0] == pytest.approx(math.log(0.25))
    assert jll[0, 1] == -math.inf
    # {b} lacks the certain "a" of spam and the certain "c" of ham: impossible in both.
    assert jll[1, 0] == -math.inf and jll[1, 1] == -math.inf


def test_non_finite_alpha_is_refused():
    for alpha in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            NaiveBayes(alpha=alpha)


def test_boolean_model_is_a_multinomial_over_once_per_message_counts():
    model, vocabulary = toy(event_model="boolean", alpha=1.0)
    # Documents containing each word: spam buy 1, cheap 2, pills 1, offer 1 (5 in all);
    # ham cheap 1, lunch 1, meeting 1, notes 1, today 2 (6 in all); |V| = 8.
    p_spam = 0.5 * (2 + 1) / (5 + 8) * ((0 + 1) / (5 + 8))
    p_ham = 0.5 * (1 + 1) / (6 + 8) * ((2 + 1) / (6 + 8))
    # "cheap cheap today": each word counts once, however often it occurs.
    expected = p_spam / (p_spam + p_ham)
    assert spam_probability(model, vocabulary, "cheap cheap today") == pytest.approx(expected)
    assert spam_probability(model, vocabulary, "cheap today") == pytest.approx(expected)


def test_information_gain_matches_hand_computation():
    model, vocabulary = toy()
    gain = model.information_gain()

    def h(*p: float) -> float:
        return -sum(x * math.log(x) for x in p if x > 0)

    # "cheap" is in 2 of 2 spam and 1 of 2 ham: H(C) - 3/4 H(2/3, 1/3) - 1/4 H(0, 1).
    cheap = vocabulary.index["cheap"]
    assert gain[cheap] == pytest.approx(h(0.5, 0.5) - 0.75 * h(2 / 3, 1 / 3))
    # "today" is in both ham and no spam: it splits the classes perfectly, gaining H(C).
    today = vocabulary.index["today"]
    assert gain[today] == pytest.approx(h(0.5, 0.5))
    assert gain.argmax() == today


@pytest.mark.parametrize(("selection", "kept"), [("ig", "today"), ("df", "cheap")])
def test_max_features_keeps_the_most_informative_tokens(selection, kept):
    model, vocabulary = toy(max_features=1, selection=selection)
    active = model.active_features()
    assert active.sum() == 1 and active[vocabulary.index[kept]]
    # Tokens outside the kept vocabulary carry no evidence in any event model.
    assert spam_probability(model, vocabulary, "pills offer") == pytest.approx(0.5)
    model.max_features = None
    assert model.active_features().all()
    assert NaiveBayes.from_state(toy(max_features=3)[0].to_state()).active_features().sum() == 3


@pytest.mark.parametrize("selection", ["ig", "df"])
def test_the_cut_of_max_features_does_not_depend_on_the_order_mail_came_in(selection):
    # Many tokens tie at the cut (each seen in one message of one class): by column,
    # the ones read first were kept, so the order of folders or of merged models
    # changed the scores.
    spam = [f"win{i} cash{i} now" for i in range(6)]
    ham = [f"lunch{i} notes{i} now" for i in range(6)]

    def kept(messages: list[str], labels: list[str]) -> set[str]:
        vocabulary = Vocabulary()
        X = count_matrix([text.split() for text in messages], vocabulary, grow=True)
        model = NaiveBayes(event_model="boolean", max_features=7, selection=selection)
        model.column_tokens = vocabulary.tokens
        model.add_counts(X, labels)
        active = model.active_features()
        assert active.sum() == 7
        return {vocabulary.tokens[i] for i in np.flatnonzero(active)}

    labels = ["spam"] * 6 + ["ham"] * 6
    forwards = kept(spam + ham, labels)
    assert kept(ham[::-1] + spam[::-1], labels[::-1]) == forwards
    # Without the tokens, ties go by column, as before: still 7, but by position.
    model, _ = toy(max_features=1)
    assert model.column_tokens is None and model.active_features().sum() == 1


def test_max_features_ranks_only_tokens_above_min_count():
    # x and z occur once, below --min-count 2, but split the classes perfectly (the
    # highest information gain): the cut must choose among y and w, which min-count
    # keeps, or it would score tokens min-count left out (review 18).
    vocabulary = Vocabulary()
    X = count_matrix([["x", "y", "w", "w"], ["y", "z", "w"]], vocabulary, grow=True)
    model = NaiveBayes(min_count=2, max_features=1)
    model.column_tokens = vocabulary.tokens
    model.add_counts(X, ["spam", "ham"])
    kept = {vocabulary.tokens[i] for i in np.flatnonzero(model.active_features())}
    assert len(kept) == 1 and kept <= {"y", "w"}


def test_ties_at_the_max_features_cut_go_by_crc32_before_the_tokens_text():
    # Four tokens of equal merit for two places: the CRC-32 of their text chooses, as
    # top-odds lists ties; by text the cut would keep whatever sorts first (review 18).
    tokens = ["p", "q", "r", "s"]
    vocabulary = Vocabulary()
    X = count_matrix([tokens, tokens], vocabulary, grow=True)
    model = NaiveBayes(max_features=2, selection="df")
    model.column_tokens = vocabulary.tokens
    model.add_counts(X, ["spam", "ham"])
    by_crc = sorted(tokens, key=lambda token: zlib.crc32(token.encode()))
    assert by_crc[:2] != sorted(tokens)[:2]
    kept = {vocabulary.tokens[i] for i in np.flatnonzero(model.active_features())}
    assert kept == set(by_crc[:2])


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_taking_counts_back_scores_as_if_never_trained(event_model):
    extra = [("spam", "lottery winner lottery"), ("ham", "quarterly board minutes")]
    vocabulary = Vocabulary()
    texts = [text.split() for _, text in TRAIN + extra]
    X = count_matrix(texts, vocabulary, grow=True)
    labels = [label for label, _ in TRAIN + extra]
    model = NaiveBayes(event_model=event_model, alpha=0.5).fit(X, labels)
    model.add_counts(X[len(TRAIN) :], labels[len(TRAIN) :], sign=-1)
    # The extra messages' own tokens now have no counts: they are no longer evidence,
    # exactly as for a model that never saw them (whose vocabulary lacks them).
    assert not model.active_features()[vocabulary.index["lottery"]]
    never, never_vocabulary = toy(event_model=event_model, alpha=0.5)
    for text in ("cheap lottery today", "board meeting notes", "cheap cheap pills"):
        assert model.predict_log_proba(vector(vocabulary, text)) == pytest.approx(
            never.predict_log_proba(vector(never_vocabulary, text))
        )


@pytest.mark.parametrize("event_model", ["multinomial", "boolean", "bernoulli"])
@pytest.mark.parametrize("min_count", [1, 2, 3])
@pytest.mark.parametrize("alpha", [1.0, 0.01])
def test_held_out_scores_equal_those_of_a_copy_without_the_messages(event_model, min_count, alpha):
    rng = np.random.default_rng(min_count)
    dense = rng.poisson(0.3, size=(90, 70)).astype(float)
    # Two words of one message each, in the first and the second fold below.
    dense[:, :2] = 0
    dense[0, 0] = dense[2, 1] = 3
    X = sp.csr_matrix(dense)
    labels = [("spam", "ham", "other")[i % 3] for i in range(90)]
    model = NaiveBayes(event_model=event_model, alpha=alpha, min_count=min_count)
    model.add_counts(X, labels)
    # A fold of mixed classes, and one that takes a whole class away.
    for rows in (np.arange(0, 90, 4), np.arange(2, 90, 3)):
        fold = X[rows]
        fold_labels = [labels[i] for i in rows]
        without = model.copy()
        without.add_counts(fold, fold_labels, sign=-1)
        expected = without.joint_log_likelihood(fold)
        got, lengths = model.held_out_scores(fold, fold_labels)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
        # Words only the fold has are no evidence for the model without it.
        np.testing.assert_array_equal(lengths, without.evidence_lengths(fold))
        assert (lengths < model.evidence_lengths(fold)).any()
    # The model itself is untouched.
    assert model.class_counts.sum() == 90


def test_held_out_scores_with_max_features_rank_the_tokens_anew():
    # Taking a fold out changes every token's merit, so the cut can keep other tokens;
    # held-out scores from the whole model's cut would calibrate on scores no model
    # without the fold gives (review 18).
    extra = [("spam", "pills offer now"), ("ham", "notes lunch meeting")]
    vocabulary = Vocabulary()
    X = count_matrix([text.split() for _, text in TRAIN + extra], vocabulary, grow=True)
    labels = [label for label, _ in TRAIN + extra]
    model = NaiveBayes(event_model="multinomial", alpha=1.0, max_features=3).fit(X, labels)
    fold, fold_labels = X[[0, 3]], [labels[0], labels[3]]
    without = model.copy()
    without.add_counts(fold, fold_labels, sign=-1)
    assert not np.array_equal(without.active_features(), model.active_features())
    got, lengths = model.held_out_scores(fold, fold_labels)
    np.testing.assert_allclose(got, without.joint_log_likelihood(fold), rtol=1e-10)
    np.testing.assert_array_equal(lengths, without.evidence_lengths(fold))


def test_held_out_scores_drop_a_token_the_message_alone_lifts_to_min_count():
    # "a" occurs 4 times, 3 of them in the held-out message: without it, "a" is below
    # --min-count 2 and no evidence, so only "b" counts in the message (review 18).
    vocabulary = Vocabulary()
    texts = ["a a a b", "a c", "b c", "b b c"]
    X = count_matrix([text.split() for text in texts], vocabulary, grow=True)
    labels = ["spam", "ham", "spam", "ham"]
    model = NaiveBayes(event_model="multinomial", alpha=1.0, min_count=2).fit(X, labels)
    without = model.copy()
    without.add_counts(X[[0]], ["spam"], sign=-1)
    assert not without.active_features()[vocabulary.index["a"]]
    got, lengths = model.held_out_scores(X[[0]], ["spam"])
    np.testing.assert_allclose(got, without.joint_log_likelihood(X[[0]]), rtol=1e-10)
    np.testing.assert_array_equal(lengths, [1.0])


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_explained_token_weights_add_up_to_the_log_odds(event_model):
    from spamnb.filter import SpamFilter

    spam_filter = SpamFilter(model=NaiveBayes(event_model=event_model, alpha=0.5))
    spam_filter.train_tokens([text.split() for _, text in TRAIN], [label for label, _ in TRAIN])
    X = spam_filter.vectorise([["cheap", "cheap", "today", "offer", "unseen"], ["meeting"]])
    _, log_odds, _ = spam_filter.score_matrix(X)
    model = spam_filter.model
    prior = model.class_log_prior()
    constant = prior[model.classes.index("spam")] - prior[model.classes.index("ham")]
    if event_model == "bernoulli":
        absent = model._bernoulli_parts()[1]
        constant += absent[model.classes.index("spam")] - absent[model.classes.index("ham")]
    for row in range(2):
        explanation = spam_filter.explain(X[row], n=100)
        added = [e["log_odds"] for e in explanation["toward_spam"] + explanation["toward_other"]]
        assert constant + sum(added) == pytest.approx(log_odds[row])
        assert explanation["against"] == "ham"
    first = spam_filter.explain(X[0], n=100)
    counts = {e["token"]: e["count"] for e in first["toward_spam"] + first["toward_other"]}
    assert counts["cheap"] == 2 and "unseen" not in counts
    assert first["known_tokens"] == 4


def test_log_sum_exp_matches_scipys():
    from scipy.special import logsumexp

    from spamnb.scores import log_sum_exp

    rng = np.random.default_rng(0)
    values = rng.normal(size=(6, 3)) * 900  # exp() of these overflows and underflows
    for axis in (0, 1):
        for keepdims in (False, True):
            expected = logsumexp(values, axis=axis, keepdims=keepdims)
            assert np.allclose(log_sum_exp(values, axis=axis, keepdims=keepdims), expected)
    edges = np.array([[-np.inf, -np.inf], [-np.inf, 0.0], [-1e308, -1e308]])
    assert np.array_equal(log_sum_exp(edges), logsumexp(edges, axis=1))
    assert np.array_equal(log_sum_exp(np.zeros((2, 0))), [-np.inf, -np.inf])


def test_a_batch_mapped_onto_a_vocabulary_keeps_its_first_column():
    # Tokens the vocabulary lacks are dropped; the one in column 0 is not one of them.
    from spamnb.counts import local_counts, to_vocabulary

    vocabulary = Vocabulary.from_tokens(["t0", "t1"])
    matrix = to_vocabulary(local_counts([["t0", "new"], ["t1", "t0", "t0"]]), vocabulary,
                           grow=False)  # fmt: skip
    assert matrix.toarray().tolist() == [[1.0, 0.0], [2.0, 1.0]]


def test_a_vocabulary_of_repeated_tokens_is_refused():
    with pytest.raises(ValueError, match="repeated"):
        Vocabulary.from_tokens(["a", "b", "a"])


def test_growing_counts_keep_the_vocabulary_in_first_seen_order():
    vocabulary = Vocabulary(["old", "known"])
    X = count_matrix([["new", "old", "other"], ["known", "last", "new"]], vocabulary, grow=True)
    assert vocabulary.tokens == ["old", "known", "new", "other", "last"]
    assert vocabulary.index == {t: i for i, t in enumerate(vocabulary.tokens)}
    assert X.shape == (2, 5) and X[0, 2] == 1 and X[1, 4] == 1


def test_used_columns_are_the_sorted_stored_columns():
    X = sp.random(300, 5000, density=0.01, format="csr", random_state=2)
    # A column stored twice in a row (not summed) and empty rows.
    X = sp.csr_matrix(
        (np.r_[X.data, 1.0, 1.0], np.r_[X.indices, 7, 7], np.r_[X.indptr, X.nnz + 2, X.nnz + 2]),
        shape=(302, 5000),
    )
    np.testing.assert_array_equal(used_columns(X), np.unique(X.indices))
    assert used_columns(sp.csr_matrix((3, 10))).size == 0


def test_presence_of_counts_with_and_without_repeated_columns():
    import scipy.sparse as sp

    from spamnb.counts import presence

    # A column stored twice in a row (not as count_matrix makes them) counts once.
    repeated = sp.csr_matrix(
        (np.array([2.0, 1.0, 3.0]), np.array([0, 0, 2]), np.array([0, 2, 3])), shape=(2, 3)
    )
    np.testing.assert_array_equal(presence(repeated).toarray(), [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(repeated.data, [2.0, 1.0, 3.0])  # left as it was
    counts = sp.csr_matrix(np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 3.0]]))
    present = presence(counts)
    np.testing.assert_array_equal(present.toarray(), [[1, 0, 1], [0, 0, 1]])
    np.testing.assert_array_equal(counts.toarray(), [[2, 0, 1], [0, 0, 3]])


def test_cut_flags_call_a_message_of_exactly_max_bytes_whole_and_max_tokens_cut():
    # The tokenizer reads the first max_bytes bytes, so a message of exactly that size
    # is read whole; it stops at max_tokens, so reaching the cap may have cut it. The
    # flags feed train's and evaluate's counts of cut mail (review 18).
    settings = TokenizerSettings()
    by_size, by_tokens = cut_flags(
        [settings.max_bytes, settings.max_bytes + 1],
        [settings.max_tokens - 1, settings.max_tokens],
        settings,
    )
    assert by_size.tolist() == [False, True]
    assert by_tokens.tolist() == [False, True]
