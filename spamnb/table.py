"""The pipe filter's scoring table: a model's weights in a file read without numpy.

procmail starts a new process for every message, so a filter's speed is its start-up
time.  Importing numpy, scipy and joblib and unpickling a model costs several times
more than reading and parsing the message, so every save also writes this table
beside the model: per token (by a 64-bit hash, sorted) the weight it adds to each
class's log-likelihood, plus each class's constant and the calibration.  Scoring
from it is exactly the model's scoring, done with bisect and a few additions.

The table records the identity (inode, size, modification time) of the model file
it was written from; a table that does not match the model beside it is not used,
nor is one whose CRC-32 does not match its contents (a flipped byte would silently
change a weight).  Checking the CRC reads the whole table: about 5 ms for the 15 MB
table of the SpamAssassin corpus, against the 90 ms a pipe run takes.
"""

from __future__ import annotations

import binascii
import json
import math
import mmap
import os
import sys
from bisect import bisect_left
from collections import Counter

from .paths import check_trusted

try:
    # hashlib's own import loads OpenSSL, a few milliseconds of every pipe run.
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - other Pythons
    from hashlib import blake2b

# Without importing typing, which costs the pipe filter's start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .filter import SpamFilter

__all__ = ["ScoringTable", "load_table", "table_arrays", "token_hash", "token_hashes"]

# Version 2 added the CRC-32; a version-1 table is not read, and the next save replaces it.
MAGIC = b"SPAMNB-TABLE\x02\n"
_PREFIX_SIZE = len(MAGIC) + 8 + 8


def token_hash(token: str) -> int:
    data = token.encode("utf-8", "surrogatepass")
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")


def token_hashes(tokens: Sequence[str]) -> Any:
    """:func:`token_hash` of many tokens as a little-endian uint64 array."""
    import numpy as np

    # One join and one array conversion instead of an int per token: a third of the
    # time for a 600,000-token model.
    digests = b"".join(
        [
            blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            for token in tokens
        ]
    )
    return np.frombuffer(digests, dtype="<u8")


def model_identity(status: os.stat_result) -> list[int]:
    """What ties a table to the very model file it was written from."""
    return [status.st_ino, status.st_size, status.st_mtime_ns]


def table_arrays(
    spam_filter: SpamFilter, model_status: os.stat_result | None = None
) -> tuple[dict[str, Any], bytes] | None:
    """The table's header and body for a model, or None when it cannot have one.

    Only models with a spam class and finite weights get a table (an unsmoothed
    model's certainties are left to the full scorer).
    """
    import numpy as np

    model = spam_filter.model
    positive = spam_filter.positive_class()
    if positive is None or len(model.classes) < 2:
        return None
    active = model.active_features()
    prior = model.class_log_prior()
    if model.event_model != "bernoulli":
        weights, constant = model.feature_log_prob(), prior
    else:
        weights, absent_sum, certain = model._bernoulli_parts()
        if certain.any():
            return None
        constant = prior + absent_sum
    columns = np.flatnonzero(active)
    weights = weights[:, columns].T.astype("<f8")
    if not (np.isfinite(weights).all() and np.isfinite(constant).all()):
        return None
    tokens = spam_filter.vocabulary.tokens
    # In slices, so that the digests' bytes objects (about 50 bytes a token) never
    # exist for the whole vocabulary at once.
    step = 1 << 16
    hashes = np.concatenate(
        [
            token_hashes([tokens[c] for c in columns[i : i + step]])
            for i in range(0, len(columns), step)
        ]
        or [np.zeros(0, "<u8")]
    )
    # Sort by hash; the rare colliding tokens share one entry with summed weights.
    unique, inverse = np.unique(hashes, return_inverse=True)
    summed = np.zeros((len(unique), len(model.classes)), "<f8")
    np.add.at(summed, inverse, weights)
    header = {
        "classes": model.classes,
        "positive": model.classes.index(positive),
        "by_presence": model.by_presence,
        "constant": [float(c) for c in constant],
        "calibration": spam_filter.calibration.to_dict(),
        "tokenizer": spam_filter.settings.to_dict(),
        "entries": len(unique),
        "model": model_identity(model_status) if model_status is not None else None,
    }
    return header, b"".join((unique.astype("<u8").data, summed.data))


def encode_table(header: dict[str, Any], body: bytes) -> bytes:
    return table_prefix(header, body) + body


def table_prefix(header: dict[str, Any], body: bytes) -> bytes:
    """What precedes the arrays in a table file (written apart, to copy no array):
    magic, the header's length, the CRC-32 of header and arrays, the JSON header."""
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-(_PREFIX_SIZE + len(text)) % 8)  # keep the arrays 8-byte aligned
    crc = binascii.crc32(body, binascii.crc32(text))
    return MAGIC + len(text).to_bytes(8, "little") + crc.to_bytes(8, "little") + text


class ScoringTable:
    def __init__(self, data: bytes | mmap.mmap) -> None:
        if data[: len(MAGIC)] != MAGIC or sys.byteorder != "little":
            raise ValueError("not a scoring table for this machine")
        length = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
        crc = int.from_bytes(data[len(MAGIC) + 8 : _PREFIX_SIZE], "little")
        if binascii.crc32(memoryview(data)[_PREFIX_SIZE:]) != crc:
            raise ValueError("damaged scoring table")
        start = _PREFIX_SIZE
        self.header = json.loads(data[start : start + length])
        n, k = self.header["entries"], len(self.header["classes"])
        body = memoryview(data)[start + length :]
        if len(body) != n * 8 * (1 + k):
            raise ValueError("truncated scoring table")
        self.hashes = body[: n * 8].cast("Q")
        self.weights = body[n * 8 :].cast("d")

    def evidence(self, tokens: Sequence[str]) -> tuple[float, int]:
        """Spam log-odds against the rest and the evidence length, as the model gives them."""
        k = len(self.header["classes"])
        joint = list(self.header["constant"])
        hashes, weights, n = self.hashes, self.weights, len(self.hashes)
        length = 0
        for token, count in Counter(tokens).items():
            h = token_hash(token)
            i = bisect_left(hashes, h)
            if i < n and hashes[i] == h:
                length += count
                times = 1 if self.header["by_presence"] else count
                for c in range(k):
                    joint[c] += times * weights[i * k + c]
        positive = joint.pop(self.header["positive"])
        top = max(joint)
        if math.isinf(top):
            return positive - top, length
        return positive - (top + math.log(sum(math.exp(j - top) for j in joint))), length


def load_table(
    model_path: str | os.PathLike[str], table_file: str, *, trust: bool
) -> ScoringTable | None:
    """The model's table if it is there, trusted, and was written from this model file.

    The model's inode, size and modification time must be those the table recorded
    when it was written: a model restored from a backup, a table copied from another
    model, or a crash between writing the two all send the reader back to the model.

    The model file is held to the trust rule too, although the table is plain data:
    a model the full commands refuse must not be used through its table either.
    """
    try:
        model_status = os.stat(model_path)
    except OSError:
        return None  # the full loader says what is wrong with the path
    if not trust:
        check_trusted(model_status, model_path)
    try:
        with open(table_file, "rb") as stream:
            if not trust:
                check_trusted(os.fstat(stream.fileno()), table_file)
            # Mapped, not read: a message looks up a few hundred of the table's entries,
            # and reading all of a large model's table (15 MB with word pairs on the
            # SpamAssassin corpus) would cost the pipe filter more than the lookups.
            table = ScoringTable(mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return table if table.header.get("model") == model_identity(model_status) else None
