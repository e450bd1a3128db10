"""A model's bookkeeping against the mail it should hold, over random runs.

Training, moving, forgetting, merging and saving are exact by design: the counts are the state,
and each operation adds or takes back a message's own counts (README, "Retraining
from cron").  This test drives a filter through random sequences of those operations
and checks, after each, that its counts are those of a fresh filter counting the mail
it should now hold, that it knows each message under its last label, and that its
mistake table holds exactly the copies it records.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from spamnb.filter import SpamFilter
from spamnb.merge import merge_filters
from spamnb.store import load, save

WORDS = [f"w{i}" for i in range(12)]
LABELS = ("spam", "ham")


def _message(draw_words: list[int], own: int) -> list[str]:
    # Each message has a token of its own, so no two messages are alike.
    return [WORDS[i] for i in draw_words] + [f"own{own}"]


MESSAGES = [
    _message(list(np.random.default_rng(seed).integers(0, len(WORDS), 3 + seed % 5)), seed)
    for seed in range(10)
]
indices = st.lists(st.integers(0, len(MESSAGES) - 1), min_size=1, max_size=6)


class Bookkeeping(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.filter = SpamFilter()
        self.held: dict[int, str] = {}  # message -> the label it should be held under

    def _digests(self, chosen: list[int]) -> list[str]:
        return [f"digest-{i}" for i in chosen]

    @rule(chosen=indices, labels=st.lists(st.sampled_from(LABELS), min_size=6, max_size=6))
    def learn(self, chosen: list[int], labels: list[str]) -> None:
        given = labels[: len(chosen)]
        self.filter.learn([MESSAGES[i] for i in chosen], given, self._digests(chosen))
        # A message given twice in one batch is held under the later label.
        for i, label in zip(chosen, given, strict=True):
            self.held[i] = label

    @rule(chosen=indices)
    def forget(self, chosen: list[int]) -> None:
        self.filter.forget([MESSAGES[i] for i in chosen], self._digests(chosen))
        for i in chosen:
            self.held.pop(i, None)

    @rule(chosen=indices, labels=st.lists(st.sampled_from(LABELS), min_size=6, max_size=6))
    def merge_in(self, chosen: list[int], labels: list[str]) -> None:
        # A second model of mail this one does not hold, merged into it: merge adds
        # the counts and the mistake tables (and refuses mail both hold).
        new = {i: label for i, label in zip(chosen, labels, strict=False) if i not in self.held}
        if not new:
            return
        other = SpamFilter()
        other.learn([MESSAGES[i] for i in new], list(new.values()), self._digests(list(new)))
        self.filter = merge_filters([self.filter, other])
        self.held.update(new)

    @rule()
    def save_and_load(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "model.joblib"
            save(self.filter, path)
            self.filter = load(path)

    @invariant()
    def knows_each_message_under_its_last_label(self) -> None:
        assert self.filter.trained == {f"digest-{i}": label for i, label in self.held.items()}

    @invariant()
    def counts_are_those_of_the_mail_held(self) -> None:
        model, index = self.filter.model, self.filter.vocabulary.index
        rows = {label: row for row, label in enumerate(self.filter.classes)}
        messages_of = Counter(self.held.values())
        for label, row in rows.items():
            assert model.class_counts[row] == messages_of[label]
        documents: Counter[tuple[str, str]] = Counter()
        occurrences: Counter[tuple[str, str]] = Counter()
        for i, label in self.held.items():
            for token in set(MESSAGES[i]):
                documents[label, token] += 1
            for token in MESSAGES[i]:
                occurrences[label, token] += 1
        for token, column in index.items():
            for label, row in rows.items():
                if column < model.doc_counts.shape[1]:
                    assert model.doc_counts[row, column] == documents[label, token]
                    assert model.token_counts[row, column] == occurrences[label, token]
                else:  # counted nothing yet: a column a save pads with zeros
                    assert documents[label, token] == occurrences[label, token] == 0

    @invariant()
    def the_mistake_table_holds_the_copies_it_records(self) -> None:
        table, copies = self.filter.mistakes.counts, self.filter.mistake_copies
        assert set(copies) <= {f"digest-{i}" for i in self.held}
        expected = np.zeros_like(table, dtype=np.float64)
        rows = {label: row for row, label in enumerate(self.filter.classes)}
        index = self.filter.vocabulary.index
        for i, label in self.held.items():
            count = copies.get(f"digest-{i}", 0)
            for token in set(MESSAGES[i]):
                column = index[token]
                if count and column < expected.shape[1]:
                    expected[rows[label], column] += count
        np.testing.assert_array_equal(table, expected)


TestBookkeeping = Bookkeeping.TestCase
TestBookkeeping.settings = settings(
    max_examples=60,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
