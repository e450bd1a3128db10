"""The README's Dovecot Sieve script and configuration, run by the real Pigeonhole:
Dovecot's LDA delivers each message into a Maildir as it would for the user, the
README's script being the user's own (``~/.dovecot.sieve``)."""

from __future__ import annotations

import os
import pwd
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import forged_verdicts, run, without_added_header

README = Path(__file__).resolve().parents[1] / "README.md"
# Where Debian (and others) keep the LDA, which is no command on PATH.
LDA_PLACES = ("/usr/lib/dovecot/dovecot-lda", "/usr/libexec/dovecot/dovecot-lda")


def readme_block(language: str) -> str:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(rf"```{language}\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"the README has one {language} block"
    return blocks[0]


def dovecot_lda() -> str:
    found = shutil.which("dovecot-lda") or next(
        (place for place in LDA_PLACES if os.access(place, os.X_OK)), None
    )
    assert found, "Dovecot's LDA is not installed (.ci/run installs dovecot-sieve)"
    return found


class Pigeonhole:
    """One user's Dovecot: the README's configuration with the filter folder set to a
    folder of the test's, the README's script as the user's own, a home holding the
    default model, and the Maildir that delivery writes."""

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
        self.config.write_text(
            setting.sub(lambda m: f"{m.group(1)} {programs}", config)
            # What README takes as done: the Sieve plugin turned on for delivery, and
            # the user's script where Debian's 90-sieve.conf has Dovecot look for it.
            + "mail_plugins = sieve\n"
            + f"plugin {{\n  sieve = file:{self.home}/sieve;active={self.home}/.dovecot.sieve\n}}\n"
        )
        (self.home / ".dovecot.sieve").write_text(readme_block("sieve"))

    def deliver(self, message: bytes) -> None:
        command = [
            dovecot_lda(),
            "-c", str(self.config),
            "-o", f"mail_home={self.home}",
            "-o", f"mail_location=maildir:{self.maildir}",
            "-e",
        ]  # fmt: skip
        if os.geteuid() == 0:
            # Dovecot gives root no mail access: a user namespace makes the test an
            # ordinary user of this machine while its files stay root's.
            user = pwd.getpwnam("nobody")
            mapped = [f"--map-user={user.pw_uid}", f"--map-group={user.pw_gid}"]
            command = ["unshare", "--user", *mapped, *command]
        # Only PATH: Dovecot sets HOME itself, which is how spamnb finds its model.
        env = {"PATH": os.environ["PATH"]}
        done = subprocess.run(command, input=message, env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        log = self.home / ".dovecot.sieve.log"
        assert not log.exists(), log.read_text(errors="replace")  # the script's errors

    def delivered(self, folder: str = "") -> list[bytes]:
        new = (self.maildir / folder if folder else self.maildir) / "new"
        return [p.read_bytes() for p in sorted(new.iterdir())] if new.exists() else []


def as_delivered(message: bytes) -> bytes:
    """The LDA reads a leading mbox "From " line as the envelope, not the message."""
    return message.split(b"\n", 1)[1] if message.startswith(b"From ") else message


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
def test_dovecot_delivers_through_the_readme_script(real_corpus, dovecot):
    corpus = real_corpus("spamassassin")
    files = sorted(p for d in corpus["spam"] + corpus["ham"] for p in d.iterdir() if p.is_file())
    messages = [p.read_bytes() for p in random.Random(12).sample(files, 24)]
    for message in messages:
        dovecot.deliver(message)
    inbox, junk = dovecot.delivered(), dovecot.delivered(".Junk")
    assert len(inbox) + len(junk) == len(messages)
    assert junk and inbox
    assert all(b"\nX-Spamnb: Spam" in m for m in junk)
    assert all(re.search(rb"\nX-Spamnb: (Ham|Unsure)", m) for m in inbox)
    originals = {as_delivered(m) for m in messages}
    for message in inbox + junk:
        assert any(without_added_header(message, original) for original in originals)


def test_a_failing_spamnb_leaves_the_message_as_it_came(dovecot, sample_maildir):
    dovecot.model.unlink()
    spam = sorted((sample_maildir / "spam" / "cur").iterdir())[0].read_bytes()
    # Not even a sender's own verdict files it once spamnb has not run.
    forged = b"X-Spamnb: Spam, score=1.0000\n" + spam
    for message in (spam, forged):
        dovecot.deliver(message)
    assert sorted(dovecot.delivered()) == sorted([spam, forged])
    assert dovecot.delivered(".Junk") == []


def test_a_forged_verdict_does_not_send_ham_to_the_junk_folder(dovecot, sample_maildir):
    ham = sorted((sample_maildir / "ham" / "cur").iterdir())[0].read_bytes()
    forgeries = forged_verdicts(ham)
    for forged in forgeries:
        dovecot.deliver(forged)
    assert dovecot.delivered(".Junk") == []
    inbox = dovecot.delivered()
    assert len(inbox) == len(forgeries)
    assert all(b"X-Spamnb-Previous: Spam" in m and b"\nX-Spamnb: Ham" in m for m in inbox)
