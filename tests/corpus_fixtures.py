"""Small corpora for the core tests: synthetic token lists and the bundled sample's mail,
and a check the tests of training on them share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spamnb.calibration import Calibration

SPAMMY = ["cheap", "win", "free", "offer", "click", "prize"]
HAMMY = ["meeting", "report", "lunch", "draft", "agenda", "thanks"]
COMMON = ["the", "a", "today", "you", "please"]


def synthetic_corpus(n_spam: int, n_ham: int, seed: int) -> tuple[list[list[str]], list[str]]:
    """Overlapping synthetic mail: each message leans to its class but borrows words
    from the other, so settings really differ, and carries a token of its own, so
    tests can tell which model saw which message."""
    rng = np.random.default_rng(seed)
    token_lists, labels = [], []
    for label, own, other, n in (("spam", SPAMMY, HAMMY, n_spam), ("ham", HAMMY, SPAMMY, n_ham)):
        for i in range(n):
            words = list(rng.choice(own, size=rng.integers(1, 5)))
            words += list(rng.choice(other, size=rng.integers(0, 4)))
            words += list(rng.choice(COMMON, size=rng.integers(0, 6)))
            token_lists.append([*words, f"id:{label}{i}"])
            labels.append(label)
    order = rng.permutation(len(labels))
    return [token_lists[i] for i in order], [labels[i] for i in order]


def sample_messages(sample_maildir: Path) -> tuple[list[bytes], list[str]]:
    """The bundled sample's raw messages, its spam first, and their labels."""
    messages, labels = [], []
    for label in ("spam", "ham"):
        for path in sorted((sample_maildir / label).glob("*/*")):
            if not path.name.startswith("."):
                messages.append(path.read_bytes())
                labels.append(label)
    return messages, labels


def assert_same_calibration(first: Calibration, second: Calibration) -> None:
    """Equal but for rounding: a vocabulary grown in another order sums each message's
    log-probabilities in another order.  Folds dealt by position differ by far more.

    Rounding in the scores moves the Platt fit's optimum by a few parts in 10^9 on
    some deals of the folds (2.5e-9 on SpamAssassin's first 500, once the digests they
    are dealt by changed), hence 1e-7."""
    for name, value in first.to_dict().items():
        assert second.to_dict()[name] == pytest.approx(value, rel=1e-7), name
