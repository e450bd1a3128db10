"""A trained filter: the tokenizer settings, the vocabulary and the Naive Bayes counts.

This is the object a model file holds.  It joins the stages (tokens, counts, model)
so the CLI and the evaluation code never have to keep them in step themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import scipy.sparse as sp

from . import __version__
from .counts import Vocabulary, count_matrix
from .model import NaiveBayes
from .scores import predicted_columns
from .tokens import DEFAULT_SETTINGS, TokenizerSettings, tokenize

__all__ = ["HAM", "SPAM", "SpamFilter"]

SPAM = "spam"
HAM = "ham"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class SpamFilter:
    model: NaiveBayes = field(default_factory=NaiveBayes)
    vocabulary: Vocabulary = field(default_factory=Vocabulary)
    settings: TokenizerSettings = DEFAULT_SETTINGS
    created: str = field(default_factory=_now)
    updated: str = field(default_factory=_now)
    # The spamnb version that last wrote the model's file.
    written_by: str = __version__

    @property
    def classes(self) -> list[str]:
        return self.model.classes

    def tokenize(
        self, messages: Sequence[bytes], on_each: Callable[[int], None] | None = None
    ) -> list[list[str]]:
        """Token lists of raw messages; ``on_each(1)`` is called after each (progress)."""
        token_lists = []
        for data in messages:
            token_lists.append(tokenize(data, self.settings))
            if on_each is not None:
                on_each(1)
        return token_lists

    def train_tokens(self, token_lists: Sequence[Sequence[str]], labels: Sequence[str]) -> None:
        """Add the counts of already tokenized messages (lets evaluation tokenize once)."""
        X = count_matrix(token_lists, self.vocabulary, grow=True)
        self.model.add_counts(X, labels)
        self.updated = _now()

    def train(self, messages: Sequence[bytes], labels: Sequence[str]) -> None:
        self.train_tokens(self.tokenize(messages), labels)

    def vectorise(self, token_lists: Sequence[Sequence[str]]) -> sp.csr_matrix:
        return count_matrix(token_lists, self.vocabulary, grow=False)

    def positive_class(self) -> str | None:
        """The class whose probability is "the spam probability", if the model has it."""
        return SPAM if SPAM in self.classes else None

    def score_tokens(
        self, token_lists: Sequence[Sequence[str]]
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Class probabilities (n, classes) and, with a spam class, spam log-odds (n,)."""
        jll = self.model.joint_log_likelihood(self.vectorise(token_lists))
        proba = np.exp(self.model.normalise(jll))
        positive = self.positive_class()
        if positive is None or len(self.classes) < 2:
            return proba, None
        return proba, self.model.log_odds_from_jll(jll, positive)

    def predict_labels(self, proba: np.ndarray) -> list[str]:
        """The most probable class of each row; exact ties never go to spam."""
        columns = predicted_columns(proba, self.classes, self.positive_class())
        return [self.classes[c] for c in columns]

    def top_odds(
        self, positive: str, negative: str, n: int, min_count: int = 1
    ) -> tuple[list[dict], list[dict]]:
        """The ``n`` tokens with the highest P(w|positive)/P(w|negative), and the reverse.

        Tokens seen fewer than ``min_count`` times in all are left out: a word seen
        once has an odds ratio set mostly by the smoothing, not by the mail.
        """
        for label in (positive, negative):
            if label not in self.classes:
                raise ValueError(f"the model has no class {label!r} (it has {self.classes})")
        ratios = self.model.log_odds_ratios(positive, negative)
        # Tokens the model ignores (below its own min_count) are no evidence at all.
        seen_enough = self.model.token_counts.sum(axis=0) >= min_count
        eligible = np.flatnonzero(seen_enough & self.model.active_features())
        order = eligible[np.argsort(ratios[eligible], kind="stable")]

        def rows(columns: np.ndarray, sign: float) -> list[dict]:
            # Each table reports the log of its own ratio, so both read "higher = stronger".
            return [
                {
                    "token": self.vocabulary.tokens[c],
                    "log_odds_ratio": float(sign * ratios[c]),
                    "counts": {
                        label: int(self.model.token_counts[i, c])
                        for i, label in enumerate(self.classes)
                    },
                }
                for c in columns
            ]

        return rows(order[::-1][:n], 1.0), rows(order[:n], -1.0)
