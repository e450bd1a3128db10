"""Training in batches, in parallel and on a Dask cluster gives the very model one
process gives; merged models equal one model of all their mail."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import assert_one_line_error, run, train_sample
from corpus_fixtures import sample_messages

from spamnb import parallel
from spamnb.filter import SpamFilter, message_digest
from spamnb.parallel import batch_counter, batched
from spamnb.store import load
from spamnb.training import CalibrationSample, learn_batches


def assert_same_model(a: SpamFilter, b: SpamFilter) -> None:
    assert a.vocabulary.tokens == b.vocabulary.tokens
    assert a.classes == b.classes
    np.testing.assert_array_equal(a.model.class_counts, b.model.class_counts)
    np.testing.assert_array_equal(a.model.token_counts, b.model.token_counts)
    np.testing.assert_array_equal(a.model.doc_counts, b.model.doc_counts)
    assert a.trained == b.trained
    assert a.calibration == b.calibration


def learned_at_once(messages: list[bytes], labels: list[str]) -> SpamFilter:
    spam_filter = SpamFilter()
    tokens = spam_filter.tokenize(messages)
    spam_filter.learn(tokens, labels, [message_digest(m) for m in messages])
    return spam_filter


def in_batches(messages, labels, size):
    for batch in batched(list(zip(messages, labels, strict=True)), size):
        yield [m for m, _ in batch], [label for _, label in batch]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("size", [1, 7, 500])
def test_batches_in_any_number_of_processes_give_the_serial_model(sample_maildir, jobs, size):
    messages, labels = sample_messages(sample_maildir)
    # Interleave the classes so that batches mix them.
    order = np.random.default_rng(0).permutation(len(labels))
    messages = [messages[i] for i in order]
    labels = [labels[i] for i in order]
    serial = learned_at_once(messages, labels)
    batched_filter = SpamFilter()
    outcome = learn_batches(batched_filter, in_batches(messages, labels, size), jobs=jobs)
    assert outcome["learned"] == len(set(serial.trained))
    assert_same_model(serial, batched_filter)


def test_batches_skip_known_mail_and_move_relabelled_mail(sample_maildir):
    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter()
    learn_batches(spam_filter, in_batches(messages, labels, 10))
    again = learn_batches(spam_filter, in_batches(messages, labels, 10))
    assert again["learned"] == 0 and again["known"] == len(set(spam_filter.trained))
    flipped = ["ham" if label == "spam" else "spam" for label in labels[:5]]
    moved = learn_batches(spam_filter, in_batches(messages[:5], flipped, 2))
    assert moved["moved"] == 5
    expected = learned_at_once(messages[5:] + messages[:5], labels[5:] + flipped)
    np.testing.assert_array_equal(
        spam_filter.model.class_counts[[spam_filter.classes.index(c) for c in expected.classes]],
        expected.model.class_counts,
    )


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_keeps_large_blocks_on_the_heap_until_it_outgrows_the_sample(
    sample_maildir, monkeypatch, tmp_path, jobs
):
    import multiprocessing

    import spamnb.training as training

    messages, labels = sample_messages(sample_maildir)
    counted = []
    used = []
    in_workers = tmp_path / "in-workers"

    def learn_and_log(spam_filter, batch, *rest):
        real_learn_batch(spam_filter, batch, *rest)
        counted.append(len(batch[1]))

    def use(thresholds):
        used.append((sum(counted), len(multiprocessing.active_children()), thresholds))

    def worker_uses(large):
        assert os.getpid() != parent
        with in_workers.open("a") as report:
            print(int(large), file=report)

    # Forked workers unpickle the function by the name the training module has for it.
    worker_uses.__module__ = training.__name__
    worker_uses.__qualname__ = worker_uses.__name__ = "_worker_heap_thresholds"
    parent = os.getpid()
    real_learn_batch = training._learn_batch
    monkeypatch.setattr(training, "_learn_batch", learn_and_log)
    monkeypatch.setattr(training, "_use_heap_thresholds", use)
    monkeypatch.setattr(training, "_worker_heap_thresholds", worker_uses)
    large, small = training._LARGE_RUN, training._SMALL_RUN
    spam_filter = SpamFilter()
    # The training process takes the small run's thresholds, and the large run's once
    # it has counted more than the sample holds (three batches of ten), whether it
    # learns them or knows them.  Workers take the small run's for the batches handed
    # out while the run held no more than the sample (two), the large run's after.
    batches = len(messages) // 10
    assert batches > 3
    for _ in range(2):
        used.clear()
        counted.clear()
        in_workers.unlink(missing_ok=True)
        learn_batches(spam_filter, in_batches(messages, labels, 10), jobs=jobs, sample_size=25)
        assert used == [(0, 0, small), (30, jobs if jobs > 1 else 0, large)]
        if jobs > 1:
            flags = in_workers.read_text().split()
            assert sorted(flags) == ["0", "0"] + ["1"] * (batches - 2)
        else:
            assert not in_workers.exists()
    assert spam_filter.model.class_counts.sum() == len(set(spam_filter.trained)) > 30
    used.clear()
    in_workers.unlink(missing_ok=True)
    learn_batches(SpamFilter(), in_batches(messages, labels, 10), jobs=jobs)
    assert [thresholds for *_, thresholds in used] == [small]
    if jobs > 1:
        assert in_workers.read_text().split() == ["0"] * batches


def test_the_heap_thresholds_are_the_ones_glibc_is_given(monkeypatch):
    import spamnb.training as training

    given = []

    def mallopt(parameter, value):
        given.append((parameter, value))
        return 1

    monkeypatch.setattr(
        training, "_glibc_function", lambda name: mallopt if name == "mallopt" else None
    )
    training._worker_heap_thresholds(False)
    training._worker_heap_thresholds(True)
    mmap, trim = training._M_MMAP_THRESHOLD, training._M_TRIM_THRESHOLD
    assert given == [
        (mmap, 32 << 20),
        (trim, 64 << 20),
        (mmap, 1 << 20),
        (trim, 128 << 10),
    ]


def test_the_last_batches_come_in_pieces_of_about_equal_weight():
    def weight(item: int) -> int:
        return 100 if item >= 20 else 1

    items = list(range(23))
    batches = list(batched(items, 5, last_pieces=4, weight=weight))
    assert [item for batch in batches for item in batch] == items
    # Full batches up to the last full one but one; then the three heavy items, which
    # one batch would have held with five light ones, each go to a worker of their own.
    assert batches[:3] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
    assert batches[3:] == [[15, 16, 17, 18, 19], [20], [21], [22]]
    # By number when the items weigh the same, the last full batch included.
    assert list(batched(range(10), 5, last_pieces=4)) == [[0, 1, 2, 3, 4], [5], [6, 7], [8], [9]]
    # A run that fits one batch stays one (it is counted without workers), and a
    # longer one is never one, however its weight lies: one heavy message last.
    assert list(batched(range(5), 5, last_pieces=4)) == [[0, 1, 2, 3, 4]]
    assert list(batched(range(6), 5, last_pieces=4)) == [[0, 1], [2], [3, 4], [5]]
    assert [len(batch) for batch in batched(range(6), 5, 4, lambda item: 10**9 * item)] == [
        3,
        1,
        1,
        1,
    ]
    assert list(batched(range(12), 5)) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert list(batched([], 5, last_pieces=4)) == []
    # Weights past a float's precision lose nothing.
    huge = list(batched(range(8), 5, 4, lambda item: 2**60 if item == 0 else 1))
    assert [item for batch in huge for item in batch] == list(range(8))


def test_reading_ahead_gives_the_batch_read_before_an_error():
    def mail():
        yield from range(7)
        raise OSError("unreadable")

    given = []
    with pytest.raises(OSError, match="unreadable"):
        for batch in batched(mail(), 5, last_pieces=4):
            given.append(batch)
    assert given == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize("jobs", [1, 2])
def test_batches_for_workers_give_the_serial_model(sample_maildir, jobs):
    from spamnb.parallel import batches_for
    from spamnb.tokens import DEFAULT_SETTINGS

    messages, labels = sample_messages(sample_maildir)
    pairs = list(zip(messages, labels, strict=True))

    def size_of(pair: tuple[bytes, str]) -> int:
        return len(pair[0])

    def batches_of(size: int | None = None, backend: str = "local") -> list[list]:
        return list(
            batches_for(pairs, size_of, DEFAULT_SETTINGS, jobs=jobs, backend=backend, size=size)
        )

    # The sample fits one batch: it stays one, for any number of workers.
    assert len(batches_of()) == 1
    # In batches of 7, its 60 messages are 8 full batches and 4 more: with workers
    # the last 11 come in 4 pieces (two a worker), without them as they are; a
    # cluster's threads are not counted here.
    batches = batches_of(size=7)
    assert [pair for batch in batches for pair in batch] == pairs
    assert len(batches) == (7 + 4 if jobs > 1 else 9)
    assert len(batches_of(size=7, backend="dask")) == 9
    serial = learned_at_once(messages, labels)
    batched_filter = SpamFilter()
    learn_batches(
        batched_filter,
        (([m for m, _ in batch], [label for _, label in batch]) for batch in batches),
        jobs=jobs,
    )
    assert_same_model(serial, batched_filter)


def test_batches_weigh_a_message_as_far_as_the_tokenizer_reads_it():
    from spamnb.parallel import batches_for
    from spamnb.tokens import DEFAULT_SETTINGS

    assert DEFAULT_SETTINGS.max_bytes
    sizes = [4_000] * 700 + [20 * DEFAULT_SETTINGS.max_bytes]
    pieces = [
        len(batch) for batch in batches_for(range(701), sizes.__getitem__, DEFAULT_SETTINGS, jobs=2)
    ]
    # Weighed whole, the attachment would leave the other 700 messages one piece of
    # 698 (the other two pieces would take one each); as read, it weighs as much as
    # 262 of them, and they are dealt three pieces of about a quarter of the work.
    assert pieces == [241, 240, 219, 1]


def test_the_calibration_sample_is_bounded_and_uniform():
    import scipy.sparse as sp

    sample = CalibrationSample(size=100, seed=1)
    for start in range(0, 10_000, 250):
        rows = sp.csr_matrix(np.arange(start, start + 250, dtype=float)[:, None])
        numbers = range(start, start + 250)
        sample.add(rows, ["spam" if i % 2 else "ham" for i in numbers], [f"d{i}" for i in numbers])
    matrix = sample.matrix(3)
    assert matrix.shape == (100, 3)
    values = matrix[:, 0].toarray().ravel()
    assert len(set(values)) == 100
    # A uniform sample of 0..9999 has a mean near 5,000 (sd of the mean about 290).
    assert 3_500 < values.mean() < 6_500
    assert [("spam" if v % 2 else "ham") for v in values] == sample.labels
    assert [f"d{v:.0f}" for v in values] == sample.digests


def test_small_mail_is_sampled_whole():
    import scipy.sparse as sp

    sample = CalibrationSample(size=100)
    sample.add(sp.csr_matrix(np.eye(3)), ["a", "b", "c"], ["1", "2", "3"])
    sample.add(sp.csr_matrix(np.eye(3)), ["d", "e", "f"], ["4", "5", "6"])
    assert sample.labels == list("abcdef")
    assert sample.matrix(5).shape == (6, 5)


def test_the_sample_keeps_each_message_once_as_trained_now():
    import scipy.sparse as sp

    sample = CalibrationSample(size=100)
    rows = sp.csr_matrix(np.arange(4, dtype=float)[:, None])
    # "m1" was met as ham, then moved to spam by a later folder; "m3" was forgotten.
    sample.add(rows, ["ham", "spam", "spam", "ham"], ["m1", "m2", "m1", "m3"])
    X, labels, digests = sample.current({"m1": "spam", "m2": "spam"}, 2)
    assert digests == ["m2", "m1"]
    assert labels == ["spam", "spam"]
    assert X[:, 0].toarray().ravel().tolist() == [1.0, 2.0]
    assert X.shape == (2, 2)


def test_counting_in_workers_keeps_the_batch_order(sample_maildir):
    messages, _ = sample_messages(sample_maildir)
    batches = list(batched(messages, 5))
    with batch_counter(SpamFilter().settings, jobs=2) as count:
        there = list(count(batches, True))
    with batch_counter(SpamFilter().settings, jobs=1) as count:
        here = list(count(batches, True))
    assert [b.digests for b in there] == [b.digests for b in here]
    assert [b.local.tokens for b in there] == [b.local.tokens for b in here]
    for a, b in zip(there, here, strict=True):
        for x, y in zip(a.local[1:], b.local[1:], strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("forked", [True, False])
def test_workers_draw_at_most_a_window_of_batches_ahead(sample_maildir, monkeypatch, forked):
    # The batches are mail read from disk: however many workers there are, only a
    # window of them may be held at once, and each is drawn in this thread.
    if not forked:
        monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    messages, _ = sample_messages(sample_maildir)
    batches = list(batched(messages, 4))
    drawn = []

    def reading():
        for batch in batches:
            drawn.append(threading.current_thread())
            yield batch

    window = 3
    ahead = []
    with batch_counter(SpamFilter().settings, jobs=2, window=window) as count:
        counted = []
        for result in count(reading(), False):
            ahead.append(len(drawn) - len(counted))
            counted.append(result)
    assert len(counted) == len(batches) == 15
    assert max(ahead) == window
    assert set(drawn) == {threading.current_thread()}
    with batch_counter(SpamFilter().settings, jobs=1) as count:
        here = list(count(batches, False))
    assert [b.local.tokens for b in counted] == [b.local.tokens for b in here]


def train_cli(model: Path, sample_maildir: Path, *extra: str) -> dict:
    result = run(
        "train",
        "--new",
        "-m",
        model,
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        "--json",
        *extra,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def forked_pools(monkeypatch) -> list[int]:
    """The number of workers of each pool forked from now on."""
    pools: list[int] = []
    real_pool = parallel._forked_pool

    def counted_pool(work, jobs):
        pools.append(jobs)
        return real_pool(work, jobs)

    monkeypatch.setattr("spamnb.parallel._forked_pool", counted_pool)
    return pools


@pytest.mark.parametrize("forked", [True, False])
def test_train_jobs_one_and_two_write_the_same_model(tmp_path, sample_maildir, monkeypatch, forked):
    # Batches of 5, so that two workers really share the sample's 60 messages.
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    if not forked:
        monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    pools = forked_pools(monkeypatch)
    one = train_cli(tmp_path / "one.joblib", sample_maildir, "--jobs", "1")
    two = train_cli(tmp_path / "two.joblib", sample_maildir, "--jobs", "2")
    assert one["learned"] == two["learned"] == 60
    assert_same_model(load(tmp_path / "one.joblib"), load(tmp_path / "two.joblib"))
    # Forked from this process on Linux; started afresh by loky elsewhere.
    assert pools == ([2] if forked and sys.platform.startswith("linux") else [])


@pytest.mark.parametrize("explain", [True, False], ids=["model", "table"])
@pytest.mark.parametrize("forked", [True, False])
def test_classify_jobs_one_and_two_print_the_same(
    tmp_path, sample_maildir, monkeypatch, forked, explain
):
    # One process counts straight into the model's vocabulary, as do workers forked
    # from it (into the copy they inherit); where fork is not offered, loky's workers
    # count over their batch's own.  Without --explain, the 60 messages are scored
    # through the model's table instead: by the workers forked with it, or here from
    # the hashes loky's workers send.  The verdicts, scores and explanations must not
    # tell them apart.
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    assert parallel.can_fork() == sys.platform.startswith("linux")
    if not forked:
        monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    model = tmp_path / "model.joblib"
    train_cli(model, sample_maildir)
    pools = forked_pools(monkeypatch)
    import spamnb.store

    loads = []
    real_load = spamnb.store.load
    monkeypatch.setattr(
        spamnb.store, "load", lambda *a, **k: loads.append(a[0]) or real_load(*a, **k)
    )
    outputs = []
    explaining = ["--explain"] if explain else []
    for jobs in ("1", "2"):
        result = run("classify", "-m", model, "--json", *explaining, "--jobs", jobs, sample_maildir)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert pools == ([2] if forked and sys.platform.startswith("linux") else [])
    assert loads == ([model, model] if explain else [])
    rows = [json.loads(line) for line in outputs[0].splitlines()]
    assert len(rows) == 60
    if explain:
        assert all(row["explanation"]["tokens"] > 0 for row in rows)


@pytest.mark.parametrize("forked", [True, False])
def test_evaluate_and_tune_jobs_one_and_two_report_the_same(sample_maildir, monkeypatch, forked):
    # With more than one job the messages are tokenized a batch at a time by forked
    # workers, or by loky's where fork is not offered; the reports must not tell.
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    if not forked:
        monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    pools = forked_pools(monkeypatch)
    tokenizing: list[int] = []  # the jobs of each run that kept the workers' tokens
    real_counted_in_order = parallel.counted_in_order

    def counted_in_order(*args, keep_tokens=False, **kwargs):
        if keep_tokens:
            tokenizing.append(kwargs["jobs"])
        return real_counted_in_order(*args, keep_tokens=keep_tokens, **kwargs)

    monkeypatch.setattr("spamnb.parallel.counted_in_order", counted_in_order)
    mail = ["--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham", "--json"]
    for command in (
        ["evaluate", "--test-size", "0.3"],
        ["evaluate", "--folds", "3"],
        ["tune", "--folds", "3", "--alphas", "0.01,0.1"],
    ):
        outputs = []
        for jobs in ("1", "2"):
            result = run(*command, *mail, "--jobs", jobs)
            assert result.exit_code == 0, result.output
            outputs.append(result.stdout)
        assert outputs[0] == outputs[1], command
    # --jobs 1 tokenizes in one process; two jobs in forked workers, or loky's.
    assert tokenizing == [2, 2, 2]
    assert pools == ([2, 2, 2] if forked and parallel.can_fork() else [])


@pytest.mark.parametrize("forked", [True, False])
def test_workers_send_token_lists_shared_within_and_across_batches(
    sample_maildir, monkeypatch, forked
):
    from spamnb.cli import read_labelled, tokenize_with_progress

    if not forked:
        monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    settings = SpamFilter().settings
    refused = batch_counter(settings, jobs=2, scorer=object(), keep_tokens=True)
    with pytest.raises(ValueError, match="keep the tokens"), refused:
        pass
    messages = sample_messages(sample_maildir)[0]
    batches = list(batched(messages, 7))
    with batch_counter(settings, jobs=2, keep_tokens=True) as count:
        sent = list(count(batches, False))
    expected = SpamFilter().tokenize(messages)
    assert [tokens for batch in sent for tokens in batch.token_lists] == expected
    for batch in sent:
        strings = {}
        for token in (token for tokens in batch.token_lists for token in tokens):
            assert strings.setdefault(token, token) is token
    # And the process that keeps them shares them across batches, as one process does.
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 7)
    items, _ = read_labelled(
        [("spam", str(sample_maildir / "spam")), ("ham", str(sample_maildir / "ham"))], None, False
    )
    workers = {"jobs": 2, "backend": "local", "scheduler": None}
    kept = tokenize_with_progress(SpamFilter(), items, "Reading", workers)
    assert kept == SpamFilter().tokenize([item.data for item in items])
    strings = {}
    for token in (token for tokens in kept for token in tokens):
        assert strings.setdefault(token, token) is token


def test_workers_take_every_core_where_they_can_be_forked(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert parallel.default_jobs() == (4 if parallel.can_fork() else 3)
    monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    assert parallel.default_jobs() == 3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are Linux's")
def test_forked_workers_count_into_the_model_vocabulary(sample_maildir):
    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter()
    spam_filter.train(messages[::2], labels[::2])
    batches = list(batched(messages, 5))
    settings, vocabulary = spam_filter.settings, spam_filter.vocabulary
    with batch_counter(settings, jobs=2, vocabulary=vocabulary) as count:
        there = list(count(batches, True))
    with batch_counter(settings, jobs=1, vocabulary=vocabulary) as count:
        here = list(count(batches, True))
    assert all(b.local is None for b in there)
    assert [b.digests for b in there] == [b.digests for b in here]
    assert all((a.matrix != b.matrix).nnz == 0 for a, b in zip(there, here, strict=True))
    assert all(
        a.matrix.shape == (len(m), len(vocabulary)) for a, m in zip(there, batches, strict=True)
    )
    # The parent keeps no reference of its own to the vocabulary the workers took.
    assert parallel._inherited_work is None


@pytest.mark.parametrize("forked", [True, False])
def test_workers_score_through_the_table_or_hash_for_it(
    tmp_path, sample_maildir, monkeypatch, forked
):
    from spamnb.paths import table_path
    from spamnb.table import TableScorer, load_table

    if not forked:
        monkeypatch.setattr("spamnb.parallel.can_fork", lambda: False)
    model = tmp_path / "model.joblib"
    train_cli(model, sample_maildir)
    scorer = TableScorer(load_table(model, table_path(model), trust=False))
    batches = list(batched(sample_messages(sample_maildir)[0], 7))
    with batch_counter(scorer.settings, jobs=2, scorer=scorer) as count:
        there = list(count(batches, False))
    with batch_counter(scorer.settings, jobs=1, scorer=scorer) as count:
        here = list(count(batches, False))
    # Forked workers have the table and send scores; loky's send hashes to score here.
    really_forked = forked and parallel.can_fork()
    assert all((b.scores is not None) == really_forked for b in there)
    assert all((b.hashed is not None) != really_forked for b in there)
    assert all(b.scores is not None and b.matrix is None and b.local is None for b in here)
    for a, b in zip(there, here, strict=True):
        for got, expected in zip(a.scored_by(scorer), b.scored_by(scorer), strict=True):
            np.testing.assert_array_equal(got, expected)
    assert parallel._inherited_work is None


def die_in_the_worker(messages, *args, **kwargs):
    os._exit(3)  # as the kernel's out-of-memory killer ends a process: no goodbye


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are Linux's")
def test_a_scoring_worker_that_dies_is_a_one_line_error(tmp_path, sample_maildir, monkeypatch):
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    model = tmp_path / "model.joblib"
    train_cli(model, sample_maildir)
    # Forked workers run the module's function as the parent has it when they fork.
    monkeypatch.setattr("spamnb.parallel._run_inherited_work", die_in_the_worker)
    for explaining in ([], ["--explain"]):  # through the table, and the model
        result = run("classify", "-m", model, "--jobs", "2", *explaining, sample_maildir)
        assert_one_line_error(result, "worker process ended", "--jobs 1")


def test_a_training_worker_that_dies_is_a_one_line_error(tmp_path, sample_maildir, monkeypatch):
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    # joblib sends loky's workers the function the parent names, this one.
    monkeypatch.setattr("spamnb.parallel.count_batch", die_in_the_worker)
    model = tmp_path / "model.joblib"
    result = run("train", "--new", "-m", model, "--jobs", "2", "--spam", sample_maildir / "spam")
    assert_one_line_error(result, "worker process ended", "--jobs 1")
    assert not model.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are Linux's")
def test_a_worker_that_died_idle_is_reported_at_the_next_batches(sample_maildir):
    import multiprocessing

    messages, labels = sample_messages(sample_maildir)
    spam_filter = SpamFilter()
    spam_filter.train(messages, labels)
    batches = list(batched(messages, 5))
    with batch_counter(spam_filter.settings, jobs=2, vocabulary=spam_filter.vocabulary) as count:
        assert len(list(count(batches[:2], False))) == 2
        # Not loky's: its reusable workers, from tests before, may still be about.
        worker = next(
            child
            for child in multiprocessing.active_children()
            if isinstance(child, multiprocessing.context.ForkProcess)
        )
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(10)
        with pytest.raises(parallel.WorkerDied, match="--jobs 1"):
            list(count(batches[2:], False))


ORPHAN_SCRIPT = """
import sys, time, multiprocessing
from spamnb.filter import SpamFilter
from spamnb.parallel import batch_counter
spam_filter = SpamFilter()
spam_filter.train([b"Subject: a\\n\\nspam words", b"Subject: b\\n\\nham words"], ["spam", "ham"])
with batch_counter(spam_filter.settings, jobs=2, vocabulary=spam_filter.vocabulary) as count:
    print(*[w.pid for w in multiprocessing.active_children()], flush=True)
    time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are Linux's")
def test_forked_workers_end_with_a_parent_killed_outright():
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT], stdout=subprocess.PIPE)
    workers = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(workers) == 2
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.05)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the workers outlived their parent"


# Run in a fresh interpreter, where nothing has imported scipy yet.  Each worker
# appends, after each batch it counts, whether scipy was imported in its process and
# whether it was in the parent's when the parent forked it.
EARLY_FORK_SCRIPT = """
import os, sys
from spamnb import parallel
from spamnb.entry import main

parallel.BATCH_SIZE = 5
report = open(sys.argv[1], "a")
parent_had_scipy = []
start_worker = parallel._start_forked_worker
run_work = parallel._run_inherited_work


def started(parent):
    parent_had_scipy.append("scipy" in sys.modules)
    start_worker(parent)


def counted(messages, with_digests, prepare=None):
    counts = run_work(messages, with_digests, prepare)
    print(parent_had_scipy[0], "scipy" in sys.modules, file=report, flush=True)
    return counts


# Looked up by name where the pool sends the work and where a worker starts.
counted.__qualname__ = counted.__name__ = "_run_inherited_work"
counted.__module__ = parallel.__name__
parallel._start_forked_worker, parallel._run_inherited_work = started, counted
sys.argv[1:] = sys.argv[2:]
main()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are Linux's")
def test_a_new_models_workers_are_forked_before_scipy_and_never_import_it(tmp_path, sample_maildir):
    # Forked first, they tokenize while the parent imports scipy and the model's
    # modules; a worker importing scipy itself would pay that again.
    report, model = tmp_path / "report", tmp_path / "model.joblib"
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    command = [sys.executable, "-c", EARLY_FORK_SCRIPT, report, "train", "--jobs", "2"]
    done = subprocess.run([*command, "-m", model, *mail], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = report.read_text().splitlines()
    assert len(lines) > 2  # the sample's 60 messages in batches of 5 or fewer
    assert set(lines) == {"False False"}
    # Into a model that exists, its settings are read first, and so is scipy.
    report.unlink()
    done = subprocess.run([*command, "-m", model, *mail], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert set(report.read_text().splitlines()) == {"True True"}
    # The same model as counting in one process.
    run("train", "--new", "--jobs", "1", "-m", tmp_path / "alone.joblib", *mail)
    assert_same_model(load(model), load(tmp_path / "alone.joblib"))


# Run in a fresh interpreter: a test before may have left a thread running here
# (joblib's loky keeps its pool), and then no helper is forked.
BACKGROUND_SCRIPT = """
import gc, os, signal, sys, time
from pathlib import Path
from spamnb import parallel

here = os.getpid()
with parallel.in_background(lambda: (os.getpid(), os.getppid())) as worked_out:
    pid, parent = worked_out()
    assert worked_out() == (pid, parent)
assert pid != here and parent == here, "not worked out in a helper forked from here"


def dies():
    if os.getpid() != here:
        os.kill(os.getpid(), signal.SIGKILL)
    return "done here"


with parallel.in_background(dies) as worked_out:
    assert worked_out() == "done here"

pid_file = Path(sys.argv[1])


def sleeps():
    pid_file.write_text(str(os.getpid()))
    time.sleep(60)


started = time.monotonic()
try:
    with parallel.in_background(sleeps):
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.01)
        raise KeyError("an error before the result was asked for")
except KeyError:
    pass
assert time.monotonic() - started < 30
try:
    os.kill(int(pid_file.read_text()), 0)
    raise AssertionError("the helper is still there")
except ProcessLookupError:
    pass  # killed and reaped, not even a zombie left


# Interrupted while waiting for the result: the helper is killed and reaped, and
# collection resumes.
def interrupt(signum, frame):
    raise KeyboardInterrupt


pid_file.unlink()
signal.signal(signal.SIGALRM, interrupt)
signal.setitimer(signal.ITIMER_REAL, 0.5)
try:
    with parallel.in_background(sleeps) as worked_out:
        worked_out()
    raise AssertionError("not interrupted")
except KeyboardInterrupt:
    pass
assert gc.get_freeze_count() == 0, "collection left frozen"
try:
    os.kill(int(pid_file.read_text()), 0)
    raise AssertionError("the interrupted helper is still there")
except ProcessLookupError:
    pass

# A fork that fails leaves the work here and no pipe open.
fds = len(os.listdir("/proc/self/fd"))
real_fork = os.fork


def no_fork():
    raise BlockingIOError("fork: resource temporarily unavailable")


os.fork = no_fork
with parallel.in_background(os.getpid) as worked_out:
    assert worked_out() == here
os.fork = real_fork
assert len(os.listdir("/proc/self/fd")) == fds, "the pipe was left open"
assert gc.get_freeze_count() == 0

# Objects a caller froze stay frozen.
gc.freeze()
frozen = gc.get_freeze_count()
with parallel.in_background(lambda: os.getpid()) as worked_out:
    assert worked_out() != here
# (A few frozen objects may have been freed meanwhile.)
assert gc.get_freeze_count() > frozen // 2, "the caller's frozen objects were thawed"
gc.unfreeze()
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked helpers are Linux's")
def test_background_work_runs_in_a_forked_helper_or_here(tmp_path):
    # Worked out in a forked helper; here when the helper dies; a helper left early
    # is stopped.
    done = subprocess.run(
        [sys.executable, "-c", BACKGROUND_SCRIPT, str(tmp_path / "helper.pid")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_background_work_is_done_here_while_another_thread_runs():
    # A process forked while another thread holds a lock can hang on that lock.
    here = os.getpid()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with parallel.in_background(os.getpid) as worked_out:
            assert worked_out() == here
    finally:
        stop.set()
        other.join()


HELPED_TRAINING_SCRIPT = """
import os, sys
from contextlib import contextmanager
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import numpy as np
from spamnb import parallel, training
from spamnb.filter import SpamFilter
from test_parallel import assert_same_model, in_batches
from corpus_fixtures import sample_messages

messages, labels = sample_messages(Path(sys.argv[1]))
real = parallel.in_background
real_can_fork = parallel.can_fork
helpers = []


@contextmanager
def recorded(work, fork=True):
    with real(lambda: (os.getpid(), work()), fork) as worked_out:
        def result():
            pid, value = worked_out()
            helpers.append(pid)
            return value
        yield result


training.in_background = recorded
# Batches of 7, so that the sample's 60 messages are more than one (mail that fits
# one batch gets no helper, as it gets no workers).
helped = SpamFilter()
training.learn_batches(helped, in_batches(messages, labels, 7), jobs=2)
assert helpers and helpers[0] != os.getpid(), "no helper was forked"
parallel.can_fork = lambda: False
alone = SpamFilter()
training.learn_batches(alone, in_batches(messages, labels, 7), jobs=2)
assert helpers[1] == os.getpid()
assert_same_model(helped, alone)
np.testing.assert_array_equal(helped.mistakes.counts, alone.mistakes.counts)
np.testing.assert_array_equal(helped.vocabulary.hashes, alone.vocabulary.hashes)
# A run larger than the calibration sample is not helped: the helper's memory grows
# with the vocabulary, and such a run's end is a small part of it.
parallel.can_fork = real_can_fork
training.learn_batches(SpamFilter(), in_batches(messages, labels, 7), jobs=2, sample_size=30)
assert helpers[2] == os.getpid()
# Nor is a run of one batch, nor a run asked to keep to one process, nor one without
# the table to train.
training.learn_batches(SpamFilter(), in_batches(messages, labels, 500), jobs=2)
assert helpers[3] == os.getpid()
training.learn_batches(SpamFilter(), in_batches(messages, labels, 7), jobs=1)
assert helpers[4] == os.getpid()
without_table = SpamFilter()
without_table.mistakes.weight = 0.0
training.learn_batches(without_table, in_batches(messages, labels, 7), jobs=2)
assert helpers[5] == os.getpid()
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked helpers are Linux's")
def test_training_with_a_helper_gives_the_model_training_alone_gives(sample_maildir):
    tests = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, "-c", HELPED_TRAINING_SCRIPT, str(sample_maildir), str(tests)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


@pytest.fixture
def environment_restored():
    """os.environ as it was: dask.distributed's nanny writes its workers' settings into
    this process's environment (MALLOC_TRIM_THRESHOLD_=65536 and single-threaded
    maths libraries among them), and every process a later test starts inherited
    them.  The trim threshold alone took the tokenizer's worst-case linearity ratio
    for IPv4 near misses from 4 to 6.2, failing test_worst_cases."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_dask_backend_trains_the_same_model(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    local = train_cli(tmp_path / "local.joblib", sample_maildir, "--jobs", "1")
    # And evaluate, whose workers send the tokens back.
    evaluate = ["evaluate", "--test-size", "0.3", "--json"]
    evaluate += ["--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    evaluated_here = run(*evaluate, "--jobs", "1")
    assert evaluated_here.exit_code == 0, evaluated_here.output
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 2
        with distributed.get_task_stream(client=client) as tasks:
            on_dask = train_cli(
                tmp_path / "dask.joblib",
                sample_maildir,
                "--backend",
                "dask",
                "--scheduler",
                cluster.scheduler_address,
            )
        # The batches were counted on the cluster, by both of its workers.
        assert len({task["worker"] for task in tasks.data}) == 2
        evaluated_there = run(
            *evaluate, "--backend", "dask", "--scheduler", cluster.scheduler_address
        )
        assert evaluated_there.exit_code == 0, evaluated_there.output
    assert evaluated_there.stdout == evaluated_here.stdout
    assert on_dask["learned"] == local["learned"]
    assert_same_model(load(tmp_path / "local.joblib"), load(tmp_path / "dask.joblib"))


def test_parallel_option_errors(tmp_path, sample_maildir):
    args = ["train", "--new", "-m", tmp_path / "m.joblib", "--spam", sample_maildir / "spam"]
    assert_one_line_error(run(*args, "--backend", "dask"), "--scheduler")
    assert_one_line_error(run(*args, "--scheduler", "tcp://127.0.0.1:1"), "--backend dask")
    zero = run(*args, "--jobs", "0")
    assert zero.exit_code == 2 and "--jobs" in zero.stderr
    missing = run("train", "--new", "-m", tmp_path / "m.joblib", "--spam", tmp_path / "nope")
    assert_one_line_error(missing, "does not exist")
    assert not (tmp_path / "m.joblib").exists()


@pytest.mark.parametrize("command", ["train", "classify", "evaluate"])
def test_dask_missing_is_a_one_line_error(tmp_path, sample_maildir, monkeypatch, command):
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails
    paths = (
        ["--spam", sample_maildir / "spam"] if command != "classify" else [sample_maildir / "spam"]
    )
    result = run(
        command, "-m", model, "--backend", "dask", "--scheduler", "tcp://127.0.0.1:1", *paths
    )
    assert_one_line_error(result, "pip install 'dask[distributed]'")


# --------------------------------------------------------------------------- merge


def test_merge_of_two_folders_equals_training_on_both(tmp_path, sample_maildir):
    spam_only = tmp_path / "spam.joblib"
    ham_only = tmp_path / "ham.joblib"
    both = tmp_path / "both.joblib"
    for model, option, folder in ((spam_only, "--spam", "spam"), (ham_only, "--ham", "ham")):
        result = run("train", "--new", "-m", model, option, sample_maildir / folder, "--jobs", "1")
        assert result.exit_code == 0, result.output
    result = run(
        "train", "--new", "-m", both, "--spam", sample_maildir / "spam", "--ham",
        sample_maildir / "ham", "--jobs", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    merged = tmp_path / "merged.joblib"
    result = run("merge", merged, spam_only, ham_only, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["classes"] == {"spam": 30, "ham": 30}
    a, b = load(both), load(merged)
    assert a.vocabulary.tokens == b.vocabulary.tokens
    np.testing.assert_array_equal(a.model.token_counts, b.model.token_counts)
    np.testing.assert_array_equal(a.model.doc_counts, b.model.doc_counts)
    # The merged model classifies as the model of all the mail does.
    for model in (both, merged):
        result = run("classify", "-m", model, sample_maildir / "spam" / "new")
        assert result.exit_code == 0, result.output
    assert run("classify", "-m", both, sample_maildir / "ham").stdout == run(
        "classify", "-m", merged, sample_maildir / "ham"
    ).stdout.replace(str(merged), str(both))


def test_merge_errors(tmp_path, sample_maildir):
    model = tmp_path / "m.joblib"
    other = tmp_path / "o.joblib"
    assert run("train", "--new", "-m", model, "--spam", sample_maildir / "spam").exit_code == 0
    assert (
        run(
            "train", "--new", "-m", other, "--no-word-pairs", "--ham", sample_maildir / "ham"
        ).exit_code
        == 0
    )
    assert_one_line_error(run("merge", tmp_path / "out.joblib", model), "at least two")
    assert_one_line_error(run("merge", tmp_path / "out.joblib", model, other), "tokenizer")
    twice = run("merge", tmp_path / "out.joblib", model, model)
    assert_one_line_error(twice, "twice")
    assert_one_line_error(run("merge", model, model, other), "exists")
    assert_one_line_error(run("merge", model, model, other, "--force"), "also one of the models")
    broken = tmp_path / "broken.joblib"
    broken.write_bytes(b"not a model")
    assert_one_line_error(run("merge", tmp_path / "out.joblib", model, broken))
    assert not (tmp_path / "out.joblib").exists()


def test_started_takes_the_first_item_now_and_yields_them_all():
    taken = []

    def results():
        for n in range(3):
            taken.append(n)
            yield n

    begun = parallel.started(results())
    # The first batch is counted before the caller goes on (to start a progress bar).
    assert taken == [0]
    assert list(begun) == [0, 1, 2]
    assert list(parallel.started(iter([]))) == []


def _dask_train(tmp_path: Path, sample_maildir: Path) -> list:
    """``train --new`` of the sample mail through Dask, the scheduler's address to add."""
    args = ["train", "--new", "-m", tmp_path / "m.joblib", "--spam", sample_maildir / "spam"]
    return [*args, "--ham", sample_maildir / "ham", "--backend", "dask", "--scheduler"]


@pytest.fixture
def half_made_clients_collected():
    """After the test, the clients that failed to start are collected here.  Such a
    client closes itself when the garbage collector finds it, and distributed takes
    a lock to close it that it also holds while starting a client: found by a
    collection inside a later test's start, it hung the test suite."""
    import gc

    yield
    for thread in threading.enumerate():
        if thread.name == "spamnb-dask-connect":
            thread.join(60)
    gc.collect()


def test_a_dask_address_that_never_answers_fails_in_one_line(
    tmp_path, sample_maildir, monkeypatch, half_made_clients_collected
):
    # A dashboard's port, or any service that accepts and says nothing, held training
    # (and the model's lock) for ever.
    pytest.importorskip("dask.distributed")
    import socket

    monkeypatch.setattr("spamnb.parallel.DASK_ANSWER_SECONDS", 2)
    args = _dask_train(tmp_path, sample_maildir)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        assert_one_line_error(run(*args, address), "answered within")
        assert time.monotonic() - started < 20
    for wrong in ("nonsense", "bogus://x:1"):
        assert_one_line_error(run(*args, wrong), "Dask")
    assert not (tmp_path / "m.joblib").exists()


def test_a_client_that_connects_after_spamnb_gave_up_is_closed():
    # It was left open, connected to its scheduler, for as long as the process lived.
    made, discarded = object(), []

    def slow_work():
        time.sleep(0.5)
        return made

    with pytest.raises(parallel.DaskUnusable, match=r"^too late$"):
        parallel._within(0.1, slow_work, "too late", discarded.append)
    deadline = time.monotonic() + 10
    while not discarded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert discarded == [made]
    # In time, it is the caller's.
    assert parallel._within(5, lambda: made, "too late", discarded.append) is made
    assert discarded == [made]


def test_a_client_that_connects_after_an_interrupt_is_closed():
    # Interrupted while it waited for the connection, spamnb left the client it then
    # made open, and distributed's default (review 39).
    made, discarded = object(), []

    def slow_work():
        time.sleep(0.5)
        return made

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            parallel._within(5, slow_work, "too late", discarded.append)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    deadline = time.monotonic() + 10
    while not discarded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert discarded == [made]


class _StuckScheduler:
    """A client whose scheduler never answers (stopped, its loop blocked)."""

    def __init__(self):
        self.asked = []

    def nthreads(self, callback_timeout=None):
        self.asked.append(callback_timeout)
        if callback_timeout is None:
            raise AssertionError("waited for ever")
        raise TimeoutError(f"timed out after {callback_timeout} s.")


def test_a_stuck_scheduler_is_asked_for_its_threads_once_and_briefly():
    # Asked every 2 s with no bound, a scheduler stopped mid-run held the run for ever,
    # past the batches' own limit, which was not yet running (review 39).
    stuck = _StuckScheduler()
    threads = parallel._ClusterThreads(stuck)
    assert threads() == 1
    time.sleep(2.1)
    assert threads() == 1
    assert stuck.asked == [2]
    # Asked again after a while: a passing fault at the start would otherwise keep
    # the whole run at one thread's two batches.
    stuck.nthreads = lambda callback_timeout=None: {"w1": 4, "w2": 4}
    threads._next -= 30
    assert threads() == 8


def test_a_dask_address_distributed_cannot_read_makes_no_client():
    # Made, it failed to start and was left as garbage (half_made_clients_collected).
    distributed = pytest.importorskip("dask.distributed")
    import gc

    def half_made():
        return [
            client
            for client in gc.get_objects()
            if isinstance(client, distributed.Client)
            and client.status not in ("closed", "newly-created")
        ]

    assert not half_made()
    for wrong, said in [
        ("nonsense", "missing port number"),
        ("bogus://x:1", "unknown address scheme 'bogus'"),
    ]:
        with (
            pytest.raises(parallel.DaskUnusable, match=f"^cannot reach .*{said}"),
            parallel._dask_client(wrong),
        ):
            pass
        assert not half_made()


def test_a_dask_address_with_nothing_there_fails_at_once(tmp_path, sample_maildir, monkeypatch):
    # A mistyped port or host took distributed's whole 30 s of trying again.
    pytest.importorskip("dask.distributed")
    import socket

    monkeypatch.setattr("spamnb.parallel.DASK_REFUSED_SECONDS", 1)
    args = _dask_train(tmp_path, sample_maildir)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()
    assert_one_line_error(
        run(*args, f"tcp://127.0.0.1:{port}"),
        f"cannot reach the Dask scheduler tcp://127.0.0.1:{port}: nothing listens on port",
    )
    assert time.monotonic() - started < 10
    # getaddrinfo would take 99999 as port 34463, where something might listen.
    assert_one_line_error(run(*args, "tcp://127.0.0.1:99999"), "there is no port 99999")
    assert_one_line_error(
        run(*args, "tcp://nosuchhost.invalid:8786"),
        "cannot reach the Dask scheduler tcp://nosuchhost.invalid:8786: cannot resolve",
    )
    assert not (tmp_path / "m.joblib").exists()


def test_a_dask_scheduler_that_listens_late_is_reached(monkeypatch):
    # A job script may start the scheduler and spamnb at once; until it listens, its
    # port refuses.
    pytest.importorskip("dask.distributed")
    import socket

    monkeypatch.setattr("spamnb.parallel.DASK_REFUSED_SECONDS", 10)
    with socket.socket() as late:
        late.bind(("127.0.0.1", 0))
        timer = threading.Timer(1.5, late.listen)
        timer.start()
        try:
            started = time.monotonic()
            parallel._reachable(f"tcp://127.0.0.1:{late.getsockname()[1]}")
            assert 1 < time.monotonic() - started < 8
        finally:
            timer.cancel()


def test_a_dask_cluster_that_cannot_count_for_this_spamnb_says_why(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr("spamnb.parallel.DASK_ANSWER_SECONDS", 3)
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    args = ["train", "--new", "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    options = dict(threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.LocalCluster(n_workers=0, **options) as empty:
        result = run(*args, "-m", tmp_path / "a.joblib", "--backend", "dask", "--scheduler",
                     empty.scheduler_address)  # fmt: skip
        assert_one_line_error(result, "has no workers")
    with (
        distributed.LocalCluster(n_workers=1, **options) as cluster,
        distributed.Client(cluster) as client,
    ):
        there = ["--backend", "dask", "--scheduler", cluster.scheduler_address]
        # One thread in all: through joblib's Dask backend it was refused, since joblib
        # would have counted in this process instead, unsaid.  Every batch goes there.
        with distributed.get_task_stream(client=client) as tasks:
            result = run(*args, "-m", tmp_path / "b.joblib", *there)
        assert result.exit_code == 0, result.output
        assert sum(task["key"].startswith("_counted_by_the_same_code") for task in tasks.data) == 12
    # Workers whose spamnb differs would count other tokens.  (A fresh cluster: one
    # scaled up under load once answered its first call with dask's own AssertionError.)
    with distributed.LocalCluster(n_workers=2, **options) as cluster:
        real = parallel._code_identity
        monkeypatch.setattr(parallel, "_code_identity", lambda: (*real()[:3], "0" * 16))
        there = ["--backend", "dask", "--scheduler", cluster.scheduler_address]
        result = run(*args, "-m", tmp_path / "c.joblib", *there)
        assert_one_line_error(result, "install the same spamnb on the same Python on the workers")


def test_more_jobs_than_cores_start_no_more_workers_than_cores(
    tmp_path, sample_maildir, monkeypatch
):
    from spamnb import cli

    pools = []
    real_pool = parallel._forked_pool

    def counted_pool(work, jobs):
        pools.append(jobs)
        return real_pool(work, jobs)

    monkeypatch.setattr(parallel, "_forked_pool", counted_pool)
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    result = run(
        "train", "--new", "-m", tmp_path / "m.joblib", "--spam", sample_maildir / "spam",
        "--ham", sample_maildir / "ham", "--jobs", "400",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    most = cli.most_local_jobs()
    assert f"--jobs 400: this machine gives spamnb {most} cores; using {most}" in result.stderr
    assert pools and max(pools) <= most


def _batch_that_never_comes_back(*args, **kwargs):
    time.sleep(8)  # longer than the run waits
    raise RuntimeError("too late")


def _train_on_threads_of_a_dask_cluster(
    tmp_path, sample_maildir, monkeypatch, counter, threads=2, batch_size=5
):
    """``train --backend dask`` on a cluster in this process, whose worker threads see
    this process's count_batch (sent by name): ``counter`` counts in its place."""
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", batch_size)
    monkeypatch.setattr(parallel, "count_batch", counter)
    args = _dask_train(tmp_path, sample_maildir)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=threads, processes=False, dashboard_address=None
    ) as cluster:
        return run(*args, cluster.scheduler_address)


_COUNTING = {"now": 0, "most": 0, "calls": 0}
_COUNTING_LOCK = threading.Lock()
_REAL_COUNT = parallel.count_batch
_ALL_AT_ONCE: list[threading.Barrier] = []


def _batch_counted_slowly(*args, **kwargs):
    with _COUNTING_LOCK:
        _COUNTING["now"] += 1
        _COUNTING["calls"] += 1
        _COUNTING["most"] = max(_COUNTING["most"], _COUNTING["now"])
        first = _COUNTING["calls"] <= (_ALL_AT_ONCE[0].parties if _ALL_AT_ONCE else 0)
    try:
        if first:
            # Every thread's first batch waits here for the others': broken (an
            # error) unless they all count at once.
            _ALL_AT_ONCE[0].wait()
        time.sleep(0.3)
        return _REAL_COUNT(*args, **kwargs)
    finally:
        with _COUNTING_LOCK:
            _COUNTING["now"] -= 1


@pytest.fixture
def counting_slowly():
    _COUNTING.update(now=0, most=0, calls=0)
    _ALL_AT_ONCE.clear()
    yield _COUNTING
    _ALL_AT_ONCE.clear()


def test_every_thread_of_a_dask_cluster_counts_at_once(
    tmp_path, sample_maildir, monkeypatch, environment_restored, counting_slowly
):
    # Through joblib's Dask backend, spamnb sent a cluster four batches for each of
    # this machine's cores (eight here) and waited for all of them before sending more:
    # sixteen threads counted eight batches at a time at most.
    _ALL_AT_ONCE.append(threading.Barrier(16, timeout=20))
    result = _train_on_threads_of_a_dask_cluster(
        tmp_path, sample_maildir, monkeypatch, _batch_counted_slowly, threads=16, batch_size=2
    )
    assert result.exit_code == 0, result.output
    assert counting_slowly["most"] == 16


def test_workers_that_join_a_dask_run_count_too(
    tmp_path, sample_maildir, monkeypatch, environment_restored, counting_slowly
):
    # The batches in flight were counted from the threads there when the run began.
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 2)
    monkeypatch.setattr(parallel, "count_batch", _batch_counted_slowly)
    args = _dask_train(tmp_path, sample_maildir)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        grow = threading.Timer(0.5, cluster.scale, args=(3,))
        grow.start()
        try:
            result = run(*args, cluster.scheduler_address)
        finally:
            grow.cancel()
    assert result.exit_code == 0, result.output
    # Two threads at first, two batches each in flight: a window never widened kept
    # four counting at most.
    assert counting_slowly["most"] > 4


def test_a_dask_batch_that_never_comes_back_ends_the_run(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    # A cluster whose last worker died left training waiting for ever, lock held.
    monkeypatch.setattr("spamnb.parallel.DASK_BATCH_SECONDS", 2)
    started = time.monotonic()
    result = _train_on_threads_of_a_dask_cluster(
        tmp_path, sample_maildir, monkeypatch, _batch_that_never_comes_back
    )
    assert_one_line_error(result, "did not return a batch within 2 s")
    assert time.monotonic() - started < 30
    assert not (tmp_path / "m.joblib").exists()


def _batch_whose_cluster_fails(*args, **kwargs):
    from concurrent.futures import CancelledError

    raise CancelledError("scheduler-connection-lost")


def _batch_whose_scheduler_stops(*args, **kwargs):
    from distributed.comm.core import CommClosedError

    raise CommClosedError("in <TCP (closed) ConnectionPool.gather local=tcp://x>: Stream is closed")


@pytest.mark.parametrize(
    "counter, said",
    [
        (_batch_whose_cluster_fails, "failed: it dropped a batch"),
        # A scheduler stopped by SIGTERM (review 38): distributed's words named its pool.
        (_batch_whose_scheduler_stops, "failed: the connection to its scheduler closed"),
    ],
)
def test_a_dask_cluster_that_fails_mid_run_is_one_line(
    tmp_path, sample_maildir, monkeypatch, environment_restored, counter, said
):
    # A scheduler gone mid-run ended in distributed's own traceback (review 33).
    result = _train_on_threads_of_a_dask_cluster(tmp_path, sample_maildir, monkeypatch, counter)
    assert_one_line_error(result, "the Dask cluster at ", said)
    assert not (tmp_path / "m.joblib").exists()


def _batch_that_kills_its_worker(*args, **kwargs):
    os._exit(1)


def _batch_that_kills_the_first_worker(*args, **kwargs):
    marker = Path(os.environ["SPAMNB_TEST_DEATH_MARKER"])
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return parallel.count_batch(*args, **kwargs)
    os._exit(1)


def test_a_dask_worker_that_dies_leaves_its_batch_to_another(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    # The batch must outlive its worker: scattered to a worker before its task (as
    # joblib's Dask backend did), it died with it, and so did the run.
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    local = train_cli(tmp_path / "local.joblib", sample_maildir, "--jobs", "1")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    monkeypatch.setenv("SPAMNB_TEST_DEATH_MARKER", str(tmp_path / "died"))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        monkeypatch.setattr(parallel, "count_batch", _batch_that_kills_the_first_worker)
        on_dask = train_cli(
            tmp_path / "dask.joblib", sample_maildir, "--backend", "dask",
            "--scheduler", cluster.scheduler_address,
        )  # fmt: skip
    assert (tmp_path / "died").exists()
    assert on_dask["learned"] == local["learned"]
    assert_same_model(load(tmp_path / "local.joblib"), load(tmp_path / "dask.joblib"))


def test_a_batch_every_dask_worker_dies_on_ends_the_run_at_once(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    # Dask gives a dead worker's batch to another, and gives up after the fourth; the
    # run then waited its whole ten minutes for that batch (review 33).
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr("spamnb.parallel.DASK_BATCH_SECONDS", 120)
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 5)
    monkeypatch.setattr(parallel, "count_batch", _batch_that_kills_its_worker)
    # The workers' processes import this module to find the function.
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    args = _dask_train(tmp_path, sample_maildir)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        started = time.monotonic()
        result = run(*args, cluster.scheduler_address)
        took = time.monotonic() - started
    assert_one_line_error(
        result, "failed: 4 workers died in turn while counting a batch, the last tcp://"
    )
    assert took < 60
    assert not (tmp_path / "m.joblib").exists()


def _batch_with_a_bug(*args, **kwargs):
    return 1 / 0


def test_a_fault_of_spamnb_on_a_dask_worker_is_no_cluster_failure(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    # Reported as "the Dask cluster failed", it sent the user after the wrong thing.
    with pytest.raises(ZeroDivisionError):
        _train_on_threads_of_a_dask_cluster(
            tmp_path, sample_maildir, monkeypatch, _batch_with_a_bug
        )


_CHECKED: list[tuple] = []
_REAL_CHECK = parallel._counted_by_the_same_code


def _recorded_check(expected, remote, *args):
    # At module level, so that the task names it (a closure is sent as a copy).
    _CHECKED.append(expected)
    return _REAL_CHECK(expected, remote, *args)


def test_every_dask_batch_is_checked_on_its_worker(
    tmp_path, sample_maildir, monkeypatch, environment_restored
):
    _CHECKED.clear()
    monkeypatch.setattr(parallel, "_counted_by_the_same_code", _recorded_check)
    result = _train_on_threads_of_a_dask_cluster(
        tmp_path, sample_maildir, monkeypatch, parallel.count_batch
    )
    assert result.exit_code == 0, result.output
    # 60 messages, 5 a batch.
    assert len(_CHECKED) == 12 and set(_CHECKED) == {parallel._code_identity()}


def test_a_batch_is_counted_only_by_the_same_code(monkeypatch):
    # A worker that joined after the check, or was restarted with other code, got
    # batches unchecked (review 33).
    here = parallel._code_identity()
    other = (*here[:3], "0" * 16)
    with pytest.raises(parallel.DaskUnusable, match="install the same spamnb"):
        parallel._counted_by_the_same_code(other, parallel.count_batch, [], None, False)
    assert parallel._counted_by_the_same_code(here, lambda *args: args, 1, 2) == (1, 2)
    # Its refusal reaches the user as it is, not as the cluster's failure.
    refused = parallel.DaskUnusable("the Dask worker w runs spamnb 9")
    with (
        pytest.raises(parallel.DaskUnusable, match=r"^the Dask worker w runs spamnb 9$"),
        parallel._cluster_failures("tcp://x:1"),
    ):
        try:
            raise refused
        except parallel.DaskUnusable as exc:
            raise RuntimeError("wrapped by the cluster") from exc


def test_the_code_identity_covers_every_module_and_the_python():
    *_, python, digest = parallel._code_identity()
    assert python == "{}.{}".format(*sys.version_info[:2]) and len(digest) == 16
    # Worked out once a process: the code it loaded, not files replaced since.
    assert parallel._code_identity() is parallel._code_identity()


def test_an_interrupt_while_reaping_the_helper_is_an_interrupt():
    # Ctrl-C inside waitpid left the helper to be reaped twice, and the second time
    # closed its pipe's number again: "Bad file descriptor", status 1 (review 33).
    # In a process of its own, with no other thread, where the helper is forked.
    script = """
import os
from spamnb import parallel
real = os.waitpid
calls = []
def waitpid(pid, flags):
    calls.append(pid)
    if len(calls) == 1:
        raise KeyboardInterrupt  # as the SIGINT handler raises it there
    return real(pid, flags)
os.waitpid = waitpid
try:
    with parallel.in_background(lambda: 42) as result:
        result()
except BaseException as exc:
    print(type(exc).__name__, len(calls))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout == "KeyboardInterrupt 1\n", done.stdout + done.stderr
