"""The pipe filter's scoring table: a model's weights in a file read without numpy.

procmail starts a new process for every message, so a filter's speed is its start-up
time.  Importing numpy, scipy and joblib and unpickling a model costs several times
more than reading and parsing the message, so every save also writes this table
beside the model: per token (by a 64-bit hash, sorted) the weight it adds to each
class's log-likelihood, plus each class's constant and the calibration.  Scoring
from it is exactly the model's scoring, done with bisect and a few additions.

The table records the identity (inode, size, modification time) of the model file
it was written from; a table that does not match the model beside it is not used.
Its entries are checked by CRC-32 too, since a flipped byte would silently change a
weight, but in blocks of 64 entries, each checked the first time a message looks a
token up in it: a message reads a few hundred of the table's entries, and checking
all of it (15 MB for the SpamAssassin corpus's model) cost the pipe about 7 ms a
message, where the blocks it reads take a tenth of that.  The small index that
finds a token's block, and the header, are checked whole when the table is opened.
"""

from __future__ import annotations

import binascii
import marshal
import math
import os
import stat
import sys
from bisect import bisect_left, bisect_right
from collections import Counter

from .paths import ModelFileError, check_trusted

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

    from .counts import Vocabulary
    from .filter import SpamFilter

__all__ = [
    "TABLE_STATES",
    "HashedBatch",
    "ScoringTable",
    "TableScorer",
    "hash_batch",
    "load_table",
    "open_table",
    "table_arrays",
    "token_hash",
    "token_hashes",
    "vocabulary_hashes",
]

# Version 2 added a CRC-32 of the whole table, version 3 one per block, version 4 a
# marshal header instead of JSON; an older table is not read, and the next save
# replaces it.
MAGIC = b"SPAMNB-TABLE\x04\n"
# A table whose tokenizer has a setting version 4's readers do not know (cjk_pairs) is
# marked version 5: an older spamnb's pipe, which would tokenize without the setting,
# takes it for another version and reads the model, which it refuses (store.py).
MAGIC_5 = b"SPAMNB-TABLE\x05\n"
_MAGICS = (MAGIC, MAGIC_5)
_PREFIX_SIZE = len(MAGIC) + 8 + 8
# Entries per checked block: 1.5 kB of hashes and weights for a two-class model.
BLOCK = 64


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


def vocabulary_hashes(vocabulary: Vocabulary) -> Any:
    """:func:`token_hashes` of every token of ``vocabulary``, in column order.

    Only the tokens added since the last call are hashed: a model file records the
    hashes, so that learning one message into a model of 500,000 tokens does not hash
    them all again to write its table (0.4 s of the 1.75 s it took).
    """
    import numpy as np

    known = vocabulary.hashes
    tokens = vocabulary.tokens
    if known is None or len(known) > len(tokens):
        known = np.zeros(0, dtype="<u8")
    if len(known) < len(tokens):
        # In slices, so that the digests' bytes objects (about 50 bytes a token) never
        # exist for the whole vocabulary at once.
        step = 1 << 16
        added = range(len(known), len(tokens), step)
        known = np.concatenate([known, *(token_hashes(tokens[i : i + step]) for i in added)])
        vocabulary.hashes = known
    return known


def checked_vocabulary_hashes(tokens: Sequence[str], hashes: object) -> Any:
    """A model file's recorded token hashes, if they are what :func:`vocabulary_hashes`
    would give for ``tokens`` (the right type and length, and right at both ends);
    else None, and the next save hashes the tokens again."""
    import numpy as np

    if not isinstance(hashes, np.ndarray) or hashes.dtype != np.dtype("<u8"):
        return None
    if hashes.shape != (len(tokens),):
        return None
    if len(tokens) and not np.array_equal(token_hashes([tokens[0], tokens[-1]]), hashes[[0, -1]]):
        return None
    return hashes


class HashedBatch:
    """A batch of token lists as numbers: the :func:`token_hashes` of its distinct
    tokens, which of them each token occurrence is (``ids``, message after message),
    and each message's number of tokens (``lengths``).  Arrays only, so a worker
    process sends it back cheaply, and scoring it needs only the table."""

    __slots__ = ("hashes", "ids", "lengths")

    def __init__(self, hashes: Any, ids: Any, lengths: Any) -> None:
        self.hashes, self.ids, self.lengths = hashes, ids, lengths


def hash_batch(token_lists: Sequence[Sequence[str]]) -> HashedBatch:
    """The token lists of a batch of messages as a :class:`HashedBatch`.

    Each distinct token is hashed once: a batch of 500 messages repeats most of its
    words, and hashing every occurrence took three times as long as numbering them
    and hashing the distinct ones (the SpamAssassin test part: 1.25 million tokens,
    350,000 distinct within their batches).
    """
    from collections import defaultdict
    from itertools import chain

    import numpy as np

    from .counts import number_tokens

    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    numbers: defaultdict[str, int] = defaultdict()
    ids = number_tokens(numbers, chain.from_iterable(token_lists))
    return HashedBatch(token_hashes(list(numbers)), ids, lengths)


def model_identity(status: os.stat_result) -> list[int]:
    """What ties a table to the very model file it was written from."""
    return [status.st_ino, status.st_size, status.st_mtime_ns]


def table_arrays(spam_filter: SpamFilter) -> tuple[dict[str, Any], tuple[Any, ...]] | None:
    """The table's header and the arrays of its body, in order, for a model, or None
    when it cannot have one.

    Only models with a spam class and finite weights get a table (an unsmoothed
    model's certainties are left to the full scorer).  The arrays are written one
    after another, never joined: at make bench-scale's 100,000 messages the body is
    30 MB, and this runs at the end of training, near its memory peak.
    """
    import numpy as np

    model = spam_filter.model
    positive = spam_filter.positive_class()
    if positive is None or spam_filter.scoring_problem() is not None:
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
    mistake_weight = spam_filter.mistake_weight()
    if mistake_weight:
        # Both are sums over the message's tokens, so their weighted mean is one
        # weight per token and class.
        # In place: feature_log_prob's array is this call's own.
        weights *= 1 - mistake_weight
        spam_filter.mistakes.add_log_prob(weights, active, mistake_weight)
        # The constant is the table's share of nothing, and a class without mail stays
        # at -inf, as in scoring.
        from .mistakes import mixed_with_mistakes

        constant = mixed_with_mistakes(constant, np.zeros_like(constant), mistake_weight)
    hashes = vocabulary_hashes(spam_filter.vocabulary)[: weights.shape[1]]
    if not active.all():  # else the arrays stand as they are, uncopied
        columns = np.flatnonzero(active)
        weights, hashes = weights[:, columns], hashes[columns]
    # A class without mail (a move can leave a third one empty) has a prior of 0: its
    # constant is -inf, and the scores of the rest are as the model gives them (the
    # scorers below take -inf in, as the model's own do).  Without a table, every pipe
    # run loaded the whole model, seven times slower (review 28).
    without_mail = model.class_counts <= 0
    finite = np.isfinite(constant) | (without_mail & (constant == -np.inf))
    if not (np.isfinite(weights).all() and finite.all()):
        return None
    # Sorted by hash, a row of weights per entry; the rare tokens whose hashes
    # collide share one entry, their weights summed in their columns' order.  Only
    # equal hashes need a stable sort for that, so the quicker unstable one goes
    # first: 18 ms against 46 for the 500,000 hashes of the SpamAssassin training
    # part's model.
    order = np.argsort(hashes)
    ordered = hashes[order]
    distinct = _run_starts(ordered)
    collide = not distinct.all()
    if collide:
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
    hashes = ordered.astype("<u8", copy=False)
    weights = np.ascontiguousarray(weights.T[order], dtype="<f8")
    del order, ordered
    if collide:
        starts = np.flatnonzero(distinct)
        weights, hashes = np.add.reduceat(weights, starts, axis=0), hashes[starts]
    fences, crcs = block_index(hashes, weights)
    header = {
        "classes": model.classes,
        "positive": model.classes.index(positive),
        "by_presence": model.by_presence,
        "constant": [float(c) for c in constant],
        "calibration": spam_filter.calibration.to_dict(),
        "tokenizer": spam_filter.settings.to_dict(),
        "entries": len(hashes),
        "block": BLOCK,
        # The identity of the model file it goes with, once that is written.
        "model": None,
    }
    return header, (fences, crcs, hashes, weights)


def _run_starts(ordered: Any) -> Any:
    """A mask of the values of sorted ``ordered`` that differ from the one before."""
    import numpy as np

    starts = np.ones(len(ordered), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    return starts


def block_index(hashes: Any, weights: Any) -> tuple[Any, Any]:
    """The first hash of every block of sorted ``hashes``, and each block's CRC-32 of
    its hashes' and then its weights' bytes."""
    import numpy as np

    starts = range(0, len(hashes), BLOCK)
    fences = np.array([hashes[i] for i in starts], dtype="<u8")
    crcs = np.array(
        [
            binascii.crc32(weights[i : i + BLOCK].data, binascii.crc32(hashes[i : i + BLOCK].data))
            for i in starts
        ],
        dtype="<u8",
    )
    return fences, crcs


def encode_table(header: dict[str, Any], arrays: tuple[Any, ...]) -> bytes:
    """The whole table file, in memory (for a model whose table on disk is not usable)."""
    return table_prefix(header, arrays) + b"".join(array.data for array in arrays)


def table_prefix(header: dict[str, Any], arrays: tuple[Any, ...]) -> bytes:
    """What precedes the arrays in a table file (written apart, to copy no array):
    magic, the header's length, its CRC-32, the header.  The header holds the CRC-32
    of the block index that follows it (the first two arrays)."""
    fences, crcs = arrays[:2]
    header = {**header, "index_crc": binascii.crc32(crcs.data, binascii.crc32(fences.data))}
    # marshal, not JSON: importing json cost the pipe 8 to 12 ms a message (its
    # scanner's patterns), and marshal is built in.  It is read only after its CRC
    # matched, from a file trusted as the model is (see load_table).
    text = marshal.dumps(header, 4)
    text += b" " * (-(_PREFIX_SIZE + len(text)) % 8)  # keep the arrays 8-byte aligned
    crc = binascii.crc32(text)
    from .tokens import TokenizerSettings

    settings = TokenizerSettings.from_dict(header.get("tokenizer", {}))
    magic = MAGIC_5 if settings.unknown_to_old_readers() else MAGIC
    return magic + len(text).to_bytes(8, "little") + crc.to_bytes(8, "little") + text


def _blocks(entries: int) -> int:
    return -(-entries // BLOCK)


class _FileSource:
    """A table file read piece by piece with pread, never mapped: a mapped file cut
    short in place (a backup copied over it, ``truncate``) kills the reader with
    SIGBUS when it touches a page past the new end, and the pipe filter would lose
    the message.  Read, a short file is a ValueError like any damage."""

    def __init__(self, descriptor: int, size: int) -> None:
        self.descriptor = descriptor
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self, offset: int, size: int) -> bytes:
        try:
            data = os.pread(self.descriptor, size, offset)
        except OSError as exc:  # a disk error is damage too: the model still scores
            raise ValueError(f"unreadable scoring table ({exc.strerror or exc})") from None
        if len(data) != size:
            raise ValueError("truncated scoring table")
        return data

    def close(self) -> None:
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1

    __del__ = close


class _BytesSource:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read(self, offset: int, size: int) -> bytes:
        data = self.data[offset : offset + size]
        if len(data) != size:
            raise ValueError("truncated scoring table")
        return data

    def close(self) -> None:
        pass


class ScoringTable:
    def __init__(self, data: bytes | _FileSource) -> None:
        source = _BytesSource(data) if isinstance(data, bytes | bytearray) else data
        self._source = source
        prefix = source.read(0, _PREFIX_SIZE) if len(source) >= _PREFIX_SIZE else b""
        if prefix[: len(MAGIC)] not in _MAGICS or sys.byteorder != "little":
            raise ValueError("not a scoring table for this machine")
        length = int.from_bytes(prefix[len(MAGIC) : len(MAGIC) + 8], "little")
        crc = int.from_bytes(prefix[len(MAGIC) + 8 :], "little")
        start = _PREFIX_SIZE
        if start + length > len(source):
            raise ValueError("damaged scoring table")
        text = source.read(start, length)
        if binascii.crc32(text) != crc:
            raise ValueError("damaged scoring table")
        try:
            self.header = marshal.loads(text)
        except (EOFError, TypeError, ValueError):
            raise ValueError("damaged scoring table") from None
        if not isinstance(self.header, dict):
            raise ValueError("damaged scoring table")
        n, k = self.header["entries"], len(self.header["classes"])
        if self.header["block"] != BLOCK:
            raise ValueError("scoring table with another block size")
        blocks = _blocks(n)
        self._body = start + length + 16 * blocks
        if len(source) != self._body + n * 8 * (1 + k):
            raise ValueError("truncated scoring table")
        index = source.read(start + length, 16 * blocks)
        if binascii.crc32(index) != self.header["index_crc"]:
            raise ValueError("damaged scoring table")
        self.fences = memoryview(index[: 8 * blocks]).cast("Q")
        self.crcs = memoryview(index[8 * blocks :]).cast("Q")
        self.entries = n
        # Each checked block's hashes and weights, as a message reads them.
        self._checked: dict[int, tuple[memoryview, memoryview]] = {}
        self._regions: tuple[bytes, bytes] | None = None

    def _whole(self) -> tuple[bytes, bytes]:
        """All hashes and all weights, read at once (a batch looks up most blocks)."""
        if self._regions is None:
            n, k = self.entries, len(self.header["classes"])
            self._regions = (
                self._source.read(self._body, n * 8),
                self._source.read(self._body + n * 8, n * 8 * k),
            )
        return self._regions

    @property
    def _hash_bytes(self) -> bytes:
        return self._whole()[0]

    @property
    def _weight_bytes(self) -> bytes:
        return self._whole()[1]

    def _block(self, block: int) -> tuple[memoryview, memoryview]:
        """A block's hashes and weights; ValueError if they are not what was written."""
        found = self._checked.get(block)
        if found is not None:
            return found
        k = len(self.header["classes"])
        first = block * BLOCK
        count = min(BLOCK, self.entries - first)
        if self._regions is not None:
            # Views, not slices: a checked table would otherwise hold every byte twice.
            hashes = memoryview(self._regions[0])[first * 8 : (first + count) * 8]
            weights = memoryview(self._regions[1])[first * 8 * k : (first + count) * 8 * k]
        else:
            hashes = self._source.read(self._body + first * 8, count * 8)
            weights = self._source.read(self._body + (self.entries + first * k) * 8, count * 8 * k)
        if binascii.crc32(weights, binascii.crc32(hashes)) != self.crcs[block]:
            raise ValueError("damaged scoring table")
        found = self._checked[block] = (memoryview(hashes).cast("Q"), memoryview(weights).cast("d"))
        return found

    def check_all(self) -> None:
        """Check every block, as looking up every token would."""
        self._whole()
        for block in range(len(self.fences)):
            self._block(block)

    def joint_log_likelihoods(self, batch: HashedBatch) -> tuple[Any, Any]:
        """Each message's joint log-likelihood per class (messages by classes, the
        model's ``SpamFilter.joint_log_likelihood``) and its evidence length (token
        occurrences the model scores), for a whole batch at once.

        The arithmetic of :meth:`evidence`, vectorised: a token's entry is found by
        binary search in the sorted hashes, and each class's sum is one bincount.
        Raises ValueError when a block it reads is damaged.
        """
        import numpy as np

        k, n = len(self.header["classes"]), len(batch.lengths)
        hashes = np.frombuffer(self._hash_bytes, dtype="<u8")
        weights = np.frombuffer(self._weight_bytes, dtype="<f8").reshape(-1, k)
        # The entry of each distinct token, or -1 for a token the table lacks.
        entry = np.full(len(batch.hashes), -1, dtype=np.int64)
        if len(hashes) and len(batch.hashes):
            # Searched in ascending order, numpy's binary search starts each from where
            # the last ended: a third of the time (a batch's 88,000 hashes in a table
            # of 500,000: 6 ms, the argsort included, against 18).
            order = np.argsort(batch.hashes)
            at = np.empty(len(batch.hashes), dtype=np.intp)
            at[order] = np.searchsorted(hashes, batch.hashes[order])
            np.minimum(at, len(hashes) - 1, out=at)
            found = hashes[at] == batch.hashes
            entry[found] = at[found]
            if len(self._checked) < len(self.fences):
                # The blocks read, marked in a mask: np.unique hashes instead (numpy
                # 2.4), slower than the whole lookup.
                read = np.bincount(at[found] // BLOCK, minlength=len(self.fences))
                for block in np.flatnonzero(read).tolist():
                    if block not in self._checked:
                        self._block(block)
        rows = np.repeat(np.arange(n), batch.lengths)
        entries = entry[batch.ids]
        known = entries >= 0
        rows, entries = rows[known], entries[known]
        lengths = np.bincount(rows, minlength=n).astype(np.float64)
        if self.header["by_presence"]:
            # A token counts once per message: one (message, entry) pair each.  Sorted
            # and compared with their neighbours, where numpy 2.4's np.unique took 28
            # times as long (184 ms against 6.6 ms for a batch's 350,000 pairs).
            pairs = np.sort(rows * len(hashes) + entries)
            pairs = pairs[_run_starts(pairs)]
            rows, entries = pairs // len(hashes), pairs % len(hashes)
        jll = np.empty((n, k))
        for c, constant in enumerate(self.header["constant"]):
            jll[:, c] = constant + np.bincount(rows, weights=weights[entries, c], minlength=n)
        return jll, lengths

    def evidence(self, tokens: Sequence[str]) -> tuple[float, int]:
        """Spam log-odds against the rest and the evidence length, as the model gives them.

        Raises ValueError when a block it reads is damaged."""
        k = len(self.header["classes"])
        joint = list(self.header["constant"])
        fences = self.fences
        by_presence = self.header["by_presence"]
        length = 0
        for token, count in Counter(tokens).items():
            h = token_hash(token)
            block = bisect_right(fences, h) - 1
            if block < 0:
                continue  # below the table's smallest hash
            hashes, weights = self._block(block)
            i = bisect_left(hashes, h)
            if i < len(hashes) and hashes[i] == h:
                length += count
                times = 1 if by_presence else count
                for c in range(k):
                    joint[c] += times * weights[i * k + c]
        positive = joint.pop(self.header["positive"])
        top = max(joint)
        if math.isinf(top):
            return positive - top, length
        return positive - (top + math.log(sum(math.exp(j - top) for j in joint))), length


class TableScorer:
    """What labelling mail needs of a model, read from its scoring table alone: the
    classes, the tokenizer's settings, the calibration, and the scores of a batch.

    ``spamnb classify`` scores through it when the table beside the model is current,
    as the pipe filter does: loading the model itself (its vocabulary of half a
    million tokens made into a dict, and scipy imported) took 0.7 s of the 2.3 s that
    classifying the 1,814 SpamAssassin test messages took.
    """

    def __init__(self, table: ScoringTable) -> None:
        from .calibration import Calibration
        from .tokens import TokenizerSettings

        header = table.header
        self.table = table
        self.classes: list[str] = list(header["classes"])
        self.settings = TokenizerSettings.from_dict(header["tokenizer"])
        self.calibration = Calibration.from_dict(header["calibration"])
        self._positive_column: int = header["positive"]

    def positive_class(self) -> str:
        return self.classes[self._positive_column]

    def predict_labels(self, proba: Any) -> list[str]:
        """The most probable class of each row; ties never go to spam."""
        from .scores import predicted_labels

        return predicted_labels(proba, self.classes, self.positive_class())

    def score_hashed(self, batch: HashedBatch) -> tuple[Any, Any, Any]:
        """Class probabilities, spam log-odds and evidence lengths, as
        ``SpamFilter.score_matrix`` gives them for the same messages."""
        import numpy as np

        from .scores import log_odds_against_rest, log_posteriors

        jll, lengths = self.table.joint_log_likelihoods(batch)
        proba = np.exp(log_posteriors(jll))
        return proba, log_odds_against_rest(jll, self._positive_column), lengths


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
    table, state = open_table(model_path, table_file, trust=trust)
    return table if state == "current" else None


# What a reader finds beside a model (see open_table).
TABLE_STATES = ("current", "missing", "other_version", "stale", "damaged", "untrusted")


def open_table(
    model_path: str | os.PathLike[str], table_file: str, *, trust: bool
) -> tuple[ScoringTable | None, str]:
    """The table beside a model and its state: "current"; "missing"; "other_version"
    (written by a spamnb with another table format); "stale" (written from another
    model file: an older one, a copy, a restored backup); "damaged" (its header,
    block index or length are wrong; a damaged block shows only when it is read, or
    with :meth:`ScoringTable.check_all`); "untrusted" (without ``trust``, a table
    another user owns or others may write, beside a model that passes: its weights
    could have been set by them).  The table is returned when it could be opened.
    A model that fails the trust rule raises ModelFileError, as loading it would."""
    try:
        model_status = os.stat(model_path)
    except OSError:
        return None, "missing"  # the full loader says what is wrong with the path
    if not trust:
        check_trusted(model_status, model_path)
    try:
        # Without blocking: opening a FIFO for reading waits for a writer, forever.
        descriptor = os.open(table_file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, "missing"
    except OSError:
        return None, "damaged"
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("not a regular file")
        os.set_blocking(descriptor, True)
        if not trust:
            try:
                check_trusted(status, table_file, folders=False)  # the model's, above
            except ModelFileError:
                os.close(descriptor)
                return None, "untrusted"
        magic = os.pread(descriptor, len(MAGIC), 0)
    except (OSError, ValueError):
        os.close(descriptor)
        return None, "damaged"
    # Read as a message needs it, a block at a time (see _FileSource): a message looks
    # up a few hundred of the table's entries, and reading all of a large model's
    # table (15 MB with word pairs on the SpamAssassin corpus) would cost the pipe
    # filter more than the lookups.  From here the source owns the descriptor.
    source = _FileSource(descriptor, status.st_size)
    if magic not in _MAGICS:
        source.close()
        same_kind = magic[:-2] == MAGIC[:-2] and magic[-1:] == MAGIC[-1:]
        return None, "other_version" if same_kind else "damaged"
    try:
        table = ScoringTable(source)
    except (ValueError, KeyError, TypeError):
        source.close()
        return None, "damaged"
    if table.header.get("model") != model_identity(model_status):
        return table, "stale"
    return table, "current"
