"""`spamnb classify`."""

from __future__ import annotations

import json

import pytest
from cli_helpers import assert_one_line_error, run


@pytest.fixture(scope="module")
def model(tmp_path_factory, sample_maildir):
    path = tmp_path_factory.mktemp("classify") / "model.joblib"
    result = run(
        "train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert result.exit_code == 0, result.output
    return path


def test_one_tab_separated_line_per_message(model, sample_mbox):
    result = run("classify", "-m", model, sample_mbox / "spam.mbox", sample_mbox / "ham.mbox")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) >= 50
    spam_lines = [line for line in lines if "spam.mbox:" in line]
    for line in lines:
        label, probability, _where = line.split("\t")
        assert label in ("spam", "ham")
        assert 0.0 <= float(probability) <= 1.0
        assert (label == "spam") == (float(probability) >= 0.5)
    # Trained on these very messages, the model should get nearly all of them right.
    correct = sum(line.startswith("spam\t") for line in spam_lines)
    assert correct >= 0.9 * len(spam_lines)
    assert spam_lines[0].endswith("spam.mbox:1")


def test_json_lines(model, sample_maildir):
    result = run("classify", "-m", model, "--json", sample_maildir / "ham")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records and all(set(r["probabilities"]) == {"spam", "ham"} for r in records)
    for record in records:
        assert record["spam_probability"] == pytest.approx(record["probabilities"]["spam"])
        assert record["source"].startswith(str(sample_maildir / "ham"))
        assert isinstance(record["log_odds"], float)
    assert sum(r["label"] == "ham" for r in records) >= 0.9 * len(records)
    assert any(r["message_id"] for r in records)


def test_stdin_message_is_named_by_its_message_id(model):
    message = (
        b"Message-ID: <abc123@example.org>\nSubject: project meeting\n\n"
        b"Agenda for the meeting attached, see you on Monday.\n"
    )
    result = run("classify", "-m", model, "-", input=message)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("\t<abc123@example.org>")


def test_missing_model(tmp_path, sample_maildir):
    assert_one_line_error(
        run("classify", "-m", tmp_path / "none.joblib", sample_maildir / "ham"), "spamnb train"
    )


def test_corrupt_model(tmp_path, sample_maildir):
    bad = tmp_path / "bad.joblib"
    bad.write_bytes(b"PK\x03\x04 not a model")
    assert_one_line_error(run("classify", "-m", bad, sample_maildir / "ham"), str(bad))


def test_missing_message(model, tmp_path):
    assert_one_line_error(run("classify", "-m", model, tmp_path / "gone"), str(tmp_path / "gone"))


def test_one_class_model_cannot_classify(tmp_path, sample_maildir):
    one = tmp_path / "one.joblib"
    run("train", "-m", one, "--spam", sample_maildir / "spam")
    assert_one_line_error(run("classify", "-m", one, sample_maildir / "ham"), "two classes")


def test_a_message_without_evidence_is_not_called_spam(model, tmp_path):
    # No token the model knows and equal priors (30 spam, 30 ham): a tie, which
    # must not become a false positive.
    empty = tmp_path / "empty.eml"
    empty.write_bytes(b"X-Nothing: zq\n\nzqzq\n")
    result = run("classify", "-m", model, "--json", empty)
    record = json.loads(result.stdout)
    assert record["probabilities"]["spam"] == pytest.approx(0.5)
    assert record["label"] == "ham"


def test_odd_paths_stay_on_one_tab_separated_line(model, tmp_path, sample_maildir):
    folder = tmp_path / "odd"
    folder.mkdir()
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    (folder / "with\nnewline\tand tab").write_bytes(message)
    result = run("classify", "-m", model, folder)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0].split("\t")) == 3


def test_stdin_only_once(model):
    assert_one_line_error(
        run("classify", "-m", model, "-", "-", input=b"Subject: x\n\ny\n"), "once"
    )
