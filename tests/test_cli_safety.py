"""The model file as a trust boundary, and concurrent trainers and classifiers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from cli_helpers import assert_one_line_error, run

from spamnb.store import load


@pytest.fixture
def model(tmp_path, sample_maildir):
    path = tmp_path / "model.joblib"
    result = run(
        "train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert result.exit_code == 0, result.output
    return path


def test_a_model_others_may_write_is_refused(model, sample_maildir):
    model.chmod(0o666)
    assert_one_line_error(
        run("classify", "-m", model, sample_maildir / "ham" / "new"), "--trust-model"
    )
    assert (
        run("classify", "--trust-model", "-m", model, sample_maildir / "ham" / "new").exit_code == 0
    )
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    piped = run("classify", "--pipe", "-m", model, input=message)
    assert piped.exit_code == 3 and piped.stdout_bytes == message


def test_a_model_of_another_user_is_refused(model, monkeypatch):
    # Seen from another user: the file's owner is no longer the one running spamnb.
    owner = os.stat(model).st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    assert_one_line_error(run("info", "-m", model), "another user")
    assert run("info", "--trust-model", "-m", model).exit_code == 0


def spamnb(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spamnb", *args], input=data, capture_output=True, check=False
    )


def test_classifiers_never_fail_while_trainers_add_up(model, tmp_path, sample_maildir):
    # Two trainers each add distinct new messages one run at a time while three
    # classifiers read the model in a loop: no read may fail and no count may be lost.
    originals = sorted((sample_maildir / "spam" / "cur").iterdir())[:6]
    new_messages = []
    for i, source in enumerate(originals):
        path = tmp_path / f"new{i}.eml"
        path.write_bytes(b"Message-ID: <concurrency-%d@test>\n" % i + source.read_bytes())
        new_messages.append(path)
    before = int(load(model).model.class_counts.sum())
    finished = False

    def trainer(paths):
        results = [spamnb("train", "-m", str(model), "--spam", str(p), "--json") for p in paths]
        return [r.returncode for r in results]

    def classifier():
        failures, runs = [], 0
        while not finished or runs == 0:
            done = spamnb("classify", "-m", str(model), str(new_messages[0]))
            runs += 1
            if done.returncode != 0 or not done.stdout:
                failures.append(done.stderr.decode())
        return failures, runs

    with ThreadPoolExecutor(max_workers=5) as pool:
        readers = [pool.submit(classifier) for _ in range(3)]
        writers = [pool.submit(trainer, new_messages[:3]), pool.submit(trainer, new_messages[3:])]
        codes = [code for w in writers for code in w.result()]
        finished = True
        outcomes = [r.result() for r in readers]
    assert codes == [0] * 6
    assert all(failures == [] for failures, _ in outcomes), outcomes
    assert all(runs >= 1 for _, runs in outcomes)
    assert int(load(model).model.class_counts.sum()) == before + 6
    assert not [p.name for p in model.parent.iterdir() if p.name.endswith(".tmp")]
    info = json.loads(spamnb("info", "-m", str(model), "--json").stdout)
    assert info["messages"]["spam"] == 36
