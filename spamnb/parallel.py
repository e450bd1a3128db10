"""Tokenizing and counting mail in bounded batches, across processes or a Dask cluster.

Naive Bayes training is counting, and counts add.  Each batch of messages is
tokenized and counted by a worker over the batch's own vocabulary; the parent maps
each batch onto the model's vocabulary in message order and adds the counts.  Taking
the batches in order makes the result equal to counting every message at once, in
one process: the same vocabulary in the same order, the same counts.

Memory stays bounded: only a few batches are read ahead of the one being added (see
:func:`counted_in_order`), so it grows with the vocabulary, not with the number of
messages.

Workers run ``count_batch`` (or, to score through a model's table, ``score_batch``):
module-level functions of bytes and tokenizer settings, so they pickle to another
process or another machine.  Where processes can be forked (Linux), local workers are
forked from this one instead of started afresh: they start at once, with nothing to
import, and scoring's workers count straight into the model's vocabulary, or score
through its table, which they hold as the parent did (see :func:`batch_counter`).
"""

from __future__ import annotations

import os
import signal
import sys
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache, partial
from itertools import accumulate, chain, islice
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

# Light (numpy only): forked workers find it imported, instead of each importing it.
from . import usable_cores
from .counts import LocalCounts, count_matrix, local_counts, to_vocabulary
from .tokens import TokenizerSettings, tokenize, tokenize_sharing

if TYPE_CHECKING:
    # Not imported to run: scoring through the model's table never needs scipy, and
    # its import was a tenth of classify's start-up.
    import scipy.sparse as sp

    from .counts import Vocabulary
    from .table import HashedBatch, TableScorer

__all__ = [
    "BACKENDS",
    "BATCH_SIZE",
    "BatchCounts",
    "DaskMissing",
    "DaskUnusable",
    "WorkerDied",
    "batch_counter",
    "batched",
    "batches_for",
    "count_batch",
    "counted_in_order",
    "default_jobs",
    "in_a_thread",
    "in_background",
    "score_batch",
    "started",
]

# Big enough that shipping a batch to a worker costs little beside tokenizing it,
# small enough that a few batches in flight stay a few megabytes of mail.
BATCH_SIZE = 500
BACKENDS = ("local", "dask")

Item = TypeVar("Item")


@dataclass
class BatchCounts:
    """One batch, counted: its counts, each message's number of tokens, and each
    message's digest (when asked for).

    A worker counts over the batch's own vocabulary (``local``); counted in this
    process, the counts are a ``matrix`` whose columns are the model's vocabulary.
    """

    local: LocalCounts | None
    matrix: sp.csr_matrix | None
    digests: list[str] | None
    lengths: np.ndarray
    # A batch scored through a model's table (see score_batch) has no matrix: it has
    # its scores, or, from a worker without the table, its tokens as hashes.
    hashed: HashedBatch | None = None
    scores: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    # A batch tokenized for a process that keeps the tokens (see tokenize_batch).
    token_lists: list[list[str]] | None = None
    # Digests that were a message's before (see mail.message_digests), by its digest.
    older_digests: dict[str, tuple[str, ...]] | None = None

    def in_vocabulary(self, vocabulary: Vocabulary, *, grow: bool) -> sp.csr_matrix:
        """The counts with the columns of ``vocabulary`` (see :func:`to_vocabulary`)."""
        if self.local is not None:
            return to_vocabulary(self.local, vocabulary, grow=grow)
        if self.matrix is None:
            raise ValueError("a batch scored through a table has no counts")
        return self.matrix

    def scored_by(self, scorer: TableScorer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Probabilities, spam log-odds and evidence lengths of a batch from
        :func:`score_batch` (see ``TableScorer.score_hashed``)."""
        if self.scores is not None:
            return self.scores
        if self.hashed is None:
            raise ValueError("a batch of counts is scored by the model, not its table")
        return scorer.score_hashed(self.hashed)


def count_batch(
    messages: Sequence[bytes],
    settings: TokenizerSettings,
    with_digests: bool,
    vocabulary: Vocabulary | None = None,
) -> BatchCounts:
    """Tokenize and count a batch of raw messages: what a worker runs, over the batch's
    own vocabulary; given the ``vocabulary`` of a model to score with (in this
    process), over that, dropping the tokens it lacks.

    Scoring counts straight into the model's vocabulary: each token looked up once,
    inside C, took 0.55-0.6 s for the 1,814 SpamAssassin test messages against
    0.8-0.96 s for a batch vocabulary and then mapping it.  Training does not: adding
    tokens needs a Python-level step per token, and building the small batch
    vocabulary first (which stays in the processor's cache) and then adding its
    distinct tokens to the model's was no slower.
    """
    token_lists = [tokenize(data, settings) for data in messages]
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    digests, older = _digests(messages, with_digests)
    if vocabulary is None:
        return BatchCounts(local_counts(token_lists), None, digests, lengths, older_digests=older)
    return BatchCounts(
        None,
        count_matrix(token_lists, vocabulary, grow=False),
        digests,
        lengths,
        older_digests=older,
    )


def tokenize_batch(
    messages: Sequence[bytes], settings: TokenizerSettings, with_digests: bool
) -> BatchCounts:
    """Tokenize a batch of raw messages for a process that keeps every message's tokens
    (``evaluate``, ``tune``): the token lists themselves, one string per distinct token
    within the batch, so each is sent once (500 SpamAssassin messages: 2.8 MB pickled
    in 23 ms, against 4.8 MB in 65 ms unshared, and 0.34 s to tokenize)."""
    token_lists = tokenize_sharing(messages, settings)
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    digests, older = _digests(messages, with_digests)
    return BatchCounts(None, None, digests, lengths, token_lists=token_lists, older_digests=older)


def _digests(
    messages: Sequence[bytes], wanted: bool
) -> tuple[list[str] | None, dict[str, tuple[str, ...]] | None]:
    """Each message's digest, and the older digests of those that had others."""
    if not wanted:
        return None, None
    from .mail import message_digests

    digests, older = [], {}
    for data in messages:
        digest, old = message_digests(data)
        digests.append(digest)
        if old:
            # A batch may hold two copies of a message with other older digests (its
            # CRLF copy and its LF one): each is kept (review 52).
            older[digest] = tuple(dict.fromkeys((*older.get(digest, ()), *old)))
    return digests, older or None


def score_batch(
    messages: Sequence[bytes],
    settings: TokenizerSettings,
    with_digests: bool,
    scorer: TableScorer | None = None,
) -> BatchCounts:
    """Tokenize a batch of raw messages for scoring through a model's table: scored
    by ``scorer`` when this process has it, else their tokens hashed for the process
    that has (see :meth:`BatchCounts.scored_by`)."""
    from .table import hash_batch

    hashed = hash_batch([tokenize(data, settings) for data in messages])
    digests, older = _digests(messages, with_digests)
    if scorer is None:
        return BatchCounts(None, None, digests, hashed.lengths, hashed=hashed, older_digests=older)
    return BatchCounts(
        None,
        None,
        digests,
        hashed.lengths,
        scores=scorer.score_hashed(hashed),
        older_digests=older,
    )


def started(results: Iterator[Item]) -> Iterator[Item]:
    """The same items, the first already taken: counting it starts the workers behind
    ``results``, forking them if they are forked, so call this before starting any
    thread (a progress bar) (see :func:`batch_counter`)."""
    first = list(islice(results, 1))
    return chain(first, results)


def batched(
    items: Iterable[Item],
    size: int = BATCH_SIZE,
    last_pieces: int = 1,
    weight: Callable[[Item], int] = lambda item: 1,
) -> Iterator[list[Item]]:
    """``items`` in lists of ``size``.  With ``last_pieces`` above 1, the items after
    the last full list but one come instead in ``last_pieces`` lists (one an item if
    they are fewer) of about equal summed ``weight``, the work an item makes.

    Workers take batches as they come free, so one worker took the last batch while
    the others waited.  Training the SpamAssassin training part with two, its last
    batch (232 messages, ending in the corpus's 173 hard ham) kept one worker busy
    0.55 s after the other had finished, and 0.4 s after the parent had mapped the
    rest.  Dealt by number the lists did not even out: the hard ham took 2.2 ms each
    to tokenize against 0.41 ms for the 2,732 ham before them, and are 6.5 times
    their size.

    A run that fits one list stays one (it is counted without workers); a longer one
    gives two lists or more however its weight lies.  Telling which list is the last
    full one but one takes reading a list ahead: when reading it fails, the list
    read before it is given first, then the error raised.
    """
    iterator = iter(items)
    if last_pieces <= 1:
        while batch := list(islice(iterator, size)):
            yield batch
        return
    batch = list(islice(iterator, size))
    first = True
    while batch:
        try:
            following = list(islice(iterator, size))
        except Exception:
            yield batch
            raise
        if len(following) == size:
            yield batch
            batch, first = following, False
        elif first and not following:
            yield batch
            return
        else:
            yield from _even_pieces(batch + following, last_pieces, weight)
            return


def _even_pieces(
    items: list[Item], pieces: int, weight: Callable[[Item], int]
) -> Iterator[list[Item]]:
    """``items`` in ``pieces`` runs (one an item if they are fewer), none empty, each
    cut where the summed weight comes nearest to its share."""
    pieces = min(pieces, len(items))
    # Sums times the number of pieces, so that every share is a whole number.
    scaled = [total * pieces for total in accumulate(max(weight(item), 1) for item in items)]
    start = 0
    for piece in range(1, pieces):
        share = scaled[-1] // pieces * piece
        crossing = bisect_left(scaled, share)  # the item whose weight reaches the share
        before = scaled[crossing - 1] if crossing else 0
        end = crossing + 1 if scaled[crossing] - share <= share - before else crossing
        # At least one item here, and one left for each piece after it.
        end = min(max(end, start + 1), len(items) - (pieces - piece))
        yield items[start:end]
        start = end
    yield items[start:]


def batches_for(
    items: Iterable[Item],
    size_of: Callable[[Item], int],
    settings: TokenizerSettings,
    *,
    jobs: int | None,
    backend: str = "local",
    size: int | None = None,
) -> Iterator[list[Item]]:
    """``items`` in batches of ``size`` (None: :data:`BATCH_SIZE`) for counting with
    ``jobs`` local workers (None: the default), the last ones dealt two a worker by
    their messages' ``size_of`` in bytes, as far as the tokenizer's ``settings`` read
    them, so that the workers finish together.  Not for a cluster, whose threads are
    counted elsewhere."""
    if jobs is None:
        jobs = default_jobs()
    pieces = 2 * jobs if jobs > 1 and backend == "local" else 1
    cap = settings.max_bytes

    def read(item: Item) -> int:
        return min(size_of(item), cap) if cap else size_of(item)

    return batched(items, size or BATCH_SIZE, pieces, read)


def default_jobs() -> int:
    """Every core this process may use where workers can be forked; elsewhere every
    core but one, which the parent needs to merge.

    Forked workers start at once and leave the parent little to do per batch: for
    scoring, nothing or one sparse product (974 messages a second on two cores
    against 697 when they counted into the vocabulary); for training, mapping each
    batch onto the vocabulary while they tokenize the next ones (4,232 messages in
    4.7 to 4.9 s on two cores against 6.1 s in one process, 2026-11-24).  Workers
    started afresh (loky's, where fork is not offered) import numpy and scipy each
    and hold a vocabulary of their own: two of them trained in 5.3 s there, and all
    processes held 432 MB against one process's 257 MB.
    """
    cores = usable_cores()
    if can_fork():
        return cores
    return max(cores - 1, 1)


def can_fork() -> bool:
    """Whether worker processes can be forked from this one (Linux only: macOS offers
    fork but its system libraries are not safe across it)."""
    import multiprocessing

    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


# What forked workers run on each batch: counting over the batch's own vocabulary
# (training), counting into the model's vocabulary, or scoring through its table.  Set
# in the parent just before the workers are forked, so each has it as the parent had
# it, without pickling: sending a 500,000-token vocabulary to each worker, or mapping a
# batch vocabulary onto it in the parent, cost more than counting in one process did.
_inherited_work: Callable[[Sequence[bytes], bool], BatchCounts] | None = None


def _start_forked_worker(parent: int) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the pool, and the
    # workers must not print tracebacks of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker holds the write end of its own task queue, so it never sees the queue
    # close: a parent killed outright (SIGKILL, the out-of-memory killer, timeout(1))
    # would leave it blocked for ever, holding its copy of the model.  Linux ends it
    # with the parent instead; the second test covers a parent gone before the first.
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _run_inherited_work(
    messages: Sequence[bytes], with_digests: bool, prepare: Callable[[], object] | None = None
) -> BatchCounts:
    assert _inherited_work is not None, "run only in a worker forked by _forked_pool"
    if prepare is not None:
        prepare()
    return _inherited_work(messages, with_digests)


Counter = Callable[[Iterable[Sequence[bytes]], bool], Iterator[BatchCounts]]


@contextmanager
def batch_counter(
    settings: TokenizerSettings,
    *,
    jobs: int = 1,
    backend: str = "local",
    scheduler: str | None = None,
    vocabulary: Vocabulary | None = None,
    scorer: TableScorer | None = None,
    keep_tokens: bool = False,
    window: int = 4,
    prepare_worker: Callable[[Sequence[bytes]], Callable[[], object]] | None = None,
) -> Iterator[Counter]:
    """A function that counts batches, yielding them in the given order, with at most
    ``window`` of them read ahead of the one it yields.

    ``jobs`` 1 counts in this process, over ``vocabulary`` when one is given (see
    :func:`count_batch`), or scores through ``scorer`` (see :func:`score_batch`), or,
    with ``keep_tokens``, gives the token lists (see :func:`tokenize_batch`).
    More run in that many worker processes.  Where processes can be forked, workers
    forked here and now do the same, with the ``vocabulary`` or ``scorer`` as this
    process has it, so enter this before starting any thread (a progress bar): a
    process forked while another thread holds a lock can hang.  Otherwise they count
    over each batch's own vocabulary, or hash each batch's tokens for this process's
    scorer (joblib's loky backend, its pool kept for every call).  ``backend`` "dask" runs
    it on the Dask cluster whose scheduler is at ``scheduler`` (an address such as
    tcp://HOST:8786), with two batches for each of its threads in flight (at most
    :data:`DASK_MOST_BATCHES`) in place of ``window``.  The batches are drawn in the
    caller's thread, as they are needed, so that a bad path fails in the caller, not
    in a worker thread.

    ``prepare_worker``, if given, is asked, with each batch as it is handed to a forked
    worker, for a function that worker runs (sent pickled) before counting the batch:
    training sets the workers' memory allocator by how much mail it has handed out.
    Workers that are not forked from this process are left as they start.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {BACKENDS}")
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    if (vocabulary is not None) + (scorer is not None) + keep_tokens > 1:
        raise ValueError("count into a vocabulary, score through a table or keep the tokens")

    def work_here(messages: Sequence[bytes], digests: bool) -> BatchCounts:
        if keep_tokens:
            return tokenize_batch(messages, settings, digests)
        if scorer is not None:
            return score_batch(messages, settings, digests, scorer)
        return count_batch(messages, settings, digests, vocabulary)

    if backend == "local" and jobs == 1:

        def count_here(batches: Iterable[Sequence[bytes]], digests: bool) -> Iterator[BatchCounts]:
            return (work_here(messages, digests) for messages in batches)

        yield count_here
        return
    if backend == "local" and can_fork():
        from concurrent.futures.process import BrokenProcessPool

        with _forked_pool(work_here, jobs) as pool:

            def count_forked(
                batches: Iterable[Sequence[bytes]], digests: bool
            ) -> Iterator[BatchCounts]:
                run = partial(_run_inherited_work, with_digests=digests)

                def submit(messages: Sequence[bytes]) -> Any:
                    prepare = None if prepare_worker is None else prepare_worker(messages)
                    return pool.submit(run, messages, prepare=prepare)

                return _deaths_reported(
                    lambda: _in_flight(submit, batches, lambda pending: len(pending) >= window),
                    BrokenProcessPool,
                )

            yield count_forked
        return
    # Workers elsewhere get the batch alone: they count it over its own vocabulary,
    # hash its tokens for this process to score, or send them back.
    remote: Callable[[Sequence[bytes], TokenizerSettings, bool], BatchCounts] = count_batch
    if keep_tokens:
        remote = tokenize_batch
    elif scorer is not None:
        remote = score_batch
    if backend == "dask":
        with _dask_client(scheduler) as client:
            # Each batch carries the code it must be counted with: a worker that
            # joined after the check, or was restarted with other code, refuses it.
            checked = partial(_counted_by_the_same_code, _code_identity(), remote)
            threads = _ClusterThreads(client)

            def full(pending: deque[_ClusterBatch]) -> bool:
                return (
                    len(pending) >= min(2 * threads(), DASK_MOST_BATCHES)
                    or sum(batch.size for batch in pending) >= DASK_MOST_BYTES
                )

            def count_on_cluster(
                batches: Iterable[Sequence[bytes]], digests: bool
            ) -> Iterator[BatchCounts]:
                def submit(messages: Sequence[bytes]) -> _ClusterBatch:
                    return _ClusterBatch(client, scheduler, checked, messages, settings, digests)

                return _in_flight(submit, batches, full)

            yield count_on_cluster
        return
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    with Parallel(n_jobs=jobs, return_as="generator") as parallel:

        def count_group(group: Sequence[Sequence[bytes]], digests: bool) -> Iterator[BatchCounts]:
            return _deaths_reported(
                lambda: parallel(
                    delayed(remote)(messages, settings, digests) for messages in group
                ),
                TerminatedWorkerError,
            )

        def count_there(batches: Iterable[Sequence[bytes]], digests: bool) -> Iterator[BatchCounts]:
            # A group at a time, read here: joblib may draw its tasks from a thread
            # of its own, and a bad path must fail in the caller's.
            for group in batched(batches, window):
                yield from count_group(group, digests)

        yield count_there


@contextmanager
def _forked_pool(work: Callable[[Sequence[bytes], bool], BatchCounts], jobs: int) -> Iterator[Any]:
    """``jobs`` worker processes forked now, each running ``work`` on the batches it
    is given, with everything ``work`` holds (a model's vocabulary or table, if any).

    concurrent.futures rather than multiprocessing.Pool: a Pool whose worker is
    killed (out of memory, say) waits for its batch for ever, where the executor
    raises BrokenProcessPool.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _inherited_work
    pool = ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_forked_worker,
        initargs=(os.getpid(),),
    )
    _inherited_work = work
    try:
        # A fork-started executor forks all its workers at its first task, and before
        # it starts a thread of its own: that task is this one, now.
        pool.submit(int).result()
    except BaseException as exc:
        pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(exc, BrokenProcessPool):
            raise WorkerDied(WORKER_DIED) from None
        raise
    finally:
        # The workers have their copy; the parent's global must not keep a model alive.
        _inherited_work = None
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def in_a_thread(work: Callable[[], Item], name: str) -> Iterator[Callable[[], Item]]:
    """A function that gives ``work()``, worked out meanwhile in a thread, or raises
    what it raised; :func:`in_background` for work that lets go of the GIL and is
    too short to be worth a process.  The thread has ended when the block does,
    however it ends, so nothing is forked while it runs."""
    import threading

    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()

    def result() -> Item:
        thread.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    try:
        yield result
    finally:
        thread.join()


@contextmanager
def in_background(work: Callable[[], Item], fork: bool = True) -> Iterator[Callable[[], Item]]:
    """A function that gives ``work()``: worked out meanwhile in a process forked now,
    where this process may fork (Linux, and no other Python thread running) and
    ``fork`` is true, else here when first asked for.

    Training's end is serial (the mistake table, then the calibration, then the save),
    so a second core sits idle through it; what does not depend on the table runs
    there.  A helper that dies, or cannot be forked, costs only the time: the work is
    then done here.  Leaving the block early, an interrupt included, stops the helper.

    Every page the two processes share is copied when either writes to it, and
    reading a Python object writes its reference count: give the helper work that
    reads arrays, not many small objects this process reads meanwhile.
    """
    import gc
    import pickle
    import threading

    helper: tuple[int, int] | None = None
    # The objects made so far are left out of garbage collection while the helper
    # runs: a collection writes to every object it looks at (16 MB of pages copied at
    # the end of training 25,000 messages).  Unless a caller froze them already: then
    # thawing them afterwards is the caller's to do, not this block's.
    freezes = False
    if fork and can_fork() and threading.active_count() == 1:
        parent = os.getpid()
        freezes = gc.get_freeze_count() == 0
        if freezes:
            gc.freeze()
        try:
            reader, writer = os.pipe()
        except OSError:
            reader = writer = -1
        try:
            pid = os.fork() if reader >= 0 else -1
        except OSError:
            pid = -1
        if pid == 0:  # the helper
            status = 1
            try:
                os.close(reader)
                _start_forked_worker(parent)
                with os.fdopen(writer, "wb") as out:
                    pickle.dump(work(), out, protocol=pickle.HIGHEST_PROTOCOL)
                status = 0
            finally:
                # None of the parent's cleanup (atexit, buffered output) may run here.
                os._exit(status)
        if pid > 0:
            os.close(writer)
            helper = (pid, reader)
        else:
            for end in (reader, writer):
                if end >= 0:
                    os.close(end)
    if helper is None and freezes:
        gc.unfreeze()
    done: list[Item] = []

    def finish(read: bool) -> tuple[bool, Any]:
        """Read the helper's result (or not), then reap it and let collection resume,
        whatever happens while reading."""
        nonlocal helper
        assert helper is not None
        # Taken before anything can be interrupted: a Ctrl-C inside waitpid left it
        # set, and the second call closed the reader's number again, by then perhaps
        # another file's.
        (pid, reader), helper = helper, None
        value, read_whole = None, False
        try:
            with os.fdopen(reader, "rb") as stream:
                if read:
                    # A helper that died before it finished leaves a stream cut short.
                    with suppress(Exception):
                        value, read_whole = pickle.load(stream), True
        finally:
            try:
                if not read_whole:
                    os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
            finally:
                if freezes:
                    gc.unfreeze()
        return read_whole and status == 0, value

    def result() -> Item:
        if not done:
            ok, value = finish(read=True) if helper is not None else (False, None)
            done.append(value if ok else work())
        return done[0]

    try:
        yield result
    finally:
        if helper is not None:
            finish(read=False)


def _in_flight(
    submit: Callable[[Sequence[bytes]], Any],
    batches: Iterable[Sequence[bytes]],
    full: Callable[[deque[Any]], bool],
) -> Iterator[BatchCounts]:
    """Each batch handed to a pool by ``submit`` (which gives its future), the results
    in order, with batches handed out until ``full`` says of those pending that they
    are enough: then the oldest is taken first.

    The pool's own map hands out every batch at once (all the mail in memory), and
    handing out a group at a time left the workers idle while the last batches of
    each group were mapped and the next group read: 4,232 SpamAssassin messages in
    nine batches kept two workers busy 2.2 s each over a counting phase of 3.1 s.
    """
    pending: deque[Any] = deque()
    try:
        for messages in batches:
            pending.append(submit(messages))
            while pending and full(pending):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def _counted_by_the_same_code(
    expected: tuple[str, ...], remote: Callable[..., BatchCounts], *args: Any
) -> BatchCounts:
    """``remote(*args)`` on a Dask worker, if it runs the code ``expected``."""
    there = _code_identity()
    if there != expected:
        raise DaskUnusable(_mismatch(_worker_name(), there, expected))
    return remote(*args)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:  # noqa: BLE001 - only a name for the message
        return "(unknown)"


@contextmanager
def _cluster_failures(scheduler: str | None) -> Iterator[None]:
    """Any failure of the Dask cluster inside (its scheduler gone, a batch cancelled,
    workers dying, a worker's refusal) as DaskUnusable in one line: they come as
    tracebacks of distributed's own exceptions.  Asking for a batch's result raises
    the worker's exception, so spamnb's own faults there pass as they are."""
    from concurrent.futures import CancelledError

    try:
        yield
    except (DaskUnusable, TimeoutError):
        raise
    except Exception as exc:
        refusal = next(
            (e for e in (exc, exc.__cause__, exc.__context__) if isinstance(e, DaskUnusable)),
            None,
        )
        if refusal is not None:  # a worker's, which says why in one line
            raise DaskUnusable(str(refusal)) from None
        kind = type(exc).__name__
        if isinstance(exc, CancelledError):
            what = "it dropped a batch (its scheduler gone?)"
        elif kind == "KilledWorker" and len(exc.args) == 3:
            # Its own words run to 400 characters, the worker's address in the middle.
            last = getattr(exc.args[1], "address", exc.args[1])
            deaths = exc.args[2] + 1
            what = (
                f"{deaths} workers died in turn while counting a batch, the last {last}"
                if deaths > 1
                else f"the worker {last} died while counting a batch"
            ) + " (out of memory? see its log)"
        elif kind in ("CommClosedError", "StreamClosedError"):
            what = "the connection to its scheduler closed (the scheduler stopped?)"
        elif isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _CLUSTER_CODE:
            what = _in_one_line(exc)
        else:
            raise  # spamnb's own fault, not the cluster's: a traceback, as locally
        raise DaskUnusable(f"the Dask cluster at {scheduler} failed: {what}") from None


def _in_one_line(exc: BaseException) -> str:
    """What ``exc`` says, in one line of at most 300 characters: distributed's
    messages run over lines and to several hundred characters."""
    return " ".join(str(exc).split())[:300] or type(exc).__name__


# The packages whose exceptions say the cluster failed, not the counting.
_CLUSTER_CODE = frozenset({"distributed", "tornado", "dask"})


def _deaths_reported(
    start: Callable[[], Iterable[Item]], *deaths: type[BaseException]
) -> Iterator[Item]:
    """What ``start()`` yields, with any of ``deaths`` (how a pool says a worker died)
    as WorkerDied.  ``start`` is called here, not by the caller, because a pool sends
    out its tasks when they are handed to it: a worker that died idle, before them,
    shows there."""
    try:
        yield from start()
    except deaths:
        raise WorkerDied(WORKER_DIED) from None


WORKER_DIED = (
    "a worker process ended before it finished its batch (killed, or out of memory?); "
    "try again with --jobs 1"
)


class WorkerDied(RuntimeError):
    """A worker process ended without returning its batch's counts."""


@contextmanager
def _dask_client(scheduler: str | None) -> Iterator[Any]:
    """A client of the Dask scheduler at ``scheduler`` whose workers run this spamnb,
    with distributed's own logging quiet."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise DaskMissing(
            "the dask backend needs dask.distributed: pip install 'dask[distributed]' "
            "(spamnb's dask extra)"
        ) from None
    if not scheduler:
        raise ValueError("the dask backend needs the scheduler's address (--scheduler)")
    _reachable(scheduler)
    # Connecting and waiting for a worker are bounded each; this bounds a scheduler
    # that takes the connection and never answers, which neither bound covers.
    deadline = 2 * DASK_ANSWER_SECONDS + 5
    client = _within(
        deadline,
        lambda: _ready_client(Client, scheduler),
        f"no Dask scheduler at {scheduler} answered within {deadline} s",
        lambda client: client.close(),
    )
    # distributed and tornado log the tracebacks of a lost scheduler themselves, before
    # spamnb says so in one line.
    import logging

    # Every one of theirs: distributed gives some (distributed.client) levels of
    # their own, which their parents' do not override.
    names = [*logging.root.manager.loggerDict, "distributed", "tornado"]
    loggers = [
        logging.getLogger(name)
        for name in dict.fromkeys(names)
        if name.split(".")[0] in ("distributed", "tornado")
    ]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield client
    finally:
        client.close()
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


class _ClusterBatch:
    """A batch counted on a Dask cluster, as :func:`_in_flight` takes a pool's
    future: ``result()`` waits at most :data:`DASK_BATCH_SECONDS`; ``size`` is its
    mail's bytes."""

    def __init__(
        self,
        client: Any,
        scheduler: str | None,
        work: Callable[[Sequence[bytes], TokenizerSettings, bool], BatchCounts],
        messages: Sequence[bytes],
        settings: TokenizerSettings,
        digests: bool,
    ) -> None:
        import warnings

        self.size = sum(map(len, messages))
        self._scheduler = scheduler
        # The mail goes inside the task, which the scheduler holds until it is done,
        # so that a worker that dies with it leaves it to another: scattered to a
        # worker first (as joblib did), it died with the worker, and the run with it.
        # A batch of long messages is a large task, which distributed warns of.
        with _cluster_failures(scheduler), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            self._future = client.submit(work, messages, settings, digests, pure=False)

    def result(self) -> BatchCounts:
        import asyncio

        with _cluster_failures(self._scheduler):
            try:
                return self._future.result(timeout=DASK_BATCH_SECONDS)
            except asyncio.TimeoutError:
                # distributed's, which is no TimeoutError before Python 3.11.
                raise TimeoutError(f"no batch back within {DASK_BATCH_SECONDS} s") from None

    def cancel(self) -> None:
        # On the way out of a failure or an interrupt: a client already closed
        # raises here, and would hide what ended the run.
        with suppress(Exception):
            self._future.cancel()


class _ClusterThreads:
    """How many threads a Dask cluster's workers have, asked again every few seconds:
    workers that join during a run (a job script starting them with spamnb, an
    adaptive cluster growing) get their batches too."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._threads = 1
        self._next = -float("inf")

    def __call__(self) -> int:
        import time

        now = time.monotonic()
        if now >= self._next:
            try:
                # Bounded: a stuck scheduler (stopped, its loop blocked) never
                # answers, and the batches' own time limit is not yet running.
                threads = self._client.nthreads(callback_timeout=2)
            except Exception:  # noqa: BLE001 - the batches' results say what failed
                # The last count stands, asked again only after a while, so that a
                # lost link costs no wait per batch and a passing fault not the run.
                self._next = now + 30
            else:
                self._threads = max(sum(threads.values()), 1)
                self._next = now + 2
        return self._threads


# How long a Dask scheduler may take to answer, to show workers, and a worker to
# return a batch.  Without them spamnb waited for ever, holding the model's lock, on
# an address that accepts connections and never answers (a dashboard's port), on
# workers that cannot import spamnb, and on a cluster whose last worker died.
DASK_ANSWER_SECONDS = 30
DASK_BATCH_SECONDS = 600
# How long a port may refuse connections before spamnb says nothing listens there.
DASK_REFUSED_SECONDS = 5

# Batches sent to a Dask cluster at once: two a worker thread, one counted and the
# next waiting, so that no thread waits for this process to send it mail; at most
# this many, and this much mail, since each is held here (and by the scheduler)
# until counted: a batch of 500 messages is a few megabytes, of long ones a hundred.
DASK_MOST_BATCHES = 128
DASK_MOST_BYTES = 256 << 20


class DaskMissing(RuntimeError):
    """dask.distributed is not installed (it is the optional extra spamnb[dask])."""


class DaskUnusable(RuntimeError):
    """The Dask cluster cannot count for this spamnb; str(exc) is one line."""


def _within(
    seconds: float, work: Callable[[], Item], late: str, discard: Callable[[Item], object]
) -> Item:
    """``work()``'s result, run in a thread of its own and given up after ``seconds``
    (the thread is left to end with the program, and to ``discard`` what it makes
    after that); its exception as DaskUnusable."""
    import threading

    outcome: dict[str, Any] = {}
    decided = threading.Lock()

    def run() -> None:
        try:
            value = work()
        except BaseException as exc:  # noqa: BLE001 - reported in the caller's thread
            outcome["error"] = exc
            return
        with decided:
            given_up = "late" in outcome
            outcome["value"] = value
        if given_up:
            discard(value)

    def give_up() -> bool:
        with decided:
            if "value" not in outcome and "error" not in outcome:
                outcome["late"] = True
        return "late" in outcome

    thread = threading.Thread(target=run, name="spamnb-dask-connect", daemon=True)
    thread.start()
    try:
        thread.join(seconds)
    except BaseException:
        # An interrupt: what the thread has made, or makes later, is nobody's.
        if not give_up() and "value" in outcome:
            discard(outcome["value"])
        raise
    if give_up():
        raise DaskUnusable(late)
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, DaskUnusable):
            raise error
        text = _in_one_line(error)
        raise DaskUnusable(f"cannot use the Dask cluster: {text}")
    return outcome["value"]


def _reachable(scheduler: str) -> None:
    """Raises DaskUnusable for a scheduler's host that does not resolve, or a port
    nobody listens on: distributed tries such an address again and again, and a
    mistyped port took its whole 30 s to be reported.  Where a connection is neither
    made nor refused (a firewall), distributed tries it as before, and says so."""
    import socket
    import time

    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    failed = f"cannot reach the Dask scheduler {scheduler}"
    # Said here, in distributed's words, rather than by a client that fails to
    # start: such a client is garbage that closes itself whenever the collector
    # finds it, and found inside another client's start it hangs that one.
    try:
        scheme, location = parse_address(scheduler)
        get_backend(scheme)
        if scheme not in ("tcp", "tls", "ws", "wss"):
            return
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as exc:
        text = _in_one_line(exc)
        raise DaskUnusable(f"{failed}: {text}") from None
    if not host:
        return
    if not 0 < port < 65536:
        raise DaskUnusable(f"{failed}: there is no port {port} (ports run from 1 to 65535)")
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise DaskUnusable(f"{failed}: cannot resolve {host} ({reason})") from None
    # A scheduler started with spamnb (a job script) refuses until it listens.
    give_up = time.monotonic() + DASK_REFUSED_SECONDS
    while True:
        for family, kind, protocol, _, address in addresses[:4]:
            try:
                with socket.socket(family, kind, protocol) as probe:
                    probe.settimeout(3)
                    probe.connect(address)
                return
            except ConnectionRefusedError:
                continue
            except OSError:
                return  # neither made nor refused: distributed's to try
        if time.monotonic() >= give_up:
            raise DaskUnusable(
                f"{failed}: nothing listens on port {port} of {host} (is the scheduler "
                "running, and is that its port?)"
            )
        time.sleep(0.5)


def _ready_client(client_class: Any, scheduler: str) -> Any:
    """A client of the scheduler at ``scheduler`` whose workers run this spamnb."""
    try:
        client = client_class(scheduler, timeout=f"{DASK_ANSWER_SECONDS}s")
    except (OSError, ValueError, TypeError) as exc:
        text = _in_one_line(exc)
        raise DaskUnusable(f"cannot reach the Dask scheduler {scheduler}: {text}") from None
    try:
        try:
            client.wait_for_workers(1, timeout=DASK_ANSWER_SECONDS)
        except Exception:  # noqa: BLE001 - dask raises its own TimeoutError
            raise DaskUnusable(
                f"the Dask scheduler at {scheduler} has no workers "
                f"(none joined within {DASK_ANSWER_SECONDS} s)"
            ) from None

        here = _code_identity()
        # Sent by reference, as this module's function: sent by value, its bytecode
        # met another Python on the workers and failed there with a meaningless error.
        # A worker that cannot import spamnb returns its exception.
        answers = client.run(_worker_identity, on_error="return")
        for worker, there in sorted(answers.items()):
            if isinstance(there, AttributeError):
                # An older spamnb, which has no _worker_identity to run.
                raise DaskUnusable(_mismatch(worker, None, here))
            if isinstance(there, BaseException):
                there = f"{type(there).__name__}: {there}"
            if there != here:
                raise DaskUnusable(_mismatch(worker, there, here))
    except BaseException:
        client.close()
        raise
    return client


@cache
def _code_identity() -> tuple[str, int, str, str]:
    """This spamnb's version, tokenizer version, Python version and a digest of every
    module of the package: workers that differ in any could count other tokens or
    digests (the tokenizer reads mail with the standard library's email package).

    Worked out once a process, when it first counts: a worker that loaded spamnb and
    then saw its files replaced counts with the code it loaded, which is what the
    digest must describe."""
    import hashlib
    from pathlib import Path

    from . import __version__, tokens

    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    python = "{}.{}".format(*sys.version_info[:2])
    return __version__, tokens.TOKENIZER_VERSION, python, digest.hexdigest()[:16]


def _worker_identity() -> tuple[str, int, str, str]:
    """:func:`_code_identity` as a worker works it out, sent to it by name."""
    return _code_identity()


def _mismatch(worker: str, there: tuple[Any, ...] | str | None, here: tuple[Any, ...]) -> str:
    """Why ``worker`` may not count: ``there`` is its identity, its reason for not
    importing spamnb, or None for an older spamnb that cannot say."""
    if isinstance(there, str):
        return f"the Dask worker {worker} cannot import spamnb ({' '.join(there.split())[:200]})"
    runs = (
        "an older spamnb"
        if there is None
        else f"spamnb {there[0]} (tokenizer {there[1]}, Python {there[2]}, code {there[3]})"
    )
    return (
        f"the Dask worker {worker} runs {runs}, this one {here[0]} (tokenizer {here[1]}, "
        f"Python {here[2]}, code {here[3]}): its counts would not match; install the same "
        "spamnb on the same Python on the workers"
    )


Batch = TypeVar("Batch")


def counted_in_order(
    batches: Iterable[Batch],
    messages_of: Callable[[Batch], Sequence[bytes]],
    settings: TokenizerSettings,
    *,
    jobs: int | None = 1,
    backend: str = "local",
    scheduler: str | None = None,
    with_digests: bool = False,
    vocabulary: Vocabulary | None = None,
    scorer: TableScorer | None = None,
    keep_tokens: bool = False,
    prepare_worker: Callable[[Sequence[bytes]], Callable[[], object]] | None = None,
) -> Iterator[tuple[Batch, BatchCounts]]:
    """Each batch with its counts, in order, counted as :func:`batch_counter` counts
    (``jobs`` None: :func:`default_jobs`); take each batch's matrix in ``vocabulary``
    with :meth:`BatchCounts.in_vocabulary`, or, given a ``scorer``, its scores with
    :meth:`BatchCounts.scored_by`, or, with ``keep_tokens``, its ``token_lists``.

    The batches are read here, a few per worker at a time, so that reading the mail
    (and its errors) stays in this thread and at most that many batches are held.
    Mail that fits one batch is counted in this process: starting workers would cost
    more than they save.
    """
    if jobs is None:
        jobs = default_jobs()
    # Two batches a local worker: one to tokenize, the next queued.  Every batch held
    # for mapping is more memory (training 100,000 messages with two workers peaked at
    # 629 MB with four a worker, 614 with two).  A Dask cluster's threads are counted
    # by batch_counter, once it has reached them.
    window = 2 * jobs
    batches = iter(batches)
    first = list(islice(batches, 2))
    if backend == "local" and len(first) < 2:
        jobs = 1
    # The batches drawn and not yet yielded, oldest first: count() yields each
    # batch's counts after drawing it, in the same order.
    drawn: deque[Batch] = deque()

    def messages() -> Iterator[Sequence[bytes]]:
        for batch in chain(first, batches):
            drawn.append(batch)
            yield messages_of(batch)

    with batch_counter(
        settings,
        jobs=jobs,
        backend=backend,
        scheduler=scheduler,
        vocabulary=vocabulary,
        scorer=scorer,
        keep_tokens=keep_tokens,
        window=window,
        prepare_worker=prepare_worker,
    ) as count:
        for counted in count(messages(), with_digests):
            yield drawn.popleft(), counted
