"""The model stage: a sparse Naive Bayes classifier whose state is counts.

The persistent state is what training counts, per class: messages, token
occurrences (for the multinomial event model) and messages containing each token
(for the Bernoulli model).  Everything a prediction uses (log priors, smoothed log
likelihoods) is derived from the counts on demand.  Because counts add, training
more mail is adding to them, two models merge by addition, and the event model,
smoothing strength and vocabulary cut-off can be changed after training.

Smoothing is Lidstone's with strength ``alpha`` (Laplace's at 1): the MAP estimate
under a symmetric Dirichlet prior of ``alpha + 1`` per outcome, so
P(w|c) = (count(w,c) + alpha) / (count(c) + alpha * |V|).  Scores are kept as sums of
logarithms: a product of thousands of probabilities below one underflows to zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .counts import class_sums, presence, token_crcs, used_columns
from .scores import log_odds_against_rest, log_posteriors

__all__ = ["EVENT_MODELS", "NaiveBayes"]

# multinomial: every occurrence of a token counts; boolean: a multinomial over
# once-per-message counts (Metsis et al., CEAS 2006, found it the best NB for spam);
# bernoulli: presence and absence of every vocabulary token.
EVENT_MODELS = ("multinomial", "boolean", "bernoulli")
# How tokens are ranked when the vocabulary is cut to ``max_features``.
FEATURE_SELECTIONS = ("ig", "df")


class NaiveBayes:
    """Multinomial or Bernoulli Naive Bayes over a growing sparse vocabulary."""

    def __init__(
        self,
        classes: Sequence[str] = (),
        *,
        event_model: str = "multinomial",
        alpha: float = 1.0,
        min_count: int = 1,
        max_features: int | None = None,
        selection: str = "ig",
    ) -> None:
        if event_model not in EVENT_MODELS:
            raise ValueError(f"unknown event model {event_model!r}; use one of {EVENT_MODELS}")
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ValueError(
                f"the smoothing strength alpha must be a finite number >= 0, not {alpha}"
            )
        if min_count < 1:
            raise ValueError("min_count must be >= 1")
        if max_features is not None and max_features < 1:
            raise ValueError("max_features must be >= 1 (or None for every token)")
        if selection not in FEATURE_SELECTIONS:
            raise ValueError(f"unknown feature selection {selection!r}; use {FEATURE_SELECTIONS}")
        self.event_model = event_model
        self.alpha = float(alpha)
        self.min_count = int(min_count)
        self.max_features = None if max_features is None else int(max_features)
        self.selection = selection
        self.classes: list[str] = []
        self.class_counts = np.zeros(0, dtype=np.int64)
        self.token_counts = np.zeros((0, 0), dtype=np.float64)
        self.doc_counts = np.zeros((0, 0), dtype=np.float64)
        # The tokens of the columns, in column order, when the model's owner gives them
        # (they are not part of its state): with max_features, tokens of equal merit at
        # the cut are then chosen by a hash of their text, so the cut follows from the
        # counts alone.  By column, the order in which mail was read, folders given or
        # models merged changed which of thousands of tied tokens were scored, and every
        # score.  A hash rather than the text itself: sorted text would favour whole
        # kinds of token ("caps:", "charset:" and digits before words).
        self.column_tokens: Sequence[str] | None = None
        for label in classes:
            self._class_row(label)

    # -- counting -----------------------------------------------------------------

    @property
    def n_features(self) -> int:
        return self.token_counts.shape[1]

    def tokens_seen(self) -> int:
        """Columns with counts: forgotten mail leaves its tokens' columns, empty."""
        return int(np.count_nonzero(self.token_counts.sum(axis=0)))

    def _class_row(self, label: str) -> int:
        if label not in self.classes:
            self.classes.append(label)
            self.class_counts = np.append(self.class_counts, 0)
            empty = np.zeros((1, self.n_features))
            self.token_counts = np.vstack([self.token_counts, empty])
            self.doc_counts = np.vstack([self.doc_counts, empty])
        return self.classes.index(label)

    def widen(self, n_features: int) -> None:
        """Give the counts ``n_features`` columns, the new ones zero (never narrower)."""
        extra = n_features - self.n_features
        if extra > 0:
            pad = np.zeros((len(self.classes), extra))
            self.token_counts = np.hstack([self.token_counts, pad])
            self.doc_counts = np.hstack([self.doc_counts, pad])

    def add_counts(
        self,
        X: sp.spmatrix,
        labels: Sequence[str],
        sign: int = 1,
        changed: np.ndarray | None = None,
    ) -> np.ndarray:
        """Add (or with ``sign=-1`` remove) the counts of the messages in ``X``.

        ``fit`` and incremental training share this one routine, so a model trained
        in pieces is identical to one trained at once.  Returns, for each message, whether
        it is a copy that changed since its class learnt it (all False when adding): one
        the caller knows ``changed`` (tokens the vocabulary lacks), one with a token its
        class holds none of, and the fewest, largest takers that account for what the
        batch takes back beyond what a class holds of a token (see _changed_rows).
        """
        if X.shape[0] != len(labels):
            raise ValueError(f"{X.shape[0]} rows but {len(labels)} labels")
        X = sp.csr_matrix(X)
        rows = np.array([self._class_row(label) for label in labels], dtype=np.int64)
        self.widen(X.shape[1])
        indicator = class_sums(rows, len(self.classes), float(sign))
        present = presence(X)
        n = X.shape[1]
        added = (indicator @ X).toarray()
        over = np.zeros(X.shape[0], dtype=bool)
        if sign < 0:
            if changed is not None:
                over |= np.asarray(changed, dtype=bool)
            short = self.token_counts[:, :n] < -added
            if short.any():
                over = self._changed_rows(X, rows, short, over)
        self.token_counts[:, :n] += added
        self.doc_counts[:, :n] += (indicator @ present).toarray()
        self.class_counts += np.bincount(rows, minlength=len(self.classes)) * sign
        if sign < 0:
            # A message forgotten after a tokenizer change may take back tokens it never
            # added; counts stay counts.
            np.maximum(self.token_counts, 0, out=self.token_counts)
            np.maximum(self.class_counts, 0, out=self.class_counts)
            # And a token is in no more of a class's messages than the class has, nor
            # than its occurrences: a Bernoulli probability above 1 made every score
            # NaN.
            np.minimum(self.doc_counts, self.class_counts[:, None], out=self.doc_counts)
            np.minimum(self.doc_counts, self.token_counts, out=self.doc_counts)
            np.maximum(self.doc_counts, 0, out=self.doc_counts)
        return over

    def _changed_rows(
        self, X: sp.csr_matrix, rows: np.ndarray, short: np.ndarray, known: np.ndarray
    ) -> np.ndarray:
        """The messages of ``X`` (class ``rows``, to be taken back) that changed since
        they were learnt: the ``known`` ones, those with a token their class holds
        none of, and for each (class, token) cell ``short`` of what the batch takes,
        the fewest takers, largest first, without which the rest fit in the class.

        Every message holding a short token was counted before, so a forwarded copy
        taken back with an unchanged one of the same mailer made two "changed"
        messages.  A copy known changed is not charged again, so the unchanged one is
        never counted for it, whatever order the batch lists them in; with several
        unchanged takers of a cell and one overdrawing it, the overdrawing one is.
        Which of equal takers is counted follows the batch's order; how many does not.
        """
        over = known.copy()
        takers: dict[tuple[int, int], list[tuple[float, int]]] = {}
        counts = self.token_counts
        for i in range(X.shape[0]):
            span = slice(X.indptr[i], X.indptr[i + 1])
            columns, taken, row = X.indices[span], X.data[span], rows[i]
            if (counts[row, columns] <= 0).any():
                over[i] = True
            hit = short[row, columns]
            for column, amount in zip(columns[hit].tolist(), taken[hit].tolist(), strict=True):
                takers.setdefault((row, column), []).append((amount, i))
        for (row, column), taking in takers.items():
            rest = [(amount, i) for amount, i in taking if not over[i]]
            total = sum(amount for amount, _ in rest)
            # Python's sort is stable: equal takers stay in the batch's order.
            for amount, i in sorted(rest, key=lambda taker: -taker[0]):
                if total <= counts[row, column]:
                    break
                over[i] = True
                total -= amount
        return over

    def fit(self, X: sp.spmatrix, labels: Sequence[str]) -> NaiveBayes:
        """Forget all counts, then count ``X``."""
        self.classes = []
        self.class_counts = np.zeros(0, dtype=np.int64)
        self.token_counts = np.zeros((0, X.shape[1]))
        self.doc_counts = np.zeros((0, X.shape[1]))
        self.add_counts(X, labels)
        return self

    # -- derived parameters --------------------------------------------------------

    def active_features(self) -> np.ndarray:
        """The columns the model scores; the rest are ignored.

        A column must occur ``min_count`` times (at least once) in all; with
        ``max_features`` only that many of those are kept, the most informative by
        ``selection``.
        """
        # A column every count of which was taken back (a forgotten message, or a
        # held-out fold's own tokens during calibration) is a token the model has not
        # seen: scoring it would add the classes' smoothing ratio as if it were
        # evidence, where a token missing from the vocabulary adds nothing.
        active = self.token_counts.sum(axis=0) >= max(self.min_count, 1)
        if self.max_features is not None and self.max_features < active.sum():
            merit = self.information_gain() if self.selection == "ig" else self.doc_counts.sum(0)
            merit = np.where(active, merit, -np.inf)
            keep = self._most_merit(merit, self.max_features)
            active = np.zeros(self.n_features, dtype=bool)
            active[keep] = True
        return active

    def _most_merit(self, merit: np.ndarray, n: int) -> np.ndarray:
        """The columns of the ``n`` highest ``merit`` (finite for more than ``n``), ties
        at the cut broken by the CRC-32 of :attr:`column_tokens` (then their text) when
        there are, else by column."""
        keep = np.argsort(-merit, kind="stable")[:n]
        tokens = self.column_tokens
        if tokens is None or len(tokens) < self.n_features:
            return keep
        last = merit[keep[-1]]
        tied = np.flatnonzero(merit == last)
        above = keep[merit[keep] > last]
        if len(above) + len(tied) == n:
            return keep
        names = [tokens[column] for column in tied]
        crcs = token_crcs(names).tolist()
        by_hash = sorted(range(len(tied)), key=lambda i: (crcs[i], names[i]))
        chosen = tied[np.asarray(by_hash[: n - len(above)], dtype=np.intp)]
        return np.concatenate([above, chosen])

    def information_gain(self) -> np.ndarray:
        """Mutual information between each token's presence and the class, in nats.

        From the document counts alone: H(C) - P(w) H(C|w) - P(not w) H(C|not w).
        """
        n = self.class_counts.astype(np.float64)
        total = max(n.sum(), 1.0)
        present = self.doc_counts.sum(axis=0)
        absent = total - present

        def entropy(counts: np.ndarray, size: np.ndarray | float) -> np.ndarray:
            p = counts / np.maximum(size, 1.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = np.where(p > 0, p * np.log(p), 0.0)
            # Summed in sorted order, so that equal terms in other class rows give the
            # same float: with three classes, summed by row the same gain differed in
            # its last bit with the order the classes were first met, and the
            # --max-features cut kept a token by that noise instead of by its CRC-32
            # (review 11).
            return -np.sort(terms, axis=0).sum(axis=0)

        prior_entropy = entropy(n[:, None], total)[0]
        with_word = entropy(self.doc_counts, present)
        without_word = entropy(np.maximum(n[:, None] - self.doc_counts, 0), absent)
        return prior_entropy - (present * with_word + absent * without_word) / total

    def class_log_prior(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.class_counts) - np.log(max(self.class_counts.sum(), 1))

    def feature_log_prob(self) -> np.ndarray:
        """log P(w|c), shape (classes, features); inactive columns are 0 (no evidence)."""
        active = self.active_features()
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.event_model != "bernoulli":
                counts = (self.doc_counts if self.by_presence else self.token_counts) * active
                totals = counts.sum(axis=1, keepdims=True)
                log_prob = np.log(counts + self.alpha) - np.log(totals + self.alpha * active.sum())
            else:
                totals = self.class_counts[:, None].astype(np.float64)
                log_prob = np.log(self.doc_counts + self.alpha) - np.log(totals + 2 * self.alpha)
        log_prob[:, ~active] = 0.0
        return log_prob

    @property
    def by_presence(self) -> bool:
        """Whether a message counts each token once (boolean and Bernoulli models)."""
        return self.event_model != "multinomial"

    def _bernoulli_parts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The weights of present words, the sum over absent words, and the certain words.

        A Bernoulli model scores every vocabulary word: log p for those present and
        log(1-p) for those absent.  Writing the sum as sum(log(1-p)) over all words
        plus sum(log p - log(1-p)) over the present ones keeps the matrix sparse.
        Unsmoothed (alpha=0) a word can have p=1, whose absence is impossible: such
        "certain" words are kept out of the sums (their log(1-p) is -inf) and counted
        instead, so that a message lacking one scores -inf rather than inf - inf.
        Smoothed, no word is certain: log(1-p) is worked out from the counts, as log p
        is, since 1 - p rounds to 0 once k is below 1e-16 of a class's messages (a word
        in every spam at k=1e-15 was certain, and k=1e-320 gave NaN scores; review 20).
        """
        active = self.active_features()
        log_p = self.feature_log_prob()
        totals = self.class_counts[:, None].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_not_p = np.log(totals - self.doc_counts + self.alpha) - np.log(
                totals + 2 * self.alpha
            )
        certain = np.isneginf(log_not_p) & active
        log_not_p[certain | ~active] = 0.0
        weights = log_p - log_not_p
        weights[:, ~active] = 0.0
        return weights, log_not_p.sum(axis=1), certain

    def joint_log_likelihood(self, X: sp.spmatrix) -> np.ndarray:
        """log P(c) + log P(message|c) for each message and class, shape (n, classes)."""
        X = self.fit_columns(X)
        if self.by_presence:
            X = presence(X)
        if self.event_model != "bernoulli":
            return np.asarray(X @ self.feature_log_prob().T) + self.class_log_prior()
        present = X
        weights, absent_sum, certain = self._bernoulli_parts()
        jll = np.asarray(present @ weights.T) + absent_sum + self.class_log_prior()
        if certain.any():
            found = np.asarray(present @ certain.T.astype(np.float64))
            jll[found < certain.sum(axis=1)] = -np.inf
        return jll

    def held_out_scores(
        self, X: sp.spmatrix, labels: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """joint_log_likelihood and evidence_lengths of messages under this model minus
        their own counts.

        The same numbers as copying the model, taking the messages' counts out and
        scoring them, without copying: only the columns the messages use change
        (their counts, whether they stay active) and, through them, each class's total
        and the size of the active vocabulary.  A copy costs two class-by-vocabulary
        arrays per calibration fold, the largest memory peak of training a big model.
        Bernoulli scores every absent word and a ``max_features`` cut ranks all
        tokens anew, so those two still copy.

        The lengths are held out too: a word no other message has is no evidence for
        a model that never saw the message, and a new message's length counts only
        words the model knows.  Counted by the whole model instead, the bundled sample's
        messages were on average 2.3 times as long as held out (277 tokens against
        121) and Enron1's 1.2 times; held out, the calibrated score's ECE on the 70/30
        test splits fell from 0.0036 to 0.0032 (SpamAssassin) and from 0.0057 to
        0.0053 (Enron1).
        """
        X = self.fit_columns(X)
        if self.event_model == "bernoulli" or self.max_features is not None:
            without = self.copy()
            without.add_counts(X, labels, sign=-1)
            return without.joint_log_likelihood(X), without.evidence_lengths(X)
        rows = np.array([self.classes.index(label) for label in labels], dtype=np.int64)
        columns = used_columns(X)
        X_cols = X[:, columns]
        present = presence(X_cols)
        indicator = class_sums(rows, len(self.classes))
        taken_tokens = (indicator @ X_cols).toarray()
        taken_docs = (indicator @ present).toarray()
        # Counts stay counts, as add_counts keeps them when it subtracts.
        tokens_after = np.maximum(self.token_counts[:, columns] - taken_tokens, 0)
        docs_after = np.maximum(self.doc_counts[:, columns] - taken_docs, 0)
        active = self.active_features()
        active_after = tokens_after.sum(axis=0) >= max(self.min_count, 1)
        counts = self.doc_counts if self.by_presence else self.token_counts
        before = counts[:, columns]
        after = docs_after if self.by_presence else tokens_after
        # The inactive columns are few (counts taken back to zero): summing all and
        # taking those out spares a float copy of the mask the width of the vocabulary
        # (16 MB at make bench-scale's 100,000 messages, at training's memory peak).
        totals = counts.sum(axis=1) - counts[:, ~active].sum(axis=1)
        totals = (
            totals - before[:, active[columns]].sum(axis=1) + after[:, active_after].sum(axis=1)
        )
        size = active.sum() - (active[columns] & ~active_after).sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            log_prob = np.log(after + self.alpha) - np.log(totals + self.alpha * size)[:, None]
            class_counts = np.maximum(
                self.class_counts - np.bincount(rows, minlength=len(self.classes)), 0
            )
            prior = np.log(class_counts) - np.log(max(class_counts.sum(), 1))
        log_prob[:, ~active_after] = 0.0
        scored = present if self.by_presence else X_cols
        lengths = np.asarray(X_cols @ active_after.astype(np.float64)).ravel()
        return np.asarray(scored @ log_prob.T) + prior, lengths

    def held_out_active(
        self, X: sp.spmatrix, labels: Sequence[str], active: np.ndarray
    ) -> np.ndarray:
        """:meth:`active_features` of this model minus the counts of ``X``, given
        ``active``, this model's own.

        With ``min_count`` 1 and no ``max_features`` a column leaves only when every
        count of it is in ``X``, so ``active`` itself is returned: the held-out scores
        already ignore such columns, and anything trained on the same mail (the
        mistake table) has counts there only from these messages.
        """
        if self.max_features is not None:
            without = self.copy()
            without.add_counts(self.fit_columns(X), labels, sign=-1)
            return without.active_features()
        if self.min_count <= 1:
            return active
        X = self.fit_columns(X)
        rows = np.array([self.classes.index(label) for label in labels], dtype=np.int64)
        columns = used_columns(X)
        indicator = class_sums(rows, len(self.classes))
        taken = (indicator @ X[:, columns]).toarray()
        remaining = np.maximum(self.token_counts[:, columns] - taken, 0).sum(axis=0)
        held_out = active.copy()
        held_out[columns] &= remaining >= self.min_count
        return held_out

    def evidence_lengths(self, X: sp.spmatrix) -> np.ndarray:
        """Occurrences, per message, of the tokens the model scores."""
        X = self.fit_columns(X)
        return np.asarray(X @ self.active_features().astype(np.float64)).ravel()

    def fit_columns(self, X: sp.spmatrix) -> sp.csr_matrix:
        """``X`` as a CSR matrix exactly as wide as the model's counts: a vocabulary
        may have grown past them (columns the model has no counts for score nothing),
        and a narrower matrix gains empty columns."""
        X = sp.csr_matrix(X)
        if X.shape[1] == self.n_features:
            return X
        if X.shape[1] < self.n_features:
            X.resize((X.shape[0], self.n_features))
            return X
        return X[:, : self.n_features]

    def token_weights(self, positive: str, negative: str) -> np.ndarray:
        """What each feature adds to log P(positive|x) - log P(negative|x) when present
        (by presence) or per occurrence (multinomial); features the model ignores add
        nothing.  For a Bernoulli model this is the present word's term against the
        absent one's, since the absent terms of all words are part of the constant."""
        if self.event_model == "bernoulli":
            weights = self._bernoulli_parts()[0]
        else:
            weights = self.feature_log_prob()
        difference = weights[self.classes.index(positive)] - weights[self.classes.index(negative)]
        difference[~self.active_features()] = 0.0
        return difference

    def log_odds_ratios(self, positive: str, negative: str) -> np.ndarray:
        """log P(w|positive) - log P(w|negative) for every feature."""
        log_prob = self.feature_log_prob()
        return log_prob[self.classes.index(positive)] - log_prob[self.classes.index(negative)]

    # -- predictions ----------------------------------------------------------------

    @staticmethod
    def normalise(jll: np.ndarray) -> np.ndarray:
        """Log posteriors from joint log-likelihoods (see scores.log_posteriors)."""
        return log_posteriors(jll)

    def predict_log_proba(self, X: sp.spmatrix) -> np.ndarray:
        return self.normalise(self.joint_log_likelihood(X))

    def predict_proba(self, X: sp.spmatrix) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: sp.spmatrix) -> list[str]:
        best = np.argmax(self.joint_log_likelihood(X), axis=1)
        return [self.classes[i] for i in best]

    def log_odds_from_jll(self, jll: np.ndarray, positive: str) -> np.ndarray:
        """log P(positive|x) - log P(not positive|x) (see scores.log_odds_against_rest)."""
        return log_odds_against_rest(jll, self.classes.index(positive))

    def log_odds(self, X: sp.spmatrix, positive: str) -> np.ndarray:
        return self.log_odds_from_jll(self.joint_log_likelihood(X), positive)

    def copy(self) -> NaiveBayes:
        state = self.to_state()
        for key in ("class_counts", "token_counts", "doc_counts"):
            state[key] = state[key].copy()
        copied = NaiveBayes.from_state(state)
        copied.column_tokens = self.column_tokens
        return copied

    # -- state ----------------------------------------------------------------------

    def to_state(self, n_features: int | None = None) -> dict[str, Any]:
        """The model for its file, its counts given ``n_features`` columns (the zeros
        of tokens counted nowhere) when they stop short of that."""
        extra = 0 if n_features is None else max(n_features - self.n_features, 0)

        def padded(counts: np.ndarray) -> np.ndarray:
            return np.pad(counts, ((0, 0), (0, extra))) if extra else counts

        return {
            "event_model": self.event_model,
            "alpha": self.alpha,
            "min_count": self.min_count,
            "max_features": self.max_features,
            "selection": self.selection,
            "classes": list(self.classes),
            "class_counts": self.class_counts,
            "token_counts": padded(self.token_counts),
            "doc_counts": padded(self.doc_counts),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> NaiveBayes:
        model = cls(
            event_model=state["event_model"],
            alpha=state["alpha"],
            min_count=state["min_count"],
            max_features=state.get("max_features"),
            selection=state.get("selection", "ig"),
        )
        model.classes = list(state["classes"])
        model.class_counts = np.asarray(state["class_counts"], dtype=np.int64)
        model.token_counts = np.asarray(state["token_counts"], dtype=np.float64)
        model.doc_counts = np.asarray(state["doc_counts"], dtype=np.float64)
        return model
