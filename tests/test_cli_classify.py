"""`spamnb classify`."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, on_a_terminal, run, run_json


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


def test_a_json_source_gives_back_a_file_names_bytes(model, sample_maildir, tmp_path):
    # As README's source row says: a name that is not UTF-8 keeps its bytes.
    folder = tmp_path / "odd"
    folder.mkdir()
    name = os.fsencode(folder) + b"/caf\xe9\xff"
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    Path(os.fsdecode(name)).write_bytes(message)
    done = subprocess.run(
        [sys.executable, "-m", "spamnb", "classify", "--json", "-m", str(model), str(folder)],
        capture_output=True,
        check=True,
    )
    (line,) = done.stdout.decode("ascii").splitlines()
    assert os.fsencode(json.loads(line)["source"]) == name


def test_json_verdicts_are_the_pipe_filters(tmp_path, sample_maildir):
    # Cut-offs set by hand put a message without evidence (score near the intercept's)
    # in the unsure band, so all three verdicts occur.
    model = tmp_path / "model.joblib"
    trained = run(
        "train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert trained.exit_code == 0, trained.output
    messages = sorted((sample_maildir / "spam" / "cur").iterdir())[:3]
    messages += sorted((sample_maildir / "ham" / "cur").iterdir())[:3]
    unknown = tmp_path / "unknown.eml"
    unknown.write_bytes(b"X-Nothing: zq\n\nzqzq\n")
    messages.append(unknown)
    record = json.loads(run("classify", "-m", model, "--json", unknown).stdout)
    score = record["spam_score"]
    assert 0.0 < score < 1.0
    band = ("--ham-cutoff", str(score / 2), "--spam-cutoff", str((1 + score) / 2))
    assert run("train", "-m", model, *band).exit_code == 0
    piped = []
    for message in messages:
        result = run("classify", "--pipe", "-m", model, input=message.read_bytes())
        piped.append({0: "spam", 1: "ham", 2: "unsure"}[result.exit_code])
    assert set(piped) == {"spam", "ham", "unsure"}
    # Through the scoring table, and through the model (which --explain loads).
    for extra in ((), ("--explain",)):
        result = run("classify", "-m", model, "--json", *extra, *messages)
        assert result.exit_code == 0, result.output
        assert [json.loads(line)["verdict"] for line in result.stdout.splitlines()] == piped


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


@pytest.fixture(scope="module")
def limited_model(tmp_path_factory, sample_maildir):
    """A model whose tokenizer limits are small enough for the sample's mail to hit."""
    path = tmp_path_factory.mktemp("limited") / "model.joblib"
    result = run(
        "train",
        "-m",
        path,
        "--max-bytes",
        "3000",
        "--max-tokens",
        "60",
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
    )
    assert result.exit_code == 0, result.output
    # Training says what the limits cut: the counts alone cannot show it.
    assert "bytes were learnt" in result.stderr and "cap of 60 tokens" in result.stderr
    return path


def test_explain_shows_what_drove_the_verdict_and_what_was_cut(limited_model, sample_maildir):
    big = max(sample_maildir.glob("*/*/*"), key=lambda p: p.stat().st_size)
    assert big.stat().st_size > 3000
    result = run("classify", "--explain", "-m", limited_model, big)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split("\t")[2].endswith(big.name)
    details = [line.strip() for line in lines[1:]]
    assert f"cut: only the first 3,000 of its {big.stat().st_size:,} bytes were read" in details
    assert "cut: its tokens stop at the cap of 60" in details
    assert any(d.startswith("60 tokens, ") and "log-odds" in d for d in details)
    assert any(d.startswith("toward spam: ") for d in details)
    assert any(d.startswith("toward ham: ") for d in details)

    record = json.loads(run("classify", "--explain", "--json", "-m", limited_model, big).stdout)
    explanation = record["explanation"]
    assert explanation["bytes"] == big.stat().st_size and explanation["tokens"] == 60
    assert explanation["cut"] == {"size": True, "tokens": True}
    assert explanation["against"] == "ham" and 0 < explanation["known_tokens"] <= 60
    weights = [e["log_odds"] for e in explanation["toward_spam"]]
    assert weights == sorted(weights, reverse=True) and all(w > 0 for w in weights)
    assert all(e["log_odds"] < 0 for e in explanation["toward_other"])


def test_explain_without_cuts_and_without_explain(model, sample_maildir):
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0]
    plain = run("classify", "-m", model, message).stdout
    explained = run("classify", "--explain", "-m", model, message).stdout
    assert explained.startswith(plain) and "cut:" not in explained
    assert "explanation" not in json.loads(run("classify", "--json", "-m", model, message).stdout)


def test_explained_tokens_cannot_drive_the_terminal():
    from spamnb.report import printable

    assert printable("cheap") == "cheap"
    assert printable("subject:\x1b[2Jgone\x07") == "subject:\\x1b[2Jgone\\x07"
    assert printable("naïve\u202eevil") == "naïve\\u202eevil"
    # Joiners, non-breaking spaces and soft hyphens are text (Persian, Indic, emoji);
    # a lone surrogate, bytes no codec read, is not (review 15).
    for text in (
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
        "\U0001f468\u200d\U0001f469",
        "price\xa0100",
        "soft\xadhyphen",
    ):
        assert printable(text) == text
    assert printable("bad\udcffbyte") == "bad\\udcffbyte"


def test_a_model_keeps_its_tokenizer_limits(limited_model, sample_maildir):
    result = run(
        "train", "-m", limited_model, "--max-tokens", "100", "--spam", sample_maildir / "spam"
    )
    assert_one_line_error(result, "--max-tokens 60", "train --new")


# --- through the model's scoring table ------------------------------------------------


def model_loads(monkeypatch) -> list[Path]:
    """The paths store.load is asked for from now on."""
    import spamnb.store

    loads = []
    real_load = spamnb.store.load

    def counted_load(path, *args, **kwargs):
        loads.append(Path(path))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(spamnb.store, "load", counted_load)
    return loads


def test_messages_are_scored_through_the_table_as_by_the_model(
    model, tmp_path, sample_maildir, monkeypatch
):
    loads = model_loads(monkeypatch)
    through_table = [run("classify", "-m", model, *fmt, sample_maildir) for fmt in ([], ["--json"])]
    assert loads == []
    # The same model without its table (a copy has another inode: the table beside it
    # would be another model's) is loaded whole.
    copy = tmp_path / "copy.joblib"
    copy.write_bytes(model.read_bytes())
    copy.chmod(0o600)
    through_model = [run("classify", "-m", copy, *fmt, sample_maildir) for fmt in ([], ["--json"])]
    assert loads == [copy, copy]
    for result in through_table + through_model:
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
    # The labels and the probabilities as printed are the same; the floats of --json
    # differ in their last digits, summed in another order.
    assert through_table[0].stdout == through_model[0].stdout
    assert len(through_table[0].stdout.splitlines()) == 60
    for table_line, model_line in zip(
        through_table[1].stdout.splitlines(), through_model[1].stdout.splitlines(), strict=True
    ):
        got, expected = json.loads(table_line), json.loads(model_line)
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
            elif key == "probabilities":
                assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12)
            else:
                assert got[key] == value, key


@pytest.mark.parametrize("options", [["--explain"], ["--alpha", "0.5"], ["--mistake-weight", "0"]])
def test_explanations_and_other_scoring_settings_load_the_model(
    model, sample_maildir, monkeypatch, options
):
    loads = model_loads(monkeypatch)
    result = run("classify", "-m", model, *options, sample_maildir / "ham")
    assert result.exit_code == 0, result.output
    assert loads == [model]


def test_a_damaged_table_is_said_and_the_model_scores(tmp_path, sample_maildir, monkeypatch):
    from spamnb.paths import table_path

    path = tmp_path / "model.joblib"
    run("train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    fresh = run("classify", "-m", path, sample_maildir)
    table = Path(table_path(path))
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0x01  # a byte of some block's hashes or weights
    table.write_bytes(bytes(data))
    loads = model_loads(monkeypatch)
    result = run("classify", "-m", path, sample_maildir)
    assert result.exit_code == 0, result.output
    assert loads == [path]
    assert result.stdout == fresh.stdout
    assert result.stderr.count("\n") == 1
    assert "scoring table" in result.stderr and "damaged" in result.stderr


def test_scoring_through_the_table_imports_neither_scipy_nor_joblib(model, sample_maildir):
    probe = (
        "import sys\n"
        "from spamnb.entry import main\n"
        "try:\n    main()\n"
        "except SystemExit as exit:\n"
        "    heavy = sorted(m for m in ('scipy', 'joblib') if m in sys.modules)\n"
        "    sys.stderr.write(f'heavy={heavy} status={exit.code}\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "classify", "-m", str(model), str(sample_maildir / "ham")],
        capture_output=True,
        check=False,
    )
    assert "heavy=[] status=0" in done.stderr.decode(), done.stderr.decode()
    assert len(done.stdout.splitlines()) == len(list(sample_maildir.glob("ham/[cn]*/*")))


def test_messages_that_tie_exactly_are_ham_through_the_table_and_the_model(tmp_path):
    # Ham is the spam with its words renamed one step round a cycle, and each test
    # message holds every renaming of its words: in exact arithmetic both classes give
    # it the same likelihood, and only the order of the sums (the table's, the
    # model's) could tip it.
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    renamed = dict(zip(words, words[1:] + words[:1], strict=True))
    rng = random.Random(7)
    for label in ("spam", "ham", "test"):
        (tmp_path / label).mkdir()
    for i in range(4):
        body = [rng.choice(words) for _ in range(rng.randint(3, 12))]
        for label, text in (("spam", body), ("ham", [renamed[w] for w in body])):
            (tmp_path / label / f"{i}.eml").write_text(
                f"Subject: note\nMessage-ID: <{label}{i}@x>\n\n{' '.join(text)}\n"
            )
    for j in range(30):
        base, text = [rng.choice(words) for _ in range(rng.randint(1, 6))], []
        for _ in words:
            text += base
            base = [renamed[w] for w in base]
        rng.shuffle(text)
        (tmp_path / "test" / f"{j}.eml").write_text(
            f"Subject: note\nMessage-ID: <t{j}@x>\n\n{' '.join(text)}\n"
        )
    model, copy = tmp_path / "model.joblib", tmp_path / "copy.joblib"
    options = ["--event-model", "multinomial", "--no-word-pairs", "--mistake-weight", "0"]
    result = run(
        "train", "-m", model, *options, "--spam", tmp_path / "spam", "--ham", tmp_path / "ham"
    )
    assert result.exit_code == 0, result.output
    copy.write_bytes(model.read_bytes())
    copy.chmod(0o600)
    through_table = run("classify", "-m", model, tmp_path / "test")
    through_model = run("classify", "-m", copy, tmp_path / "test")
    labels = [line.split("\t")[0] for line in through_table.stdout.splitlines()]
    assert labels == ["ham"] * 30
    assert through_table.stdout == through_model.stdout


@pytest.mark.parametrize("case", ["stale", "other-version", "missing", "symlink"])
def test_what_the_table_beside_the_model_decides(tmp_path, sample_maildir, monkeypatch, case):
    import os

    from spamnb.paths import table_path

    path = tmp_path / "model.joblib"
    run("train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham")
    fresh = run("classify", "-m", path, sample_maildir)
    table = Path(table_path(path))
    given = path
    if case == "stale":  # a model restored from a backup: another modification time
        os.utime(path, (1e9, 1e9))
    elif case == "other-version":  # written by another spamnb
        data = bytearray(table.read_bytes())
        data[len(b"SPAMNB-TABLE")] ^= 0x7F
        table.write_bytes(bytes(data))
    elif case == "missing":
        table.unlink()
    else:  # the table sits beside the file the link points to
        given = tmp_path / "link.joblib"
        given.symlink_to(path.name)
    loads = model_loads(monkeypatch)
    result = run("classify", "-m", given, sample_maildir)
    assert result.exit_code == 0, result.output
    assert result.stdout == fresh.stdout and result.stderr == ""
    assert loads == ([] if case == "symlink" else [given])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("command", [["classify"], ["classify", "--json"], ["info"], ["top-odds"]])
def test_an_output_that_cannot_be_written_is_a_one_line_error(model, sample_maildir, command):
    paths = [str(sample_maildir / "ham")] if command[0] == "classify" else []
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "spamnb", *command, "-m", str(model), *paths],
            stdout=full,
            stderr=subprocess.PIPE,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "spamnb: cannot write the output: No space left on device"
    ]


@pytest.mark.parametrize("command", [["info"], ["info", "--json"], ["top-odds", "-n", "200"]])
def test_an_output_cut_short_by_a_file_size_limit_is_a_one_line_error(model, tmp_path, command):
    # The kernel writes up to the limit and then refuses: Python's buffered writer
    # dropped the rest of a short write, and the command exited 0 (review 43).
    import resource
    import signal

    whole = subprocess.run(
        [sys.executable, "-m", "spamnb", *command, "-m", str(model)],
        capture_output=True,
        check=True,
    ).stdout
    limit = len(whole) // 2
    assert limit >= 300

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as Python sets it
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    output = tmp_path / "output"
    with open(output, "wb") as written:
        done = subprocess.run(
            [sys.executable, "-m", "spamnb", *command, "-m", str(model)],
            stdout=written,
            stderr=subprocess.PIPE,
            preexec_fn=limit_file_size,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == ["spamnb: cannot write the output: File too large"]
    assert output.read_bytes() == whole[:limit]


def test_a_write_of_nothing_is_an_error_not_a_hang(monkeypatch):
    from spamnb import entry

    calls = []

    def writes_nothing(fd, data):
        calls.append(fd)
        assert len(calls) < 100, "the writer spins on a write of nothing"
        return 0

    monkeypatch.setattr(entry.os, "write", writes_nothing)
    with pytest.raises(OSError, match="nothing could be written"):
        entry._WholeWriter(1).write(b"report")


def test_a_closed_standard_output_is_a_one_line_error(model, sample_maildir):
    done = subprocess.run(
        [sys.executable, "-m", "spamnb", "classify", "-m", str(model), str(sample_maildir / "ham")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "spamnb: cannot write the output: standard output is closed"
    ]


def test_a_closed_standard_error_leaves_the_work_and_the_output_whole(
    model, sample_maildir, tmp_path
):
    # A daemon's "2>&-": the progress check failed on None, so nothing was done (status
    # 1), and click's own errors went into the output.
    def closed_stderr(*args: str | Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spamnb", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            check=False,
            preexec_fn=lambda: os.close(2),
        )

    trained = tmp_path / "m.joblib"
    done = closed_stderr(
        "train", "-m", trained, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert done.returncode == 0 and trained.exists()
    done = closed_stderr("classify", "-m", model, sample_maildir / "ham")
    assert done.returncode == 0 and len(done.stdout.splitlines()) >= 30
    done = closed_stderr("classify", "-m", tmp_path / "missing.joblib", sample_maildir / "ham")
    assert done.returncode == 1 and done.stdout == b""


@pytest.mark.parametrize(
    "environment",
    [
        {"PYTHONIOENCODING": "latin-1"},
        {"COLUMNS": "0"},
        {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    ],
)
def test_a_terminal_that_cannot_show_the_report_still_gets_it(model, sample_maildir, environment):
    # A Latin-1 locale: rich wrote the report's bars, failed, and the report was lost
    # to a traceback.  COLUMNS=0: rich printed nothing, with status 0.  The C locale
    # without UTF-8 mode: ASCII with surrogateescape, and the folds' "±" (review 35).
    folds = ["--folds", "3"] if "LC_ALL" in environment else ["-m", str(model)]
    done = subprocess.run(
        [sys.executable, "-m", "spamnb", "evaluate", *folds,
         "--spam", str(sample_maildir / "spam"), "--ham", str(sample_maildir / "ham")],
        capture_output=True,
        env={**os.environ, **environment},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    shown = done.stdout.decode("latin-1")
    assert "accuracy" in shown.lower() and "30" in shown
    if "PYTHONIOENCODING" in environment:
        assert "#" in shown and "\\u2588" not in shown


def _classify_on_a_terminal(model: Path, folder: Path, *, stdout_too: bool) -> bytes:
    """What a terminal shows of ``spamnb classify``: its stderr is the terminal, and
    with ``stdout_too`` so is its stdout (else stdout goes to a pipe)."""
    return on_a_terminal(["classify", "-j", "1", "-m", str(model), str(folder)], stdout_too)


def test_no_progress_bar_among_verdicts_on_a_terminal(model, sample_maildir):
    # Each verdict line would land on the bar's line, and the bar is never erased.
    shown = _classify_on_a_terminal(model, sample_maildir, stdout_too=True)
    assert b"Classifying" not in shown
    assert shown.count(b"\tcorpora/") + shown.count(b"sample") >= 10
    # With the verdicts going elsewhere, the terminal shows the bar.
    assert b"Classifying" in _classify_on_a_terminal(model, sample_maildir, stdout_too=False)


def test_a_closed_standard_input_is_no_trouble_without_dash(model, sample_maildir):
    # Reading the folder once took sys.stdin.buffer, and sys.stdin is None.
    result = subprocess.run(
        [sys.executable, "-m", "spamnb", "classify", "-m", str(model), str(sample_maildir)],
        capture_output=True,
        preexec_fn=lambda: os.close(0),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) >= 50


def test_help_leaves_out_the_tokenizer_options_a_model_fixes():
    shown = run("classify", "--help").output
    assert "--alpha" in shown
    for option in ("--word-pairs", "--max-bytes", "--max-tokens"):
        assert option not in shown
    assert "--word-pairs" in run("train", "--help").output


@pytest.mark.parametrize(
    ("labels", "options"),
    [
        ({"spam": 30, "ham": 4}, ()),  # a prior far from even
        ({"spam": 30, "ham": 30}, ("--event-model", "bernoulli")),  # the absent words
        ({"spam": 30, "ham": 15, "lists": 15}, ()),  # against one class of three
    ],
)
def test_explained_tokens_and_other_terms_add_up_to_the_log_odds(
    tmp_path, sample_maildir, labels, options
):
    def files(label):
        return sorted(p for p in (sample_maildir / label).rglob("*") if p.is_file())

    pools = {"spam": files("spam"), "other": files("ham")}
    folders = {}
    for label, count in labels.items():
        pool = pools["spam" if label == "spam" else "other"]
        folder = folders[label] = tmp_path / label
        folder.mkdir()
        for source in pool[:count]:
            (folder / source.name).write_bytes(source.read_bytes())
        del pool[:count]
    model = tmp_path / "m.joblib"
    args = ["train", "-m", model, "--spam", folders["spam"], "--ham", folders["ham"], *options]
    if "lists" in folders:
        args += ["--label", f"lists={folders['lists']}"]
    assert run(*args).exit_code == 0
    message = tmp_path / "short.eml"
    message.write_bytes(b"Subject: cheap offer\n\nplease call now\n")
    record = json.loads(run("classify", "--explain", "--json", "-m", model, message).stdout)
    explained = record["explanation"]
    tokens = explained["toward_spam"] + explained["toward_other"]
    assert len(tokens) < 10  # every token of the message is listed
    total = sum(entry["log_odds"] for entry in tokens) + explained["other_terms"]
    assert total == pytest.approx(explained["log_odds"], abs=1e-9)
    assert abs(explained["other_terms"]) > 0.01
    if "lists" not in folders:
        assert explained["log_odds"] == pytest.approx(record["log_odds"])


def test_a_model_with_a_class_forgotten_whole_refuses_to_classify(tmp_path, sample_maildir):
    # Its prior for that class is 0: every message was certain spam, and nothing said so.
    model = tmp_path / "m.joblib"
    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    assert run("train", "-m", model, "--spam", spam, "--ham", ham).exit_code == 0
    forgot = run("train", "-m", model, "--forget", ham)
    assert forgot.exit_code == 0 and "no ham messages left" in forgot.stderr
    message = sorted((ham / "cur").iterdir())[0]
    assert_one_line_error(run("classify", "-m", model, message), "no ham messages left")
    piped = run("classify", "--pipe", "-m", model, input=message.read_bytes())
    assert piped.exit_code == 3 and piped.stdout_bytes == message.read_bytes()
    assert "no ham messages left" in piped.stderr
    # Trained again with ham, it classifies.
    assert run("train", "-m", model, "--ham", ham).exit_code == 0
    assert run("classify", "-m", model, message).stdout.startswith("ham\t")


def test_allow_empty_lets_an_empty_folder_print_nothing(tmp_path, sample_maildir):
    # classify ~/Maildir/new ~/Maildir/cur failed whenever new/ was empty.
    model = tmp_path / "m.joblib"
    assert run("train", "-m", model, "--spam", sample_maildir / "spam",
               "--ham", sample_maildir / "ham").exit_code == 0  # fmt: skip
    empty = tmp_path / "new"
    empty.mkdir()
    folder = sample_maildir / "ham" / "new"
    assert_one_line_error(run("classify", "-m", model, empty, folder), "no messages found")
    result = run("classify", "--allow-empty", "-m", model, empty, folder)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == len(list(folder.iterdir()))
    assert_one_line_error(
        run("classify", "--pipe", "--allow-empty", "-m", model, input=b"Subject: x\n\ny\n"),
        "--allow-empty cannot be used with --pipe",
    )


def test_the_filters_own_options_are_refused_without_pipe(model, sample_maildir):
    # Labelling ignored them: a header name or exit status asked for never came.
    folder = sample_maildir / "ham" / "new"
    for options, said in (
        (["--header-name", "X-Mine"], "--header-name works only with --pipe"),
        (["--header-name", "X-Spamnb"], "--header-name works only with --pipe"),
        (["--exit-zero", "--max-size", "100"], "--exit-zero, --max-size work only with --pipe"),
    ):
        assert_one_line_error(run("classify", "-m", model, *options, folder), said)
    assert run("classify", "-m", model, folder).exit_code == 0


def test_info_says_a_model_without_a_spam_class_gets_no_pipe_table(tmp_path, sample_maildir):
    model = tmp_path / "m.joblib"
    trained = run("train", "-m", model, "--label", f"news={sample_maildir / 'spam'}",
                  "--label", f"lists={sample_maildir / 'ham'}")  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert run_json("info", "-m", model, "--json")["pipe_table"] == "unusable"
    # And that the pipe refuses it, rather than loading it whole (review 48).
    shown = " ".join(run("info", "-m", model).stdout.split())
    assert "--pipe refuses a model without a spam class" in shown
    assert "cut-offs none: the model has no spam class" in shown
    piped = subprocess.run(
        [sys.executable, "-m", "spamnb", "classify", "--pipe", "-m", str(model)],
        input=b"Subject: hi\n\nhello\n",
        capture_output=True,
    )
    assert piped.returncode == 3 and piped.stdout == b"Subject: hi\n\nhello\n"
    # A third class left without mail classifies, and gets its table (review 28: none
    # was written, and every pipe run loaded the whole model).
    three = tmp_path / "three.joblib"
    assert run("train", "-m", three, "--spam", sample_maildir / "spam" / "cur",
               "--ham", sample_maildir / "ham" / "cur",
               "--label", f"lists={sample_maildir / 'ham' / 'new'}").exit_code == 0  # fmt: skip
    assert run("train", "-m", three, "--forget", sample_maildir / "ham" / "new").exit_code == 0
    assert run_json("info", "-m", three, "--json")["pipe_table"] == "current"


def test_evaluate_and_merge_say_a_class_was_forgotten_whole(tmp_path, sample_maildir):
    model, ham_only = tmp_path / "m.joblib", tmp_path / "h.joblib"
    spam, ham = sample_maildir / "spam", sample_maildir / "ham"
    assert run("train", "-m", model, "--spam", spam, "--ham", ham / "cur").exit_code == 0
    assert run("train", "-m", model, "--forget", spam).exit_code == 0
    result = run("evaluate", "-m", model, "--spam", spam, "--ham", ham)
    assert_one_line_error(result, "no spam messages left")
    assert run("train", "-m", ham_only, "--ham", ham / "new").exit_code == 0
    merged = run("merge", tmp_path / "both.joblib", model, ham_only)
    assert merged.exit_code == 0 and "no spam messages left" in merged.stderr


def test_messages_joined_without_blank_lines_are_warned_of(model, tmp_path):
    # Review 50: `cat` of five messages, each starting with its envelope line, has no
    # blank line before the next one, so it reads as one message; nothing said so.
    messages = [
        f"From a@b Mon Jan  6 10:3{n}:00 2025\nSubject: part {n}\n\nbody {n}\n".encode()
        for n in range(3)
    ]
    joined = tmp_path / "joined"
    joined.write_bytes(b"".join(messages))
    result = run("classify", "-m", model, joined)
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1
    assert result.stderr.splitlines() == [
        f"Warning: {joined} was read as one message, but it holds 2 more envelope lines, "
        "each with a header field after it and no blank line before it, as messages "
        "joined together have: --format mbox reads it as an mbox"
    ]
    assert len(run("classify", "-m", model, "--format", "mbox", joined).stdout.splitlines()) == 3
    # Not for a Maildir's message, which is one whatever it holds, nor for an mbox.
    maildir = tmp_path / "Maildir"
    for part in ("cur", "new", "tmp"):
        (maildir / part).mkdir(parents=True)
    (maildir / "cur" / "1.M1P1.host:2,S").write_bytes(joined.read_bytes())
    assert run("classify", "-m", model, maildir / "cur" / "1.M1P1.host:2,S").stderr == ""
    box = tmp_path / "box"
    box.write_bytes(b"\n".join(messages))
    listed = run("classify", "-m", model, box)
    assert listed.stderr == "" and len(listed.stdout.splitlines()) == 3
