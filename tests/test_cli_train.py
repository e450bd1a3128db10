"""`spamnb train` and `spamnb info`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, on_a_terminal, run, run_json, train_sample

from spamnb import __version__, cli
from spamnb.model import EVENT_MODELS
from spamnb.store import load, save
from spamnb.tokens import TOKENIZER_VERSION


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and __version__ in result.stdout


def test_python_dash_m_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "spamnb", "--version"], capture_output=True, text=True, check=True
    )
    assert __version__ in done.stdout


def test_cli_event_models_match_the_model_module():
    assert cli.EVENT_MODELS == EVENT_MODELS


def test_train_prints_a_summary_and_writes_the_model(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    result = run(
        "train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert result.exit_code == 0, result.output
    # Not a terminal (cron, a log): one line.
    (line,) = result.stdout.splitlines()
    assert line.startswith("spamnb: learned 60,") and "has 30 spam, 30 ham messages" in line
    spam_filter = load(model)
    assert set(spam_filter.classes) == {"spam", "ham"}
    assert spam_filter.model.class_counts.sum() == 60
    one = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    single = run("train", "-m", tmp_path / "one.joblib", "--spam", one)
    assert "has 1 spam message," in single.stdout


def test_the_terminal_summary_table():
    from rich.console import Console

    from spamnb.report import training_summary

    console = Console(record=True, width=80)
    summary = {
        "model": "m.joblib",
        "classes": {"spam": {"trained": 3, "total": 10}, "ham": {"trained": 0, "total": 7}},
        "known": 4,
        "moved": 1,
        "forgotten": 0,
        "unknown": 0,
        "vocabulary": 1234,
        "model_bytes": 5000,
    }
    console.print(training_summary(summary))
    text = console.export_text()
    for expected in ("spam", "10", "already known, skipped", "moved", "1,234 tokens", "5.0 kB"):
        assert expected in text
    assert "forgotten" not in text


def test_train_json_summary_counts_every_message(tmp_path, sample_maildir, sample_mbox):
    model = tmp_path / "model.joblib"
    summary = run_json(
        "train", "-m", model, "--spam", sample_mbox / "spam.mbox", "--ham", sample_mbox / "ham.mbox"
    )
    spam_n = summary["classes"]["spam"]["trained"]
    ham_n = summary["classes"]["ham"]["trained"]
    assert 25 <= spam_n <= 40 and 25 <= ham_n <= 40
    assert summary["vocabulary"] > 500 and summary["model_bytes"] == model.stat().st_size
    # Maildir and mbox hold the same messages, so they count the same.
    again = run_json(
        "train",
        "--new",
        "-m",
        tmp_path / "m2.joblib",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
    )
    assert again["classes"]["spam"]["trained"] == spam_n
    assert again["classes"]["ham"]["trained"] == ham_n


def test_training_again_learns_only_new_mail_and_new_starts_over(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    first = run_json("train", "-m", model, "--spam", sample_maildir / "spam" / "cur")
    assert first["learned"] == 28
    second = run_json(
        "train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    # The 28 in cur/ are known; the 2 spam in new/ and the 30 ham are new.
    assert (second["learned"], second["known"]) == (32, 28)
    assert second["classes"]["spam"] == {"trained": 2, "total": 30}
    assert second["classes"]["ham"] == {"trained": 30, "total": 30}
    fresh = run_json("train", "--new", "-m", model, "--ham", sample_maildir / "ham")
    assert list(fresh["classes"]) == ["ham"] and fresh["learned"] == 30


def test_a_message_trained_again_with_the_other_label_moves(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    before = load(model).model.token_counts.copy()
    ham_message = sorted((sample_maildir / "ham" / "cur").iterdir())[0]
    moved = run_json("train", "-m", model, "--spam", ham_message)
    assert (moved["moved"], moved["learned"]) == (1, 0)
    assert moved["classes"]["spam"]["total"] == 31 and moved["classes"]["ham"]["total"] == 29
    # Moving it back restores the counts exactly.
    back = run_json("train", "-m", model, "--ham", ham_message)
    assert back["moved"] == 1
    assert (load(model).model.token_counts == before).all()


def test_forget_takes_messages_back_out(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    outcome = run_json("train", "-m", model, "--forget", sample_maildir / "spam" / "new")
    assert (outcome["forgotten"], outcome["unknown"]) == (2, 0)
    assert outcome["classes"]["spam"]["total"] == 28
    again = run_json("train", "-m", model, "--forget", sample_maildir / "spam" / "new")
    assert (again["forgotten"], again["unknown"]) == (0, 2)


def test_the_verdict_header_does_not_change_what_a_message_is(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    message = sorted((sample_maildir / "spam" / "cur").iterdir())[0].read_bytes()
    run("train", "-m", model, "--spam", "-", input=message)
    filtered = message.replace(b"\nSubject:", b"\nX-Spamnb: Ham, score=0.1\nSubject:", 1)
    assert filtered != message
    assert run_json("train", "-m", model, "--spam", "-", input=filtered)["known"] == 1


def test_a_message_filed_and_read_since_moves_and_is_forgotten_exactly(tmp_path, sample_maildir):
    # Between two runs a mail program may mark the message read or flagged, and the
    # filter adds its verdict; the counts taken out must be the counts put in.
    model = tmp_path / "model.joblib"
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    before = load(model).model.token_counts.copy()
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    filed = message.replace(
        b"\nSubject:",
        b"\nStatus: RO\nX-Status: AF\nX-Keywords: $label1\nX-UID: 7\n"
        b"X-Spamnb: ham, score=0.01\nSubject:",
        1,
    )
    assert filed != message
    assert run_json("train", "-m", model, "--spam", "-", input=filed)["moved"] == 1
    assert run_json("train", "-m", model, "--ham", "-", input=message)["moved"] == 1
    assert (load(model).model.token_counts == before).all()
    assert run_json("train", "-m", model, "--forget", "-", input=filed)["forgotten"] == 1
    forgotten = load(model)
    run("train", "-m", model, "--ham", "-", input=message)
    assert (load(model).model.token_counts == before).all()
    assert forgotten.model.token_counts.sum() < before.sum()


def test_a_message_given_under_both_labels_at_once_is_reported_moved(tmp_path, sample_maildir):
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0]
    spam, ham = tmp_path / "spam", tmp_path / "ham"
    spam.mkdir()
    ham.mkdir()
    (spam / "copy").write_bytes(message.read_bytes())
    (ham / "copy").write_bytes(message.read_bytes())
    for other in sorted((sample_maildir / "spam" / "cur").iterdir())[:2]:
        (spam / other.name).write_bytes(other.read_bytes())
    model = tmp_path / "model.joblib"
    summary = run_json("train", "--new", "-m", model, "--spam", spam, "--ham", ham)
    # Four files, three messages: the later label wins, and the change is counted.
    assert (summary["learned"], summary["moved"], summary["known"]) == (3, 1, 0)
    assert summary["classes"]["ham"]["total"] == 1


def test_forgetting_mail_never_trained_says_so_in_one_line(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir, spam="cur")
    result = run("train", "-m", model, "--forget", sample_maildir / "spam" / "new")
    assert result.exit_code == 0
    assert "forgot 0 (2 never trained);" in result.stdout


def test_a_class_new_to_the_model_is_warned_of(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir, spam="cur")
    typo = run("train", "-m", model, "--label", f"Spams={sample_maildir / 'spam' / 'new'}")
    assert typo.exit_code == 0
    assert typo.stderr.splitlines() == [
        "Warning: added the class 'Spams' to the model's 'spam', 'ham'"
    ]
    typo = run("train", "-m", model, "--label", f"HAM={sample_maildir / 'ham' / 'new'}")
    assert typo.exit_code == 0
    assert typo.stderr.splitlines() == [
        "Warning: the class 'HAM' is not 'ham' (class names are exact), so it is a class "
        "of its own; --ham names 'ham'"
    ]
    # Said when it is given, also to a new model, and to evaluate (review 48).
    wide = "\uff53\uff50\uff41\uff4d"  # "spam" in full-width letters
    for command in (
        ("train", "-m", tmp_path / "fresh.joblib"),
        ("evaluate", "--test-size", "0.3"),
    ):
        result = run(*command, "--label", f"{wide}={sample_maildir / 'spam'}", "--ham",
                     sample_maildir / "ham")  # fmt: skip
        assert result.exit_code == 0, result.output
        assert f"the class {wide!r} is not 'spam'" in result.stderr
    # Known classes, and a first training, warn of nothing.
    known = run("train", "-m", model, "--spam", sample_maildir / "spam" / "new")
    assert known.stderr == ""
    first = run("train", "-m", tmp_path / "new.joblib", "--label", f"news={sample_maildir / 'ham'}")
    assert first.stderr == ""


def test_one_flag_takes_several_paths(tmp_path, sample_maildir):
    spam_files = sorted((sample_maildir / "spam" / "cur").iterdir())[:3]
    summary = run_json(
        "train", "-m", tmp_path / "m.joblib", "--spam", *spam_files, "--ham", sample_maildir / "ham"
    )
    assert summary["classes"]["spam"]["trained"] == 3


def test_general_labels(tmp_path, sample_maildir):
    summary = run_json(
        "train",
        "-m",
        tmp_path / "m.joblib",
        "--label",
        f"junk={sample_maildir / 'spam'}",
        "--label",
        f"work={sample_maildir / 'ham'}",
    )
    assert set(summary["classes"]) == {"junk", "work"}
    # Like --spam and --ham, a --label takes several paths, each of its class.
    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    summary = run_json(
        "train",
        "-m",
        tmp_path / "m2.joblib",
        "--label",
        f"junk={spam / 'cur'}",
        spam / "new",
        "--label",
        f"work={ham / 'cur'}",
        ham / "new",
    )
    assert {name: row["trained"] for name, row in summary["classes"].items()} == {
        "junk": len(list(spam.glob("[cn]*/*"))),
        "work": len(list(ham.glob("[cn]*/*"))),
    }
    # And one --label may name several classes, each NAME=PATH starting one.
    both = run_json("train", "-m", tmp_path / "m3.joblib", "--label", f"junk={spam}", f"work={ham}")
    assert {name: row["trained"] for name, row in both["classes"].items()} == {
        "junk": len(list(spam.glob("[cn]*/*"))),
        "work": len(list(ham.glob("[cn]*/*"))),
    }


def test_one_message_from_stdin(tmp_path, sample_maildir):
    message = sorted((sample_maildir / "spam" / "cur").iterdir())[0].read_bytes()
    result = run("train", "-m", tmp_path / "m.joblib", "--spam", "-", "--json", input=message)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["classes"]["spam"]["trained"] == 1


def test_model_path_from_environment(tmp_path, sample_maildir, monkeypatch):
    monkeypatch.setenv("SPAMNB_MODEL", str(tmp_path / "env-model.joblib"))
    assert run("train", "--spam", sample_maildir / "spam").exit_code == 0
    assert (tmp_path / "env-model.joblib").exists()
    monkeypatch.delenv("SPAMNB_MODEL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg" / "share"))
    assert run("train", "--spam", sample_maildir / "spam").exit_code == 0
    assert (tmp_path / "xdg" / "share" / "spamnb" / "model.joblib").exists()
    # Every folder it made is private, as the XDG specification asks and as the model
    # itself is.
    for made in ("xdg", "xdg/share", "xdg/share/spamnb"):
        assert (tmp_path / made).stat().st_mode & 0o777 == 0o700, made


def test_info_describes_the_model(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run(
        "train",
        "-m",
        model,
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
        "--alpha",
        "0.5",
    )
    details = run_json("info", "-m", model)
    assert details["path"] == str(model)
    assert details["classes"] == ["spam", "ham"]
    assert details["alpha"] == 0.5 and details["format_version"] >= 1
    assert details["vocabulary"] > 0 and details["created"]
    human = run("info", "-m", model)
    assert human.exit_code == 0 and "vocabulary" in human.stdout
    # A long path is folded over lines, never cut short.
    assert str(model) in "".join(human.stdout.split())


def test_info_says_what_the_pipe_finds_and_train_rewrites_the_table(tmp_path, sample_maildir):
    import os

    from spamnb.table import BLOCK, MAGIC

    model = tmp_path / "model.joblib"
    table = tmp_path / "model.joblib.table"
    sample = ["--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    run("train", "-m", model, *sample)

    def state() -> str:
        return run_json("info", "-m", model)["pipe_table"]

    assert state() == "current"
    good = table.read_bytes()
    table.write_bytes(good[: len(MAGIC) - 2] + b"\x03" + good[len(MAGIC) - 1 :])
    assert state() == "other_version"
    damaged = bytearray(good)
    damaged[-BLOCK] ^= 1  # a weight in the last block, which only check_all reads
    table.write_bytes(bytes(damaged))
    assert state() == "damaged"
    table.write_bytes(good)
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert state() == "stale"
    table.unlink()
    assert state() == "missing"
    human = run("info", "-m", model)
    assert "missing" in human.stdout and "next train" in " ".join(human.stdout.split())
    # Training the same mail again learns nothing, but writes the model and its table.
    assert run_json("train", "-m", model, *sample)["learned"] == 0
    assert state() == "current"


def test_the_mistake_table_in_info_and_turned_off_by_its_weight(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    off = tmp_path / "off.joblib"
    sample = ["--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"]
    run("train", "-m", model, *sample)
    run("train", "-m", off, "--mistake-weight", "0", *sample)
    table = run_json("info", "-m", model)["mistake_table"]
    assert table["weight"] == 0.5 and table["in_use"]
    assert 0 < table["messages"] <= table["copies"]
    assert "weight 0.5" in run("info", "-m", model).stdout
    assert run_json("info", "-m", off)["mistake_table"] == {
        "weight": 0.0,
        "in_use": False,
        "messages": 0,
        "copies": 0,
    }
    assert "off" in run("info", "-m", off).stdout
    # The same counts either way; scoring with weight 0 gives the untrained table's scores.
    folder = sample_maildir / "spam"

    def scores(*args):
        result = run("classify", *args, "--json", folder)
        assert result.exit_code == 0, result.output
        return [json.loads(line)["log_odds"] for line in result.stdout.splitlines()]

    # (The model with --mistake-weight 0 is loaded; the other is scored through its
    # table, which sums in another order.)
    assert scores("-m", model, "--mistake-weight", "0") == pytest.approx(scores("-m", off))
    assert scores("-m", model) != pytest.approx(scores("-m", off))


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--spam", "/no/such/folder"], ["/no/such/folder"]),
        (["--label", "nonsense"], ["NAME=PATH"]),
        ([], ["--spam"]),
    ],
    ids=["missing-path", "bad-label", "nothing-to-learn"],
)
def test_bad_arguments_give_one_line_errors(tmp_path, args, fragments):
    assert_one_line_error(run("train", "-m", tmp_path / "m.joblib", *args), *fragments)


def test_empty_folder_and_non_mail_file(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(run("train", "-m", tmp_path / "m.joblib", "--spam", empty), str(empty))
    junk = tmp_path / "photo.jpg"
    junk.write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 4)
    assert_one_line_error(run("train", "-m", tmp_path / "m.joblib", "--spam", junk), str(junk))
    assert not (tmp_path / "m.joblib").exists()


def test_corrupt_existing_model_is_not_overwritten(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    model.write_bytes(b"precious bytes of something else")
    result = run("train", "-m", model, "--spam", sample_maildir / "spam")
    assert_one_line_error(result, "not a spamnb model file")
    assert "--new" not in result.stderr  # which would not replace it either
    result = run("train", "-m", model, "--new", "--spam", sample_maildir / "spam")
    assert_one_line_error(result, "only a model is replaced")
    assert model.read_bytes() == b"precious bytes of something else"


def test_info_on_a_corrupt_model(tmp_path):
    model = tmp_path / "model.joblib"
    model.write_bytes(b"\x00garbage")
    assert_one_line_error(run("info", "-m", model), str(model))


@pytest.mark.parametrize("alpha", ["0", "nan", "inf", "-1"])
def test_alpha_must_be_positive_and_finite(tmp_path, sample_maildir, alpha):
    result = run(
        "train", "-m", tmp_path / "m.joblib", "--spam", sample_maildir / "spam", "--alpha", alpha
    )
    assert result.exit_code == 2 and "--alpha" in result.stderr
    assert not (tmp_path / "m.joblib").exists()


@pytest.mark.parametrize("option", ["--mistake-weight", "--ham-cutoff", "--spam-cutoff"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_weights_and_cutoffs_must_be_finite(tmp_path, sample_maildir, option, value):
    # float() takes "nan", and nan passes every comparison with a range's bounds.
    result = run(
        "train", "-m", tmp_path / "m.joblib", "--spam", sample_maildir / "spam", option, value
    )
    assert result.exit_code == 2 and option in result.stderr
    assert not (tmp_path / "m.joblib").exists()


def test_labels_are_shown_literally_not_as_markup(tmp_path, sample_maildir):
    (tmp_path / "m[").mkdir()
    result = run(
        "train",
        "-m",
        tmp_path / "m[/x].joblib",
        "--label",
        f"[bold]news={sample_maildir / 'spam'}",
        "--ham",
        sample_maildir / "ham",
    )
    assert result.exit_code == 0, result.output
    assert "[bold]news" in result.stdout


def test_overlapping_paths_count_each_message_once(tmp_path, sample_maildir):
    spam = sample_maildir / "spam"
    result = run("train", "-m", tmp_path / "m.joblib", "--spam", spam, spam / "cur", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["classes"]["spam"]["trained"] == 30
    assert "counted once" in result.stderr


def test_a_message_is_one_message_however_its_path_is_spelt(tmp_path, sample_maildir, monkeypatch):
    cur = sample_maildir / "spam" / "cur"
    first = sorted(cur.iterdir())[0]
    (tmp_path / "alias").symlink_to(sample_maildir / "spam", target_is_directory=True)
    (tmp_path / "link").symlink_to(first)
    (tmp_path / "box").write_bytes(b"From a\n\nx\n")
    monkeypatch.chdir(cur)
    identity = cli.message_identities()
    spellings = [
        str(first),
        str(tmp_path / "alias" / "cur" / first.name),
        str(tmp_path / "link"),
        first.name,
        f"../cur/{first.name}",
    ]
    assert {identity(path) for path in spellings} == {os.path.realpath(first)}
    assert identity(f"{tmp_path}/../{tmp_path.name}/box:2") == f"{os.path.realpath(tmp_path)}/box:2"
    assert identity("-") == "-"
    # Each spelling given as a path of its own, the message is learnt once.
    summary = run_json("train", "-m", tmp_path / "m.joblib", "--spam", *spellings)
    assert summary["classes"]["spam"]["trained"] == 1


def test_a_message_under_two_labels_is_an_error(tmp_path, sample_maildir):
    spam = sample_maildir / "spam"
    result = run("train", "-m", tmp_path / "m.joblib", "--spam", spam, "--ham", spam / "new")
    assert_one_line_error(result, "both spam and ham")


def test_equals_form_takes_several_paths_too(tmp_path, sample_maildir):
    files = sorted((sample_maildir / "spam" / "cur").iterdir())[:2]
    summary = run_json("train", "-m", tmp_path / "m.joblib", f"--spam={files[0]}", files[1])
    assert summary["classes"]["spam"]["trained"] == 2


def test_model_path_that_is_a_directory(tmp_path, sample_maildir):
    assert_one_line_error(run("info", "-m", tmp_path), "directory")


def test_no_progress_codes_in_redirected_stderr(tmp_path, sample_maildir, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    result = run(
        "train",
        "-m",
        tmp_path / "m.joblib",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
    )
    assert result.exit_code == 0
    assert "\x1b[" not in result.stderr


def test_cutoffs_chosen_by_hand_survive_retraining(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    run(
        "train",
        "-m",
        model,
        "--spam",
        sample_maildir / "spam" / "cur",
        "--ham",
        sample_maildir / "ham" / "cur",
    )
    run_json("train", "-m", model, "--ham-cutoff", "0.3", "--spam-cutoff", "0.95")
    run(
        "train",
        "-m",
        model,
        "--spam",
        sample_maildir / "spam" / "new",
        "--ham",
        sample_maildir / "ham" / "new",
    )
    calibration = load(model).calibration
    assert (calibration.ham_cutoff, calibration.spam_cutoff) == (0.3, 0.95)
    assert calibration.chosen_cutoffs
    assert_one_line_error(run("train", "-m", model, "--ham-cutoff", "0.99"), "must not exceed")


def test_scoring_options_alone_are_set_in_an_existing_model(tmp_path, sample_maildir):
    # What tune advises ("spamnb train --alpha 0.1 ..."), with no mail to learn.
    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir)
    before = load(model)
    result = run("train", "-m", model, "--alpha", "0.1", "--mistake-weight", "0.3")
    assert result.exit_code == 0, result.output
    # The calibration was fitted under the old options, on mail the model does not keep.
    assert "train --new on your folders refits them" in result.stderr
    after = load(model)
    assert (after.model.alpha, after.mistakes.weight) == (0.1, 0.3)
    assert (after.model.token_counts == before.model.token_counts).all()
    assert after.calibration == before.calibration
    # Setting what the model has already changes nothing, and says nothing of it; nor
    # does a ranking of tokens for a model that keeps them all, whose scores it leaves.
    again = run("train", "-m", model, "--alpha", "0.1")
    assert again.exit_code == 0 and "refits" not in again.stderr
    ranked = run("train", "-m", model, "--select", "df")
    assert ranked.exit_code == 0 and "refits" not in ranked.stderr
    assert load(model).model.selection == "df"
    # With mail it knows already (or too little to refit on), the old fit stays too.
    known = train_sample(model, sample_maildir, "--alpha", "0.5")
    assert known.exit_code == 0 and "refits them" in known.stderr
    assert load(model).calibration == before.calibration
    # No model at the path: a mistyped path, not a new empty model.
    assert_one_line_error(
        run("train", "-m", tmp_path / "missing.joblib", "--alpha", "0.1"), "there is no model"
    )
    assert not (tmp_path / "missing.joblib").exists()
    assert_one_line_error(run("train", "-m", model), "give mail to learn from")


def test_a_model_trained_one_class_per_run_says_it_is_not_calibrated(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    first = run("train", "-m", model, "--spam", sample_maildir / "spam")
    assert first.exit_code == 0 and "not calibrated" not in first.stderr  # no ham to tell
    second = run("train", "-m", model, "--ham", sample_maildir / "ham")
    assert second.exit_code == 0
    assert "the spam score is not calibrated yet" in second.stderr
    info = run_json("info", "-m", model)
    assert info["cutoffs"]["fitted_on"] == 0 and not info["cutoffs"]["set_by_hand"]
    assert "not calibrated yet" in " ".join(run("info", "-m", model).output.split())
    # A run with both classes fits it, and info says on what.
    retrained = tmp_path / "both.joblib"
    both = train_sample(retrained, sample_maildir)
    assert "not calibrated" not in both.stderr
    info = run_json("info", "-m", retrained)
    assert info["cutoffs"]["fitted_on"] == 60
    assert "chosen on 60 held-out messages" in " ".join(run("info", "-m", retrained).output.split())


def test_a_later_run_refits_the_calibration_only_with_as_much_mail(tmp_path, sample_maildir):
    # Refitted on any run with 20 of each class, a nightly run's few dozen messages set
    # the cut-offs (they closed on 0.5) and the junk folder got more good mail.
    def folder(name: str, label: str, count: int) -> Path:
        path = tmp_path / name
        path.mkdir()
        words = "cheap pills offer winner" if label == "spam" else "meeting notes agenda draft"
        for n in range(count):
            text = f"Message-ID: <{name}{n}@example.org>\nSubject: {label} {n}\n\n{words} {n}\n"
            (path / f"{n}.eml").write_text(text)
        return path

    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir)
    first = load(model).calibration
    assert first.fitted_on == 60
    nightly = ("--spam", folder("s1", "spam", 25), "--ham", folder("h1", "ham", 25))
    assert run_json("train", "-m", model, *nightly)["learned"] == 50
    assert load(model).calibration == first
    weekly = ("--spam", folder("s2", "spam", 30), "--ham", folder("h2", "ham", 30))
    assert run_json("train", "-m", model, *weekly)["learned"] == 60
    assert load(model).calibration.fitted_on == 60 and load(model).calibration != first
    # Nor one of much mail with little of a class (review 51).
    second = load(model).calibration
    lopsided = ("--spam", folder("s3", "spam", 70), "--ham", folder("h3", "ham", 2))
    assert run_json("train", "-m", model, *lopsided)["learned"] == 72
    assert load(model).calibration == second


def test_allow_empty_takes_an_emptied_junk_folder_as_no_mail(tmp_path, sample_maildir):
    # README's nightly job: the junk folder is often empty, and the ham must still be
    # learnt.
    junk = tmp_path / "Maildir" / ".Junk"
    for part in ("cur", "new", "tmp"):
        (junk / part).mkdir(parents=True)
    mbox = tmp_path / "emptied.mbox"
    mbox.write_bytes(b"")
    model = tmp_path / "model.joblib"
    train_sample(model, sample_maildir, spam="cur")
    ham = sample_maildir / "ham"
    assert_one_line_error(
        run("train", "-m", model, "--spam", junk, "--ham", ham), "no messages found in"
    )
    before = load(model).model.class_counts.sum()
    outcome = run_json(
        "train", "-m", model, "--allow-empty", "--spam", junk, mbox, sample_maildir / "spam"
    )
    assert outcome["learned"] == len(list((sample_maildir / "spam" / "new").iterdir()))
    assert load(model).model.class_counts.sum() == before + outcome["learned"]
    # An empty folder under a class the model lacks adds no class, and says none.
    quiet = run("train", "-m", model, "--allow-empty", "--label", f"news={junk}")
    assert quiet.exit_code == 0 and "class" not in quiet.stderr
    assert load(model).classes == ["spam", "ham"]
    # Nothing at all to learn in a new model is still an error, and makes no model.
    assert_one_line_error(
        run("train", "-m", tmp_path / "new.joblib", "--allow-empty", "--spam", junk),
        "no messages found in",
    )
    assert not (tmp_path / "new.joblib").exists()
    # Standard input is one message, never a folder: empty, it stays an error.
    assert_one_line_error(
        run("train", "-m", model, "--allow-empty", "--spam", "-", input=b""), "is empty"
    )
    # Named an mbox, it is an emptied one piped in (review 50).
    piped = run("train", "-m", model, "--allow-empty", "--format", "mbox", "--spam", "-", input=b"")
    assert piped.exit_code == 0, piped.stderr
    assert_one_line_error(
        run("train", "-m", model, "--format", "mbox", "--spam", "-", input=b""), "is empty"
    )


def test_forgetting_two_copies_of_a_message_at_once(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    source = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    copy = tmp_path / "copy.eml"
    copy.write_bytes(source.read_bytes())
    run("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    outcome = run_json("train", "-m", model, "--forget", source, copy)
    assert (outcome["forgotten"], outcome["unknown"]) == (1, 0)
    assert outcome["classes"]["spam"]["total"] == 29


def test_messages_without_message_id_differ_by_subject_but_not_by_other_headers():
    from spamnb.filter import message_digest

    body = b"\nSame body in every copy.\n"
    first = b"Subject: invoice 1\nX-Spamnb: Ham\n" + body
    assert message_digest(first) != message_digest(b"Subject: invoice 2\n" + body)
    assert message_digest(first) == message_digest(b"Subject:  invoice\n  1\nStatus: RO\n" + body)
    # With a Message-ID the Subject no longer matters: it identifies the message.
    with_id = b"Message-ID: <a@example.com>\n"
    assert message_digest(with_id + b"Subject: [SPAM] x\n" + body) == message_digest(
        with_id + b"Subject: x\n" + body
    )


def test_word_pairs_are_chosen_when_a_model_is_created(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    run("train", "-m", model, "--no-word-pairs", *mail)
    plain = load(model)
    assert plain.settings.word_pairs == 0
    assert not any(" " in t for t in plain.vocabulary.tokens if t.count(":") == 0)
    # The tokenizer of a trained model is fixed: asking for pairs now is a clear error.
    assert_one_line_error(run("train", "-m", model, "--word-pairs", *mail), "train --new")
    assert_one_line_error(
        run("classify", "-m", model, "--word-pairs", sample_maildir / "spam"), "word pairs off"
    )
    run("train", "-m", model, "--new", *mail)
    assert load(model).settings.word_pairs == 1
    report = run_json("evaluate", "--no-word-pairs", *mail, "--test-size", "0.3")
    assert report["protocol"]["word_pairs"] is False


def test_chinese_and_japanese_pairs_are_chosen_when_a_model_is_created(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    run("train", "-m", model, *mail)
    assert load(model).settings.cjk_pairs == 0
    # The sample's Japanese Subject "京都の写真" is one word by default.
    assert "subject:京都の写真" in load(model).vocabulary.tokens
    assert_one_line_error(run("train", "-m", model, "--cjk-pairs", *mail), "train --new")
    assert_one_line_error(
        run("classify", "-m", model, "--cjk-pairs", sample_maildir / "spam"),
        "Chinese and Japanese pairs off",
    )
    run("train", "-m", model, "--new", "--cjk-pairs", *mail)
    paired = load(model)
    assert paired.settings.cjk_pairs == 1
    assert {"subject:京都", "subject:の写", "subject:写真"} <= set(paired.vocabulary.tokens)
    described = " ".join(run("info", "-m", model).output.split())  # the table wraps
    assert "Chinese and Japanese as pairs of characters" in described
    assert run_json("info", "-m", model)["tokenizer"]["cjk_pairs"] == 1
    report = run_json("evaluate", "--cjk-pairs", *mail, "--test-size", "0.3")
    assert report["protocol"]["cjk_pairs"] is True


def test_train_new_says_which_settings_of_the_replaced_model_it_drops(tmp_path, sample_maildir):
    model = tmp_path / "model.joblib"
    mail = ("--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    run("train", "-m", model, "--cjk-pairs", "--max-tokens", "1000", *mail)
    replaced = run("train", "-m", model, "--new", *mail)
    assert replaced.exit_code == 0
    warnings = replaced.stderr.splitlines()
    assert len(warnings) == 2, replaced.stderr
    assert "Chinese and Japanese pairs on; the new one has them off" in warnings[0]
    assert "give --cjk-pairs to keep" in warnings[0]
    assert "--max-tokens 1000; the new one 50000" in warnings[1]
    assert "give --max-tokens 1000 to keep" in warnings[1]
    assert load(model).settings.cjk_pairs == 0
    # A setting given on the command line is the user's choice: nothing to say.
    chosen = run("train", "-m", model, "--new", "--no-word-pairs", *mail)
    assert chosen.exit_code == 0 and chosen.stderr == ""
    # Kept by default, the setting's loss is said with the option that keeps it.
    dropped = run("train", "-m", model, "--new", *mail)
    assert "word pairs off; the new one has them on" in dropped.stderr
    assert "give --no-word-pairs to keep" in dropped.stderr
    # Nothing changes: nothing said.
    assert run("train", "-m", model, "--new", *mail).stderr == ""
    # Without its scoring table (a model without a spam class has none), the model
    # itself tells (review 44).
    labels = (
        "--label",
        f"news={sample_maildir / 'spam'}",
        "--label",
        f"other={sample_maildir / 'ham'}",
    )
    run("train", "-m", model, "--new", "--cjk-pairs", *labels)
    assert not Path(f"{model}.table").exists()
    dropped = run("train", "-m", model, "--new", *labels)
    assert "Chinese and Japanese pairs on; the new one has them off" in dropped.stderr
    # A damaged model is replaced as before, without a word about its settings.
    model.write_bytes(model.read_bytes()[:100])
    replaced = run("train", "-m", model, "--new", *mail)
    assert replaced.exit_code == 0 and replaced.stderr == ""
    assert load(model).settings.word_pairs == 1


def test_an_older_spamnb_refuses_a_model_of_chinese_and_japanese_pairs(
    tmp_path, sample_maildir, monkeypatch
):
    from spamnb import store, table
    from spamnb.paths import table_path
    from spamnb.store import ModelFileError

    # An older spamnb drops settings it does not know: it would tokenize the model
    # without its pairs and save it so.  The model and its table say they are newer.
    plain, paired = tmp_path / "plain.joblib", tmp_path / "paired.joblib"
    # The sample's ham less its CRLF message, which would make the plain model format 7.
    ham = tmp_path / "ham"
    ham.mkdir()
    for message in (sample_maildir / "ham").glob("*/*"):
        if b"\r\n" not in message.read_bytes():
            shutil.copy(message, ham)
    mail = ("--spam", sample_maildir / "spam", "--ham", ham)
    run("train", "-m", plain, *mail)
    run("train", "-m", paired, "--cjk-pairs", *mail)
    assert run_json("info", "-m", plain)["format_version"] == 5
    assert run_json("info", "-m", paired)["format_version"] == 6
    assert Path(table_path(plain)).read_bytes().startswith(table.MAGIC)
    assert Path(table_path(paired)).read_bytes().startswith(table.MAGIC_5)
    # As the spamnb before the setting read them: the plain pair still opens.
    monkeypatch.setattr(store, "FORMAT_VERSION", 5)
    monkeypatch.setattr(table, "_MAGICS", (table.MAGIC,))
    assert load(plain).settings.cjk_pairs == 0
    assert table.open_table(plain, table_path(plain), trust=True)[1] == "current"
    with pytest.raises(ModelFileError, match="newer than this spamnb"):
        load(paired)
    assert table.open_table(paired, table_path(paired), trust=True)[1] == "other_version"


def test_every_json_key_of_train_merge_and_info_is_documented(tmp_path, sample_maildir):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")

    def section(name: str) -> str:
        return readme.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]

    spam, ham = tmp_path / "spam.joblib", tmp_path / "ham.joblib"
    trained = run_json("train", "-m", spam, "--spam", sample_maildir / "spam")
    run_json("train", "-m", ham, "--ham", sample_maildir / "ham")
    merged = run_json("merge", tmp_path / "all.joblib", spam, ham)
    described = run_json("info", "-m", tmp_path / "all.joblib")
    for name, output in (("train", trained), ("merge", merged), ("info", described)):
        missing = [key for key in output if f"`{key}`" not in section(name)]
        assert not missing, (name, missing)


def test_a_folder_without_mail_is_told_apart_from_the_skips_before_it(tmp_path, sample_maildir):
    spam = tmp_path / "spam"
    shutil.copytree(sample_maildir / "spam" / "cur", spam)
    (spam / "notes.txt").write_text("not a message\n")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "README").write_text("no mail here\n")
    result = run("train", "-m", tmp_path / "m.joblib", "--spam", spam, "--ham", empty)
    assert_one_line_error(result, f"no messages found in {empty}", "1 skipped", "README")
    assert "notes.txt" not in result.stderr
    result = run("train", "-m", tmp_path / "m.joblib", "--spam", spam, "--ham", empty / "sub")
    assert_one_line_error(result, f"no messages found in {empty / 'sub'}")
    assert "skipped" not in result.stderr


def test_every_command_has_a_whole_summary_in_the_top_help():
    commands = run("--help").stdout.split("Commands:", 1)[1].strip().splitlines()
    assert len(commands) == 7
    assert not [line for line in commands if line.endswith("...")]


def test_a_warning_goes_above_the_progress_bar():
    # Printed by click while rich drew the bar, it landed on the bar's line, a piece
    # of the bar left beside it (review 35, reading a large folder holding a photo);
    # rich clears the line first.
    program = (
        "-c",
        "from spamnb.cli import progress_bar, warn\n"
        "with progress_bar('Learning', None) as advance:\n"
        "    advance(3)\n"
        "    warn('skipped 1 file')\n",
    )
    shown = on_a_terminal([], program=program)
    assert b"Learning" in shown
    assert b"\x1b[2KWarning: skipped 1 file" in shown
    assert b"[progress.description]" not in shown  # the bar's own markup, drawn raw
    # A terminal that cannot redraw gets no bar, and no empty line for it either.
    for term in ("dumb", "unknown"):
        assert on_a_terminal([], program=program, term=term) == b"Warning: skipped 1 file\r\n"


def test_the_installed_command_completes_as_readme_says(tmp_path):
    # The command's entry point reads the pipe filter's options by hand before click;
    # completion must still reach click, with a line as bash hands it over.
    spamnb = str(Path(sys.executable).with_name("spamnb"))

    def completed(words: str) -> list[str]:
        env = {**os.environ, "_SPAMNB_COMPLETE": "bash_complete", "COMP_WORDS": words}
        env["COMP_CWORD"] = str(len(words.split()) - 1)
        done = subprocess.run([spamnb], env=env, capture_output=True, text=True, check=True)
        return done.stdout.splitlines()

    assert "plain,train" in completed("spamnb tr")
    assert {"plain,--spam", "plain,--spam-cutoff"} <= set(completed("spamnb train --sp"))
    assert "plain,--pipe" in completed("spamnb classify --pi")
    source = subprocess.run(
        [spamnb], env={**os.environ, "_SPAMNB_COMPLETE": "bash_source"}, capture_output=True
    )
    assert b"complete -o nosort -F _spamnb_completion spamnb" in source.stdout
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert 'eval "$(_SPAMNB_COMPLETE=bash_source spamnb)"' in readme


def test_info_shows_the_cutoffs_and_the_tokenizers_limits(tmp_path, sample_maildir):
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir, "--new", "--max-tokens", "900")
    described = run_json("info", "-m", model)
    assert described["tokenizer"]["max_tokens"] == 900
    assert described["cutoffs"]["set_by_hand"] is False
    run_json("train", "-m", model, "--ham-cutoff", "0.3", "--spam-cutoff", "0.95")
    described = run_json("info", "-m", model)
    assert described["cutoffs"] == {"ham": 0.3, "spam": 0.95, "set_by_hand": True, "fitted_on": 60}
    shown = run("info", "-m", model).stdout
    assert "at most 900 tokens" in shown and "set by hand" in shown


def test_the_same_mail_under_two_labels_in_one_run_is_warned_about(tmp_path, sample_maildir):
    copies = tmp_path / "copies"
    shutil.copytree(sample_maildir / "spam" / "cur", copies)
    model = tmp_path / "m.joblib"
    spam = sample_maildir / "spam" / "cur"
    result = run("train", "-m", model, "--spam", spam, "--ham", copies, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["conflicting"] == len(list(copies.iterdir())) > 0
    assert "under two labels" in result.stderr
    # A later run that moves mail on purpose (a message refiled) is no conflict.
    result = run("train", "-m", model, "--spam", copies, "--json")
    assert json.loads(result.stdout)["conflicting"] == 0
    assert json.loads(result.stdout)["moved"] > 0
    assert "under two labels" not in result.stderr


def test_wrong_paths_say_what_is_wrong_with_them(tmp_path, sample_maildir):
    model = tmp_path / "m.joblib"
    dangling = tmp_path / "junk"
    dangling.symlink_to(tmp_path / "gone")
    result = run("train", "-m", model, "--spam", dangling, "--ham", sample_maildir / "ham")
    assert_one_line_error(result, "broken symbolic link")
    # A Maildir whose mail is all in its .Sub/ folders points at --recursive.
    maildir = tmp_path / "Maildir"
    for part in ("cur", "new", "tmp"):
        (maildir / part).mkdir(parents=True)
    junk = maildir / ".Junk"
    shutil.copytree(sample_maildir / "spam", junk)
    result = run("train", "-m", model, "--spam", maildir, "--ham", sample_maildir / "ham")
    assert_one_line_error(result, "no messages found", "--recursive")
    # Only there: the same folder given as another format is no matter for --recursive
    # (review 50).
    result = run("train", "-m", model, "--format", "mh", "--spam", maildir)
    assert_one_line_error(result, "no messages found in")
    assert "recursive" not in result.stderr
    result = run("train", "-m", model, "--format", "mbox", "--spam", maildir)
    assert_one_line_error(result, "is a directory, not an mbox file")
    assert "recursive" not in result.stderr
    result = run(
        "train", "-m", model, "--spam", maildir, "--ham", sample_maildir / "ham", "--recursive"
    )
    assert result.exit_code == 0, result.output


def test_forgetting_reads_in_batches_and_tokenizes_only_what_the_model_learnt(
    tmp_path, sample_maildir, monkeypatch
):
    from spamnb.filter import SpamFilter

    model = tmp_path / "m.joblib"
    assert run("train", "-m", model, "--spam", sample_maildir / "spam" / "cur",
               "--ham", sample_maildir / "ham" / "cur").exit_code == 0  # fmt: skip
    learnt = load(model)
    # A folder of learnt and unlearnt mail, with a copy of a learnt message.
    mixed = tmp_path / "mixed"
    shutil.copytree(sample_maildir / "spam", mixed)
    first = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    shutil.copy(first, mixed / "copy.eml")
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", 4)
    tokenized = []
    real = SpamFilter.tokenize
    monkeypatch.setattr(
        SpamFilter,
        "tokenize",
        lambda self, data, **k: tokenized.append(len(data)) or real(self, data, **k),
    )
    result = run_json("train", "-m", model, "--forget", mixed, "--json")
    spam_learnt = sum(label == "spam" for label in learnt.trained.values())
    assert result["forgotten"] == spam_learnt
    assert result["unknown"] == len(list((sample_maildir / "spam" / "new").iterdir()))
    assert sum(tokenized) == spam_learnt and len(tokenized) > 1
    assert max(tokenized) <= 4
    assert "spam" not in load(model).trained.values()


def test_known_mail_that_gives_new_tokens_leaves_a_model_that_loads(tmp_path, sample_maildir):
    # Known by its Message-ID and body, a copy with a field more (or any known mail
    # read by a newer tokenizer, as after an upgrade) adds tokens to the vocabulary
    # and no counts; the model saved then had counts short of its vocabulary, and was
    # refused as damaged at every later run, the pipe's included.
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir, "--new")
    before = load(model)
    original = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    copy = tmp_path / "copy.eml"
    copy.write_bytes(b"X-Original-To: someone.else@example.test\n" + original.read_bytes())
    summary = run_json("train", "-m", model, "--spam", copy, "--json")
    assert summary["known"] == 1 and summary["learned"] == 0
    after = load(model)
    grown = len(after.vocabulary) - len(before.vocabulary)
    assert grown > 0
    assert after.model.token_counts.shape == (len(after.classes), len(after.vocabulary))
    assert not after.model.token_counts[:, len(before.vocabulary) :].any()
    assert (
        after.model.token_counts[:, : len(before.vocabulary)] == before.model.token_counts
    ).all()
    verdict = run("classify", "--pipe", "-m", model, input=copy.read_bytes())
    assert verdict.exit_code in (0, 1, 2), verdict.stderr


def test_a_copy_that_changed_since_it_was_learnt_is_warned_of_when_moved_or_forgotten(
    tmp_path, sample_maildir
):
    # Known by its Message-ID and body, but its counts are taken back from the copy
    # given now: one forwarded since (a Received field added) took out other mail's.
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir, "--new")
    original = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    forwarded = tmp_path / "forwarded.eml"
    forwarded.write_bytes(
        b"Received: from relay.forwarder.example (relay.forwarder.example [198.51.100.7])\n"
        + original.read_bytes()
    )
    unchanged = tmp_path / "unchanged.eml"
    unchanged.write_bytes(b"Status: RO\nX-Keywords: Junk\n" + original.read_bytes())
    said = "had tokens that the copy learnt did not"
    for copy, warned in ((unchanged, False), (forwarded, True)):
        for options in (["--forget", copy], ["--ham", copy]):
            scratch = tmp_path / "scratch.joblib"
            shutil.copy(model, scratch)
            result = run("train", "-m", scratch, *options, "--json")
            assert result.exit_code == 0, result.stderr
            summary = json.loads(result.stdout)
            assert summary["forgotten"] + summary["moved"] == 1
            assert (said in result.stderr) is warned, (copy.name, options, result.stderr)
            assert "changed" not in summary
    # A model of an older tokenizer may find an unchanged copy changed: the warning
    # says the newer tokenizer may be why, not only the copy.
    older = load(model)
    older.settings = older.settings._replace(version=TOKENIZER_VERSION - 1)
    save(older, model)
    result = run("train", "-m", model, "--forget", forwarded)
    assert said in result.stderr
    assert f"read otherwise by tokenizer {TOKENIZER_VERSION} than by tokenizer" in result.stderr


def test_a_message_moved_from_a_folder_to_an_mbox_is_moved_not_learnt_again(
    tmp_path, sample_maildir
):
    import mailbox

    from spamnb.mail import message_digests
    from spamnb.store import save

    data = b"Message-ID: <moved@example.org>\nSubject: offer\n\nFrom today: cheap pills"
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "1.eml").write_bytes(data)
    box = mailbox.mbox(str(tmp_path / "junk.mbox"))
    box.add(data)
    box.close()
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir, "--new")
    first = run_json("train", "-m", model, "--ham", folder, "--json")
    assert first["learned"] == 1
    moved = run_json("train", "-m", model, "--spam", tmp_path / "junk.mbox", "--json")
    assert (moved["learned"], moved["moved"]) == (0, 1)
    forgot = run_json("train", "-m", model, "--forget", tmp_path / "junk.mbox", "--json")
    assert forgot["forgotten"] == 1
    # A model that learnt the message under the digest of spamnb before knows it still,
    # and from then on by the new one.
    run_json("train", "-m", model, "--ham", folder, "--json")
    digest, [older] = message_digests(data)
    spam_filter = load(model)
    spam_filter.trained[older] = spam_filter.trained.pop(digest)
    if digest in spam_filter.mistake_copies:
        spam_filter.mistake_copies[older] = spam_filter.mistake_copies.pop(digest)
    save(spam_filter, model)
    again = run_json("train", "-m", model, "--ham", folder, "--json")
    assert (again["learned"], again["known"]) == (0, 1)
    assert digest in load(model).trained and older not in load(model).trained
    assert run_json("train", "-m", model, "--forget", folder, "--json")["forgotten"] == 1


def test_a_crlf_copy_of_a_message_moves_it_and_the_model_says_so_in_its_format(
    tmp_path, sample_maildir
):
    from spamnb.mail import message_digests

    # The same message as a mail client's "this is spam" button saves it (CRLF) and
    # as delivered to a Maildir (LF): one message, moved (review 50).
    data = b"Message-ID: <crlf@example.org>\nSubject: offer\n\ncheap pills\nnow\n"
    delivered, saved = tmp_path / "delivered", tmp_path / "saved"
    delivered.mkdir()
    saved.mkdir()
    (delivered / "1.eml").write_bytes(data)
    (saved / "1.eml").write_bytes(data.replace(b"\n", b"\r\n"))
    model = tmp_path / "m.joblib"
    # Mail without a CRLF (the sample's spam) leaves the model in the format older
    # spamnb reads.
    first = run_json("train", "-m", model, "--spam", sample_maildir / "spam", "--ham", delivered)
    assert first["learned"] == 31
    assert run_json("info", "-m", model)["format_version"] == 5
    moved = run_json("train", "-m", model, "--spam", saved, "--json")
    assert (moved["learned"], moved["moved"]) == (0, 1)
    # A spamnb of format 5 or 6 would take the message for new: it must refuse the file.
    assert run_json("info", "-m", model)["format_version"] == 7
    assert load(model).crlf_digests
    # A model that learnt the CRLF copy under format 6's digest knows it still, and from
    # then on by the digest now.
    digest, [format_6] = message_digests((saved / "1.eml").read_bytes())
    spam_filter = load(model)
    spam_filter.trained[format_6] = spam_filter.trained.pop(digest)
    spam_filter.crlf_digests = False
    save(spam_filter, model)
    assert run_json("info", "-m", model)["format_version"] == 5
    again = run_json("train", "-m", model, "--spam", saved, "--json")
    assert (again["learned"], again["known"]) == (0, 1)
    assert digest in load(model).trained and format_6 not in load(model).trained
    assert run_json("info", "-m", model)["format_version"] == 7
    forgot = run_json("train", "-m", model, "--forget", delivered, "--json")
    assert forgot["forgotten"] == 1


def test_forgotten_mail_takes_its_tokens_out_of_the_count_of_tokens(tmp_path, sample_maildir):
    # Forgetting leaves the columns of the forgotten tokens, empty: they were counted.
    cur = tmp_path / "cur.joblib"
    train_sample(cur, sample_maildir, "--new", spam="cur")
    everything = tmp_path / "all.joblib"
    train_sample(everything, sample_maildir, "--new")
    before = run_json("info", "-m", everything, "--json")["vocabulary"]
    forgot = run_json(
        "train", "-m", everything, "--forget", sample_maildir / "spam" / "new", "--json"
    )
    expected = run_json("info", "-m", cur, "--json")["vocabulary"]
    assert forgot["forgotten"] > 0 and before > expected
    assert forgot["vocabulary"] == expected
    assert run_json("info", "-m", everything, "--json")["vocabulary"] == expected


@pytest.mark.parametrize("batch_size", [4, 500])
def test_mail_under_two_labels_is_counted_once_in_the_run_s_summary(
    tmp_path, sample_maildir, monkeypatch, batch_size
):
    # With the copies in a later batch than the mail they copy, each was reported
    # as trained in both classes: a new model's classes added up to more than its mail.
    copies = tmp_path / "copies"
    shutil.copytree(sample_maildir / "spam" / "cur", copies)
    monkeypatch.setattr("spamnb.parallel.BATCH_SIZE", batch_size)
    model = tmp_path / "m.joblib"
    summary = run_json(
        "train", "--new", "-m", model, "--spam", sample_maildir / "spam",
        "--ham", sample_maildir / "ham", copies, "--json", "--jobs", "1",
    )  # fmt: skip
    assert summary["conflicting"] == len(list(copies.iterdir()))
    for name, counts in summary["classes"].items():
        assert counts["trained"] == counts["total"], (name, summary["classes"])


@pytest.mark.parametrize(("offset", "said"), [(-1, "retrain it with --new"), (1, "upgrade spamnb")])
def test_a_model_of_another_tokenizer_version_is_told_apart(tmp_path, sample_maildir, offset, said):
    from spamnb.filter import SpamFilter
    from spamnb.store import save
    from spamnb.tokens import TOKENIZER_VERSION, TokenizerSettings

    model = tmp_path / "m.joblib"
    other = SpamFilter(settings=TokenizerSettings(version=TOKENIZER_VERSION + offset))
    other.train_tokens([["cheap", "pills"], ["lunch", "today"]], ["spam", "ham"])
    save(other, model)
    message = sorted((sample_maildir / "spam" / "cur").iterdir())[0]
    # train, which a nightly job runs, says it too (it said nothing).
    for result in (run("info", "-m", model), run("train", "-m", model, "--spam", message)):
        assert result.exit_code == 0, result.output
        assert f"tokenizer {TOKENIZER_VERSION + offset}" in result.stderr and said in result.stderr


def test_a_flat_spam_score_is_warned_of(tmp_path, sample_maildir, monkeypatch):
    import spamnb.filter

    fit_platt = spamnb.filter.fit_platt
    # Held-out scores turned around, as a model worse than chance would give them.
    monkeypatch.setattr(
        spamnb.filter, "fit_platt", lambda scores, is_spam: fit_platt(-scores, is_spam)
    )
    result = train_sample(tmp_path / "m.joblib", sample_maildir, "--new", "--json")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "fitted flat" in line]
    assert len(warned) == 1
    assert "held-out spam scored no higher than held-out ham" in warned[0]
    from spamnb.store import load

    assert load(tmp_path / "m.joblib").calibration.slope == 0


def test_a_model_the_pipe_cannot_score_through_a_table_is_warned_of(tmp_path, sample_maildir):
    # An unsmoothed Bernoulli model holds certainties: no table is written, and --pipe
    # gave most mail no score (status 3, deferred by the procmail recipe) without a word
    # from train (review 9).  k=0 is the library's alone: the command line takes k > 0.
    path = tmp_path / "b.joblib"
    assert train_sample(path, sample_maildir, "--event-model", "bernoulli").exit_code == 0
    unsmoothed = load(path)
    unsmoothed.model.alpha = 0.0
    save(unsmoothed, path)
    more = tmp_path / "more.eml"
    more.write_bytes(b"Subject: one more\n\nnew ham words\n")
    certain = run("train", "-m", path, "--ham", more)
    assert certain.exit_code == 0
    assert not (tmp_path / "b.joblib.table").exists()
    (line,) = [line for line in certain.stderr.splitlines() if "no pipe scoring table" in line]
    assert "k=0" in line and "bernoulli" in line


@pytest.mark.parametrize("alpha", ["1e-15", "1e-320"])
def test_a_bernoulli_model_at_a_tiny_k_has_no_certainties(tmp_path, sample_maildir, alpha):
    # 1 - p of a word in every spam rounded to 0 below k = 1e-16 of the spam's count:
    # at 1e-15 a certainty (no table, and most piped mail unscored), at 1e-320 NaN
    # scores that classify printed as 'nan' with status 0 (reviews 9, 20).  Lidstone's
    # estimate has none at any k > 0.
    path = tmp_path / "s.joblib"
    smoothed = train_sample(path, sample_maildir, "--event-model", "bernoulli", "--alpha", alpha)
    assert smoothed.exit_code == 0 and (tmp_path / "s.joblib.table").exists()
    assert "no pipe scoring table" not in smoothed.stderr
    classified = run("classify", "-m", path, sample_maildir, "--json")
    assert classified.exit_code == 0
    scores = [json.loads(line)["spam_score"] for line in classified.stdout.splitlines()]
    assert scores and all(score is not None and 0 <= score <= 1 for score in scores)


def test_a_model_reached_through_a_link_is_not_warned_of_a_missing_table(tmp_path, sample_maildir):
    # The table is written beside the link's target; looked for beside the link, train
    # warned every run that the weights held certainties (review 14).
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.joblib"
    link.symlink_to(tmp_path / "real" / "model.joblib")
    trained = train_sample(link, sample_maildir)
    assert trained.exit_code == 0
    assert (tmp_path / "real" / "model.joblib.table").exists()
    assert "no pipe scoring table" not in trained.stderr


def test_an_mbox_on_standard_input_is_learnt_as_its_messages_when_named_so(
    tmp_path, sample_maildir
):
    # `train --spam - < spam.mbox` learnt the whole mbox as one message, unsaid
    # (review 26): it is warned of, and --format mbox reads its messages.  Standard
    # input stays one message by default: a bounce piped from procmail carries the
    # original's envelope line (review 31).
    spam = sorted(p for p in (sample_maildir / "spam").glob("*/*") if p.is_file())[:4]
    envelope = b"From sender@example.org Tue Mar  4 09:12:44 2025\n"
    mbox = b"\n".join(envelope + p.read_bytes().rstrip(b"\n") + b"\n" for p in spam)
    model = tmp_path / "model.joblib"
    assert train_sample(model, sample_maildir).exit_code == 0
    one = run("classify", "-m", model, "-", input=mbox)
    assert one.exit_code == 0, one.output
    assert len(one.stdout.splitlines()) == 1
    assert "--format mbox reads it as an mbox" in one.stderr
    listed = run("classify", "-m", model, "--format", "mbox", "-", input=mbox)
    assert [line.split("\t")[2] for line in listed.stdout.splitlines()] == [
        "-:1", "-:2", "-:3", "-:4"
    ]  # fmt: skip
    assert "--format mbox" not in listed.stderr
    fresh = tmp_path / "fresh.joblib"
    learnt = run_json("train", "-m", fresh, "--format", "mbox", "--spam", "-", input=mbox)
    assert learnt["classes"]["spam"]["trained"] == 4


def known_by_format_6(model: Path, digest: str, format_6: str) -> None:
    """Make the model know the message ``digest`` by ``format_6``, as a model of format
    6 that learnt its CRLF copy does."""
    spam_filter = load(model)
    spam_filter.trained[format_6] = spam_filter.trained.pop(digest)
    if digest in spam_filter.mistake_copies:
        spam_filter.mistake_copies[format_6] = spam_filter.mistake_copies.pop(digest)
    spam_filter.retired_digests.pop(format_6, None)
    spam_filter.crlf_digests = False
    save(spam_filter, model)


def test_both_copies_a_format_6_model_held_apart_are_forgotten_and_merges_see_them(
    tmp_path, sample_maildir
):
    from spamnb.mail import message_digests

    # Ending in a blank line, as most SpamAssassin mail does: the LF copy has an older
    # digest of its own too.
    data = b"Message-ID: <twice@example.org>\nSubject: offer\n\ncheap pills\nnow\n\n"
    lf, crlf, both = tmp_path / "lf", tmp_path / "crlf", tmp_path / "both"
    for folder, message in ((lf, data), (crlf, data.replace(b"\n", b"\r\n"))):
        folder.mkdir()
        (folder / "1.eml").write_bytes(message)
    both.mkdir()
    shutil.copy(crlf / "1.eml", both / "a-crlf.eml")
    shutil.copy(lf / "1.eml", both / "b-lf.eml")
    digest, (format_6, *_) = message_digests((crlf / "1.eml").read_bytes())
    assert message_digests((lf / "1.eml").read_bytes())[1]
    model = tmp_path / "m.joblib"
    train_sample(model, sample_maildir)
    before = load(model).model.class_counts.copy()
    # As a model of format 6 left it: the CRLF copy learnt as ham under its digest
    # then, and the LF copy as spam under its own.
    run_json("train", "-m", model, "--ham", lf)
    known_by_format_6(model, digest, format_6)
    run_json("train", "-m", model, "--spam", lf)
    assert list(load(model).model.class_counts) == [before[0] + 1, before[1] + 1]
    held_apart = tmp_path / "held-apart.joblib"
    shutil.copy(model, held_apart)
    # Forgetting both forgot one (review 51).
    forgot = run_json("train", "-m", model, "--forget", lf, crlf)
    assert (forgot["forgotten"], forgot["unknown"]) == (2, 0)
    assert list(load(model).model.class_counts) == list(before)
    # Training the CRLF copy again takes the other entry out: one message, once.  (The
    # LF copy has no digest of an older spamnb to find the CRLF one by.)
    counts = load(held_apart).model.token_counts.copy()
    shutil.copy(held_apart, tmp_path / "held-apart-2.joblib")
    again = run("train", "-m", held_apart, "--spam", crlf, "--json")
    assert json.loads(again.stdout)["known"] == 1
    assert "1 message had been learnt twice, as copies with other line ends" in again.stderr
    # The same with both copies in one batch, the CRLF copy first: the LF copy's older
    # digests overwrote the CRLF copy's (review 52).
    again = run_json("train", "-m", tmp_path / "held-apart-2.joblib", "--spam", both)
    assert list(load(tmp_path / "held-apart-2.joblib").model.class_counts) == [
        before[0] + 1,
        before[1],
    ]
    healed = load(held_apart)
    assert list(healed.model.class_counts) == [before[0] + 1, before[1]]
    assert format_6 not in healed.trained and healed.trained[digest] == "spam"
    ham = healed.classes.index("ham")
    assert (healed.model.token_counts[ham] <= counts[ham]).all()
    assert healed.model.token_counts[ham].sum() < counts[ham].sum()
    # A model that learns the CRLF copy now records the digest format 6 gave it, so
    # merging it with a model of format 6 that holds the message sees it in both.
    old = tmp_path / "old.joblib"
    train_sample(old, sample_maildir, spam="cur")
    run_json("train", "-m", old, "--spam", crlf)
    known_by_format_6(old, digest, format_6)
    new = tmp_path / "new.joblib"
    run_json("train", "-m", new, "--spam", crlf)
    assert load(new).retired_digests[format_6] == digest
    merged = run("merge", tmp_path / "merged.joblib", old, new)
    assert_one_line_error(merged, "1 message was trained into both")
