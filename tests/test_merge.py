"""Merging models: the sum of models' counts is the model trained on all their mail.

The mistake table is the exception (merge.py says why): its merge is the sum of the
parts' tables, which the tests check as such, and scores are compared with it off."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from corpus_fixtures import sample_messages

from spamnb.calibration import Calibration
from spamnb.filter import SpamFilter, message_digest
from spamnb.merge import IncompatibleModels, merge_filters
from spamnb.model import NaiveBayes
from spamnb.store import NotAModelError, from_payload, to_payload
from spamnb.tokens import TOKENIZER_VERSION, TokenizerSettings


@pytest.fixture(scope="module")
def sample(sample_maildir):
    """The sample's raw messages, their token lists, labels and digests."""
    messages, labels = sample_messages(sample_maildir)
    token_lists = SpamFilter().tokenize(messages)
    digests = [message_digest(m) for m in messages]
    # The tests below rely on every sample message being a distinct message.
    assert len(set(digests)) == len(digests)
    return messages, token_lists, labels, digests


def trained_on(token_lists, labels, **kwargs) -> SpamFilter:
    spam_filter = SpamFilter(**kwargs)
    spam_filter.train_tokens(token_lists, labels)
    return spam_filter


def pick(items: list, rows: list[int]) -> list:
    return [items[i] for i in rows]


def assert_same_counts(merged: SpamFilter, whole: SpamFilter) -> None:
    assert merged.vocabulary.tokens == whole.vocabulary.tokens
    assert merged.vocabulary.index == whole.vocabulary.index
    assert merged.classes == whole.classes
    assert merged.settings == whole.settings
    for name in ("class_counts", "token_counts", "doc_counts"):
        np.testing.assert_array_equal(getattr(merged.model, name), getattr(whole.model, name))
    for name in ("event_model", "alpha", "min_count", "max_features", "selection"):
        assert getattr(merged.model, name) == getattr(whole.model, name)


def assert_same_scores(merged: SpamFilter, whole: SpamFilter, token_lists) -> None:
    merged, whole = copy.deepcopy(merged), copy.deepcopy(whole)
    merged.mistakes.weight = whole.mistakes.weight = 0.0
    merged_proba, merged_odds, merged_lengths = merged.score_tokens(token_lists)
    whole_proba, whole_odds, whole_lengths = whole.score_tokens(token_lists)
    # The same counts in the same columns make the same arithmetic: equal to the bit.
    np.testing.assert_array_equal(merged_proba, whole_proba)
    np.testing.assert_array_equal(merged_odds, whole_odds)
    np.testing.assert_array_equal(merged_lengths, whole_lengths)
    assert merged.predict_labels(merged_proba) == whole.predict_labels(whole_proba)


def splits(n: int, n_spam: int) -> dict[str, list[list[int]]]:
    everything = list(range(n))
    return {
        "interleaved": [everything[::2], everything[1::2]],
        "halves": [everything[: n // 2], everything[n // 2 :]],
        # Each part has one class only; the second part's class is new to the merge.
        "by class": [everything[:n_spam], everything[n_spam:]],
        # Later parts first, so the concatenation is not the corpus's own order.
        "reordered": [everything[n // 3 :], everything[: n // 3]],
    }


def assert_summed_mistakes(merged: SpamFilter, parts: list[SpamFilter]) -> None:
    """The merged mistake table is the parts' tables added column by token."""
    expected = np.zeros((len(merged.classes), len(merged.vocabulary)))
    for part in parts:
        rows = [merged.classes.index(c) for c in part.classes]
        columns = [merged.vocabulary.index[t] for t in part.vocabulary.tokens]
        table = part.mistakes.counts
        expected[np.ix_(rows[: table.shape[0]], columns[: table.shape[1]])] += table
    np.testing.assert_array_equal(merged.mistakes.counts, expected)
    copies: dict[str, int] = {}
    for part in parts:
        copies.update(part.mistake_copies)
    assert merged.mistake_copies == copies


@pytest.mark.parametrize("split", ["interleaved", "halves", "by class", "reordered"])
def test_merge_of_disjoint_parts_equals_training_on_everything(sample, split):
    messages, token_lists, labels, _ = sample
    parts = splits(len(messages), labels.count("spam"))[split]
    filters = []
    for rows in parts:
        spam_filter = SpamFilter()
        spam_filter.train(pick(messages, rows), pick(labels, rows))
        filters.append(spam_filter)
    order = [i for rows in parts for i in rows]
    whole = SpamFilter()
    whole.train(pick(messages, order), pick(labels, order))

    merged = merge_filters(filters)

    assert_same_counts(merged, whole)
    assert_same_scores(merged, whole, token_lists)
    assert_summed_mistakes(merged, filters)
    assert merged.model.class_counts.sum() == len(messages)


def test_merge_of_learned_parts_equals_learning_everything(sample):
    _, token_lists, labels, digests = sample
    n = len(labels)
    parts = [list(range(0, n, 3)), list(range(1, n, 3)), list(range(2, n, 3))]
    filters = []
    for rows in parts:
        spam_filter = SpamFilter()
        spam_filter.learn(pick(token_lists, rows), pick(labels, rows), pick(digests, rows))
        filters.append(spam_filter)
    order = [i for rows in parts for i in rows]
    whole = SpamFilter()
    whole.learn(pick(token_lists, order), pick(labels, order), pick(digests, order))

    merged = merge_filters(filters)

    assert_same_counts(merged, whole)
    assert_same_scores(merged, whole, token_lists)
    assert_summed_mistakes(merged, filters)
    assert set(merged.mistake_copies) <= set(merged.trained)
    assert list(merged.trained.items()) == list(whole.trained.items())
    # Learning the sample again into the merge finds every message known.
    outcome = merged.learn(token_lists, labels, digests)
    assert (outcome["learned"], outcome["moved"], outcome["known"]) == (0, 0, n)


def test_three_way_merge_with_classes_in_different_orders(sample):
    _, token_lists, labels, _ = sample
    spam = [i for i, label in enumerate(labels) if label == "spam"]
    ham = [i for i, label in enumerate(labels) if label == "ham"]
    # Model 1 meets ham first, model 2 spam first, and only model 3 has "newsletter".
    relabelled = list(labels)
    for i in ham[-5:]:
        relabelled[i] = "newsletter"
    parts = [
        ham[:8] + spam[:6],
        spam[6:12] + ham[8:16],
        ham[-5:] + spam[12:] + ham[16:-5],
    ]
    filters = [trained_on(pick(token_lists, rows), pick(relabelled, rows)) for rows in parts]
    assert [f.classes for f in filters] == [
        ["ham", "spam"],
        ["spam", "ham"],
        ["newsletter", "spam", "ham"],
    ]
    order = [i for rows in parts for i in rows]
    whole = trained_on(pick(token_lists, order), pick(relabelled, order))

    merged = merge_filters(filters)

    assert merged.classes == ["ham", "spam", "newsletter"]
    assert_same_counts(merged, whole)
    assert_same_scores(merged, whole, token_lists)
    assert_summed_mistakes(merged, filters)
    # Only model 3 counted "newsletter": its row is model 3's, moved to the merged columns.
    columns = [merged.vocabulary.index[t] for t in filters[2].vocabulary.tokens]
    expected = np.zeros(len(merged.vocabulary))
    expected[columns] = filters[2].model.token_counts[0]
    np.testing.assert_array_equal(merged.model.token_counts[-1], expected)


def test_merging_with_an_empty_model_gives_the_same_model(sample):
    _, token_lists, labels, _ = sample
    trained = trained_on(token_lists, labels)
    for filters in ([trained, SpamFilter()], [SpamFilter(), trained]):
        merged = merge_filters(filters)
        assert_same_counts(merged, trained)
        assert_same_scores(merged, trained, token_lists)


def test_the_first_models_scoring_settings_are_kept(sample):
    _, token_lists, labels, _ = sample
    settings = {
        "event_model": "multinomial",
        "alpha": 0.5,
        "min_count": 2,
        "max_features": 300,
        "selection": "df",
    }
    tuned = trained_on(token_lists[:30], labels[:30], model=NaiveBayes(**settings))
    default = trained_on(token_lists[30:], labels[30:])

    merged = merge_filters([tuned, default])
    assert {name: getattr(merged.model, name) for name in settings} == settings
    # Counts do not depend on the scoring settings: a filter trained on everything
    # with the first model's settings is the merge.
    whole = trained_on(token_lists, labels, model=NaiveBayes(**settings))
    assert_same_counts(merged, whole)
    assert_same_scores(merged, whole, token_lists)

    other_way = merge_filters([default, tuned])
    assert other_way.model.event_model == "boolean"
    assert other_way.model.max_features is None


def test_the_calibration_fitted_on_most_messages_is_kept(sample):
    _, token_lists, labels, _ = sample
    filters = [trained_on(token_lists[i::3], labels[i::3]) for i in range(3)]
    filters[0].calibration = Calibration(slope=0.5, fitted_on=20)
    filters[1].calibration = Calibration(
        slope=2.0,
        intercept=-1.0,
        fitted_on=40,
        ham_cutoff=0.3,
        spam_cutoff=0.7,
        chosen_cutoffs=True,
        length_exponent=0.75,
    )
    filters[2].calibration = Calibration(slope=3.0, fitted_on=40)
    # The largest, and of equals the first: cut-offs chosen by hand come with it.
    assert merge_filters(filters).calibration == filters[1].calibration
    assert merge_filters(filters[::-1]).calibration == filters[2].calibration
    # Models never calibrated keep the first model's (default) calibration.
    unfitted = [trained_on(token_lists[i::2], labels[i::2]) for i in range(2)]
    unfitted[1].calibration = Calibration(slope=9.0)
    assert merge_filters(unfitted).calibration == unfitted[0].calibration


def test_a_calibration_fitted_on_other_scores_is_not_taken(sample):
    from spamnb.merge import calibration_left_unfitted

    _, token_lists, labels, _ = sample
    filters = [trained_on(token_lists[i::3], labels[i::3]) for i in range(3)]
    filters[0].calibration = Calibration(slope=0.5, fitted_on=20)
    # Fitted on more mail, but on a multinomial model's scores with another k.
    filters[1].model.event_model = "multinomial"
    filters[1].model.alpha = 1.0
    filters[1].calibration = Calibration(slope=2.0, fitted_on=40)
    filters[2].calibration = Calibration(slope=3.0, fitted_on=30)
    assert merge_filters(filters).calibration == filters[2].calibration
    assert not calibration_left_unfitted(filters, merge_filters(filters))
    # Only the other scores were calibrated: none, rather than a map of other numbers.
    alone = [filters[0], filters[1]]
    alone[0].calibration = Calibration()
    assert merge_filters(alone).calibration == Calibration()
    assert calibration_left_unfitted(alone, merge_filters(alone))
    # The merge scores with the smallest mistake weight: a calibration made under a
    # larger one scored other numbers too.
    weighted = [trained_on(token_lists[i::2], labels[i::2]) for i in range(2)]
    weighted[0].calibration = Calibration(slope=0.5, fitted_on=20)
    weighted[1].mistakes.weight = 0.0
    weighted[1].calibration = Calibration()
    assert merge_filters(weighted).calibration == Calibration()
    assert calibration_left_unfitted(weighted, merge_filters(weighted))
    # A model whose table lacks a class scores without it, whatever weight it stores:
    # merged with it, a model calibrated with its table on leaves the merge (which has
    # no table row of that class either) uncalibrated (review 28).
    spam_and_ham = trained_on(token_lists, labels)
    assert spam_and_ham.mistake_weight() > 0
    spam_and_ham.calibration = Calibration(slope=0.5, fitted_on=20)
    news = trained_on(token_lists[:4], ["news"] * 4)
    assert news.mistakes.weight > 0 and news.mistake_weight() == 0
    merged = merge_filters([spam_and_ham, news])
    assert merged.mistake_weight() == 0
    assert merged.calibration == Calibration()
    assert calibration_left_unfitted([spam_and_ham, news], merged)
    # How tokens are ranked for a cut changes nothing when none are cut.
    ranked = [trained_on(token_lists[i::2], labels[i::2]) for i in range(2)]
    ranked[1].model.selection = "df" if ranked[0].model.selection != "df" else "ig"
    ranked[1].calibration = Calibration(slope=2.0, fitted_on=40)
    assert ranked[0].model.max_features is None
    assert merge_filters(ranked).calibration == ranked[1].calibration


def test_merging_models_never_calibrated_leaves_no_calibration_out(sample):
    # merge warns that a calibration was left out only when some model had one: models
    # never calibrated, even of other scoring settings, lose nothing (review 18).
    from spamnb.merge import calibration_left_unfitted

    _, token_lists, labels, _ = sample
    filters = [trained_on(token_lists[i::2], labels[i::2]) for i in range(2)]
    filters[1].model.event_model = "multinomial"
    assert not any(f.calibration.fitted_on for f in filters)
    assert not calibration_left_unfitted(filters, merge_filters(filters))
    assert merge_filters(filters).calibration == Calibration()


def test_cut_offs_set_by_hand_in_the_first_model_are_kept(sample):
    _, token_lists, labels, _ = sample
    filters = [trained_on(token_lists[i::2], labels[i::2]) for i in range(2)]
    filters[0].calibration = Calibration(
        slope=0.5, fitted_on=20, ham_cutoff=0.2, spam_cutoff=0.95, chosen_cutoffs=True
    )
    filters[1].calibration = Calibration(slope=2.0, fitted_on=40, ham_cutoff=0.1)
    merged = merge_filters(filters).calibration
    assert (merged.slope, merged.fitted_on) == (2.0, 40)
    assert (merged.ham_cutoff, merged.spam_cutoff, merged.chosen_cutoffs) == (0.2, 0.95, True)


def test_created_is_the_earliest_and_updated_is_now(sample):
    _, token_lists, labels, _ = sample
    filters = [trained_on(token_lists[i::3], labels[i::3]) for i in range(3)]
    filters[0].created = "2024-01-01T00:00:00+00:00"
    # Earlier than model 1's, though later as text: times are compared, not strings.
    filters[1].created = "2024-01-01T01:00:00+02:00"
    filters[2].created = "not a time"
    before = datetime.now(timezone.utc).replace(microsecond=0)

    merged = merge_filters(filters)

    assert merged.created == "2024-01-01T01:00:00+02:00"
    assert datetime.fromisoformat(merged.updated) >= before


def test_different_word_pairs_setting_is_refused(sample):
    _, token_lists, labels, _ = sample
    pairs = trained_on(token_lists[:30], labels[:30])
    no_pairs = trained_on(token_lists[30:], labels[30:], settings=TokenizerSettings(word_pairs=0))
    with pytest.raises(
        IncompatibleModels, match=r"^model 3 .*tokenizer.*word_pairs off against on"
    ):
        merge_filters([pairs, copy.deepcopy(pairs), no_pairs])


def test_different_cjk_pairs_setting_is_refused(sample):
    _, token_lists, labels, _ = sample
    plain = trained_on(token_lists[:30], labels[:30])
    cjk = trained_on(token_lists[30:], labels[30:], settings=TokenizerSettings(cjk_pairs=1))
    with pytest.raises(IncompatibleModels, match=r"^model 2 .*tokenizer.*cjk_pairs on against off"):
        merge_filters([plain, cjk])


def test_different_tokenizer_version_is_refused(sample):
    _, token_lists, labels, _ = sample
    current = trained_on(token_lists[:30], labels[:30])
    old = trained_on(
        token_lists[30:], labels[30:], settings=TokenizerSettings(version=TOKENIZER_VERSION - 1)
    )
    with pytest.raises(
        IncompatibleModels, match=rf"^model 2 .*version {TOKENIZER_VERSION - 1} against"
    ) as refused:
        merge_filters([current, old])
    assert "\n" not in str(refused.value)


def test_a_message_trained_into_two_models_is_refused(sample):
    _, token_lists, labels, digests = sample

    def learned(rows, labels=labels):
        spam_filter = SpamFilter()
        spam_filter.learn(pick(token_lists, rows), pick(labels, rows), pick(digests, rows))
        return spam_filter

    first, second = learned(range(0, 30)), learned(range(30, 50))
    # Model 3 learned two of model 1's messages again, with the same labels.
    third = learned([*range(50, len(labels)), 3, 7])
    with pytest.raises(
        IncompatibleModels,
        match=r"^2 messages were trained into both model 1 and model 3; .*count them twice",
    ):
        merge_filters([first, second, third])

    # With another label the message is refused too: it would be in both classes.
    flipped = ["ham" if label == "spam" else "spam" for label in labels]
    relabelled = learned([*range(50, len(labels)), 3], labels=flipped)
    with pytest.raises(
        IncompatibleModels,
        match=r"^1 message was trained into both model 1 and model 2 \(1 of them with another",
    ):
        merge_filters([first, relabelled])


def test_a_message_one_model_took_over_under_its_digest_now_is_refused_in_another(sample):
    # Both models learnt the same mail under the digests an older spamnb gave it; the
    # first has since read it again and knows it by its digest now (adopt_digests),
    # the second has not.  They hold the same messages all the same.
    _, token_lists, labels, digests = sample
    older = [f"older-{digest}" for digest in digests]

    def learned(rows):
        spam_filter = SpamFilter()
        spam_filter.learn(pick(token_lists, rows), pick(labels, rows), pick(older, rows))
        return spam_filter

    upgraded, stale = learned(range(40)), learned(range(30, len(labels)))
    upgraded.adopt_digests({now: [old] for now, old in zip(digests[:40], older[:40], strict=True)})
    assert set(upgraded.trained) == set(digests[:40])
    for models, first, second in (([upgraded, stale], 1, 2), ([stale, upgraded], 1, 2)):
        with pytest.raises(
            IncompatibleModels,
            match=rf"^10 messages were trained into both model {first} and model {second}; ",
        ):
            merge_filters(models)
    # Apart, they merge, and the merge still knows which messages the old digests were.
    apart = learned(range(40, len(labels)))
    merged = merge_filters([upgraded, apart])
    assert merged.retired_digests == dict(zip(older[:40], digests[:40], strict=True))
    # The stale model's messages 30 on: ten through the retired digests, the rest as
    # the apart model learnt them.
    with pytest.raises(IncompatibleModels, match=rf"^{len(labels) - 30} messages were trained"):
        merge_filters([merged, stale])


def test_a_model_that_holds_messages_twice_is_refused_naming_two_models(sample):
    # A model of format 6 that learnt messages' CRLF and LF copies apart holds each by
    # two digests, which another model's retired digests tie together: the refusal
    # named "model 1 and model 1" (review 52).
    _, token_lists, labels, digests = sample
    older = [f"older-{digest}" for digest in digests]
    twice = SpamFilter()
    twice.learn(token_lists[:5], labels[:5], digests[:5])
    twice.learn(token_lists[:5], labels[:5], older[:5])
    knows = SpamFilter()
    knows.learn(token_lists[:5], labels[:5], digests[:5])
    knows.retired_digests.update(zip(older[:5], digests[:5], strict=True))
    with pytest.raises(
        IncompatibleModels,
        match=r"^5 messages were trained into both model 1 and model 2, and others in other ",
    ):
        merge_filters([twice, knows])


def test_retired_digests_are_saved_for_the_messages_still_held(sample):
    _, token_lists, labels, digests = sample
    older = [f"older-{digest}" for digest in digests]
    spam_filter = SpamFilter()
    spam_filter.learn(token_lists, labels, older)
    spam_filter.adopt_digests({now: [old] for now, old in zip(digests, older, strict=True)})
    spam_filter.forget(token_lists[:5], digests[:5])
    loaded = from_payload(to_payload(spam_filter), Path("m.joblib"))
    assert loaded.retired_digests == dict(zip(older[5:], digests[5:], strict=True))
    # A file from before the record has none; a record naming mail never learnt is
    # damage, as any inconsistent part of a model file is.
    payload = to_payload(spam_filter)
    del payload["retired_digests"]
    payload["format_version"] = 4
    assert from_payload(payload, Path("m.joblib")).retired_digests == {}
    payload = to_payload(spam_filter)
    payload["retired_digests"]["now"] = payload["retired_digests"]["old"]
    with pytest.raises(NotAModelError, match="retired digests"):
        from_payload(payload, Path("m.joblib"))


def test_models_without_digests_merge_with_learned_ones(sample):
    _, token_lists, labels, digests = sample
    learned = SpamFilter()
    learned.learn(token_lists[:30], labels[:30], digests[:30])
    counted = trained_on(token_lists[30:], labels[30:])
    merged = merge_filters([learned, counted])
    assert merged.trained == learned.trained
    assert_same_counts(merged, trained_on(token_lists, labels))


@pytest.mark.parametrize("count", [0, 1])
def test_fewer_than_two_models_are_refused(count):
    with pytest.raises(ValueError, match="at least 2 models"):
        merge_filters([SpamFilter() for _ in range(count)])


def snapshot(spam_filter: SpamFilter) -> dict:
    return {
        "tokens": list(spam_filter.vocabulary.tokens),
        "index": dict(spam_filter.vocabulary.index),
        "state": copy.deepcopy(spam_filter.model.to_state()),
        "settings": spam_filter.settings,
        "calibration": spam_filter.calibration,
        "trained": dict(spam_filter.trained),
        "dates": (spam_filter.created, spam_filter.updated),
    }


def assert_unchanged(spam_filter: SpamFilter, before: dict) -> None:
    after = snapshot(spam_filter)
    for key in ("tokens", "index", "settings", "calibration", "trained", "dates"):
        assert after[key] == before[key], key
    for key, value in before["state"].items():
        np.testing.assert_array_equal(after["state"][key], value)


def test_merging_does_not_modify_its_inputs(sample):
    _, token_lists, labels, digests = sample
    filters = []
    for i in range(3):
        spam_filter = SpamFilter()
        spam_filter.learn(token_lists[i::3], labels[i::3], digests[i::3])
        filters.append(spam_filter)
    filters[2].model.classes.reverse()  # classes in another order, counts to match
    for name in ("token_counts", "doc_counts", "class_counts"):
        setattr(filters[2].model, name, getattr(filters[2].model, name)[::-1].copy())
    before = [snapshot(f) for f in filters]

    merged = merge_filters(filters)
    for spam_filter, state in zip(filters, before, strict=True):
        assert_unchanged(spam_filter, state)

    # Nor does the merge share state with them: training it leaves them alone.
    merged.train_tokens([["a-token-nobody-has", *token_lists[0]]], ["spam"])
    merged.forget(token_lists[:2], digests[:2])
    merged.calibration = Calibration(slope=5.0)
    for spam_filter, state in zip(filters, before, strict=True):
        assert_unchanged(spam_filter, state)


def test_a_merged_model_saves_and_loads(sample):
    _, token_lists, labels, digests = sample
    filters = []
    for i in range(2):
        spam_filter = SpamFilter()
        spam_filter.learn(token_lists[i::2], labels[i::2], digests[i::2])
        filters.append(spam_filter)
    merged = merge_filters(filters)
    loaded = from_payload(to_payload(merged), Path("merged.model"))
    assert_same_counts(loaded, merged)
    assert loaded.trained == merged.trained
    assert loaded.calibration == merged.calibration


def test_the_merge_command_says_what_it_could_not_keep(tmp_path, sample_maildir):
    from cli_helpers import assert_one_line_error, run

    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    boolean, multinomial = tmp_path / "b.joblib", tmp_path / "m.joblib"
    assert run("train", "-m", boolean, "--spam", spam / "cur", "--ham", ham / "cur").exit_code == 0
    trained = run(
        "train", "-m", multinomial, "--spam", spam / "new", "--ham", ham / "new",
        "--event-model", "multinomial", "--alpha", "1", "--mistake-weight", "0",
    )  # fmt: skip
    assert trained.exit_code == 0
    merged = run("merge", tmp_path / "out.joblib", boolean, multinomial)
    assert merged.exit_code == 0, merged.output
    assert "not calibrated" in merged.stderr
    # The same file twice, and a folder for OUTPUT, each say so.
    assert_one_line_error(
        run("merge", tmp_path / "x.joblib", boolean, f"{tmp_path}/./b.joblib"), "given twice"
    )
    assert_one_line_error(run("merge", "", boolean, multinomial), "OUTPUT is empty")
    assert_one_line_error(run("merge", tmp_path, boolean, multinomial), "is a folder")
    plain = tmp_path / "plain"
    plain.write_text("not a folder")
    assert_one_line_error(run("merge", plain / "x.joblib", boolean, multinomial), "not a folder")
