"""The pipe filter's scoring table and fast start: same scores, light imports."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import run

from spamnb.entry import fast_pipe_options
from spamnb.paths import table_path
from spamnb.pipe import score_message
from spamnb.store import load, save
from spamnb.table import load_table

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


def test_fast_option_parsing():
    assert fast_pipe_options(["classify", "--pipe"]) == {}
    assert fast_pipe_options(["classify", "-p", "-m", "m.joblib", "--exit-zero"]) == {
        "model": "m.joblib",
        "exit_zero": True,
    }
    assert fast_pipe_options(["classify", "--pipe", "--max-size=10", "--header-name", "X-A"]) == {
        "max_size": 10,
        "header_name": "X-A",
    }
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
