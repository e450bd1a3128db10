"""The mistake table: a second set of presence counts, of the mail the filter finds hard.

CRM114 does not count all mail: it starts empty and adds a message only when the
model, as it stands, gets it wrong or nearly wrong, and repeats the passes until it
gets every message right by a margin (its "thick threshold" training).  Its counts
then weigh the hard mail (mailing-list spam written in ham's words, newsletters that
read as spam) far above the easy majority that dominates a Naive Bayes model's
counts.  spamnb keeps both: the Naive Bayes counts of all mail and this table, and
scores a message by the mean of the two joint log-likelihoods.

The experiment behind it (docs/accuracy.md, "The mistake table"): 5-fold cross-
validation on the training parts of the SpamAssassin and Enron1 splits, on seven
fresh fold partitions run after the weight was fixed.  The mean of the two made
204 errors (69 false positives) against the Naive Bayes's 252 (83) on SpamAssassin
(sign test over messages p = 0.002) and 338 (84) against 361 (107) on Enron1
(p = 0.39); the table alone, as CRM114 uses it, was better on SpamAssassin (211) and
worse on Enron1 (387), and one table holding both sets of counts made 232 and 360.

The table's counts are per class and token: how many copies of messages containing
the token were added.  Its probabilities are Lidstone-smoothed like the model's
boolean event model, over the tokens the table has seen; a token it has not seen
adds nothing (as a token outside the vocabulary adds nothing to the model), and
there is no class prior: the model supplies that.  Which messages are added depends
on the order they are met in, so training walks them in an order drawn from their
content (see :func:`content_order`): the same mail in the same runs gives the same
table, whatever order its folders list it in (a run of more than 10,000 new
messages trains it on a sample chosen by a hash of each message's digest, for the
same reason).  Each message's number of copies
is returned so that the filter can take them back exactly when the message is
forgotten or moved to another class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .calibration import LENGTH_EXPONENT
from .counts import class_sums, token_crcs, used_columns

__all__ = [
    "MISTAKE_WEIGHT",
    "MistakeTable",
    "block_sums",
    "class_rows",
    "content_keys",
    "content_order",
]

# The weight of the table's joint log-likelihood against the model's.  Fixed at one
# half before the fresh fold partitions were run; 0.25 and 0.75 measured worse on
# both corpora there.
MISTAKE_WEIGHT = 0.5
# CRM114's settings as the experiment measured them: a message is added while its
# margin (the table's log-odds for its own class against the strongest other,
# divided by its number of distinct known tokens to the power LENGTH_EXPONENT: the
# filter's ranking score, but for presence, where that divides by occurrences) is
# at most MARGIN, in at most PASSES passes.  Margins 0 to 8 were tried;
# 4 made the fewest errors on SpamAssassin and the table used about a third of the
# mail.  ALPHA is the model's default smoothing strength.
MARGIN = 4.0
PASSES = 10
ALPHA = 0.01
COUNT_TYPE = np.float32


def block_sums(
    indices: np.ndarray, indptr: np.ndarray, values: np.ndarray, start: int, end: int
) -> np.ndarray:
    """``values`` (one row per column) summed over the columns of each of the messages
    start..end-1 of a CSR structure (``indices``, ``indptr``): ``P[start:end] @
    values`` for their presence rows ``P``.

    A few messages are summed by gathering their columns' values (building a matrix
    costs more than that); more go through a sparse product, which does not copy
    every entry's values first, over a matrix built for them alone.
    """
    first, last = indptr[start], indptr[end]
    if end - start > 64:
        block = sp.csr_matrix(
            (np.ones(last - first), indices[first:last], indptr[start : end + 1] - first),
            shape=(end - start, len(values)),
        )
        return block @ values
    summed = np.zeros((end - start, *values.shape[1:]))
    # Only messages with columns: each then sums up to the next one's start.
    filled = indptr[start + 1 : end + 1] > indptr[start:end]
    if filled.any():
        offsets = indptr[start:end][filled] - first
        # take(): numpy 2.4 gathers rows of a 2-D array by fancy indexing seven to ten
        # times as slowly (22 to 31 ms against 3.1 to 3.2 for a million rows of two
        # columns).
        summed[filled] = np.add.reduceat(values.take(indices[first:last], axis=0), offsets, axis=0)
    return summed


def content_order(
    X: sp.csr_matrix,
    tokens: Sequence[str],
    seed: int = 0,
    digests: Sequence[str] | None = None,
    crcs: np.ndarray | None = None,
) -> np.ndarray:
    """An order of the messages (rows of ``X``, whose columns are ``tokens``) that
    depends on what they contain, not on where they stand: messages are walked by
    their :func:`content_keys`.

    A seeded permutation of the rows would make the table depend on the order the
    mail was read in: the same SpamAssassin training part made 14 test errors when
    `evaluate --test-size` trained on it folder by folder, and 16 when `train` read
    the same messages from two folders of hard links (the benchmark's layout), and
    the order in which a Maildir's files are listed differs between file systems.
    Messages with the same tokens have the same key; their ``digests``, when given,
    order them (which one holds the copies matters when one is forgotten).
    ``crcs`` are the tokens' :func:`counts.token_crcs` from seed 0, if at hand.
    """
    keys = content_keys(X, tokens, seed, crcs)
    if digests is None:
        return np.argsort(keys, kind="stable")
    digest_rank = np.unique(np.asarray(digests, dtype=str), return_inverse=True)[1]
    return np.lexsort((digest_rank, keys))


def content_keys(
    X: sp.csr_matrix, tokens: Sequence[str], seed: int = 0, crcs: np.ndarray | None = None
) -> np.ndarray:
    """Each message's key: the sum, modulo 2^32, of a CRC-32 (started from ``seed``)
    of each of its tokens (:func:`counts.token_crcs`; given as ``crcs`` for seed 0,
    they are not worked out again).

    A CRC is the same in every process, unlike Python's salted ``hash``; summed over
    hundreds of tokens, modulo 2^32, the keys spread evenly, so an order by key is as
    good as random and unrelated to a message's length.  Working them out costs about
    0.13 s for the 500,000 tokens of the SpamAssassin training part.
    """
    if crcs is not None and seed == 0 and len(crcs) >= X.shape[1]:
        # Unsigned 32-bit sums wrap around: they are the sums modulo 2^32.
        column_keys = crcs[: X.shape[1]]
    else:
        used = np.zeros(X.shape[1], dtype=bool)
        used[X.indices] = True
        column_keys = np.zeros(X.shape[1], dtype=np.uint32)
        step = 1 << 16
        for start in range(0, X.shape[1], step):
            # A slice of the vocabulary at a time: a Python list of every used column
            # number raised the peak of training 100,000 messages from 577 to 589 MB.
            columns = np.flatnonzero(used[start : start + step]) + start
            column_keys[columns] = token_crcs([tokens[c] for c in columns.tolist()], seed)
        del used
    n = X.shape[0]
    keys = np.zeros(n, dtype=np.uint32)
    rows_at_once = 4096  # so that the gathered keys stay small
    for start in range(0, n, rows_at_once):
        end = min(start + rows_at_once, n)
        first, last = X.indptr[start], X.indptr[end]
        filled = X.indptr[start + 1 : end + 1] > X.indptr[start:end]
        if filled.any():
            offsets = X.indptr[start:end][filled] - first
            sums = np.add.reduceat(column_keys[X.indices[first:last]], offsets)
            keys[start:end][filled] = sums
    return keys


_ONE_BLOCK = np.zeros(1, dtype=np.intp)


def margin_divisors(longest: int) -> np.ndarray:
    """What a margin is divided by for each number of known tokens up to ``longest``
    (a whole number, as the values' last column is 1 for each active column): worked
    out once for a walk rather than in each block."""
    return np.maximum(np.arange(longest + 1, dtype=np.float64), 1) ** LENGTH_EXPONENT


def _block_margins(
    indices: np.ndarray,
    indptr: np.ndarray,
    values: np.ndarray,
    per_token: np.ndarray,
    labels: np.ndarray,
    divisors: np.ndarray,
    start: int,
    end: int,
    ignored: np.ndarray | None = None,
) -> np.ndarray:
    """The margins :meth:`MistakeTable.train` gives messages start..end-1: each one's
    score for its own class over the best other's (not an ``ignored`` one), per known
    token to a power."""
    summed = block_sums(indices, indptr, values, start, end)
    known = summed[:, -1]
    scores = summed[:, :-1] - known[:, None] * per_token
    own = labels[start:end]
    mine = scores[np.arange(len(own)), own]
    scores[np.arange(len(own)), own] = -np.inf
    if ignored is not None:
        scores[:, ignored] = -np.inf
    margins = (mine - scores.max(axis=1)) / divisors[known.astype(np.int64)]
    margins[known == 0] = 0.0
    # A message with no tokens: no copy of it can change its margin.
    margins[indptr[start + 1 : end + 1] == indptr[start:end]] = np.inf
    return margins


def _single_margin(
    indices: np.ndarray,
    start: int,
    end: int,
    values: np.ndarray,
    per_token: np.ndarray,
    label: int,
    divisors: np.ndarray,
    ignored: np.ndarray | None = None,
) -> float:
    """The margin :meth:`MistakeTable.train` gives the message whose columns are
    indices[start:end], as :func:`_block_margins` gives it in a block of its own: the
    same sums by the same numpy calls (``np.add.reduceat``, as :func:`block_sums`
    gathers a few rows; a plain sum adds in another order), the rest on one row.  In
    the first pass, where about a message in four is added and each addition starts a
    block of one, it took the walk of the SpamAssassin training part from 0.37 s to
    0.33 (its first pass from 0.17 s to 0.14)."""
    if start == end:
        return math.inf  # no tokens: no copy of it can change its margin
    summed = np.add.reduceat(values.take(indices[start:end], axis=0), _ONE_BLOCK, axis=0)[0]
    known = summed[-1]
    if known == 0:
        return 0.0
    scores = summed[:-1] - known * per_token
    mine = scores[label]
    scores[label] = -np.inf
    if ignored is not None:
        scores[ignored] = -np.inf
    return float((mine - scores.max()) / divisors[int(known)])


def mixed_with_mistakes(jll: np.ndarray, table_jll: np.ndarray, weight: float) -> np.ndarray:
    """The Naive Bayes's joint log-likelihoods ``jll`` mixed with the mistake table's
    at ``weight``; what the Naive Bayes holds impossible (-inf: a class without mail)
    stays so, where at weight 1 the product 0 * -inf was NaN, and so was every score
    (review 29)."""
    with np.errstate(invalid="ignore"):
        mixed = (1 - weight) * jll + weight * table_jll
    return np.where(np.isneginf(jll), -np.inf, mixed)


class MistakeTable:
    """Per-class counts of the messages added for being hard, and their scoring."""

    def __init__(self, weight: float = MISTAKE_WEIGHT) -> None:
        if not (0.0 <= weight <= 1.0):
            raise ValueError(f"the mistake table's weight must be in [0, 1], not {weight}")
        self.weight = float(weight)
        # Whole numbers, exact in float32 up to 2^24 copies of a token: half the
        # memory of float64 for an array as wide as the vocabulary, which at 100,000
        # messages made the difference to the 600 MB that training must stay under.
        # Arithmetic on them is done in float64.
        self.counts = np.zeros((0, 0), dtype=COUNT_TYPE)

    def fit_shape(self, n_classes: int, n_features: int) -> None:
        """Grow to the model's classes and vocabulary (both only ever grow)."""
        rows, columns = self.counts.shape
        if rows < n_classes or columns < n_features:
            grown = np.zeros((max(rows, n_classes), max(columns, n_features)), COUNT_TYPE)
            grown[:rows, :columns] = self.counts
            self.counts = grown

    def has_every_class(self, with_mail: np.ndarray) -> bool:
        """Whether each class of the model that has mail (``with_mail``, a flag per
        class; two or more of them) has a row holding some.

        A class the model holds no mail of, as moving all of a third class's mail
        elsewhere leaves one, scores nothing, and its row is empty too (its copies were
        taken back): asking for it had turned the table off for good (review 28)."""
        classes = np.flatnonzero(with_mail)
        rows = self.counts.shape[0]
        if len(classes) < 2 or classes[-1] >= rows:
            return False
        return bool(self.counts[classes].any(axis=1).all())

    # Scoring only reads the table: it may be narrower than the model's vocabulary
    # (tokens learnt in a run that did not train it), and a column it lacks is one it
    # has never seen, which scores nothing.  Only training grows it (fit_shape).

    def active(self, usable: np.ndarray) -> np.ndarray:
        """The columns the table scores, as wide as ``usable`` (the model's active
        columns, at least as wide as the table): seen by the table and scored by the
        model."""
        width = self.counts.shape[1]
        if len(usable) < width:
            raise ValueError(f"{len(usable)} usable columns for a table of {width}")
        active = np.zeros(len(usable), dtype=bool)
        active[:width] = self.counts.any(axis=0) & usable[:width]
        return active

    def _totals(self, active: np.ndarray) -> np.ndarray:
        """Each class's copies of tokens over the ``active`` columns, in float64."""
        width = self.counts.shape[1]
        return self.counts.sum(axis=1, where=active[:width], dtype=np.float64)

    def log_prob(self, usable: np.ndarray) -> np.ndarray:
        """log P(w|c) by the table, shape (classes, len(usable)); 0 off its active
        columns."""
        log_prob = np.zeros((self.counts.shape[0], len(usable)))
        self.add_log_prob(log_prob, usable, 1.0)
        return log_prob

    def add_log_prob(self, out: np.ndarray, usable: np.ndarray, weight: float) -> None:
        """``out += weight * log_prob(usable)``, a slice of columns at a time.

        Saving a model writes the pipe's table of weights, the memory peak of training
        a large mailbox: there each whole-vocabulary temporary is 20 to 40 MB."""
        active = self.active(usable)
        with np.errstate(divide="ignore"):  # no active column: nothing is scored
            per_class = np.log(self._totals(active) + ALPHA * np.count_nonzero(active))
        step, width = 1 << 16, min(self.counts.shape[1], len(usable))
        for start in range(0, width, step):
            piece = slice(start, min(start + step, width))
            log_prob = np.log(self.counts[:, piece].astype(np.float64) + ALPHA)
            log_prob -= per_class[:, None]
            log_prob[:, ~active[piece]] = 0.0
            log_prob *= weight
            out[:, piece] += log_prob

    def joint(self, P: sp.csr_matrix, usable: np.ndarray) -> np.ndarray:
        """The table's log-likelihood of each message (presence rows ``P``) per class."""
        return np.asarray(P @ self.log_prob(usable).T)

    def add(self, P: sp.csr_matrix, rows: np.ndarray, copies: np.ndarray, sign: int = 1) -> None:
        """Add (or take back) ``copies`` of each presence row to its class ``rows``."""
        indicator = class_sums(rows, self.counts.shape[0], sign * np.asarray(copies, float))
        n = P.shape[1]
        self.counts[:, :n] += (indicator @ P).toarray()
        if sign < 0:
            np.maximum(self.counts, 0, out=self.counts)

    def held_out_joint(
        self, P: sp.csr_matrix, rows: np.ndarray, copies: np.ndarray, usable: np.ndarray
    ) -> np.ndarray:
        """:meth:`joint` by the table minus these messages' own copies (calibration).

        Only the columns the messages use change, and through them each class's total
        and the number of active columns, so nothing of the vocabulary's size is copied.
        """
        columns = used_columns(P)
        columns = columns[usable[columns] & (columns < self.counts.shape[1])]
        P_columns = P[:, columns]
        indicator = class_sums(rows, self.counts.shape[0], np.asarray(copies, float))
        before = self.counts[:, columns].astype(np.float64)
        after = np.maximum(before - (indicator @ P_columns).toarray(), 0)
        active = self.active(usable)
        active_after = after.sum(axis=0) > 0
        totals = self._totals(active)
        totals = totals - before[:, active[columns]].sum(axis=1) + after[:, active_after].sum(1)
        size = active.sum() - (active[columns] & ~active_after).sum()
        with np.errstate(divide="ignore"):  # no active column left: nothing is scored
            log_prob = np.log(after + ALPHA) - np.log(totals + ALPHA * size)[:, None]
        log_prob[:, ~active_after] = 0.0
        return np.asarray(P_columns @ log_prob.T)

    def train(
        self,
        X: sp.csr_matrix,
        rows: np.ndarray,
        seed: int = 0,
        tokens: Sequence[str] | None = None,
        digests: Sequence[str] | None = None,
        order: np.ndarray | None = None,
        ignored: np.ndarray | None = None,
    ) -> np.ndarray:
        """Add the messages (count rows ``X``, counted by presence; class numbers
        ``rows``) the table gets wrong by less than ``MARGIN``, pass after pass;
        returns each one's copies.  A message's margin is over the other classes but
        the ``ignored`` ones (a flag per class: those the model has no mail of, whose
        empty rows would outvote every class on the tokens they have not seen).  A row
        must hold each column once, as count matrices do (checking would cost a pass
        over the matrix).  A message with
        no tokens at all is never added: no copy of it can change its score.

        Messages are taken one at a time, each scored by the table as the messages
        before it left it, in :func:`content_order` when the columns' ``tokens`` are
        given (the filter gives them, and the messages' ``digests`` when it has
        them), else in a permutation seeded by ``seed``; or in ``order``, when the
        caller has worked that out already.
        Scoring them one by one in Python cost 3 s for 4,232 messages, though after
        the first pass the table adds only a few dozen: so the next messages are
        scored together, up to the first that must be added; the table changes only
        there, and the rest are scored again from the message after it.  The number
        scored together grows while none is added, up to 1,024.

        Memory stays a small part of the messages' own: the work uses a reordered
        copy of their column numbers only (the matrix's data is rebuilt for one
        block at a time), renumbered to the columns they have, so the table's
        working copy is the size of those, not of the vocabulary.  (Copying the
        10,000 messages of the calibration sample as matrices, and numpy's unique()
        over their columns, cost 200 MB at the peak of training 25,000 messages.)
        """
        n, n_classes = X.shape[0], self.counts.shape[0]
        if ignored is not None and not ignored.any():
            ignored = None  # nothing to mask in every block
        copies = np.zeros(n, dtype=np.int64)
        if n == 0 or n_classes < 2:
            return copies
        if order is None and tokens is None:
            order = np.random.default_rng(seed).permutation(n)
        elif order is None:
            order = content_order(X, tokens, seed, digests)
        labels = np.asarray(rows)[order]
        starts, ends = X.indptr[:-1][order], X.indptr[1:][order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=indptr[1:])
        indices = np.concatenate(
            [X.indices[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
            or [np.zeros(0, dtype=X.indices.dtype)]
        )
        # Every column the messages have, whatever the model's cut-offs: those are
        # scoring settings, changed after training (``spamnb tune``, ``classify
        # --max-features``), and the table's counts must not depend on them.
        used = np.zeros(X.shape[1], dtype=bool)
        used[indices] = True
        local = np.flatnonzero(used)
        renumber = np.zeros(X.shape[1], dtype=indices.dtype)
        renumber[local] = np.arange(len(local), dtype=indices.dtype)
        for piece in range(0, len(indices), 1 << 20):  # in place, a piece at a time
            indices[piece : piece + (1 << 20)] = renumber[indices[piece : piece + (1 << 20)]]
        del used, renumber
        # Columns the table has no copy of have zero counts in every class, so the
        # totals over its active columns are the row sums.
        totals = self.counts.sum(axis=1, dtype=np.float64)
        n_active = int(np.count_nonzero(self.counts.any(axis=0)))
        active = self.counts[:, local].any(axis=0)
        # Per column: log(count + alpha) for each class while the column is active
        # (0 before), and last 1 if it is active, so one sum over a message's columns
        # gives its log-likelihoods and its number of known tokens.  A column becomes
        # active when its first copy is added.
        values = np.zeros((len(local), n_classes + 1))
        values[active, :n_classes] = np.log(
            self.counts[:, local[active]].T.astype(np.float64) + ALPHA
        )
        values[active, n_classes] = 1.0
        # What a block's scoring needs beside the table: each message's place and
        # class as Python numbers, and the margins' divisors.
        bounds, classes = indptr.tolist(), labels.tolist()
        divisors = margin_divisors(int(np.diff(indptr).max()))
        # An empty table has no totals; every message then scores 0 anyway.
        per_token = np.log(totals + ALPHA * n_active) if n_active else totals.copy()
        for _ in range(PASSES):
            added = 0
            position, chunk = 0, 1
            while position < n:
                end = min(position + chunk, n)
                if end - position == 1:
                    # One message, the most common block after an addition, scored with
                    # a third of the numpy calls of a block (see _single_margin).
                    margin = _single_margin(
                        indices,
                        bounds[position],
                        bounds[end],
                        values,
                        per_token,
                        classes[position],
                        divisors,
                        ignored,
                    )
                    hits = [0] if margin <= MARGIN else []
                else:
                    margins = _block_margins(
                        indices,
                        indptr,
                        values,
                        per_token,
                        labels,
                        divisors,
                        position,
                        end,
                        ignored,
                    )
                    hits = np.flatnonzero(margins <= MARGIN)
                if not len(hits):
                    position = end
                    # At most 1,024 messages a block, so that its matrix stays small.
                    chunk = min(chunk * 4, 1024)
                    continue
                first = position + int(hits[0])
                columns = indices[bounds[first] : bounds[first + 1]]
                label = classes[first]
                in_table = local[columns]
                self.counts[label, in_table] += 1
                new = columns[~active[columns]]
                active[new] = True
                values[new, n_classes] = 1.0
                n_active += len(new)
                # Before this copy the new columns had no count in any class.
                values[new, :n_classes] = np.log(ALPHA)
                values[columns, label] = np.log(
                    self.counts[label, in_table].astype(np.float64) + ALPHA
                )
                totals[label] += len(columns)
                per_token = np.log(totals + ALPHA * n_active)
                copies[order[first]] += 1
                added += 1
                position, chunk = first + 1, 1
            if not added:
                break
        return copies

    def to_state(self, n_classes: int, n_features: int) -> dict[str, Any]:
        """The table for the model file, a row for each of the model's ``n_classes``
        (a class the table has no row for yet has none of its mail), as wide as its
        ``n_features``."""
        columns = np.flatnonzero(self.counts.any(axis=0))
        counts = np.zeros((n_classes, len(columns)), dtype=np.int64)
        counts[: self.counts.shape[0]] = self.counts[:n_classes, columns]
        return {
            "weight": self.weight,
            "n_features": max(n_features, self.counts.shape[1]),
            "columns": columns.astype(np.int64),
            "counts": counts,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], n_classes: int, n_features: int) -> MistakeTable:
        table = cls(weight=float(state["weight"]))
        columns = np.asarray(state["columns"])
        counts = np.asarray(state["counts"])
        if not (
            np.issubdtype(columns.dtype, np.integer) and np.issubdtype(counts.dtype, np.number)
        ):
            raise ValueError("the mistake table holds values of the wrong type")
        if (
            counts.shape != (n_classes, len(columns))
            or columns.ndim != 1
            or not np.isfinite(counts).all()
            or (len(columns) and (columns.min() < 0 or columns.max() >= n_features))
            or (len(columns) > 1 and (np.diff(columns) <= 0).any())
            or (counts < 0).any()
        ):
            raise ValueError("the mistake table does not match the model's classes and vocabulary")
        table.counts = np.zeros((n_classes, n_features), dtype=COUNT_TYPE)
        table.counts[:, columns] = counts
        return table


def class_rows(classes: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    number = {label: i for i, label in enumerate(classes)}
    return np.fromiter((number[label] for label in labels), dtype=np.int64, count=len(labels))
