"""The training stage for mailboxes of any size: batches in, counts added, one calibration.

:meth:`SpamFilter.learn` takes every message's tokens at once.  Here messages arrive
in batches, are counted by :mod:`spamnb.parallel` (in this process, in worker
processes or on a Dask cluster) and are added to the filter in order, so the counts
equal those of ``learn`` on all of them.  The mistake table is trained and the
calibration fitted once at the end, on the counted messages when there are at most
``CALIBRATION_SAMPLE`` of them and on a uniform sample of that many otherwise: the
calibration has two parameters and two cut-offs to fit, the mistake table takes in
about a third of the mail it is shown, and keeping every message's row would make
memory grow with the mailbox.
"""

from __future__ import annotations

import ctypes
import hashlib
import heapq
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .counts import cut_flags
from .mail import digest_changed_in_format_7
from .parallel import BatchCounts, counted_in_order, default_jobs, in_background, started

if TYPE_CHECKING:
    # Imported where used: counting_started() forks its workers before a new model's
    # training imports scipy (see cli.train).
    import scipy.sparse as sp

    from .filter import HeldOut, SpamFilter
    from .tokens import TokenizerSettings

__all__ = [
    "CALIBRATION_SAMPLE",
    "CalibrationSample",
    "counting_started",
    "learn_batches",
    "learn_counted",
]

CALIBRATION_SAMPLE = 10_000


class CalibrationSample:
    """A uniform sample of at most ``size`` count rows, with their labels and digests:
    the messages whose digests hash lowest (a bottom-k sample).

    A reservoir sample keeps each row with a chance drawn as it arrives, so the same
    mail read in another order gave another sample, and with it another mistake
    table and calibration.  A hash of the digest picks the same messages whatever
    the order, as uniformly, in the same memory.
    """

    def __init__(self, size: int = CALIBRATION_SAMPLE, seed: int = 0) -> None:
        self.size = size
        self.seen = 0
        # Whole batches while the sample has room (slicing rows one by one is slow);
        # single rows once it is full and rows start replacing each other.
        self.parts: list[sp.csr_matrix] = []
        self.labels: list[str] = []
        self.digests: list[str] = []
        self._seed = str(seed).encode()
        self._keys: list[int] = []
        # Once full: the sample's largest keys first (negated in a min-heap), with
        # their slots, and the slot of each digest in the sample.
        self._largest: list[tuple[int, int]] = []
        self._slot_of: dict[str, int] = {}
        self._by_row = False

    def _key(self, digest: str) -> int:
        hashed = hashlib.blake2b(digest.encode("utf-8", "surrogatepass"), digest_size=8)
        hashed.update(self._seed)
        return int.from_bytes(hashed.digest(), "big")

    def add(self, X: sp.csr_matrix, labels: Sequence[str], digests: Sequence[str]) -> None:
        # Counts of one message fit 32 bits, and so do column numbers below 2^31: half
        # the memory of the float64 data and int64 columns the batches come in (10,000
        # rows of about 1,000 tokens each are 80 MB instead of 160).
        import scipy.sparse as sp

        X = sp.csr_matrix(
            (X.data.astype(np.float32), X.indices.astype(np.int32), X.indptr.astype(np.int32)),
            shape=X.shape,
        )
        keys = [self._key(digest) for digest in digests]
        room = max(self.size - self.seen, 0)
        if room:
            kept = min(room, len(labels))
            self.parts.append(X[:kept])
            self.labels.extend(labels[:kept])
            self.digests.extend(digests[:kept])
            self._keys.extend(keys[:kept])
            self.seen += kept
            X, labels, digests, keys = X[kept:], labels[kept:], digests[kept:], keys[kept:]
        if not len(labels):
            return
        if not self._by_row:
            self.parts = [part[i] for part in self.parts for i in range(part.shape[0])]
            self._largest = [(-key, slot) for slot, key in enumerate(self._keys)]
            heapq.heapify(self._largest)
            self._slot_of = {digest: slot for slot, digest in enumerate(self.digests)}
            self._by_row = True
        for i, label in enumerate(labels):
            self.seen += 1
            digest, key = digests[i], keys[i]
            slot = self._slot_of.get(digest)
            if slot is None:
                # Not in the sample: it takes the slot of the largest key if its
                # own is smaller.
                largest, slot = self._largest[0]
                if key >= -largest:
                    continue
                heapq.heapreplace(self._largest, (-key, slot))
                if self._slot_of.get(self.digests[slot]) == slot:
                    del self._slot_of[self.digests[slot]]
                self._slot_of[digest] = slot
                self._keys[slot] = key
            # A message met again (moved by a later folder) replaces its own row.
            self.parts[slot] = X[i]
            self.labels[slot] = label
            self.digests[slot] = digest

    def matrix(self, n_features: int, release: bool = False) -> sp.csr_matrix:
        """The sampled rows, widened to the vocabulary's final size.

        Built by concatenating the parts' arrays, without a widened copy of each
        part before the stacked one; with ``release`` each part is dropped as soon as
        it is copied, since at the end of training the stacked matrix, the model and
        the mistake table's working arrays meet at training's memory peak.
        """
        import scipy.sparse as sp

        parts = self.parts
        if release:
            self.parts = []
        n_rows = sum(part.shape[0] for part in parts)
        nnz = sum(part.nnz for part in parts)
        data = np.empty(nnz, dtype=np.float64)
        indices = np.empty(nnz, dtype=np.int32)
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        row = at = 0
        for number in range(len(parts)):
            part = parts[number]
            if release:
                parts[number] = None
            data[at : at + part.nnz] = part.data
            indices[at : at + part.nnz] = part.indices
            indptr[row + 1 : row + part.shape[0] + 1] = part.indptr[1:] + at
            row += part.shape[0]
            at += part.nnz
        return sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_features))

    def current(
        self, trained: dict[str, str], n_features: int
    ) -> tuple[sp.csr_matrix, list[str], list[str]]:
        """The sampled rows, labels and digests, each message once and as it is trained
        now: a message met twice in one run (moved to another class by a later
        folder) keeps its last row, and is dropped if that is not its class now.
        The sample's rows are released: this is the end of a run."""
        last = {digest: i for i, digest in enumerate(self.digests)}
        keep = sorted(i for digest, i in last.items() if trained.get(digest) == self.labels[i])
        X = self.matrix(n_features, release=True)
        if len(keep) == len(self.labels):
            return X, list(self.labels), list(self.digests)
        return X[keep], [self.labels[i] for i in keep], [self.digests[i] for i in keep]


# A batch of raw messages with their labels.
LabelledBatch = tuple[Sequence[bytes], Sequence[str]]


@contextmanager
def counting_started(
    batches: Iterable[LabelledBatch],
    settings: TokenizerSettings,
    *,
    jobs: int | None = 1,
    backend: str = "local",
    scheduler: str | None = None,
    sample_size: int = CALIBRATION_SAMPLE,
) -> Iterator[Iterator[tuple[LabelledBatch, BatchCounts]]]:
    """Batches of (raw messages, labels), each given back with its counts, in order,
    counted as ``jobs`` and ``backend`` say (see :func:`parallel.counted_in_order`).

    The first batch is counted on entering, so that any local workers are forked by
    then: training a new model forks them before this process imports scipy and the
    model's modules (see ``cli.train``).  Leaving stops the workers at once, on an
    error or Ctrl-C too.

    Forked workers keep large blocks on the heap until the run has handed them more
    mail than ``sample_size``, as this process does until it has counted more (see
    :func:`learn_counted`), and give such blocks pages of their own after.
    """
    _use_heap_thresholds(_SMALL_RUN)
    handed_out = 0

    def prepare_worker(messages: Sequence[bytes]) -> Callable[[], None]:
        nonlocal handed_out
        handed_out += len(messages)
        return partial(_worker_heap_thresholds, handed_out > sample_size)

    counting = counted_in_order(
        batches,
        lambda batch: batch[0],
        settings,
        jobs=jobs,
        backend=backend,
        scheduler=scheduler,
        with_digests=True,
        prepare_worker=prepare_worker,
    )
    with closing(counting):
        yield started(counting)


def learn_batches(
    spam_filter: SpamFilter,
    batches: Iterable[LabelledBatch],
    *,
    jobs: int | None = 1,
    backend: str = "local",
    scheduler: str | None = None,
    progress: Callable[[], AbstractContextManager[Callable[[int], None]]] | None = None,
    sample_size: int = CALIBRATION_SAMPLE,
) -> dict[str, Any]:
    """Learn batches of (raw messages, labels) as :meth:`SpamFilter.learn` learns, then
    refit the calibration once (see :func:`learn_counted`)."""
    with counting_started(
        batches,
        spam_filter.settings,
        jobs=jobs,
        backend=backend,
        scheduler=scheduler,
        sample_size=sample_size,
    ) as counted:
        return learn_counted(
            spam_filter, counted, jobs=jobs, progress=progress, sample_size=sample_size
        )


def learn_counted(
    spam_filter: SpamFilter,
    counted: Iterable[tuple[LabelledBatch, BatchCounts]],
    *,
    jobs: int | None = 1,
    progress: Callable[[], AbstractContextManager[Callable[[int], None]]] | None = None,
    sample_size: int = CALIBRATION_SAMPLE,
) -> dict[str, Any]:
    """Learn batches with their counts from :func:`counting_started` (entered with
    ``spam_filter``'s tokenizer settings and the same ``jobs``), then refit the
    calibration once; returns the summed outcome of every batch, with ``cut``: how
    many messages the tokenizer's limits cut (see :func:`counts.cut_flags`).

    ``progress()`` gives a function called with each batch's number of messages; it is
    entered here, after any workers are forked (a progress bar's thread must not
    exist when they are)."""
    outcome: dict[str, Any] = {
        "learned": 0,
        "moved": 0,
        "known": 0,
        "changed": 0,
        "conflicting": 0,
        # Second entries of messages a model before format 7 held twice, taken out.
        "held_twice": 0,
        "by_class": {},
        "cut": {"size": 0, "tokens": 0},
    }
    sample = CalibrationSample(sample_size)
    # This run's messages, by digest: one met again under another label is the same
    # mail in two folders of different labels, which moving it would hide.  Each with
    # the class this run counted it in ("" if none: the model knew it).
    this_run: dict[str, str] = {}
    conflicting: set[str] = set()
    batches_learnt = messages_counted = 0
    large = False
    with progress() if progress is not None else nullcontext(None) as on_step:
        for batch, counts in counted:
            _learn_batch(spam_filter, batch, counts, outcome, sample, this_run, conflicting)
            batches_learnt += 1
            # Counted, not learnt: mail the model knows already is counted all the
            # same (a nightly run over the same folders).
            messages_counted += len(batch[1])
            if not large and messages_counted > sample.size:
                large = True
                spam_filter.vocabulary.stop_keeping_crcs()
                _use_heap_thresholds(_LARGE_RUN)
                _return_freed_memory()
            if on_step is not None:
                on_step(len(batch[1]))
    _return_freed_memory()
    if sample.labels:
        X, labels, digests = sample.current(spam_filter.trained, len(spam_filter.vocabulary))
        # A helper is another process: not when asked for one (--jobs 1), and not for
        # mail that fits one batch, which is counted without workers for the same
        # reason: forking costs more than it saves (a train run of two messages into
        # the SpamAssassin model took 1.21 s with a helper against 1.13 s).
        cores = default_jobs() if jobs is None else jobs
        helped = cores > 1 and batches_learnt > 1 and sample.seen <= sample.size
        _train_mistakes_and_calibrate(spam_filter, X, labels, digests, helped=helped)
    return outcome


def _train_mistakes_and_calibrate(
    spam_filter: SpamFilter,
    X: sp.csr_matrix,
    labels: list[str],
    digests: list[str],
    helped: bool,
) -> None:
    """The serial end of training; if ``helped``, with what the mistake table does not
    enter worked out beside it in a forked helper: the Naive Bayes's held-out scores
    for the calibration, and the scoring table's hashes of the new tokens, which saving
    the model needs.

    Those took 0.34 s and 0.31 s of the 2.1 s between counting the SpamAssassin
    training part and writing its model, on a core that was idle.  Training 100,000
    messages, a helper saved nothing measurable (73.5 s against 73.4 without) and the
    processes held 620 MB at once against 560: its memory grows with the vocabulary,
    while the work it takes on is bounded by the calibration sample.  So it helps only
    a run that the sample holds whole.

    The table's walk order is drawn from the tokens' text before the helper is forked:
    reading a string writes its reference count, and the page it lies on, shared with
    the helper, is then copied.  Drawn afterwards (and with garbage collection not yet
    frozen, see :func:`in_background`), the two processes held 581 MB at once at the
    end of training 25,000 messages, against 517.  The helper's hashing copies the
    pages of the tokens' text for the same reason, in the helper alone: on the
    SpamAssassin training part the processes' summed peak stayed below training's
    without a helper (299 MB against 308).
    """
    from .table import vocabulary_hashes

    # Without the table to train, the parent would only wait for a helper.
    trains = spam_filter.trains_mistakes(labels)
    order = spam_filter.mistake_order(X, digests) if trains else None
    dealt = spam_filter.calibration_folds(X, labels, digests=digests)
    vocabulary = spam_filter.vocabulary

    def beside_the_table() -> tuple[np.ndarray, HeldOut | None]:
        held_out = spam_filter.model_held_out(X, labels, dealt) if dealt else None
        return vocabulary_hashes(vocabulary), held_out

    with in_background(beside_the_table, fork=helped and trains) as worked_out:
        copies = spam_filter.train_mistakes(X, labels, digests, order=order)
        # The table's share of the calibration, while the helper finishes its own
        # (the two end within a few hundredths of a second of each other on the
        # SpamAssassin training part; worked out after the helper's, it was waited
        # for).
        table_held_out = spam_filter.mistakes_held_out(X, labels, dealt, copies) if dealt else None
        hashes, held_out = worked_out()
    # Tokens are only ever appended: the hashes of all of them stay right.
    vocabulary.hashes = hashes
    if held_out is not None:
        spam_filter.fit_calibration_matrix(
            X, labels, model_held_out=held_out, mistakes_held_out=table_held_out
        )


def _learn_batch(
    spam_filter: SpamFilter,
    batch: LabelledBatch,
    counts: BatchCounts,
    outcome: dict[str, Any],
    sample: CalibrationSample,
    this_run: dict[str, str],
    conflicting: set[str],
) -> None:
    batch_messages, batch_labels = batch
    labels = list(batch_labels)
    assert counts.digests is not None
    if counts.older_digests:
        spam_filter.adopt_digests(counts.older_digests)
    label_now: dict[str, str] = {}
    for digest, label in zip(counts.digests, labels, strict=True):
        before = label_now.get(digest)
        if before is None and digest in this_run:
            before = spam_filter.trained.get(digest)
        if before is not None and before != label:
            conflicting.add(digest)
        label_now[digest] = label
    for digest in label_now:
        this_run.setdefault(digest, "")
    outcome["conflicting"] = len(conflicting)
    by_size, by_tokens = cut_flags(
        [len(data) for data in batch_messages], counts.lengths, spam_filter.settings
    )
    outcome["cut"]["size"] += int(by_size.sum())
    outcome["cut"]["tokens"] += int(by_tokens.sum())
    X = counts.in_vocabulary(spam_filter.vocabulary, grow=True)
    batch_outcome, rows = spam_filter.learn_matrix(X, labels, counts.digests)
    if counts.older_digests:
        outcome["held_twice"] += spam_filter.settle_older_digests(
            X, counts.digests, counts.older_digests
        )
    for key in ("learned", "moved", "known", "changed"):
        outcome[key] += batch_outcome[key]
    for label, count_now in batch_outcome["by_class"].items():
        outcome["by_class"][label] = outcome["by_class"].get(label, 0) + count_now
    for i in rows:
        digest = counts.digests[i]
        if earlier := this_run[digest]:
            # Counted by an earlier batch of this run and moved now: once, under its
            # last label (a new model's classes added up to more than its mail).
            outcome["by_class"][earlier] -= 1
        this_run[digest] = labels[i]
    if rows:
        sample.add(X[rows], [labels[i] for i in rows], [counts.digests[i] for i in rows])
    if not spam_filter.crlf_digests and counts.older_digests:
        # A message format 6 digested otherwise has that digest among its older ones.
        older = counts.older_digests
        spam_filter.crlf_digests = any(
            digest in older and digest in spam_filter.trained and digest_changed_in_format_7(data)
            for data, digest in zip(batch_messages, counts.digests, strict=True)
        )


# glibc's mallopt parameters: the size from which a block gets pages of its own, and
# the free space at the top of the heap from which that space is handed back.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# (block size, free top) for a run still small: the largest glibc raises its own to.
_SMALL_RUN = (32 << 20, 64 << 20)
# For a large run: 1 MiB, and glibc's own starting value.
_LARGE_RUN = (1 << 20, 128 << 10)


def _glibc_function(name: str) -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):  # not glibc (musl has neither function)
        return None


def _use_heap_thresholds(thresholds: tuple[int, int]) -> None:
    """Set glibc's thresholds for this process (and workers forked later): a small
    run keeps its large blocks on the heap, a large run gives every block of 1 MiB
    or more pages of its own, returned to the system when it is freed.  They stay
    set when training is over.

    Left to itself, glibc starts at 128 KiB and raises the block size, up to 32 MiB,
    each time such a block is freed, so counting's batch-sized arrays and pickled
    batches soon come from the heap, which keeps their pages once they are freed.
    Training 100,000 messages with two forked workers (at 222bb3d), the processes then
    held 676 MB at once (their summed PSS, while counting) and the training process
    peaked at 576 MB; with the threshold fixed at 1 MiB, 587 and 566 MB (the target
    is 600).

    Fresh pages cost system time, though, and a small run's heap holds little.  With
    1 MiB from the start, training on the SpamAssassin training part (4,232
    messages) took 435,000 page faults and 1.34 s of system time; with the workers
    at 1 MiB and the training process at the small run's thresholds, 222,000 and
    0.82 s, and 4.03 s of wall time against 4.39 (three runs each), for 245 MB at
    its peak against 218.  A run turns large once it has counted more messages than
    the calibration sample holds; at 100,000 messages the training process then
    peaked at 540 MB (572 for all processes), against 527 (562) with 1 MiB from the
    start (docs/benchmarks.md has the other policies measured).
    """
    mallopt = _glibc_function("mallopt")
    if mallopt is not None:
        block, free_top = thresholds
        mallopt(_M_MMAP_THRESHOLD, block)
        mallopt(_M_TRIM_THRESHOLD, free_top)


def _worker_heap_thresholds(large: bool) -> None:
    """Run by a forked counting worker before each batch: the large run's thresholds
    once the run has handed its workers more mail than the calibration sample holds,
    else the small run's.

    With the large run's from the start, a worker took fresh pages for every block of
    1 MiB or more (a batch's arrays, its pickled counts) and faulted them in again for
    the next batch.  Training the SpamAssassin training part (4,232 messages, two
    workers), twenty alternating runs in two sets 30 minutes apart (2026-11-29): wall
    2.19 s median against 2.31 and 2.42 against 2.58, faster in 19 of the 20 pairs;
    the workers' page faults 61,000 against 155,000 and training's system time 0.44
    to 0.48 s against 0.63 to 0.70.  (At stop 31 the same change, measured on the
    tokenizer of then, gained in one set of pairs and not in the next, and was taken
    out.)  Workers keeping the small run's throughout held too much at 100,000
    messages: 627 MB with the training process at once (their summed PSS).  Going back
    to 1 MiB after the sample, the training process's peak there is unchanged (548 to
    554 MB against 545 to 553, three runs each), while the sampled sum of all the
    processes' PSS was 611 to 623 MB against 600 to 603: each worker holds about 20
    MB more of the heap it grew while the run was small.
    """
    _use_heap_thresholds(_LARGE_RUN if large else _SMALL_RUN)


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system between counting and the end of
    training (glibc only): with workers, what counting left free on the heap (89 MB
    of 485 resident after 100,000 messages, before the threshold above was fixed)
    raised training's peak; returned, it fell from 614 to 586 MB."""
    trim = _glibc_function("malloc_trim")
    if trim is not None:
        trim(0)
