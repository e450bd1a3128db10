"""The counts stage: token lists to a sparse document-by-token count matrix.

A :class:`Vocabulary` maps tokens to column numbers.  Training grows it; scoring only
looks tokens up, so words the model never saw are simply absent from the row, which
is exactly what Naive Bayes needs (an unseen word carries no evidence either way).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["Vocabulary", "count_matrix"]


class Vocabulary:
    """An append-only token -> column mapping; column order is first-seen order."""

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        self.tokens: list[str] = []
        self.index: dict[str, int] = {}
        for token in tokens:
            self.add(token)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: object) -> bool:
        return token in self.index

    def add(self, token: str) -> int:
        column = self.index.get(token)
        if column is None:
            column = self.index[token] = len(self.tokens)
            self.tokens.append(token)
        return column


def count_matrix(
    token_lists: Sequence[Sequence[str]], vocabulary: Vocabulary, *, grow: bool
) -> sp.csr_matrix:
    """Rows are messages, columns the vocabulary, values how often each token occurs.

    With ``grow`` new tokens are added to the vocabulary (training); without it they
    are dropped (scoring).  The CSR arrays are built in one pass over all tokens and
    duplicates summed by scipy, which is far faster than a dict per message.
    """
    lookup = vocabulary.index
    columns: list[int] = []
    indptr = np.zeros(len(token_lists) + 1, dtype=np.int64)
    for row, tokens in enumerate(token_lists):
        if grow:
            add = vocabulary.add
            columns.extend(add(token) for token in tokens)
        else:
            columns.extend(c for c in map(lookup.get, tokens) if c is not None)
        indptr[row + 1] = len(columns)
    indices = np.asarray(columns, dtype=np.int64)
    data = np.ones(len(indices), dtype=np.float64)
    matrix = sp.csr_matrix((data, indices, indptr), shape=(len(token_lists), len(vocabulary)))
    matrix.sum_duplicates()
    return matrix
