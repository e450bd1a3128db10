"""Tests for corpora/fetch.py.

The real-corpus tests unpack the archives from the shared mirror beside the checkout
(``../shared/corpora``) and are marked ``corpus``. The network path cannot be exercised
here, so it is tested by pre-seeding the download cache with tarballs laid out like the
upstream ones and making any real network access fail.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import http.client
import importlib.util
import io
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest

REPO = Path(__file__).resolve().parents[1]
FETCH_PY = REPO / "corpora" / "fetch.py"
# The archives of the real corpora: $SPAMNB_CORPUS_MIRROR, else ../shared/corpora (as in CI).
MIRROR = Path(os.environ.get("SPAMNB_CORPUS_MIRROR") or REPO.parent / "shared" / "corpora")
NO_MIRROR = f"these tests need the corpus archives in {MIRROR} (or set SPAMNB_CORPUS_MIRROR)"

EXPECTED = {"spamassassin": (4150, 1896), "enron1": (3672, 1500), "sms": (4827, 747)}
KNOWN_MD5_EXCEPTION = "hard_ham/00230.244a63cd74c81123ef26129453e32c95"


def _load_fetch():
    spec = importlib.util.spec_from_file_location("spamnb_corpora_fetch", FETCH_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve their module through sys.modules while the class is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fetch_mod = _load_fetch()


@pytest.fixture(autouse=True)
def _no_network_and_no_env_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fetch_mod.MIRROR_ENV, raising=False)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tests must not touch the network")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.fixture(scope="module")
def fetched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not MIRROR.is_dir():
        pytest.fail(NO_MIRROR)
    dest = tmp_path_factory.mktemp("corpora")
    return {name: fetch_mod.fetch(name, dest, mirror=MIRROR) for name in EXPECTED}


def run_fetch(mirror: Path, dest: Path, *corpora: str) -> subprocess.CompletedProcess[str]:
    """corpora/fetch.py run as a user runs it, from ``mirror`` into ``dest``."""
    return subprocess.run(
        [sys.executable, str(FETCH_PY), "--mirror", str(mirror), "--dest", str(dest), *corpora],
        capture_output=True,
        text=True,
        check=False,
    )


def _counts(name: str, root: Path) -> tuple[int, int]:
    dirs = fetch_mod.labelled_dirs(name, root)
    ham = sum(len(fetch_mod.message_files(d)) for d in dirs["ham"])
    spam = sum(len(fetch_mod.message_files(d)) for d in dirs["spam"])
    return ham, spam


def _write_md5_named(directory: Path, bodies: list[bytes]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, body in enumerate(bodies, 1):
        path = directory / f"{i:05d}.{hashlib.md5(body).hexdigest()}"
        path.write_bytes(body)
        paths.append(path)
    return paths


# --- real corpora from the mirror -------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mirror_fetch_gives_expected_counts(fetched: dict[str, Path], name: str) -> None:
    root = fetched[name]
    assert root.is_dir() and fetch_mod.is_verified(name, root)
    assert _counts(name, root) == EXPECTED[name]


@pytest.mark.corpus
def test_labelled_dirs_layout(fetched: dict[str, Path]) -> None:
    sa = fetch_mod.labelled_dirs("spamassassin", fetched["spamassassin"])
    assert [d.name for d in sa["ham"]] == ["easy_ham", "easy_ham_2", "hard_ham"]
    assert [d.name for d in sa["spam"]] == ["spam", "spam_2"]
    enron = fetch_mod.labelled_dirs("enron1", fetched["enron1"])
    assert [d.name for d in enron["ham"]] == ["ham"]
    assert [d.name for d in enron["spam"]] == ["spam"]


@pytest.mark.corpus
def test_each_sms_is_a_message_of_its_line(fetched: dict[str, Path]) -> None:
    root = fetched["sms"]
    lines = (root / "SMSSpamCollection").read_bytes().split(b"\n")
    # The third line is the first spam.
    label, _, text = lines[2].partition(b"\t")
    assert label == b"spam"
    message = (root / "spam" / "0003").read_bytes()
    assert message == fetch_mod.SMS_HEADER + text + b"\n"
    assert not (root / "ham" / "0003").exists()
    # Every line is one message, in its class, numbered by its line.
    names = {
        label: {p.name for p in fetch_mod.message_files(root / label)} for label in ("ham", "spam")
    }
    expected = {"ham": set(), "spam": set()}
    for number, line in enumerate(lines, 1):
        if line:
            expected[line.partition(b"\t")[0].decode()].add(f"{number:04d}")
    assert names == expected


@pytest.mark.corpus
def test_second_fetch_is_a_no_op(fetched: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("already verified corpus was unpacked or re-hashed again")

    monkeypatch.setattr(fetch_mod, "extract_archive", must_not_run)
    monkeypatch.setattr(fetch_mod, "sha256_file", must_not_run)
    monkeypatch.setattr(fetch_mod, "verify", must_not_run)
    for name, root in fetched.items():
        marker = root / fetch_mod.MARKER_NAME
        before = marker.stat().st_mtime_ns
        assert fetch_mod.fetch(name, root.parent, mirror=MIRROR) == root
        assert marker.stat().st_mtime_ns == before


@pytest.mark.corpus
def test_md5_names_checked_on_mirror_copy(fetched: dict[str, Path]) -> None:
    root = fetched["spamassassin"]
    bad = fetch_mod.md5_name_mismatches(root)
    # The check really runs over the mirror copy: exactly the documented file differs.
    assert [p.relative_to(root).as_posix() for p in bad] == [KNOWN_MD5_EXCEPTION]


@pytest.mark.corpus
def test_tampered_message_in_unpacked_corpus_is_caught(
    fetched: dict[str, Path], tmp_path: Path
) -> None:
    copy = tmp_path / fetch_mod.CORPORA["spamassassin"].root
    shutil.copytree(fetched["spamassassin"], copy)
    (copy / fetch_mod.MARKER_NAME).unlink()
    victim = fetch_mod.message_files(copy / "spam")[7]
    data = bytearray(victim.read_bytes())
    data[-2] ^= 0x01
    victim.write_bytes(bytes(data))
    with pytest.raises(fetch_mod.FetchError, match=victim.name):
        fetch_mod.verify("spamassassin", copy)
    # An existing unmarked tree is verified in place rather than trusted or overwritten.
    with pytest.raises(fetch_mod.FetchError, match="MD5"):
        fetch_mod.fetch("spamassassin", tmp_path, mirror=MIRROR)
    assert not (copy / fetch_mod.MARKER_NAME).exists()


@pytest.mark.corpus
def test_an_sms_collection_unpacked_by_hand_gets_its_messages(
    fetched: dict[str, Path], tmp_path: Path
) -> None:
    # As the mirror's README unpacks it: the data file and the readme, no folders.
    by_hand = tmp_path / fetch_mod.CORPORA["sms"].root
    by_hand.mkdir()
    for member in ("SMSSpamCollection", "readme"):
        shutil.copyfile(fetched["sms"] / member, by_hand / member)
    assert fetch_mod.fetch("sms", tmp_path, mirror=MIRROR) == by_hand
    assert _counts("sms", by_hand) == EXPECTED["sms"]
    assert (by_hand / "spam" / "0003").read_bytes() == (
        fetched["sms"] / "spam" / "0003"
    ).read_bytes()


@pytest.mark.corpus
def test_cli_reports_each_corpus(fetched: dict[str, Path]) -> None:
    dest = fetched["enron1"].parent
    result = run_fetch(MIRROR, dest, "all")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [
        f"spamassassin: {fetched['spamassassin']} (ham 4150, spam 1896)",
        f"enron1: {fetched['enron1']} (ham 3672, spam 1500)",
        f"sms: {fetched['sms']} (ham 4827, spam 747)",
    ]


@pytest.mark.corpus
def test_network_mode_layout_from_cached_downloads(
    fetched: dict[str, Path], tmp_path: Path
) -> None:
    # Rebuild tarballs shaped like the upstream ones (one top directory per archive, plus
    # the "cmds" helper file) from the mirror copy, and drop them in the download cache;
    # the SMS collection comes as a zip of its two files.
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for name, root in fetched.items():
        for up in fetch_mod.CORPORA[name].upstream:
            archive = downloads / up.url.rsplit("/", 1)[-1]
            if name == "sms":
                with zipfile.ZipFile(archive, "w") as zipped:
                    for member in ("SMSSpamCollection", "readme"):
                        zipped.write(root / member, member)
                continue
            source = root / up.top if name == "spamassassin" else root
            # Uncompressed on purpose: it is quick, and the reader auto-detects compression.
            with tarfile.open(archive, "w") as tar:
                tar.add(source, arcname=up.top, filter=_drop_marker)
                cmds = b"mv 00001.x 00001.y\n"
                info = tarfile.TarInfo(f"{up.top}/cmds")
                info.size = len(cmds)
                tar.addfile(info, io.BytesIO(cmds))
    dest = tmp_path / "dest"
    for name in EXPECTED:
        root = fetch_mod.fetch(name, dest, mirror=None, downloads=downloads)
        assert root == dest / fetch_mod.CORPORA[name].root
        assert _counts(name, root) == EXPECTED[name]
        assert not list(root.rglob("cmds"))


def _drop_marker(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if info.name.endswith(fetch_mod.MARKER_NAME) else info


# --- fast checks (mirror archives used only where noted) ---------------------------------


@pytest.mark.corpus
def test_corrupted_mirror_archive_is_refused(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / fetch_mod.CORPORA["enron1"].mirror_archive
    shutil.copyfile(MIRROR / archive.name, archive)
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    dest = tmp_path / "dest"
    with pytest.raises(fetch_mod.FetchError, match="checksum mismatch"):
        fetch_mod.fetch("enron1", dest, mirror=mirror)
    assert not (dest / "enron1").exists()
    # The staging directory was cleaned up; only the lock runs take turns on is left.
    assert [p.name for p in dest.iterdir()] == [".enron1.lock"]


def test_md5_name_check_catches_tampering(tmp_path: Path) -> None:
    good, victim, _ = _write_md5_named(tmp_path / "spam", [b"one\n", b"two\n", b"three\n"])
    assert fetch_mod.md5_name_mismatches(tmp_path, ["spam"]) == []
    victim.write_bytes(b"tWo\n")
    assert fetch_mod.md5_name_mismatches(tmp_path, ["spam"]) == [victim]
    # A name that is not NNNNN.<md5> at all is reported too, but "cmds" is not a message.
    (tmp_path / "spam" / "README").write_bytes(b"x")
    (tmp_path / "spam" / "cmds").write_bytes(b"mv a b\n")
    bad = fetch_mod.md5_name_mismatches(tmp_path, ["spam"])
    assert sorted(p.name for p in bad) == sorted(["README", victim.name])
    assert good not in bad


def test_missing_mirror_archive_cli_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    result = run_fetch(empty, tmp_path / "d")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = result.stderr.strip().splitlines()
    # "all" by default: one line for each corpus, none of which the mirror has.
    assert len(errors) == len(fetch_mod.CORPORA)
    for error, corpus in zip(errors, fetch_mod.CORPORA.values(), strict=True):
        assert error.startswith("fetch.py: error: ")
        assert f"{corpus.mirror_archive} not found in mirror" in error


@pytest.mark.corpus
def test_all_fetches_what_the_mirror_has_and_names_what_it_lacks(tmp_path: Path) -> None:
    if not MIRROR.is_dir():
        pytest.fail(NO_MIRROR)
    partial = tmp_path / "mirror"
    partial.mkdir()
    sms = fetch_mod.get_corpus("sms")
    shutil.copy(MIRROR / sms.mirror_archive, partial)
    result = run_fetch(partial, tmp_path / "d")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"sms: {tmp_path / 'd' / sms.root} (ham 4827, spam 747)"]
    errors = [line for line in result.stderr.splitlines() if line.startswith("fetch.py:")]
    assert [error.split(" not found")[0] for error in errors] == [
        f"fetch.py: error: {fetch_mod.get_corpus(name).mirror_archive}"
        for name in ("spamassassin", "enron1")
    ]


def test_mirror_env_variable_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fetch_mod.MIRROR_ENV, str(tmp_path / "env-mirror"))
    with pytest.raises(fetch_mod.FetchError, match="env-mirror"):
        fetch_mod.fetch("enron1", tmp_path / "dest")


def test_network_failure_is_a_clean_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreachable(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    with pytest.raises(fetch_mod.FetchError, match=r"download failed: http.*enron1\.tar\.gz"):
        fetch_mod.fetch("enron1", tmp_path / "dest", downloads=tmp_path / "dl")
    assert not list((tmp_path / "dl").glob("*"))  # no partial download left behind

    code = fetch_mod.main(
        ["--dest", str(tmp_path / "dest"), "--downloads", str(tmp_path / "dl"), "enron1"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("fetch.py: error: download failed")


class _ShortResponse(io.BytesIO):
    """A reply that promises more bytes than it sends, as a connection closed early."""

    headers: ClassVar[dict[str, str]] = {"Content-Length": "1000"}

    def __enter__(self) -> _ShortResponse:
        return self


@pytest.mark.parametrize(
    "reply",
    [
        lambda *a, **k: _ShortResponse(b"x" * 100),
        lambda *a, **k: (_ for _ in ()).throw(http.client.IncompleteRead(b"x" * 10, 990)),
        lambda *a, **k: (_ for _ in ()).throw(http.client.BadStatusLine("garbage")),
    ],
)
def test_a_broken_download_is_a_clean_error_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply
) -> None:
    # A short file was kept as the download and every later run failed on it; the
    # http.client errors ended in a traceback.
    monkeypatch.setattr(urllib.request, "urlopen", reply)
    with pytest.raises(fetch_mod.FetchError, match=r"^download failed: http"):
        fetch_mod.fetch("enron1", tmp_path / "dest", downloads=tmp_path / "dl")
    assert not list((tmp_path / "dl").glob("*"))


def test_a_cached_download_that_fails_is_deleted(tmp_path: Path) -> None:
    downloads = tmp_path / "dl"
    downloads.mkdir()
    cached = downloads / fetch_mod.CORPORA["enron1"].upstream[0].url.rsplit("/", 1)[-1]
    cached.write_bytes(b"not an archive")
    with pytest.raises(fetch_mod.FetchError, match=re.escape(f"{cached}: ")) as info:
        fetch_mod.fetch("enron1", tmp_path / "dest", downloads=downloads)
    assert "deleted it; the next run downloads it again" in str(info.value)
    assert not cached.exists()


def _tar_with(tmp_path: Path, entries: list[tarfile.TarInfo]) -> Path:
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        for info in entries:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return archive


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


@pytest.mark.parametrize(
    "bad",
    [
        "/etc/evil",
        "enron1/../../evil",
        "../enron1/ham/x.txt",
        "elsewhere/ham/x.txt",
    ],
)
def test_unsafe_member_paths_are_refused(tmp_path: Path, bad: str) -> None:
    archive = _tar_with(tmp_path, [_file("enron1/ham/ok.txt"), _file(bad)])
    with pytest.raises(fetch_mod.FetchError):
        fetch_mod.extract_archive(archive, tmp_path / "out", "enron1")
    assert not (tmp_path / "evil").exists()
    assert not Path("/etc/evil").exists()


def test_links_are_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("enron1/ham/passwd")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    archive = _tar_with(tmp_path, [link])
    with pytest.raises(fetch_mod.FetchError, match="non-regular"):
        fetch_mod.extract_archive(archive, tmp_path / "out", "enron1")


def test_extract_skips_cmds_and_keeps_layout(tmp_path: Path) -> None:
    archive = _tar_with(tmp_path, [_file("spam_2/00001.abc"), _file("spam_2/cmds")])
    fetch_mod.extract_archive(archive, tmp_path / "out", "spam_2")
    assert sorted(p.name for p in (tmp_path / "out" / "spam_2").iterdir()) == ["00001.abc"]


def test_truncated_archive_is_a_clean_error(tmp_path: Path) -> None:
    archive = _tar_with(tmp_path, [_file("enron1/ham/a.txt")])
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(gzip.compress(archive.read_bytes())[:40])
    with pytest.raises(fetch_mod.FetchError, match="cannot unpack"):
        fetch_mod.extract_archive(truncated, tmp_path / "out", "enron1")


def test_sms_lines_are_checked_before_they_are_written(tmp_path: Path) -> None:
    root = tmp_path / "smsspamcollection"
    root.mkdir()
    with pytest.raises(fetch_mod.FetchError, match="SMSSpamCollection is missing"):
        fetch_mod.sms_messages(root)
    (root / "SMSSpamCollection").write_bytes(b"ham\thello\nspam\tWIN now\n")
    with pytest.raises(fetch_mod.FetchError, match="checksum mismatch"):
        fetch_mod.sms_messages(root)
    assert not (root / "ham").exists()


@pytest.mark.parametrize("bad", ["sub/SMSSpamCollection", "../evil", "dir/", "..\\evil", ".."])
def test_zip_members_must_be_plain_top_level_files(tmp_path: Path, bad: str) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("readme", b"ok")
        zipped.writestr(bad, b"x")
    with pytest.raises(fetch_mod.FetchError, match="refusing member"):
        fetch_mod.extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out" / "readme").exists()
    assert not (tmp_path / "evil").exists()


def test_unknown_corpus_name() -> None:
    with pytest.raises(ValueError, match="unknown corpus"):
        fetch_mod.fetch("enron7", Path("unused"))


def test_a_failed_download_leaves_the_good_ones_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every cached archive of the corpus was deleted when any later one failed.
    downloads = tmp_path / "dl"
    downloads.mkdir()
    first = fetch_mod.CORPORA["spamassassin"].upstream[0]
    good = downloads / first.url.rsplit("/", 1)[-1]
    with tarfile.open(good, "w:bz2") as tar:
        body = b"Subject: hi\n\nhello\n"
        info = tarfile.TarInfo(f"{first.top}/00001.x")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))

    def unreachable(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    with pytest.raises(fetch_mod.FetchError, match="download failed") as info:
        fetch_mod.fetch("spamassassin", tmp_path / "dest", downloads=downloads)
    assert "deleted" not in str(info.value)
    assert good.is_file()


# --- review 34: runs at once, damaged copies, content, full disks, killed runs ------------


def _from_the_mirror(dest: Path) -> list[str]:
    """The command line of fetch.py from the real mirror into ``dest``, but the corpus."""
    if not MIRROR.is_dir():
        pytest.fail(NO_MIRROR)
    return [sys.executable, str(FETCH_PY), "--mirror", str(MIRROR), "--dest", str(dest)]


@pytest.mark.corpus
def test_runs_into_one_destination_take_turns(tmp_path: Path) -> None:
    # The later runs' renames failed on the folder the first had put there.
    command = _from_the_mirror(tmp_path)
    runs = [
        subprocess.Popen([*command, "enron1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert out.decode().startswith("enron1: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".enron1.lock", "enron1"]


@pytest.mark.corpus
def test_a_copy_damaged_after_its_check_is_checked_again(
    fetched: dict[str, Path], tmp_path: Path
) -> None:
    # The marker alone said "verified", and the advice to fetch again could not mend it.
    damaged = tmp_path / "enron1"
    shutil.copytree(fetched["enron1"], damaged)
    shutil.rmtree(damaged / "spam")
    assert not fetch_mod.is_verified("enron1", damaged)
    with pytest.raises(fetch_mod.FetchError, match=r"spam/ is missing \(remove .* afresh\)"):
        fetch_mod.fetch("enron1", tmp_path, mirror=MIRROR)
    assert fetch_mod.is_verified("enron1", fetched["enron1"])


def test_enron1_files_of_the_right_number_are_not_taken_for_the_corpus(tmp_path: Path) -> None:
    # Its archive comes over plain HTTP with no checksum, and counts were all that was
    # checked: 5,172 empty files passed as Enron1.
    downloads = tmp_path / "dl"
    downloads.mkdir()
    archive = downloads / "enron1.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for group, (_, count) in fetch_mod.CORPORA["enron1"].groups.items():
            for n in range(count):
                info = tarfile.TarInfo(f"enron1/{group}/{n:04}.txt")
                info.size = 2
                tar.addfile(info, io.BytesIO(b"hi"))
    not_enron = r"5172 file\(s\) are not enron1 messages"
    with pytest.raises(fetch_mod.FetchError, match=not_enron) as info:
        fetch_mod.fetch("enron1", tmp_path / "dest", downloads=downloads)
    assert "deleted" in str(info.value) and not archive.exists()
    assert not (tmp_path / "dest" / "enron1").exists()


def test_a_bad_sms_download_is_deleted_and_named(tmp_path: Path) -> None:
    # Its data file is checked as its messages are written, which happened outside the
    # handling that deletes a bad download: every later run failed on it.
    downloads = tmp_path / "dl"
    downloads.mkdir()
    archive = downloads / "sms+spam+collection.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("SMSSpamCollection", "ham\thello\nspam\twin now\n")
    with pytest.raises(fetch_mod.FetchError, match="checksum mismatch for sms/") as info:
        fetch_mod.fetch("sms", tmp_path / "dest", downloads=downloads)
    assert "partial" not in str(info.value)
    assert not archive.exists()


def test_a_full_destination_keeps_the_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write error was taken for a bad archive, and a good download deleted.
    downloads = tmp_path / "dl"
    downloads.mkdir()
    archive = downloads / "enron1.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("enron1/ham/0001.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "extract", full)
    dest = tmp_path / "dest"
    message = f"cannot write {dest}: No space left on device"
    with pytest.raises(fetch_mod.DestinationError, match=f"^{re.escape(message)}$"):
        fetch_mod.fetch("enron1", dest, downloads=downloads)
    assert archive.exists()


@pytest.mark.corpus
def test_a_terminated_run_leaves_nothing_and_a_killed_ones_leftovers_go(tmp_path: Path) -> None:
    command = _from_the_mirror(tmp_path)
    run = subprocess.Popen([*command, "spamassassin"], stderr=subprocess.DEVNULL)
    # Terminated while it unpacks (SIGTERM: a CI time-out, a closed session).
    while not list(tmp_path.glob(".spamassassin-20030228.partial-*")) and run.poll() is None:
        time.sleep(0.01)
    run.terminate()
    assert run.wait(timeout=60) == 143
    assert not list(tmp_path.glob("*.partial-*"))
    # A run killed outright cleans nothing: the next one does.
    leftover = tmp_path / ".smsspamcollection.partial-x1y2z3"
    (leftover / "smsspamcollection").mkdir(parents=True)
    assert subprocess.run([*command, "sms"], capture_output=True, check=False).returncode == 0
    assert not leftover.exists()


def test_two_runs_sharing_the_download_cache_both_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both wrote one ".part" file, one truncating the other's, and the later rename
    # found it gone.
    both_reading = threading.Barrier(2)

    class Reply(io.BytesIO):
        headers: ClassVar[dict[str, str]] = {}

        def __enter__(self) -> Reply:
            return self

        def read(self, size: int | None = -1) -> bytes:
            # Each run has opened where it writes before either writes a byte.
            if not self.tell():
                both_reading.wait(timeout=10)
            return super().read(size)

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: Reply(b"archive bytes"))
    target = tmp_path / "dl" / "enron1.tar.gz"
    errors: list[BaseException] = []

    def download() -> None:
        try:
            fetch_mod._download("http://example.org/enron1.tar.gz", target, lambda _: None)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=download) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() == b"archive bytes"
    assert [p.name for p in target.parent.iterdir()] == [target.name]
    # Readable by whoever shares the cache, as the umask says (mkstemp's are 0600).
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.corpus
def test_a_copy_nobody_may_change_is_checked_in_place(
    fetched: dict[str, Path], tmp_path: Path
) -> None:
    # One a previous version verified: taking the lock, or writing the new marker,
    # failed on the read-only folder.
    dest = tmp_path / "shared"
    shutil.copytree(fetched["sms"], dest / "smsspamcollection")
    marker = dest / "smsspamcollection" / fetch_mod.MARKER_NAME
    marker.write_text("spamnb-fetch v1 sms ham=4827 spam=747\n")
    os.chmod(dest, 0o555)
    try:
        command = [sys.executable, str(FETCH_PY), "--dest", str(dest), "sms"]
        if os.geteuid() == 0:
            # Root may write anywhere: in a user namespace the test is the owner of its
            # files, whom a folder's mode binds.
            nobody = pwd.getpwnam("nobody")
            mapped = [f"--map-user={nobody.pw_uid}", f"--map-group={nobody.pw_gid}"]
            command = ["unshare", "--user", *mapped, *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        os.chmod(dest, 0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sms: ")
    assert not (dest / ".smsspamcollection.lock").exists()
    assert marker.read_text().startswith("spamnb-fetch v1 ")
    # And checked: a message gone from it is said, with why it stays so.
    next((dest / "smsspamcollection" / "spam").iterdir()).unlink()
    os.chmod(dest, 0o555)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        os.chmod(dest, 0o755)
    assert done.returncode == 1
    assert "spam/ has 746 messages" in done.stderr and "cannot be written" in done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_closed_output_still_fetches_every_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched_now: list[str] = []

    def fake_fetch(name: str, dest: Path, *args: object, **kwargs: object) -> Path:
        fetched_now.append(name)
        return Path(dest) / name

    monkeypatch.setattr(fetch_mod, "fetch", fake_fetch)
    monkeypatch.setattr(fetch_mod, "labelled_dirs", lambda name, root: {"ham": [], "spam": []})
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        status = fetch_mod.main(["--dest", str(tmp_path), "all"])
    assert status == 1
    assert fetched_now == list(fetch_mod.CORPORA)


def test_main_leaves_the_callers_sigterm_alone(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    fetch_mod.main(["--dest", str(tmp_path), "--mirror", str(tmp_path / "none"), "sms"])
    assert signal.getsignal(signal.SIGTERM) is before
