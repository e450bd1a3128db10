"""Fetch, verify and unpack the public spam corpora used to evaluate spamnb.

Corpora:

* ``spamassassin``: the SpamAssassin public corpus (20030228 release, spam_2 from the
  20050311 revision). Ham: easy_ham, easy_ham_2, hard_ham. Spam: spam, spam_2.
* ``enron1``: Enron-Spam, preprocessed set enron1 (Metsis et al., CEAS 2006). Ham: ham/.
  Spam: spam/.
* ``sms``: the SMS Spam Collection v.1 (Almeida et al., DocEng 2011), one text file of
  labelled lines, written out as one message file per line (ham/, spam/; see
  ``sms_messages``). Not mail: a check that the defaults hold on short texts.

Two sources:

* a mirror directory (``--mirror DIR`` or ``SPAMNB_CORPUS_MIRROR=DIR``) holding the
  repackaged ``.tar.xz`` archives described in its README; their SHA-256 sums are
  checked before anything is unpacked;
* otherwise the original upstream archives, downloaded over HTTP(S). Their checksums
  are not published, so the unpacked content is verified instead.

Either way the result is checked the same way (per-directory message counts, each
message file's name and first bytes, for SpamAssassin the MD5 embedded in every file
name, for the SMS collection its data file's SHA-256) and a marker file is written,
so a second run with the same destination does nothing.  Runs into one destination
take turns on a lock file beside the corpus.

Usage::

    python corpora/fetch.py [--dest DIR] [--mirror DIR] [--downloads DIR]
                            [spamassassin|enron1|sms|all]

Exit status: 0, 1 when a corpus could not be fetched, 2 for a usage error, 130 when
interrupted (143 when terminated).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import hashlib
import http.client
import lzma
import os
import re
import shutil
import signal
import sys
import tarfile
import tempfile
import threading
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
DEFAULT_DEST = HERE / "data"
DEFAULT_DOWNLOADS = HERE / "downloads"
MIRROR_ENV = "SPAMNB_CORPUS_MIRROR"
MARKER_NAME = ".spamnb-verified"
# Bump when the layout or the checks change, so old unpacked copies are re-verified.
MARKER_VERSION = 2
DOWNLOAD_TIMEOUT = 60

# Upstream tarballs carry a list of mv commands next to the messages; it is not mail.
_NOT_MESSAGES = frozenset({"cmds"})
_SA_NAME = re.compile(r"^\d{5}\.([0-9a-f]{32})$")


class FetchError(Exception):
    """A corpus could not be fetched or failed verification; the message is for users."""


class DestinationError(FetchError):
    """The destination could not be written (a full disk): no fault of the archive."""


# A destination out of room: no fault of the archive, which is not deleted for it.
# (Not EACCES: an archive's own member modes can refuse its files.)
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def dest_of(staged: Path) -> Path:
    """The destination a path under a run's staging folder is unpacked for: that
    folder is gone by the time an error naming it is read."""
    return next((p.parent for p in (staged, *staged.parents) if ".partial-" in p.name), staged)


@contextmanager
def _writing_into(dest: Path) -> Iterator[None]:
    """Turn a destination that has no room into a DestinationError naming ``dest``."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            raise DestinationError(f"cannot write {dest}: {exc.strerror or exc}") from exc
        raise


@dataclass(frozen=True)
class Upstream:
    """One original archive: where to get it and where its top directory lands."""

    url: str
    top: str  # the single top-level directory inside the tarball ("" for a flat zip)
    into: str  # directory under the staging area to unpack into ("" = staging itself)


@dataclass(frozen=True)
class Corpus:
    name: str
    root: str  # directory name of the unpacked corpus under the destination
    mirror_archive: str
    mirror_sha256: str
    groups: dict[str, tuple[str, int]]  # subdirectory -> (label, expected message count)
    upstream: tuple[Upstream, ...]
    md5_named: bool = False
    # Files known to differ from the MD5 in their name (relative to the corpus root).
    md5_exceptions: frozenset[str] = frozenset()
    # Writes the message folders from what the archive holds, when it holds no folders
    # of messages (the SMS collection is one file of lines); given the unpacked root.
    messages_from: Callable[[Path], None] | None = None
    # Every message file's name (``{group}`` standing for its folder) and first bytes:
    # Enron's archive comes over plain HTTP with no published checksum, and its counts
    # alone passed any files of the right number (5,172 empty ones).
    file_name: str = ""
    starts_with: bytes = b""


_SA_BASE = "https://spamassassin.apache.org/old/publiccorpus/"
_SA_ROOT = "spamassassin-20030228"

_SMS_ROOT = "smsspamcollection"
_SMS_DATA = "SMSSpamCollection"
# SHA-256 of the collection's data file (MD5 1949b64a224790d01335c2bf8a0e48b2, the same
# in every copy compared): UCI publishes no checksum of its zip, so the content is checked.
_SMS_DATA_SHA256 = "7d039a24a6083ed9ef0f806ebad56bbb976e3aeb8de05669173bfdc4996c239d"
# Every SMS becomes a message with this header only: its text is the body (without a
# header a line such as "Urgent: call now" would read as a header field), and its
# charset is the data file's.
SMS_HEADER = b"Content-Type: text/plain; charset=utf-8\n\n"


def sms_messages(root: Path) -> None:
    """Write ``root/ham/NNNN`` and ``root/spam/NNNN`` from the collection's data file:
    one message per line, named by the line's number (from 1), holding
    :data:`SMS_HEADER`, the text after the line's TAB and a newline."""
    data_file = root / _SMS_DATA
    if not data_file.is_file():
        raise FetchError(f"{data_file} is missing")
    check_sha256(data_file, _SMS_DATA_SHA256)
    for label in ("ham", "spam"):
        (root / label).mkdir(exist_ok=True)
    for number, line in enumerate(data_file.read_bytes().split(b"\n"), 1):
        if not line:
            continue
        label, tab, text = line.partition(b"\t")
        if not tab or label not in (b"ham", b"spam"):
            raise FetchError(f"{data_file}: line {number} is not LABEL<TAB>TEXT")
        (root / label.decode() / f"{number:04d}").write_bytes(SMS_HEADER + text + b"\n")


CORPORA: dict[str, Corpus] = {
    "spamassassin": Corpus(
        name="spamassassin",
        root=_SA_ROOT,
        mirror_archive="spamassassin-20030228.tar.xz",
        mirror_sha256="f3dccf25b7dc6c443f1f562b4225a77d6c564b11d1866f3fe4237c432129dd4c",
        groups={
            "easy_ham": ("ham", 2500),
            "easy_ham_2": ("ham", 1400),
            "hard_ham": ("ham", 250),
            "spam": ("spam", 500),
            "spam_2": ("spam", 1396),
        },
        upstream=tuple(
            Upstream(_SA_BASE + archive, top, _SA_ROOT)
            for archive, top in (
                ("20030228_easy_ham.tar.bz2", "easy_ham"),
                ("20030228_easy_ham_2.tar.bz2", "easy_ham_2"),
                ("20030228_hard_ham.tar.bz2", "hard_ham"),
                ("20030228_spam.tar.bz2", "spam"),
                ("20050311_spam_2.tar.bz2", "spam_2"),
            )
        ),
        md5_named=True,
        # Upstream edited this message's header hostnames after naming the file.
        md5_exceptions=frozenset({"hard_ham/00230.244a63cd74c81123ef26129453e32c95"}),
    ),
    "enron1": Corpus(
        name="enron1",
        root="enron1",
        mirror_archive="enron-spam-enron1.tar.xz",
        mirror_sha256="1240a530de20e4137c1624f9818e44c3944a0f0349da7668e0d7bacbe5a4cd2f",
        groups={"ham": ("ham", 3672), "spam": ("spam", 1500)},
        upstream=(
            Upstream(
                "http://www.aueb.gr/users/ion/data/enron-spam/preprocessed/enron1.tar.gz",
                "enron1",
                "",
            ),
        ),
        # 0001.1999-12-10.farmer.ham.txt, 0006.2003-12-18.GP.spam.txt
        file_name=r"\d{4}\.\d{4}-\d{2}-\d{2}\.[A-Za-z]+\.{group}\.txt",
        starts_with=b"Subject:",
    ),
    "sms": Corpus(
        name="sms",
        root=_SMS_ROOT,
        mirror_archive="sms-spam-collection-v1.tar.xz",
        mirror_sha256="cfd64a9ac3480da873ca2e16cb3bdfea6696f63e28467f98660bc054f512fbab",
        groups={"ham": ("ham", 4827), "spam": ("spam", 747)},
        upstream=(
            Upstream(
                "https://archive.ics.uci.edu/static/public/228/sms+spam+collection.zip",
                "",
                _SMS_ROOT,
            ),
        ),
        messages_from=sms_messages,
    ),
}

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def get_corpus(name: str) -> Corpus:
    """Return the description of corpus ``name`` (ValueError if unknown)."""
    try:
        return CORPORA[name]
    except KeyError:
        known = ", ".join(sorted(CORPORA))
        raise ValueError(f"unknown corpus {name!r} (known: {known})") from None


# --- checks shared by mirror and network mode -------------------------------------------


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_sha256(path: Path, expected: str) -> None:
    """Raise FetchError unless the file's SHA-256 is ``expected``."""
    actual = sha256_file(path)
    if actual != expected:
        raise FetchError(f"checksum mismatch for {path}: sha256 {actual}, expected {expected}")


def message_files(directory: Path) -> list[Path]:
    """The message files of one corpus directory, sorted by name.

    Hidden files and the upstream ``cmds`` helper are not messages.
    """
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.name not in _NOT_MESSAGES
    )


def md5_name_mismatches(root: Path, groups: list[str] | None = None) -> list[Path]:
    """SpamAssassin-style files whose name is not ``NNNNN.<md5 of the file>``.

    Checks every message file in ``groups`` (default: all SpamAssassin directories)
    under ``root`` and returns the offenders, known exceptions included; callers decide
    what to tolerate.
    """
    if groups is None:
        groups = list(CORPORA["spamassassin"].groups)
    bad = []
    for group in groups:
        for path in message_files(root / group):
            match = _SA_NAME.match(path.name)
            if match is None or hashlib.md5(path.read_bytes()).hexdigest() != match.group(1):
                bad.append(path)
    return bad


def misshapen_files(corpus: Corpus, root: Path) -> list[Path]:
    """The message files under ``root`` whose name or first bytes are not the corpus's."""
    bad = []
    for group in corpus.groups:
        pattern = re.compile(corpus.file_name.replace("{group}", re.escape(group)) or ".*")
        for path in message_files(root / group):
            if not pattern.fullmatch(path.name):
                bad.append(path)
            elif corpus.starts_with:
                with path.open("rb") as fh:
                    if fh.read(len(corpus.starts_with)) != corpus.starts_with:
                        bad.append(path)
    return bad


def verify(name: str, root: Path) -> None:
    """Check an unpacked corpus; raise FetchError describing the first problem found."""
    corpus = get_corpus(name)
    problems = []
    for group, (_, expected) in corpus.groups.items():
        directory = root / group
        if not directory.is_dir():
            problems.append(f"{group}/ is missing")
            continue
        found = len(message_files(directory))
        if found != expected:
            problems.append(f"{group}/ has {found} messages, expected {expected}")
    if problems:
        raise FetchError(f"{root}: " + "; ".join(problems))
    if corpus.md5_named:
        bad = [
            p
            for p in md5_name_mismatches(root, list(corpus.groups))
            if p.relative_to(root).as_posix() not in corpus.md5_exceptions
        ]
        if bad:
            shown = ", ".join(p.relative_to(root).as_posix() for p in bad[:3])
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            raise FetchError(
                f"{root}: {len(bad)} message file(s) do not match the MD5 in their name: "
                f"{shown}{more}"
            )
    if corpus.file_name or corpus.starts_with:
        bad = misshapen_files(corpus, root)
        if bad:
            shown = ", ".join(p.relative_to(root).as_posix() for p in bad[:3])
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            raise FetchError(
                f"{root}: {len(bad)} file(s) are not {corpus.name} messages: {shown}{more}"
            )


def labelled_dirs(name: str, root: Path) -> dict[str, list[Path]]:
    """Return ``{"spam": [...], "ham": [...]}``: the message directories of an unpacked corpus."""
    corpus = get_corpus(name)
    dirs: dict[str, list[Path]] = {"spam": [], "ham": []}
    for group, (label, _) in corpus.groups.items():
        dirs[label].append(root / group)
    missing = [d for ds in dirs.values() for d in ds if not d.is_dir()]
    if missing:
        raise FetchError(f"{missing[0]} is missing; run `python corpora/fetch.py {name}` first")
    return dirs


# --- unpacking ------------------------------------------------------------------------


def _checked_member(member: tarfile.TarInfo, top: str, archive: Path) -> bool:
    """Vet one archive member; False means skip it, FetchError means refuse the archive."""
    name = member.name
    path = PurePosixPath(name)
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in path.parts:
        raise FetchError(f"{archive.name}: refusing unsafe member path {name!r}")
    parts = [p for p in path.parts if p != "."]
    if not parts or parts[0] != top:
        raise FetchError(f"{archive.name}: unexpected member {name!r} outside {top}/")
    if not (member.isfile() or member.isdir()):
        # Messages are plain files; links or devices have no business in a mail corpus.
        raise FetchError(f"{archive.name}: refusing non-regular member {name!r}")
    return not (member.isfile() and parts[-1] in _NOT_MESSAGES)


def extract_archive(archive: Path, into: Path, top: str) -> None:
    """Unpack ``archive`` (any tar compression) into ``into``, expecting one ``top`` dir.

    Members with absolute paths, ``..`` components, links, or outside ``top`` make the
    whole archive fail; upstream's ``cmds`` files are skipped.
    """
    into.mkdir(parents=True, exist_ok=True)
    # The "data" filter (Python 3.12, backported to 3.8.17+/3.11.4+) is a second line of
    # defence behind our own member checks; older interpreters just rely on the latter.
    extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    try:
        # Stream mode decompresses once; random access would rewind compressed input.
        with tarfile.open(archive, "r|*") as tar:
            for member in tar:
                if _checked_member(member, top, archive):
                    with _writing_into(dest_of(into)):
                        tar.extract(member, into, **extra)
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as exc:
        raise FetchError(f"cannot unpack {archive}: {exc}") from exc


def extract_zip(archive: Path, into: Path) -> None:
    """Unpack a zip whose members are plain files at its top level into ``into``.

    A directory, or a path of any kind in a member's name, makes the whole archive
    fail before anything is written.
    """
    into.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = zipped.infolist()
            for member in members:
                name = member.filename
                if member.is_dir() or "/" in name or "\\" in name or name in ("", ".", ".."):
                    raise FetchError(f"{archive.name}: refusing member {name!r}")
            for member in members:
                if member.filename in _NOT_MESSAGES:
                    continue
                with (
                    _writing_into(dest_of(into)),
                    zipped.open(member) as source,
                    (into / member.filename).open("wb") as out,
                ):
                    shutil.copyfileobj(source, out, 1 << 20)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        zlib.error,
        # An unsupported compression method, and an encrypted member.
        NotImplementedError,
        RuntimeError,
    ) as exc:
        raise FetchError(f"cannot unpack {archive}: {exc}") from exc


def _download(url: str, target: Path, log: Log) -> None:
    log(f"downloading {url}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A file of this run's own: two runs sharing the cache wrote one ".part" file, one
    # truncating what the other was writing, and the second's rename found it gone.
    # Named for this process and thread, and made with the umask's mode (mkstemp's are
    # their owner's alone, and a cache others share needs the usual mode).
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    request = urllib.request.Request(url, headers={"User-Agent": "spamnb-corpus-fetch/1"})
    try:
        with (
            os.fdopen(handle, "wb") as out,
            urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response,
        ):
            shutil.copyfileobj(response, out, 1 << 20)
            expected = response.headers.get("Content-Length")
            got = out.tell()
        # A connection closed early ends the read without an error: the short file
        # was kept as the download, and every later run failed on it.
        if expected is not None and expected.isdigit() and got != int(expected):
            raise FetchError(f"download failed: {url}: ended after {got} of {expected} bytes")
    except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as exc:
        partial.unlink(missing_ok=True)
        reason = " ".join(str(getattr(exc, "reason", None) or exc).split()) or type(exc).__name__
        raise FetchError(f"download failed: {url}: {reason}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)


def _unpack_from_mirror(corpus: Corpus, mirror: Path, staging: Path, log: Log) -> None:
    archive = mirror / corpus.mirror_archive
    if not mirror.is_dir():
        raise FetchError(f"the mirror {mirror} is not a folder")
    if not archive.is_file():
        raise FetchError(f"{corpus.mirror_archive} not found in mirror {mirror}")
    log(f"checking {archive}")
    check_sha256(archive, corpus.mirror_sha256)
    log(f"unpacking {archive.name}")
    extract_archive(archive, staging, corpus.root)


def _unpack_from_upstream(corpus: Corpus, downloads: Path, staging: Path, log: Log) -> None:
    for up in corpus.upstream:
        archive = downloads / up.url.rsplit("/", 1)[-1]
        # A previous run's download is reused; content verification catches a bad one.
        if not archive.is_file():
            _download(up.url, archive, log)
        log(f"unpacking {archive.name}")
        try:
            if archive.suffix == ".zip":
                extract_zip(archive, staging / up.into)
            else:
                extract_archive(archive, staging / up.into, up.top)
        except DestinationError:
            raise  # the archive is good: the destination could not take it
        except FetchError as exc:
            # A bad download was reused by every later run, which failed on it.
            archive.unlink(missing_ok=True)
            raise FetchError(f"{exc} (deleted it; the next run downloads it again)") from None


# --- the public entry point -----------------------------------------------------------


def _marker_text(corpus: Corpus) -> str:
    counts = " ".join(f"{group}={n}" for group, (_, n) in corpus.groups.items())
    return f"spamnb-fetch v{MARKER_VERSION} {corpus.name} {counts}\n"


def is_verified(name: str, root: Path) -> bool:
    """True if ``root`` carries the marker written after a successful verification and
    each of its folders still holds as many messages: a folder deleted or thinned since
    was taken as whole, and the advice to fetch again could not mend it."""
    corpus = get_corpus(name)
    marker = root / MARKER_NAME
    try:
        if marker.read_text(encoding="utf-8") != _marker_text(corpus):
            return False
        return all(
            len(message_files(root / group)) == count for group, (_, count) in corpus.groups.items()
        )
    except OSError:
        return False


@contextmanager
def _turn(dest: Path, corpus: Corpus, log: Log) -> Iterator[None]:
    """Hold the lock of ``corpus`` in ``dest`` (runs into one destination take turns).
    Opened for reading where another user's file may not be written, which is all
    flock needs on a local disk."""
    lock = dest / f".{corpus.root}.lock"
    try:
        # For writing where that is allowed: NFS locks only files open for it.
        handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:  # another user's lock file, in a folder we may write
        handle = os.open(lock, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another fetch of {corpus.name} into {dest}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def fetch(
    name: str,
    dest: Path,
    mirror: Path | None = None,
    downloads: Path | None = None,
    log: Log | None = None,
) -> Path:
    """Make corpus ``name`` available under ``dest`` and return its root directory.

    ``mirror`` (default: ``$SPAMNB_CORPUS_MIRROR``) selects a local archive directory;
    without one the upstream archives are downloaded into ``downloads`` (default
    ``corpora/downloads/``). Does nothing if ``dest`` already holds a verified copy.
    Raises FetchError with a one-line explanation on any failure.
    """
    corpus = get_corpus(name)
    dest = Path(dest)
    root = dest / corpus.root
    log = log or _quiet
    if is_verified(name, root):
        return root
    if root.is_dir() and not os.access(dest, os.W_OK):
        # A copy nobody may change here (a shared tree, or one verified by an older
        # version of this script): checked in place, and left unmarked.
        try:
            verify(name, root)
        except (FetchError, OSError) as exc:
            raise FetchError(f"{exc} (and {dest} cannot be written to fetch it afresh)") from None
        return root
    try:
        dest.mkdir(parents=True, exist_ok=True)
        # Two runs into one destination (test processes, benchmarks) unpacked the same
        # corpus at once, and the later rename failed on the folder the first put there.
        with _turn(dest, corpus, log):
            if is_verified(name, root):
                return root
            return _fetch_now(corpus, dest, mirror, downloads, log)
    except FetchError:
        raise
    except OSError as exc:
        where = exc.filename or dest
        raise FetchError(f"{where}: {exc.strerror or exc}") from None


def _fetch_now(
    corpus: Corpus, dest: Path, mirror: Path | None, downloads: Path | None, log: Log
) -> Path:
    name = corpus.name
    root = dest / corpus.root
    # Whatever a run that was killed left unpacking (its own cleanup never ran): no other
    # run is unpacking here while this one holds the lock.
    for leftover in dest.glob(f".{corpus.root}.partial-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if root.exists():
        # Unpacked some other way, or a marker from an older version: check it in place
        # rather than clobbering a directory we did not necessarily create.  A corpus
        # whose messages this script writes (the SMS collection, unpacked by hand from
        # the mirror's archive) gets its message folders added beside what is there.
        try:
            missing = [g for g in corpus.groups if not (root / g).is_dir()]
            if corpus.messages_from is not None and len(missing) == len(corpus.groups):
                corpus.messages_from(root)
            verify(name, root)
        except FetchError as exc:
            raise FetchError(f"{exc} (remove {root} to fetch it afresh)") from None
        (root / MARKER_NAME).write_text(_marker_text(corpus), encoding="utf-8")
        return root

    if mirror is None and os.environ.get(MIRROR_ENV):
        mirror = Path(os.environ[MIRROR_ENV])
    # Unpack beside the destination and rename at the end, so an interrupted or failed
    # run never leaves a half-populated corpus that looks complete.
    staging: Path | None = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{corpus.root}.partial-", dir=dest))
        if mirror is not None:
            _unpack_from_mirror(corpus, Path(mirror), staging, log)
        else:
            _unpack_from_upstream(corpus, Path(downloads or DEFAULT_DOWNLOADS), staging, log)
        unpacked = staging / corpus.root
        try:
            if corpus.messages_from is not None:
                log(f"writing {corpus.name}'s messages")
                with _writing_into(dest):
                    corpus.messages_from(unpacked)
            log(f"verifying {corpus.name}")
            verify(name, unpacked)
        except DestinationError:
            raise
        except FetchError as exc:
            # Named by the staging folder, which is gone by the time it is read.
            named = FetchError(str(exc).replace(str(unpacked), corpus.name))
            if mirror is not None:
                raise named from None
            raise _without_bad_downloads(corpus, downloads, named) from None
        (unpacked / MARKER_NAME).write_text(_marker_text(corpus), encoding="utf-8")
        os.replace(unpacked, root)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return root


def _without_bad_downloads(corpus: Corpus, downloads: Path | None, exc: FetchError) -> FetchError:
    """``exc`` (the unpacked corpus failed verification), after deleting the corpus's
    cached downloads, which one of them is wrong is not known: a bad one was reused by
    every later run, which failed on it for ever."""
    folder = Path(downloads or DEFAULT_DOWNLOADS)
    deleted = []
    for up in corpus.upstream:
        archive = folder / up.url.rsplit("/", 1)[-1]
        if archive.is_file():
            archive.unlink()
            deleted.append(str(archive))
    if not deleted:
        return exc
    return FetchError(f"{exc} (deleted {', '.join(deleted)}; the next run downloads it again)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fetch.py", description="Fetch and verify the public spam corpora."
    )
    parser.add_argument(
        "corpus", nargs="?", default="all", choices=[*CORPORA, "all"], help="default: all"
    )
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"default: {DEFAULT_DEST}")
    parser.add_argument(
        "--mirror",
        type=Path,
        default=None,
        help=f"take archives from this directory (default: ${MIRROR_ENV}, else download)",
    )
    parser.add_argument(
        "--downloads",
        type=Path,
        default=DEFAULT_DOWNLOADS,
        help=f"cache for downloaded archives (default: {DEFAULT_DOWNLOADS})",
    )
    args = parser.parse_args(argv)
    names = list(CORPORA) if args.corpus == "all" else [args.corpus]

    def log(message: str) -> None:
        print(f"  {message}", file=sys.stderr)

    # Each corpus is fetched on its own: one missing from a mirror (say the SMS, which
    # the tests alone read) leaves the others to be fetched, and every failure is named.
    failed = 0
    output_lost = False
    try:
        for name in names:
            try:
                root = fetch(name, args.dest, args.mirror, args.downloads, log=log)
                counts = {
                    label: sum(len(message_files(d)) for d in dirs)
                    for label, dirs in labelled_dirs(name, root).items()
                }
            except (FetchError, OSError) as exc:
                print(f"fetch.py: error: {exc}", file=sys.stderr)
                failed += 1
                continue
            try:
                print(f"{name}: {root} (ham {counts['ham']}, spam {counts['spam']})", flush=True)
            except OSError as exc:  # closed or full: said once, and the rest still fetched
                if not output_lost:
                    print(
                        f"fetch.py: cannot write the output: {exc.strerror or exc}", file=sys.stderr
                    )
                    # Nothing more may be written to it, not even at exit.
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, sys.stdout.fileno())
                    os.close(devnull)
                output_lost = True
    except KeyboardInterrupt:
        print("fetch.py: interrupted", file=sys.stderr)
        return 130
    return 1 if failed or output_lost else 0


def _terminated(signum: int, frame: object) -> None:
    # Terminated (a CI time-out, a closed session), the run cleans up as after Ctrl-C;
    # its unpacking folder was left behind for good.
    sys.exit(143)


if __name__ == "__main__":
    # Here, not in main(): a process that calls main() keeps its own handling of SIGTERM.
    signal.signal(signal.SIGTERM, _terminated)
    sys.exit(main())
