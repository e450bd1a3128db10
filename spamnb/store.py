"""The model file: one versioned joblib payload behind a checksum, written atomically.

The payload holds plain data only (strings, numbers, numpy arrays): the counts are
the state, so a newer spamnb can read an older file and rebuild everything else.  A
write goes to a temporary file in the same directory which then replaces the old
file in one rename, so a reader sees either the old model or the new one, never a
half-written file, even if the writer dies.

Before the payload comes a fixed header: a magic string, the payload's length and its
SHA-256.  Unpickling a damaged file can fail anywhere, or worse succeed with a wrong
count, so a file is checked against the header before one byte of it is unpickled: a
truncated file or a flipped byte is refused with one clear line.  Files written before
the header existed (format 1 and 2) are still read, unchecked.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from . import __version__
from .calibration import Calibration
from .counts import Vocabulary
from .paths import (
    ModelFileError,
    check_folders,
    check_trusted,
    default_model_path,
    table_path,
)
from .table import checked_vocabulary_hashes, vocabulary_hashes
from .tokens import TokenizerSettings

if TYPE_CHECKING:
    # Imported where a model is made from a file: training a new model takes its
    # lock before it imports scipy (see cli.train).
    from .filter import SpamFilter
    from .mistakes import MistakeTable
    from .model import NaiveBayes

__all__ = [
    "FILE_MAGIC",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ModelFileError",
    "default_model_path",
    "load",
    "save",
    "training_lock",
]

FORMAT_NAME = "spamnb-model"
# Bump when a reader of the previous version could misread the new file.  Version 2
# packs the vocabulary and the digests of trained messages into byte arrays: joblib
# pickles a list of 600,000 strings one by one in Python (3 s of a 4 s save), an
# array in one write.  Version 1 files are still read.
# Version 3 puts the checksum header before the payload.  Version 4 adds the mistake
# table: an older spamnb would score without it and disagree with the pipe's table.
# Version 5 knows messages by the digest that reads mbox escapes back (see
# mail.message_digests), and records the digests it retired: an older spamnb took
# every message whose digest had changed (most of a mailbox) for new mail, and its
# next training counted it again, with nothing said.  Version 6 is written only for a
# model with a tokenizer setting version 5 lacks (cjk_pairs): an older spamnb drops
# settings it does not know, so it tokenized such a model without them, and its next
# save left them out for good.  Version 7 is written only for a model that may know a
# message by the digest that reads CRLFs as LFs (SpamFilter.crlf_digests): a spamnb of
# version 5 or 6 would take it for new mail.  Other models stay version 5, which older
# spamnb reads.
FORMAT_VERSION = 7
_FORMAT_FOR_CRLF_DIGESTS = 7
_FORMAT_FOR_CJK_PAIRS = 6
_FORMAT_FOR_OLD_READERS = 5
# PNG's trick: the high byte and the line ends show a file mangled by a text-mode copy.
FILE_MAGIC = b"\x89SPAMNB-MODEL\r\n\x1a\n"
_DIGEST_SIZE = 32
HEADER_SIZE = len(FILE_MAGIC) + 8 + _DIGEST_SIZE
# Characters that may join packed strings, the first one no string contains.
_SEPARATORS = ("\n", "\x00", "\x1f")


# Strings joined and encoded this many at a time.
_PACK_SLICE = 1 << 16


class NotAModelError(ModelFileError):
    """A file that holds no spamnb model: another kind of file, or a damaged model
    (which train --new may replace; a model refused for trust or age may not)."""


def pack_strings(strings: list[str]) -> dict[str, Any]:
    """Strings as one UTF-8 byte array, joined by a character none of them holds."""
    for separator in _SEPARATORS:
        packed = _packed(strings, separator)
        if packed is not None:
            return {"separator": separator, "count": len(strings), "utf8": packed}
    return {"strings": list(strings)}


def _packed(strings: list[str], separator: str) -> np.ndarray | None:
    """The strings' UTF-8, joined by ``separator``; None if one of them holds it.

    Written a slice at a time into one array: joining all of them and then encoding
    held the text twice (two copies of 60 MB for the 2 million tokens of make
    bench-scale's 100,000 messages, at the peak of its training).  The array is sized
    from the first slice and grown in place (realloc, which moves a large block by
    remapping its pages, not by copying them) when later slices are longer.  Measuring
    every slice first, to fill an array of exact size, joined each slice twice (46 ms
    of saving the SpamAssassin training part's model, against 27), and summing the
    strings' lengths to size it took 11 ms.
    """
    data = np.empty(0, dtype=np.uint8)
    at = 0
    for number, (count, piece) in enumerate(_joined_slices(strings, separator)):
        if piece.count(separator) != count - 1:
            return None
        encoded = _encoded(piece)
        end = at + bool(number) + len(encoded)
        if end > len(data):
            # Room for the rest at this slice's bytes a string, a tenth more, and at
            # least half as much again as there was.
            rest = (len(strings) - number * _PACK_SLICE - count) * len(encoded) // count
            data.resize(max(end + rest + rest // 10, len(data) * 3 // 2), refcheck=False)
        if number:
            data[at] = ord(separator)
            at += 1
        data[at:end] = np.frombuffer(encoded, dtype=np.uint8)
        at = end
    # In place: the array is this function's own.
    data.resize(at, refcheck=False)
    return data


def _joined_slices(strings: list[str], separator: str) -> Iterator[tuple[int, str]]:
    """Each slice of ``_PACK_SLICE`` strings: how many, and joined by ``separator``."""
    for start in range(0, len(strings), _PACK_SLICE):
        piece = strings[start : start + _PACK_SLICE]
        yield len(piece), separator.join(piece)


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def unpack_strings(packed: object, what: str) -> list[str]:
    if not isinstance(packed, dict):
        raise ValueError(f"the {what} is not a packed string list")
    if "strings" in packed:
        strings = packed["strings"]
    else:
        count = packed["count"]
        data = np.asarray(packed["utf8"], dtype=np.uint8).tobytes()
        strings = data.decode("utf-8", "surrogatepass").split(packed["separator"]) if count else []
        if len(strings) != count:
            raise ValueError(f"the {what} holds {len(strings)} strings, not {count}")
    if not isinstance(strings, list) or not _all_text(strings):
        raise ValueError(f"the {what} holds non-text entries")
    return strings


def _all_text(items: list[Any]) -> bool:
    # The types collected inside C: a generator of isinstance() calls took a tenth of
    # a second per check for a vocabulary of 500,000 tokens, and loading checks twice.
    return set(map(type, items)) <= {str}


def to_payload(spam_filter: SpamFilter) -> dict[str, Any]:
    # A model's counts may stop short of its vocabulary: re-reading mail it knows
    # adds that mail's tokens to the vocabulary and counts nothing, and a newer
    # tokenizer gives known mail tokens the vocabulary lacks.  A file holds counts for
    # every token (zeros for those), as from_payload checks.
    n_features = len(spam_filter.vocabulary)
    return {
        "format": FORMAT_NAME,
        "format_version": (
            _FORMAT_FOR_CRLF_DIGESTS
            if spam_filter.crlf_digests
            else _FORMAT_FOR_CJK_PAIRS
            if spam_filter.settings.unknown_to_old_readers()
            else _FORMAT_FOR_OLD_READERS
        ),
        "spamnb_version": __version__,
        "created": spam_filter.created,
        "updated": spam_filter.updated,
        "tokenizer": spam_filter.settings.to_dict(),
        "vocabulary": pack_strings(spam_filter.vocabulary.tokens),
        # The scoring table's hash of each token, so that the next save hashes only
        # the tokens it adds (a cache: a file without it, or with wrong ones, is read
        # and hashed again).
        "token_hashes": vocabulary_hashes(spam_filter.vocabulary),
        "model": spam_filter.model.to_state(n_features),
        "calibration": spam_filter.calibration.to_dict(),
        "trained": _pack_trained(spam_filter.trained, spam_filter.model.classes),
        # Since format 5; older files have none.
        "retired_digests": _pack_retired(spam_filter.live_retired_digests()),
        # Since format 7, and only in files of that format (see FORMAT_VERSION).
        **({"crlf_digests": True} if spam_filter.crlf_digests else {}),
        "mistakes": {
            **spam_filter.mistakes.to_state(len(spam_filter.classes), n_features),
            "digests": pack_strings(list(spam_filter.mistake_copies)),
            "copies": np.fromiter(spam_filter.mistake_copies.values(), np.int64),
        },
    }


def _pack_trained(trained: dict[str, str], classes: list[str]) -> dict[str, Any]:
    numbers = {label: number for number, label in enumerate(classes)}
    return {
        "digests": pack_strings(list(trained)),
        "classes": np.fromiter((numbers[label] for label in trained.values()), np.int32),
    }


def _pack_retired(retired: dict[str, str]) -> dict[str, Any]:
    return {"old": pack_strings(list(retired)), "now": pack_strings(list(retired.values()))}


def _unpack_retired(packed: object, trained: dict[str, str]) -> dict[str, str]:
    if packed is None:
        return {}
    if not isinstance(packed, dict):
        raise ValueError("the record of retired digests is not packed digests")
    old = unpack_strings(packed["old"], "record of retired digests")
    now = unpack_strings(packed["now"], "record of retired digests")
    if len(old) != len(now) or not set(now) <= trained.keys():
        raise ValueError("the record of retired digests names messages never trained")
    return dict(zip(old, now, strict=True))


def _unpack_trained(packed: object, classes: list[str]) -> dict[str, str]:
    if not isinstance(packed, dict):
        raise ValueError("the record of trained messages is not packed digests")
    digests = unpack_strings(packed["digests"], "record of trained messages")
    numbers = np.asarray(packed["classes"])
    if numbers.shape != (len(digests),) or not np.isin(numbers, range(len(classes))).all():
        raise ValueError("the record of trained messages names unknown classes")
    return dict(zip(digests, (classes[n] for n in numbers.tolist()), strict=True))


def from_payload(payload: object, path: Path, *, checksummed: bool = True) -> SpamFilter:
    """The filter a model file's payload holds; ``checksummed`` says whether the file
    had the checksum header that every file of format 3 and later has."""
    from .filter import SpamFilter
    from .mistakes import MistakeTable
    from .model import NaiveBayes

    if not isinstance(payload, dict) or payload.get("format") != FORMAT_NAME:
        raise NotAModelError(f"{path} is not a spamnb model file")
    version = payload.get("format_version")
    if type(version) is not int or version < 1:
        raise NotAModelError(f"{path} is a damaged spamnb model file (format version {version!r})")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model format {version}, newer than this spamnb "
            f"({__version__}, format {FORMAT_VERSION}) reads; upgrade spamnb"
        )
    if version >= 3 and not checksummed:
        # Its header cut off: the payload would be unpickled unchecked.
        raise NotAModelError(
            f"{path} is a damaged spamnb model file (format {version} without its checksum header)"
        )
    try:
        model = NaiveBayes.from_state(payload["model"])
        if version >= 2:
            tokens = unpack_strings(payload["vocabulary"], "vocabulary")
            trained = _unpack_trained(payload["trained"], model.classes)
        else:
            tokens, trained = payload["vocabulary"], payload.get("trained", {})
        vocabulary = Vocabulary.from_tokens(tokens) if isinstance(tokens, list) else Vocabulary()
        settings = TokenizerSettings.from_dict(payload["tokenizer"])
        calibration = Calibration.from_dict(payload.get("calibration", {}))
        if model.token_counts.shape == model.doc_counts.shape and model.n_features < len(tokens):
            # Written by a spamnb that saved counts short of the vocabulary (after
            # known mail gave new tokens, see to_payload): the missing columns are the
            # zeros they stand for, and the next save writes them.
            model.widen(len(tokens))
        _check_consistent(model, vocabulary, tokens, settings)
        vocabulary.hashes = checked_vocabulary_hashes(tokens, payload.get("token_hashes"))
        _check_calibration(calibration)
        if version >= 4:
            mistakes, mistake_copies = _unpack_mistakes(payload["mistakes"], model, trained)
        else:
            # Trained before the table existed: the mail it learnt is gone, so the
            # table stays out of scoring (weight 0) until `train --new` (README, info).
            mistakes, mistake_copies = MistakeTable(weight=0.0), {}
        return SpamFilter(
            model=model,
            vocabulary=vocabulary,
            settings=settings,
            created=str(payload["created"]),
            updated=str(payload["updated"]),
            written_by=str(payload["spamnb_version"]),
            read_format=version,
            calibration=calibration,
            trained=_checked_trained(trained, model.classes),
            mistakes=mistakes,
            mistake_copies=mistake_copies,
            retired_digests=_unpack_retired(payload.get("retired_digests"), trained),
            crlf_digests=_crlf_digests(payload, version),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise NotAModelError(f"{path} is a damaged spamnb model file ({detail})") from None


def _crlf_digests(payload: dict[str, Any], version: int) -> bool:
    crlf = payload.get("crlf_digests", False)
    if type(crlf) is not bool or (crlf and version < _FORMAT_FOR_CRLF_DIGESTS):
        raise ValueError(f"the record of CRLF digests is {crlf!r} in format {version}")
    return crlf


def _unpack_mistakes(
    packed: object, model: NaiveBayes, trained: dict[str, str]
) -> tuple[MistakeTable, dict[str, int]]:
    from .mistakes import MistakeTable

    if not isinstance(packed, dict):
        raise ValueError("the mistake table is not a table")
    table = MistakeTable.from_state(packed, len(model.classes), model.n_features)
    digests = unpack_strings(packed["digests"], "record of mistake copies")
    copies = np.asarray(packed["copies"])
    if (
        copies.shape != (len(digests),)
        or not np.issubdtype(copies.dtype, np.integer)
        or (copies < 1).any()
        or len(set(digests)) != len(digests)
    ):
        raise ValueError("the record of mistake copies does not match its digests")
    if not set(digests) <= trained.keys():
        raise ValueError("the mistake table holds copies of messages never trained")
    return table, dict(zip(digests, copies.tolist(), strict=True))


def _checked_trained(trained: object, classes: list[str]) -> dict[str, str]:
    if not isinstance(trained, dict) or not all(
        isinstance(k, str) and v in classes for k, v in trained.items()
    ):
        raise ValueError("the record of trained messages is not digest -> class")
    return trained


def _check_calibration(calibration: Calibration) -> None:
    values = calibration.to_dict()
    if not all(isinstance(v, int | float) and np.isfinite(v) for v in values.values()):
        raise ValueError("calibration parameters are not finite numbers")
    if not 0 <= calibration.ham_cutoff <= calibration.spam_cutoff <= 1:
        raise ValueError("calibration cut-offs are out of order")


def _check_consistent(
    model: NaiveBayes, vocabulary: Vocabulary, tokens: object, settings: TokenizerSettings
) -> None:
    """Refuse a payload whose parts disagree, before it can fail later in scoring."""
    n_classes, n_features = len(model.classes), len(vocabulary)
    if not isinstance(tokens, list) or len(tokens) != n_features:
        # (Vocabulary.from_tokens has refused repeated tokens already.)
        raise ValueError("vocabulary has repeated or missing tokens")
    if not _all_text(tokens):
        raise ValueError("vocabulary holds non-text tokens")
    if not all(isinstance(c, str) for c in model.classes) or len(set(model.classes)) != n_classes:
        raise ValueError("class names are not distinct strings")
    if model.class_counts.shape != (n_classes,) or (model.class_counts < 0).any():
        raise ValueError("message counts do not match the classes")
    for counts in (model.token_counts, model.doc_counts):
        if counts.shape != (n_classes, n_features):
            raise ValueError(f"counts of shape {counts.shape}, expected {(n_classes, n_features)}")
        if not np.isfinite(counts).all() or (counts < 0).any():
            raise ValueError("counts are negative or not finite")
    for name, value in settings.to_dict().items():
        if type(value) is not int or value < 0:
            raise ValueError(f"tokenizer setting {name}={value!r}")


def model_status(path: Path) -> os.stat_result | None:
    """What is at ``path`` (links followed), or None when nothing is; ModelFileError
    when the path cannot be looked at: a link loop, a folder on the way that may not
    be searched, a name too long.  (Path.exists() took a loop for nothing there, so
    train replaced the link with a new model, and raised the others.)"""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ModelFileError(f"{path} is a loop of symbolic links, not a model") from None
        raise ModelFileError(f"cannot read model {path}: {exc.strerror or exc}") from None


# How a model file of format 1 or 2 starts: a bare joblib pickle (protocol 2 or later).
_PICKLE_START = b"\x80"


def refuse_to_replace_a_non_model(path: Path) -> None:
    """Raise ModelFileError unless ``path`` holds nothing, an empty file, or what
    starts as a spamnb model (sound or damaged): train --new and merge --force replace
    a model, never another file.

    A review's `train --new -m ham.mbox --ham ham.mbox` wrote the model over the
    mailbox it had just read; a mistyped -m could name any file.  A damaged model
    still starts with the magic (or, from format 1 or 2, as a pickle), so --new can
    still replace it, as the error that refuses to load it says.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return
    except OSError:
        return  # the write says what is wrong with the path
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return  # save refuses anything but a regular file, naming it
        start = os.pread(descriptor, len(FILE_MAGIC), 0)
    except OSError:
        return
    finally:
        os.close(descriptor)
    # A model cut short inside its magic is damaged too; so is an empty file.
    if FILE_MAGIC.startswith(start) or start.startswith(_PICKLE_START):
        return
    raise ModelFileError(
        f"{path} is not a spamnb model, and only a model is replaced; move it away "
        "or give another model path"
    )


def load(path: Path, *, trust: bool = False) -> SpamFilter:
    """Read a model file.

    The payload is unpickled by :func:`unpickle_payload`, which builds plain data only,
    so a file cannot make spamnb run code.  Still, whoever can change a model decides
    what it calls spam: unless ``trust`` is set, refuse one that another user owns or
    that others may write or replace (paths.check_trusted).  The checks are made on
    the open file, so the file cannot be swapped between check and load.
    """
    path = Path(path)
    status = model_status(path)
    if status is None:
        raise ModelFileError(f"no model at {path}; train one with 'spamnb train -m {path} ...'")
    if stat.S_ISDIR(status.st_mode):
        raise ModelFileError(f"{path} is a directory, not a model file")
    try:
        # Without blocking: opening a FIFO for reading waits for a writer, forever.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(descriptor, "rb") as stream:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):
                raise ModelFileError(_not_regular(path))
            os.set_blocking(descriptor, True)
            if not trust:
                check_trusted(status, path)
            header = stream.read(HEADER_SIZE)
            checksummed = header.startswith(FILE_MAGIC)
            if checksummed:
                _verify_checksum(stream, header, path)
                stream.seek(HEADER_SIZE)
            else:
                stream.seek(0)  # a format 1 or 2 file: a bare joblib payload
            payload = unpickle_payload(stream, path)
    except ModelFileError:
        raise
    except OSError as exc:
        raise ModelFileError(f"cannot read model {path}: {exc.strerror or exc}") from None
    except MemoryError:
        # Not the file's fault: under a memory limit (ulimit -v) the pipe's road through
        # the whole model called a sound model damaged (review 9).
        raise ModelFileError(f"not enough memory to load the model {path}") from None
    except Exception:  # noqa: BLE001 - truncated or foreign files fail in many ways inside pickle
        raise NotAModelError(f"{path} is not a spamnb model file, or it is damaged") from None
    return from_payload(payload, path, checksummed=checksummed)


# The globals a model's pickle names: a payload is dicts, lists, strings, numbers and
# numpy arrays (see to_payload), and joblib writes each array as a NumpyArrayWrapper
# (naming numpy.ndarray as its class) followed by its bytes.
PAYLOAD_GLOBALS = frozenset(
    {("numpy", "dtype"), ("numpy", "ndarray"), ("joblib.numpy_pickle", "NumpyArrayWrapper")}
)


def unpickle_payload(stream: BinaryIO, path: Path) -> Any:
    """What joblib.load(stream) gives for a model's payload, refusing anything else.

    Unpickling calls whatever functions a file names, so a foreign or crafted file
    given as a model ran its code before it could be refused (a reviewer's file made
    spamnb run a shell command, then said "not a spamnb model file").  This
    unpickler builds only PAYLOAD_GLOBALS, and no array of Python objects, which
    joblib reads with plain pickle, outside these checks.
    """
    import pickle

    from joblib.numpy_pickle import NumpyArrayWrapper, NumpyUnpickler

    class PayloadUnpickler(NumpyUnpickler):
        dispatch = NumpyUnpickler.dispatch.copy()

        def find_class(self, module: str, name: str) -> Any:
            if (module, name) not in PAYLOAD_GLOBALS:
                raise pickle.UnpicklingError(f"it names {module}.{name}, which no model holds")
            return super().find_class(module, name)

        def load_build(self) -> None:
            # Before BUILD the stack ends with the object and then its state.
            if len(self.stack) >= 2 and isinstance(self.stack[-2], NumpyArrayWrapper):
                state = self.stack[-1]
                dtype = state.get("dtype") if isinstance(state, dict) else None
                if not hasattr(dtype, "hasobject") or dtype.hasobject:
                    raise pickle.UnpicklingError("it holds an array of Python objects")
            NumpyUnpickler.load_build(self)

        dispatch[pickle.BUILD[0]] = load_build

    try:
        unpickler = PayloadUnpickler(str(path), stream, ensure_native_byte_order=True)
    except TypeError:  # a joblib before the byte-order argument, which it always did
        unpickler = PayloadUnpickler(str(path), stream)
    return unpickler.load()


def _verify_checksum(stream: BinaryIO, header: bytes, path: Path) -> None:
    if len(header) < HEADER_SIZE:
        raise NotAModelError(f"{path} is a damaged spamnb model file (truncated in its header)")
    length = int.from_bytes(header[len(FILE_MAGIC) : len(FILE_MAGIC) + 8], "little")
    expected = header[len(FILE_MAGIC) + 8 :]
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    if size != length:
        raise NotAModelError(
            f"{path} is a damaged spamnb model file ({size:,} bytes of payload, "
            f"the header says {length:,}: truncated or appended to)"
        )
    if digest.digest() != expected:
        raise NotAModelError(
            f"{path} is a damaged spamnb model file (its checksum does not match: "
            "changed on disk since it was written)"
        )


class _ChecksummingWriter:
    """Passes writes on while hashing them; joblib asks where it is to align arrays."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.digest = hashlib.sha256()
        self.length = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.length += memoryview(data).nbytes
        return self.stream.write(data)

    def tell(self) -> int:
        return self.stream.tell()

    def flush(self) -> None:
        self.stream.flush()


def dump_checksummed(payload: dict[str, Any], stream: BinaryIO) -> None:
    """Write the header and the payload; the header is filled in once the payload is out."""
    import joblib

    start = stream.tell()
    stream.write(bytes(HEADER_SIZE))
    writer = _ChecksummingWriter(stream)
    joblib.dump(payload, writer)
    end = stream.tell()
    stream.seek(start)
    stream.write(FILE_MAGIC + writer.length.to_bytes(8, "little") + writer.digest.digest())
    stream.seek(end)


def _make_folder(folder: Path) -> None:
    """Create the model's folder and any missing above it, private (0700) as the model
    is, and as the XDG specification asks of the folders it makes (~/.local/share and
    its spamnb/).  (``mkdir(parents=True)`` gives the parents the default mode.)"""
    missing = []
    while not folder.is_dir():
        if folder.exists():
            raise ModelFileError(f"cannot write a model inside {folder}: it is not a folder")
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir(mode=0o700, exist_ok=True)


@contextmanager
def training_lock(
    path: Path, *, trust: bool = False, on_wait: Callable[[], None] | None = None
) -> Iterator[None]:
    """Serialise writers of one model (readers never wait: they see whole files).

    Unless ``trust`` is set, refuse to write a model where others could replace it, as
    loading it would be refused.  ``on_wait()`` is called once if another writer holds
    the lock, before waiting for it: a wait without a word looked like a hang.

    Two trainers that each read, add and write would lose one's counts; an advisory
    lock on a companion file makes the second wait for the first.  The lock file is
    never deleted, as deleting it would let a third trainer lock a new inode.
    """
    import fcntl

    if not trust:
        # As given (its links count too), and before a folder is made where it would be.
        check_folders(path)
    path = Path(os.path.realpath(path))
    _refuse_other_than_a_file(path)
    _refuse_a_name_too_long(path)
    try:
        _make_folder(path.parent)
        if not trust:
            # Again: a folder someone made on the way meanwhile would be taken as ours.
            check_folders(path)
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ModelFileError(f"cannot lock model {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        _remove_stale_temporaries(path)
        yield
    finally:
        os.close(fd)


# The longest name a save writes beside the model: its table's temporary file,
# "." NAME ".table" "." and mkstemp's 8 characters ".tmp".
_LONGEST_COMPANION = len(".") + len(".table") + len(".") + 8 + len(".tmp")


def _refuse_a_name_too_long(path: Path) -> None:
    """Refuse a model whose name leaves no room for its table and temporary files,
    before any mail is read: the save failed only after the whole training run."""
    try:
        limit = os.pathconf(path.parent if path.parent.is_dir() else "/", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    size = len(os.fsencode(path.name))
    if size + _LONGEST_COMPANION > limit:
        raise ModelFileError(
            f"the model's file name is {size} bytes long, too long for the files saved "
            f"beside it; give one of at most {limit - _LONGEST_COMPANION} bytes"
        )


def _remove_stale_temporaries(path: Path) -> None:
    """Delete what a killed writer left: every writer holds the lock, so while we hold
    it any temporary file of this model (or its table) belongs to a dead process.

    Only names _write_temporary makes for this very model: a wider pattern took the
    live temporary file of a model whose name starts with this one's ("mail.old" for
    "mail"), held under another lock, and its writer failed."""
    own = re.compile(rf"\.{re.escape(path.name)}(?:\.table)?\.[a-z0-9_]{{8}}\.tmp")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return  # writing there will say what is wrong
    for name in names:
        if own.fullmatch(name):
            (path.parent / name).unlink(missing_ok=True)


def save(spam_filter: SpamFilter, path: Path) -> int:
    """Write the model atomically, then its pipe scoring table; returns the model's size.

    A symlinked model is updated where the link points, and an existing model keeps
    its permissions but others' write access, without which no command would load it
    again; a new one is private (0600), since its tokens come from your mail.  Only
    a regular file is replaced: a device or a FIFO at the path is refused.
    """
    path = Path(os.path.realpath(path))
    _refuse_other_than_a_file(path)
    try:
        _make_folder(path.parent)
    except OSError as exc:
        raise ModelFileError(f"cannot write model {path}: {exc.strerror or exc}") from None
    status = model_status(path)
    mode = status.st_mode & 0o755 if status is not None else None
    with interrupts_deferred():
        return _save_pair(spam_filter, path, mode)


def _not_regular(path: Path) -> str:
    return f"{path} is not a regular file (a device, a FIFO or a socket), so not a model"


def _refuse_other_than_a_file(path: Path, *, table: bool = False) -> None:
    """Refuse to write a model, or its scoring table (``table``), over anything but a
    regular file (as root, over /dev/null itself)."""
    try:
        status = path.stat()
    except OSError:
        return  # nothing there yet, or nothing we could see: the write will tell
    if table and not stat.S_ISREG(status.st_mode):
        # Named as the table's place: "not a model file" sent the user to the model,
        # which was fine (review 43).
        what = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file"
        raise ModelFileError(
            f"{path} is {what}, where the model's scoring table goes; move it away"
        )
    if stat.S_ISDIR(status.st_mode):
        raise ModelFileError(f"{path} is a directory, not a model file")
    if not stat.S_ISREG(status.st_mode):
        raise ModelFileError(_not_regular(path))


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block ends.

    The model and its scoring table are one unit to the user: an interrupt between
    the two renames would leave a new model with a stale table, which works but
    sends every pipe run to the slow road until the next save.  A handler of its own
    notes the interrupt and the old handler gets it when the pair is written, so it
    still stops the program then.  Blocking the signal (pthread_sigmask) did not
    hold it: the mask is the main thread's, and the kernel gave the signal to a
    thread that did not block it (numpy's OpenBLAS starts one per core at import),
    whose delivery still made Python raise KeyboardInterrupt in the main thread.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:
        # A handler installed outside Python cannot be put back by Python: leave it be.
        yield
        return
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    # Only after the block succeeded: a failed save's own error must not turn into
    # "interrupted".
    if caught:
        if previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)
        elif callable(previous):  # default_int_handler raises KeyboardInterrupt
            try:
                previous(signal.SIGINT, None)
            except KeyboardInterrupt:
                # Said with the interruption: the work was kept, which "interrupted"
                # alone denied.
                raise KeyboardInterrupt("after the model was saved") from None


def _save_pair(spam_filter: SpamFilter, path: Path, mode: int | None) -> int:
    """Write both files whole before either replaces the old one, so that a failed
    write (a full disk) leaves the old model and table as they were."""
    from .parallel import in_a_thread
    from .table import model_identity, table_arrays, table_prefix

    # Both files hold the tokens' hashes, which are worked out lazily and kept on the
    # vocabulary: worked out here first, so that the two sides below neither hash the
    # tokens twice nor both write them.
    vocabulary_hashes(spam_filter.vocabulary)
    table_file = Path(table_path(path))
    _refuse_other_than_a_file(table_file, table=True)  # before the model is replaced
    written: list[str] = []
    try:
        # The table is worked out in a thread while the model is written: both are
        # mostly numpy, hashing and writing, which run without the GIL.  Saving the
        # SpamAssassin training part's model this way made its training 3.48 s against
        # 3.53 (medians of ten alternating runs).  Only the table's header waits for
        # the model file, whose identity it records: a rename keeps the inode, size
        # and modification time, so the temporary file's are the model's.
        with in_a_thread(lambda: table_arrays(spam_filter), "spamnb-table") as worked_out:
            model_tmp = _write_temporary(
                path, lambda stream: dump_checksummed(to_payload(spam_filter), stream), mode
            )
            written.append(model_tmp)
            table = worked_out()
        model_stat = os.stat(model_tmp)  # the model's, once renamed
        table_tmp = None
        if table is not None:
            header, arrays = table
            header = {**header, "model": model_identity(model_stat)}
            pieces = (table_prefix(header, arrays), *(array.data for array in arrays))
            table_tmp = _write_temporary(table_file, lambda stream: stream.writelines(pieces), mode)
            written.append(table_tmp)
        os.replace(model_tmp, path)
        written.remove(model_tmp)
        try:
            if table_tmp is None:
                table_file.unlink(missing_ok=True)
            else:
                os.replace(table_tmp, table_file)
                written.remove(table_tmp)
        except OSError as exc:
            with suppress(OSError):
                _fsync_directory(path.parent)  # the model's rename, at least, made durable
            raise ModelFileError(
                f"saved {path}, but not its scoring table: {exc.strerror or exc} (the "
                "pipe filter reads the whole model until a save writes the table)"
            ) from None
        _fsync_directory(path.parent)
        return model_stat.st_size
    except OSError as exc:
        raise ModelFileError(f"cannot write model {path}: {exc.strerror or exc}") from None
    finally:
        for name in written:
            Path(name).unlink(missing_ok=True)


def _write_temporary(path: Path, write: Callable[[BinaryIO], object], mode: int | None) -> str:
    """The name of a new file beside ``path`` holding what ``write`` wrote, on disk."""
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ModelFileError(f"cannot write model {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as tmp:
            write(tmp)
            tmp.flush()
            if mode is not None:
                os.fchmod(tmp.fileno(), mode)
            os.fsync(tmp.fileno())
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise ModelFileError(f"cannot write model {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return tmp_name


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry itself reaches the disk.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
