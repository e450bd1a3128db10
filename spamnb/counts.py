"""The counts stage: token lists to a sparse document-by-token count matrix.

A :class:`Vocabulary` maps tokens to column numbers.  Training grows it; scoring only
looks tokens up, so words the model never saw are simply absent from the row, which
is exactly what Naive Bayes needs (an unseen word carries no evidence either way).
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain, islice, repeat
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

    from .tokens import TokenizerSettings

__all__ = [
    "LocalCounts",
    "Vocabulary",
    "class_sums",
    "count_matrix",
    "cut_flags",
    "local_counts",
    "number_tokens",
    "presence",
    "to_vocabulary",
    "token_crcs",
    "used_columns",
]


class Vocabulary:
    """An append-only token -> column mapping; column order is first-seen order."""

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        self.tokens: list[str] = []
        # A defaultdict without a factory is a dict, until one is given to number new
        # tokens inside C (see :meth:`numbered`).
        self.index: defaultdict[str, int] = defaultdict()
        # The scoring table's hash of each token in column order, for the first
        # len(hashes) tokens (table.vocabulary_hashes keeps it; tokens are only ever
        # appended, so a hash once taken stays right).
        self.hashes: np.ndarray | None = None
        # Each token's CRC-32 (see :func:`token_crcs`) in column order, in slices, kept
        # by :meth:`numbered` while every token has one: the order the mistake table
        # is trained in starts from them (see mistakes.content_keys).  Worked out as
        # training counts, 0.13 s of work leaves the end of training, where it was
        # all there was to do.
        self._crcs: list[np.ndarray] | None = []
        for token in tokens:
            self.add(token)

    @classmethod
    def from_tokens(cls, tokens: list[str]) -> Vocabulary:
        """A vocabulary of distinct ``tokens`` in that order, built in one dict call
        (loading a model of 10^6 tokens token by token took a second)."""
        vocabulary = cls()
        vocabulary.tokens = list(tokens)
        vocabulary.index = defaultdict(
            None, zip(vocabulary.tokens, range(len(tokens)), strict=True)
        )
        if len(vocabulary.index) != len(vocabulary.tokens):
            raise ValueError("vocabulary has repeated tokens")
        vocabulary._crcs = None
        return vocabulary

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: object) -> bool:
        return token in self.index

    def catch_up(self) -> None:
        """Append to ``tokens`` what was added to ``index`` directly (dicts keep
        insertion order), as :func:`number_tokens` adds them."""
        added = len(self.index) - len(self.tokens)
        if added > 0:
            # From the end: walking the dict from its start would cost the whole
            # vocabulary for every small batch.
            self.tokens.extend(reversed(list(islice(reversed(self.index), added))))

    def numbered(self, tokens: Iterable[str]) -> np.ndarray:
        """The column of each token, new ones added in the order they come.

        A missing token is numbered by the dict's own size, all inside C (see
        :func:`number_tokens`): looking every token up, then adding the new ones
        (dict.get, a list of the new ones, dict.update) took 0.32 to 0.40 s against
        0.29 to 0.33 (three runs) to map the SpamAssassin training part's batches,
        720,000 batch tokens, onto its vocabulary of 500,000.
        """
        first = len(self.tokens)
        try:
            columns = number_tokens(self.index, tokens)
        finally:
            # Whatever was numbered before an error is a token of the vocabulary.
            self.catch_up()
        if self._crcs is not None and len(self.tokens) > first:
            self._crcs.append(token_crcs(self.tokens[first:]))
        return columns

    def add(self, token: str) -> int:
        column = self.index.get(token)
        if column is None:
            column = self.index[token] = len(self.tokens)
            self.tokens.append(token)
            self._crcs = None
        return column

    def crcs(self) -> np.ndarray | None:
        """Every token's :func:`token_crcs`, in column order, if they were kept."""
        if self._crcs is None:
            return None
        if len(self._crcs) != 1:
            self._crcs = [np.concatenate([np.zeros(0, np.uint32), *self._crcs])]
        crcs = self._crcs[0]
        return crcs if len(crcs) == len(self.tokens) else None

    def stop_keeping_crcs(self) -> None:
        """Keep no more CRCs: a run too large for its calibration sample needs those
        of the sample's tokens only."""
        self._crcs = None


def number_tokens(index: defaultdict[str, int], tokens: Iterable[str]) -> np.ndarray:
    """The number of each token in ``index``, a missing one numbered by the index's
    size as it is added: all inside C, as map runs no Python code per token (on the
    hottest loop of training a fifth faster than setdefault(token, len(index)) in a
    list comprehension, and three times Vocabulary.add)."""
    index.default_factory = index.__len__
    try:
        return np.fromiter(map(index.__getitem__, tokens), dtype=np.int64)
    finally:
        # The factory is the dict's own method, a reference cycle: broken here, the
        # dict goes as soon as it is unused instead of at the next garbage collection
        # (which had raised training's peak memory by 17 MB at 25,000 messages).
        index.default_factory = None


def token_crcs(tokens: Sequence[str], seed: int = 0) -> np.ndarray:
    """The CRC-32 of each token's UTF-8, started from ``seed``, as uint32."""
    return np.fromiter(
        (zlib.crc32(token.encode("utf-8", "surrogatepass"), seed) for token in tokens),
        dtype=np.uint32,
        count=len(tokens),
    )


def count_matrix(
    token_lists: Sequence[Sequence[str]], vocabulary: Vocabulary, *, grow: bool
) -> sp.csr_matrix:
    """Rows are messages, columns the vocabulary, values how often each token occurs.

    With ``grow`` new tokens are added to the vocabulary (training); without it they
    are dropped (scoring).  The CSR arrays are built in one pass over all tokens and
    duplicates summed by scipy, which is far faster than a dict per message.
    """
    n = len(token_lists)
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=n)
    index = vocabulary.index
    if grow:
        indices = vocabulary.numbered(chain.from_iterable(token_lists))
        per_row = lengths
    else:
        # Every token looked up inside C (map over dict.get), unknown ones (-1) then
        # dropped by numpy: a third of the time of a comprehension testing each.
        indices = np.fromiter(
            map(index.get, chain.from_iterable(token_lists), repeat(-1)),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        known = indices >= 0
        per_row = lengths
        if not known.all():
            rows = np.repeat(np.arange(n), lengths)[known]
            per_row = np.bincount(rows, minlength=n)
            indices = indices[known]
    import scipy.sparse as sp

    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_row, out=indptr[1:])
    data = np.ones(len(indices), dtype=np.float64)
    matrix = sp.csr_matrix((data, indices, indptr), shape=(n, len(vocabulary)))
    matrix.sum_duplicates()
    return matrix


def class_sums(
    rows: np.ndarray, n_classes: int, weights: float | np.ndarray = 1.0
) -> sp.csr_matrix:
    """A classes-by-messages matrix whose product with a matrix of the messages' rows
    sums them per class (message i into class ``rows[i]``, times its weight): one
    sparse product per statistic, however many messages."""
    import scipy.sparse as sp

    values = np.broadcast_to(np.asarray(weights, dtype=np.float64), (len(rows),))
    return sp.csr_matrix((values, (rows, np.arange(len(rows)))), shape=(n_classes, len(rows)))


def presence(X: sp.spmatrix) -> sp.csr_matrix:
    """The count matrix ``X`` with every stored count set to one: the rows of the
    models that count a token once per message.

    When ``X`` stores each column at most once per row, as count_matrix makes it, the
    result shares its column numbers and row pointers instead of copying them: the
    copy, and a second array of ones beside it, made the memory peak of training
    100,000 messages (a calibration fold, 579 MB).  Neither matrix may then be changed
    in place; spamnb only multiplies them.
    """
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    if not X.has_canonical_format:
        # Summed first, so that a column stored twice in a row still counts once.
        X = sp.csr_matrix(X, copy=True)
        X.sum_duplicates()
    return sp.csr_matrix((np.ones(X.nnz), X.indices, X.indptr), shape=X.shape)


def used_columns(X: sp.spmatrix) -> np.ndarray:
    """The columns ``X`` stores anything in, ascending.

    Marked in a mask the width of ``X``: np.unique sorts or hashes the stored column
    numbers instead, 250 ms for the 600,000 of one calibration fold of the
    SpamAssassin training part against 1.5 ms, and calibration asks twice per fold.
    """
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    used = np.zeros(X.shape[1], dtype=bool)
    used[X.indices] = True
    return np.flatnonzero(used)


class LocalCounts(NamedTuple):
    """A batch's counts over its own tokens, as the arrays of a canonical CSR matrix
    (each row's columns ascending, each once) whose columns are ``tokens``.

    Not a scipy matrix: a worker forked before the parent imported scipy never
    imports it (0.16 s of start-up; see ``cli.train``)."""

    tokens: list[str]
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray


def local_counts(token_lists: Sequence[Sequence[str]]) -> LocalCounts:
    """The counts of a batch over its own vocabulary (first-seen order).

    Workers count this way, knowing nothing of the model; :func:`to_vocabulary` then
    maps the columns onto the model's.
    """
    index: defaultdict[str, int] = defaultdict()
    n = len(token_lists)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, token_lists), dtype=np.int64, count=n), out=indptr[1:])
    columns = number_tokens(index, chain.from_iterable(token_lists))
    # Each message's distinct tokens, in column order, with their counts: what a
    # scipy matrix's sum_duplicates() makes of them, by one sort of numbers (a tenth
    # faster).
    width = len(index)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    pairs, counts = np.unique(rows * width + columns, return_counts=True)
    rows = pairs // max(width, 1)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return LocalCounts(list(index), counts.astype(np.float64), pairs - rows * width, indptr)


def to_vocabulary(counts: LocalCounts, vocabulary: Vocabulary, *, grow: bool) -> sp.csr_matrix:
    """The ``counts`` of a batch as a matrix with the columns of ``vocabulary``.

    With ``grow`` the batch's new tokens are added in its first-seen order, so batches
    mapped in message order build the very vocabulary that counting all the messages
    at once builds.  Without it, tokens the vocabulary lacks are dropped.
    """
    import scipy.sparse as sp

    tokens = counts.tokens
    if grow:
        first = len(vocabulary)
        columns = vocabulary.numbered(tokens)
        if np.count_nonzero(columns >= first) != len(vocabulary) - first:
            raise ValueError("a batch's tokens must be distinct; the vocabulary is broken")
    else:
        index = vocabulary.index
        columns = np.fromiter(map(index.get, tokens, repeat(-1)), np.int64, count=len(tokens))
    n_rows = len(counts.indptr) - 1
    mapped = columns[counts.indices] if len(tokens) else counts.indices.astype(np.int64)
    shape = (n_rows, len(vocabulary))
    if grow or (mapped >= 0).all():
        result = sp.csr_matrix((counts.data, mapped, counts.indptr), shape=shape)
    else:
        keep = mapped >= 0
        rows = np.repeat(np.arange(n_rows), np.diff(counts.indptr))[keep]
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
        result = sp.csr_matrix((counts.data[keep], mapped[keep], indptr), shape=shape)
    # Columns in order within each row, as count_matrix leaves them: sums of the
    # same numbers in another order can differ in the last bit.
    result.sort_indices()
    return result


def cut_flags(
    sizes: Sequence[int], token_counts: Sequence[int] | np.ndarray, settings: TokenizerSettings
) -> tuple[np.ndarray, np.ndarray]:
    """Per message, whether the tokenizer read only its first ``max_bytes`` (from the
    messages' sizes in bytes), and whether its tokens reached the cap ``max_tokens``
    (from ``token_counts``, each message's number of tokens)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    by_size = sizes > settings.max_bytes if settings.max_bytes else np.zeros(len(sizes), bool)
    by_tokens = np.zeros(len(sizes), bool)
    if settings.max_tokens:
        by_tokens = np.asarray(token_counts, dtype=np.int64) >= settings.max_tokens
    return by_size, by_tokens
