"""The README's Dovecot Sieve script and configuration, run by the real Pigeonhole
(``sieve-test -e``, which delivers into a Maildir as Dovecot's LDA would)."""

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


def readme_block(language: str) -> str:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(rf"```{language}\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"the README has one {language} block"
    return blocks[0]


class Pigeonhole:
    """One user's Dovecot: the README's configuration with the filter folder set to a
    folder of the test's, its Sieve script, a home holding the default model, and the
    Maildir that delivery writes."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.maildir = self.home / "Maildir"
        self.model = self.home / ".local" / "share" / "spamnb" / "model.joblib"
        self.model.parent.mkdir(parents=True)
        programs = root / "sieve-filter"
        programs.mkdir()
        # As README says: a link to the installed spamnb, found by its name.
        (programs / "spamnb").symlink_to(Path(sys.executable).with_name("spamnb"))
        setting = re.compile(r"^(\s*sieve_filter_bin_dir\s*=).*$", re.M)
        config = readme_block("dovecot")
        assert len(setting.findall(config)) == 1, "the configuration sets the folder once"
        self.config = root / "dovecot.conf"
        self.config.write_text(setting.sub(lambda m: f"{m.group(1)} {programs}", config))
        self.script = root / "dovecot.sieve"
        self.script.write_text(readme_block("sieve"))
        self.sent = 0

    def deliver(self, message: bytes, tmp: Path) -> None:
        sieve_test = shutil.which("sieve-test")
        assert sieve_test, "sieve-test is not installed (.ci/run installs dovecot-sieve)"
        # A file of its own each time: sieve-test stores the message it reads as a
        # hard link to that file, which rewriting it would change.
        self.sent += 1
        mail = tmp / f"message-{self.sent}.eml"
        mail.write_bytes(message)
        command = [
            sieve_test,
            "-c", str(self.config),
            "-o", f"mail_home={self.home}",
            "-o", f"mail_location=maildir:{self.maildir}",
            "-e", str(self.script), str(mail),
        ]  # fmt: skip
        if os.geteuid() == 0:
            # Dovecot gives no mail access to root; a user namespace makes the test
            # another user while its files stay root's.
            command = ["unshare", "--user", "--map-user=1000", "--map-group=1000", *command]
        # Only PATH: Dovecot sets HOME itself, which is how spamnb finds its model.
        env = {"PATH": os.environ["PATH"]}
        done = subprocess.run(command, env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")

    def delivered(self, folder: str = "") -> list[bytes]:
        new = (self.maildir / folder if folder else self.maildir) / "new"
        return [p.read_bytes() for p in sorted(new.iterdir())] if new.exists() else []


@pytest.fixture
def dovecot(tmp_path, sample_maildir) -> Pigeonhole:
    user = Pigeonhole(tmp_path)
    trained = run(
        "train",
        "-m",
        user.model,
        "--spam",
        sample_maildir / "spam",
        "--ham",
        sample_maildir / "ham",
    )
    assert trained.exit_code == 0
    return user


@pytest.mark.corpus
def test_dovecot_delivers_through_the_readme_script(tmp_path, real_corpus, dovecot):
    corpus = real_corpus("spamassassin")
    files = sorted(p for d in corpus["spam"] + corpus["ham"] for p in d.iterdir() if p.is_file())
    messages = [p.read_bytes() for p in random.Random(12).sample(files, 24)]
    for message in messages:
        dovecot.deliver(message, tmp_path)
    inbox, junk = dovecot.delivered(), dovecot.delivered(".Junk")
    assert len(inbox) + len(junk) == len(messages)
    assert junk and inbox
    assert all(b"\nX-Spamnb: Spam" in m for m in junk)
    assert all(re.search(rb"\nX-Spamnb: (Ham|Unsure)", m) for m in inbox)
    originals = set(messages)
    for message in inbox + junk:
        assert any(without_added_header(message, original) for original in originals)


def test_a_failing_spamnb_leaves_the_message_as_it_came(tmp_path, dovecot, sample_maildir):
    dovecot.model.unlink()
    spam = sorted((sample_maildir / "spam" / "cur").iterdir())[0].read_bytes()
    # Not even a sender's own verdict files it once spamnb has not run.
    forged = b"X-Spamnb: Spam, score=1.0000\n" + spam
    for message in (spam, forged):
        dovecot.deliver(message, tmp_path)
    assert sorted(dovecot.delivered()) == sorted([spam, forged])
    assert dovecot.delivered(".Junk") == []


def test_a_forged_verdict_does_not_send_ham_to_the_junk_folder(tmp_path, dovecot, sample_maildir):
    ham = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    forgeries = forged_verdicts(ham)
    for forged in forgeries:
        dovecot.deliver(forged, tmp_path)
    assert dovecot.delivered(".Junk") == []
    inbox = dovecot.delivered()
    assert len(inbox) == len(forgeries)
    assert all(b"X-Spamnb-Previous: Spam" in m and b"\nX-Spamnb: Ham" in m for m in inbox)
