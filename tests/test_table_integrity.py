"""The scoring table's checks of itself and of the model it was written from, each
held by a test (review 12's mutation audit found these unpinned): any damage to its
prefix, header or block index, another block size, bytes added, a model replaced by
a copy of the same size and time, and recorded token hashes that are wrong."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import run

from spamnb.paths import table_path
from spamnb.pipe import score_message
from spamnb.store import dump_checksummed, load, save, to_payload
from spamnb.table import (
    _PREFIX_SIZE,
    MAGIC,
    ScoringTable,
    load_table,
    model_identity,
    open_table,
    table_arrays,
    table_prefix,
)

MESSAGE = b"Subject: cheap pills\n\nbuy cheap pills now, lunch at noon\n"


@pytest.fixture
def model(tmp_path, sample_maildir) -> Path:
    path = tmp_path / "model.joblib"
    result = run(
        "train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert result.exit_code == 0, result.output
    return path


def checked_part(data: bytes) -> int:
    """The bytes of a table file before its blocks: prefix, header and block index."""
    header_length = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
    table = ScoringTable(data)
    return _PREFIX_SIZE + header_length + 16 * len(table.fences)


def test_any_damage_before_the_blocks_makes_the_table_unused(model):
    table_file = Path(table_path(model))
    intact = table_file.read_bytes()
    expected = score_message(MESSAGE, model, trust=False)
    end = checked_part(intact)
    assert end > _PREFIX_SIZE + 100
    for position in range(end):
        damaged = bytearray(intact)
        damaged[position] ^= 0x10
        table_file.write_bytes(bytes(damaged))
        assert load_table(model, table_file, trust=False) is None, position
    # The model itself still scores, as the table would have.
    assert score_message(MESSAGE, model, trust=False) == expected


def test_another_block_size_or_bytes_added_are_damage(model):
    table_file = Path(table_path(model))
    intact = table_file.read_bytes()
    table_file.write_bytes(intact + bytes(8))
    assert open_table(model, table_file, trust=False)[1] == "damaged"
    header, arrays = table_arrays(load(model))
    header = {**header, "model": model_identity(os.stat(model)), "block": 32}
    table_file.write_bytes(table_prefix(header, arrays) + b"".join(a.data for a in arrays))
    assert open_table(model, table_file, trust=False)[1] == "damaged"


def test_a_table_without_a_field_falls_back_to_the_model(model):
    expected = score_message(MESSAGE, model, trust=False)
    header, arrays = table_arrays(load(model))
    del header["calibration"]
    header["model"] = model_identity(os.stat(model))
    table_file = Path(table_path(model))
    table_file.write_bytes(table_prefix(header, arrays) + b"".join(a.data for a in arrays))
    assert open_table(model, table_file, trust=False)[1] == "current"
    assert score_message(MESSAGE, model, trust=False) == expected


def test_a_model_replaced_by_a_copy_of_the_same_size_and_time_is_stale(model, tmp_path):
    copy = tmp_path / "copy.joblib"
    shutil.copy2(model, copy)
    status = os.stat(model)
    os.utime(copy, ns=(status.st_atime_ns, status.st_mtime_ns))
    os.replace(copy, model)
    assert os.stat(model).st_size == status.st_size
    assert os.stat(model).st_mtime_ns == status.st_mtime_ns
    assert open_table(model, table_path(model), trust=False)[1] == "stale"


def test_wrong_recorded_token_hashes_are_not_trusted(model, tmp_path):
    spam_filter = load(model)
    payload = to_payload(spam_filter)
    right = payload["token_hashes"].copy()
    payload["token_hashes"] = right[::-1].copy()
    wrong = tmp_path / "wrong.joblib"
    with open(wrong, "wb") as stream:
        dump_checksummed(payload, stream)
    reloaded = load(wrong)
    assert reloaded.vocabulary.hashes is None
    # Saved again, the table is built from hashes worked out anew.
    save(reloaded, wrong)
    assert (load(wrong).vocabulary.hashes == right).all()
