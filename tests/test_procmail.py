"""The README's procmail recipe, run by the real procmail on real corpus messages."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import forged_verdicts, run, without_added_header

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_recipe() -> str:
    match = re.search(r"```procmail\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert match, "the README has no procmail recipe"
    return match.group(1)


def with_spamnb(recipe: str, spamnb: Path) -> str:
    """The recipe with its SPAMNB line pointing at the spamnb under test."""
    line = re.compile(r"^SPAMNB=.*$", re.M)
    assert len(line.findall(recipe)) == 1, "the recipe sets SPAMNB in one line"
    return line.sub(lambda _: f"SPAMNB={spamnb}", recipe)


def rcfile_for(tmp_path: Path, model: Path) -> Path:
    """The README recipe, run as user of a temporary home with its own model.

    procmail takes HOME from the password file and passes on its own variables, so
    the test sets both in the rcfile, as a user with a model elsewhere would.
    """
    spamnb = Path(sys.executable).with_name("spamnb")
    recipe = with_spamnb(readme_recipe(), spamnb)
    rcfile = tmp_path / "procmailrc"
    rcfile.write_text(f"HOME={tmp_path}\nSPAMNB_MODEL={model}\n" + recipe)
    return rcfile


def deliver(rcfile: Path, message: bytes, env: dict[str, str]) -> int:
    procmail = shutil.which("procmail")
    assert procmail, "procmail is not installed (.ci/run installs the Debian package)"
    done = subprocess.run([procmail, "-m", str(rcfile)], input=message, env=env, check=False)
    return done.returncode


def trained_model(home: Path, sample_maildir: Path) -> Path:
    model = home / "model.joblib"
    trained = run(
        "train", "-m", model, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert trained.exit_code == 0
    return model


def make_maildirs(home: Path) -> Path:
    """The recipe's Maildir with its .Junk folder."""
    maildir = home / "Maildir"
    for folder in (maildir, maildir / ".Junk"):
        for sub in ("cur", "new", "tmp"):
            (folder / sub).mkdir(parents=True)
    return maildir


def delivered(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((folder / "new").iterdir())] if folder.exists() else []


def as_procmail_stores(message: bytes) -> bytes:
    """procmail drops a leading mbox "From " line and ends a message with an empty line."""
    if message.startswith(b"From "):
        message = message.split(b"\n", 1)[1]
    return message if message.endswith(b"\n\n") else message + b"\n"


@pytest.mark.corpus
def test_procmail_delivers_through_the_readme_recipe(tmp_path, real_corpus, sample_maildir):
    model = trained_model(tmp_path, sample_maildir)
    maildir = make_maildirs(tmp_path)
    rcfile = rcfile_for(tmp_path, model)
    env = {"PATH": os.environ["PATH"]}

    corpus = real_corpus("spamassassin")
    files = sorted(p for d in corpus["spam"] + corpus["ham"] for p in d.iterdir() if p.is_file())
    messages = [p.read_bytes() for p in random.Random(11).sample(files, 24)]
    for message in messages:
        assert deliver(rcfile, message, env) == 0
    inbox, junk = delivered(maildir), delivered(maildir / ".Junk")
    assert len(inbox) + len(junk) == len(messages)
    assert junk and inbox
    assert all(b"\nX-Spamnb: Spam" in m for m in junk)
    assert not any(b"\nX-Spamnb: Spam" in m for m in inbox)
    originals = {as_procmail_stores(m) for m in messages}
    for message in inbox + junk:
        assert any(without_added_header(message, original) for original in originals)


def test_procmail_defers_when_spamnb_fails(tmp_path, sample_maildir):
    rcfile = tmp_path / "procmailrc"
    rcfile.write_text(with_spamnb(readme_recipe(), Path(sys.executable).with_name("spamnb")))
    env = {
        "HOME": str(tmp_path),
        "PATH": os.environ["PATH"],
        "SPAMNB_MODEL": str(tmp_path / "none.joblib"),
    }
    message = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    # No model: spamnb exits 3 and the recipe makes procmail ask the MTA to retry (75).
    assert deliver(rcfile, message, env) == 75
    assert delivered(tmp_path / "Maildir") == []


def test_a_forged_verdict_does_not_send_ham_to_the_junk_folder(tmp_path, sample_maildir):
    model = trained_model(tmp_path, sample_maildir)
    maildir = make_maildirs(tmp_path)
    rcfile = rcfile_for(tmp_path, model)
    ham = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    forgeries = forged_verdicts(ham)
    for forged in forgeries:
        assert deliver(rcfile, forged, {"PATH": os.environ["PATH"]}) == 0
    assert delivered(maildir / ".Junk") == []
    inbox = delivered(maildir)
    assert len(inbox) == len(forgeries)
    assert all(b"X-Spamnb-Previous: Spam" in m and b"\nX-Spamnb: Ham" in m for m in inbox)
