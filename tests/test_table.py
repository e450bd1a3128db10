"""The pipe filter's scoring table and fast start: same scores, light imports."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run

from spamnb.entry import fast_pipe_options
from spamnb.paths import table_path
from spamnb.pipe import score_message
from spamnb.store import load, save
from spamnb.table import TableScorer, hash_batch, load_table

OPTIONS = [
    [],
    ["--event-model", "boolean", "--max-features", "500"],
    ["--event-model", "multinomial"],
    ["--event-model", "bernoulli"],
    ["--min-count", "3", "--alpha", "0.1"],
]


def messages(sample_maildir):
    return [p.read_bytes() for p in sorted(sample_maildir.glob("*/*/*")) if p.is_file()]


@pytest.mark.parametrize(
    "options", OPTIONS, ids=["defaults", "max-features", "multinomial", "bernoulli", "min-count"]
)
def test_table_scores_equal_the_models(tmp_path, sample_maildir, options):
    model = tmp_path / "model.joblib"
    result = run(
        "train",
        "-m",
        model,
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        *options,
    )
    assert result.exit_code == 0, result.output
    spam_filter = load(model)
    table = load_table(model, table_path(model), trust=False)
    assert table is not None
    for data in messages(sample_maildir)[::3]:
        tokens = spam_filter.tokenize([data])
        _, log_odds, lengths = spam_filter.score_tokens(tokens)
        expected = (float(log_odds[0]), float(lengths[0]))
        assert table.evidence(tokens[0]) == pytest.approx(expected, rel=1e-9, abs=1e-9)
    # And a whole batch at once, as classify scores; an empty message and one of
    # unknown words score the classes' constants alone.
    unknown = b"Subject: zzqx\n\nqqzv wwxk zzqx\n"
    batch = [*messages(sample_maildir), b"", unknown]
    assert_batch_scores_equal_the_models(spam_filter, table, batch)


def assert_batch_scores_equal_the_models(spam_filter, table, batch: list[bytes]) -> None:
    """A whole batch scored through the table (classify's road for a few messages):
    the model's probabilities, log-odds and evidence lengths, and so its labels."""
    token_lists = spam_filter.tokenize(batch)
    proba, log_odds, lengths = spam_filter.score_tokens(token_lists)
    scorer = TableScorer(table)
    got_proba, got_log_odds, got_lengths = scorer.score_hashed(hash_batch(token_lists))
    assert scorer.classes == spam_filter.classes
    assert scorer.positive_class() == spam_filter.positive_class()
    np.testing.assert_array_equal(got_lengths, lengths)
    np.testing.assert_allclose(got_log_odds, log_odds, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got_proba, proba, rtol=1e-9, atol=1e-12)
    assert scorer.predict_labels(got_proba) == spam_filter.predict_labels(proba)


def test_batch_scores_of_an_empty_batch(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    table = load_table(model, table_path(model), trust=False)
    proba, log_odds, lengths = TableScorer(table).score_hashed(hash_batch([]))
    assert proba.shape == (0, 2) and log_odds.shape == lengths.shape == (0,)


def test_a_batch_reading_a_damaged_block_fails(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    table_file = Path(table_path(model))
    data = bytearray(table_file.read_bytes())
    data[-3] ^= 0x40  # a weight of the last block
    table_file.write_bytes(bytes(data))
    table = load_table(model, table_file, trust=True)
    assert table is not None  # the header and the index are whole
    spam_filter = load(model)
    everything = hash_batch(spam_filter.tokenize(messages(sample_maildir)))
    with pytest.raises(ValueError, match="damaged"):
        TableScorer(table).score_hashed(everything)


@pytest.mark.corpus
def test_batch_scores_equal_the_models_on_real_mail(tmp_path, real_corpus):
    corpus = real_corpus("spamassassin")
    files = {
        label: sorted(p for d in dirs for p in d.iterdir() if p.is_file())
        for label, dirs in corpus.items()
    }
    train = {label: paths[::4] for label, paths in files.items()}
    model = tmp_path / "model.joblib"
    args = ["--spam", *train["spam"], "--ham", *train["ham"]]
    assert run("train", "--new", "-m", model, *args).exit_code == 0
    table = load_table(model, table_path(model), trust=False)
    assert table is not None
    rest = [p.read_bytes() for paths in files.values() for p in paths[1::4]]
    assert len(rest) > 1_000
    assert_batch_scores_equal_the_models(load(model), table, rest)


def test_three_classes(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    spam_files = sorted((sample_maildir / "spam" / "cur").iterdir())
    run(
        "train",
        "-m",
        model,
        "--spam",
        *spam_files[:15],
        "--label",
        f"promo={spam_files[20]}",
        "--ham",
        sample_maildir / "ham",
    )
    spam_filter = load(model)
    table = load_table(model, table_path(model), trust=False)
    for data in messages(sample_maildir)[::4]:
        tokens = spam_filter.tokenize([data])
        _, log_odds, lengths = spam_filter.score_tokens(tokens)
        expected = (float(log_odds[0]), float(lengths[0]))
        assert table.evidence(tokens[0]) == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert_batch_scores_equal_the_models(spam_filter, table, messages(sample_maildir))


def test_a_third_class_left_without_mail_keeps_the_table_and_the_mistake_table(
    tmp_path, sample_maildir
):
    # Moving all of a third class's mail to another class left it empty: the mistake
    # table went out of use and never trained again, and no pipe table was written, so
    # every pipe run loaded the whole model, and nothing said so (review 28).
    model = tmp_path / "model.joblib"
    spam = sorted((sample_maildir / "spam" / "cur").iterdir())
    promo = spam[20:26]
    first = run(
        "train",
        "-m",
        model,
        "--spam",
        *spam[:20],
        "--label",
        *[f"promo={p}" for p in promo],
        "--ham",
        sample_maildir / "ham",
    )
    assert first.exit_code == 0, first.output
    assert load(model).mistake_weight() > 0
    moved = run("train", "-m", model, "--spam", *promo)
    assert moved.exit_code == 0, moved.output
    spam_filter = load(model)
    assert spam_filter.empty_classes() == ["promo"]
    assert spam_filter.mistake_weight() > 0
    table = load_table(model, table_path(model), trust=False)
    assert table is not None
    batch = messages(sample_maildir)
    for data in batch[::4]:
        tokens = spam_filter.tokenize([data])
        _, log_odds, lengths = spam_filter.score_tokens(tokens)
        expected = (float(log_odds[0]), float(lengths[0]))
        assert table.evidence(tokens[0]) == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert_batch_scores_equal_the_models(spam_filter, table, batch)
    # And a run without promo mail trains it again: the walk leaves the empty promo row
    # out (reviews 28 to 30).
    assert spam_filter.trains_mistakes(["spam", "ham"])


def test_a_class_without_mail_stays_impossible_at_mistake_weight_one(tmp_path, sample_maildir):
    # At weight 1 the Naive Bayes's share is 0, and 0 times a class's -inf prior was
    # NaN: every message scored NaN, and no pipe table was written (review 29).
    model = tmp_path / "model.joblib"
    spam = sorted((sample_maildir / "spam" / "cur").iterdir())
    promo = spam[20:26]
    first = run(
        "train", "-m", model, "--mistake-weight", "1", "--spam", *spam[:20],
        "--label", *[f"promo={p}" for p in promo], "--ham", sample_maildir / "ham",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    assert run("train", "-m", model, "--spam", *promo).exit_code == 0
    spam_filter = load(model)
    assert spam_filter.mistake_weight() == 1
    batch = messages(sample_maildir)
    proba, log_odds, _ = spam_filter.score_tokens(spam_filter.tokenize(batch))
    assert np.isfinite(log_odds).all() and not np.isnan(proba).any()
    assert (proba[:, spam_filter.classes.index("promo")] == 0).all()
    table = load_table(model, table_path(model), trust=False)
    assert table is not None
    assert_batch_scores_equal_the_models(spam_filter, table, batch)


def same_score(got: tuple, expected: tuple) -> bool:
    """Verdict and cut equal, score equal to rounding."""
    return (got[0], got[2]) == (expected[0], expected[2]) and got[1] == pytest.approx(expected[1])


def test_a_stale_or_missing_table_falls_back_to_the_model(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    data = messages(sample_maildir)[0]
    fresh = score_message(data, model, trust=False)
    table_file = Path(table_path(model))
    # A model restored from a backup (other modification time) does not match its table.
    old = time.time() - 100
    os.utime(model, (old, old))
    assert load_table(model, table_file, trust=False) is None
    assert same_score(score_message(data, model, trust=False), fresh)
    table_file.unlink()
    assert same_score(score_message(data, model, trust=False), fresh)
    # A table copied from another model is not used either.
    other = tmp_path / "other.joblib"
    run(
        "train",
        "-m",
        other,
        "--spam",
        sample_maildir / "spam" / "cur",
        "--ham",
        sample_maildir / "ham",
    )
    Path(table_path(other)).rename(table_file)
    assert load_table(model, table_file, trust=False) is None
    # The next save writes it again.
    save(load(model), model)
    assert load_table(model, table_file, trust=False) is not None


def test_fast_option_parsing(monkeypatch):
    assert fast_pipe_options(["classify", "--pipe"]) == {}
    assert fast_pipe_options(["classify", "-p", "-m", "m.joblib", "--exit-zero"]) == {
        "model": "m.joblib",
        "exit_zero": True,
    }
    assert fast_pipe_options(["classify", "--pipe", "--max-size=10", "--header-name", "X-A"]) == {
        "max_size": 10,
        "header_name": "X-A",
    }
    # A short option's value is the rest of its word, as click reads it: "-m=PATH" names
    # the model "=PATH" on both roads (review 9: this parser took PATH, click "=PATH").
    assert fast_pipe_options(["classify", "-p", "-mm.joblib"]) == {"model": "m.joblib"}
    assert fast_pipe_options(["classify", "-p", "-m=m.joblib"]) == {"model": "=m.joblib"}
    from click.testing import CliRunner

    from spamnb.cli import main

    seen = {}
    monkeypatch.setattr(
        "spamnb.cli.filter_pipe", lambda model_path, *rest: seen.setdefault("model", model_path)
    )
    CliRunner().invoke(main, ["classify", "-p", "-m=m.joblib", "--jobs", "1"])
    assert str(seen["model"]) == "=m.joblib"
    # Anything else goes the full way, through click.
    for args in (
        ["classify", "a.eml"],
        ["classify", "--pipe", "--alpha", "2"],
        ["classify", "--pipe", "--max-size", "big"],
        ["classify", "--pipe", "--header-name", "Bad Name"],
        ["classify", "--pipe", "-m"],
        ["train", "--pipe"],
    ):
        assert fast_pipe_options(args) is None, args


def test_the_fast_pipe_imports_no_heavy_modules(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    probe = (
        "import sys\n"
        "from spamnb.entry import main\n"
        "try:\n    main()\n"
        "except SystemExit as exit:\n"
        "    names = ('numpy', 'scipy', 'joblib', 'click', 'rich', 'json', 'hashlib', 'typing')\n"
        "    heavy = sorted(m for m in names if m in sys.modules)\n"
        "    sys.stderr.write(f'heavy={heavy} status={exit.code}\\n')\n"
    )
    data = messages(sample_maildir)[0]
    done = subprocess.run(
        [sys.executable, "-c", probe, "classify", "--pipe", "-m", str(model)],
        input=data,
        capture_output=True,
        check=False,
    )
    assert "heavy=[]" in done.stderr.decode(), done.stderr.decode()
    assert b"\nX-Spamnb: " in done.stdout


@pytest.mark.parametrize("cut", [0, 10, 200, -8])
def test_an_empty_or_truncated_table_falls_back_to_the_model(tmp_path, sample_maildir, cut):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    data = messages(sample_maildir)[5]
    fresh = score_message(data, model, trust=False)
    table_file = Path(table_path(model))
    table_file.write_bytes(table_file.read_bytes()[:cut])
    assert load_table(model, table_file, trust=False) is None
    assert same_score(score_message(data, model, trust=False), fresh)


def test_tokens_whose_hashes_collide_share_one_entry_with_summed_weights(sample_maildir):
    from spamnb.filter import SpamFilter
    from spamnb.table import table_arrays, token_hashes, vocabulary_hashes

    spam_filter = SpamFilter()
    data, labels = [], []
    for label in ("spam", "ham"):
        for path in sorted((sample_maildir / label / "cur").iterdir()):
            data.append(path.read_bytes())
            labels.append(label)
    spam_filter.train(data, labels)
    header, (_, _, hashes, weights) = table_arrays(spam_filter)
    n = len(spam_filter.vocabulary)
    assert header["entries"] == n == len(hashes) and (hashes[1:] > hashes[:-1]).all()
    # Make the second and the last token collide with the first.
    forged = vocabulary_hashes(spam_filter.vocabulary).copy()
    forged[[1, n - 1]] = forged[0]
    spam_filter.vocabulary.hashes = forged
    header, (_, _, merged_hashes, merged) = table_arrays(spam_filter)
    assert header["entries"] == n - 2 and len(merged_hashes) == n - 2
    entry = int(np.flatnonzero(merged_hashes == forged[0])[0])
    by_hash = {int(h): row for h, row in zip(hashes, weights, strict=True)}
    tokens = spam_filter.vocabulary.tokens
    colliding = token_hashes([tokens[0], tokens[1], tokens[n - 1]])
    expected = sum((by_hash[int(h)] for h in colliding), np.zeros(2))
    np.testing.assert_allclose(merged[entry], expected, rtol=1e-12)
    # Every other entry is as it was.
    rest = {int(h): row for h, row in zip(merged_hashes, merged, strict=True) if h != forged[0]}
    assert rest.keys() == by_hash.keys() - {int(h) for h in colliding}
    assert all(np.array_equal(row, by_hash[h]) for h, row in rest.items())
