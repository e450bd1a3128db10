"""The model file: round trip, atomic writes, and clear errors for bad files."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import joblib
import numpy as np
import pytest

from spamnb import __version__
from spamnb.filter import SpamFilter
from spamnb.store import (
    FORMAT_VERSION,
    HEADER_SIZE,
    ModelFileError,
    default_model_path,
    dump_checksummed,
    load,
    save,
    to_payload,
)
from spamnb.tokens import TokenizerSettings

SPAM_MAIL = [
    b"Subject: cheap pills\n\nbuy cheap pills online now",
    b"Subject: you won\n\nclaim your prize money now",
]
HAM_MAIL = [
    b"Subject: meeting\n\nagenda for the project meeting on monday",
    b"Subject: lunch\n\nlunch with the team on friday",
]


@pytest.fixture
def trained() -> SpamFilter:
    spam_filter = SpamFilter(settings=TokenizerSettings(max_word_length=15))
    spam_filter.train(SPAM_MAIL + HAM_MAIL, ["spam"] * 2 + ["ham"] * 2)
    return spam_filter


def test_round_trip_keeps_counts_vocabulary_and_settings(tmp_path, trained):
    path = tmp_path / "model.joblib"
    size = save(trained, path)
    assert size == path.stat().st_size > 0
    loaded = load(path)
    assert loaded.vocabulary.tokens == trained.vocabulary.tokens
    assert loaded.classes == trained.classes
    assert np.array_equal(loaded.model.token_counts, trained.model.token_counts)
    assert np.array_equal(loaded.model.doc_counts, trained.model.doc_counts)
    assert loaded.settings == trained.settings
    assert loaded.written_by == __version__
    tokens = loaded.tokenize([b"Subject: cheap\n\nclaim cheap pills"])
    assert np.allclose(loaded.score_tokens(tokens)[0], trained.score_tokens(tokens)[0])


def test_save_creates_directories_and_leaves_no_temporary_files(tmp_path, trained):
    path = tmp_path / "a" / "b" / "model.joblib"
    save(trained, path)
    save(trained, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.joblib", "model.joblib.table"]


def test_a_save_is_on_disk_when_it_returns(tmp_path, trained, monkeypatch):
    # Each file is fsynced before its rename, and the folder after both renames: else
    # a power cut could leave the old names, or none, though the save had returned.
    import os

    from spamnb import store

    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        store.os,
        "fsync",
        lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real_fsync(fd),
    )
    path = tmp_path / "m.joblib"
    save(trained, path)
    folder = str(tmp_path)
    assert synced.count(folder) >= 1
    assert synced.index(folder) > max(i for i, name in enumerate(synced) if name != folder)
    assert len([name for name in synced if name != folder]) == 2  # the model and its table


def test_failed_write_keeps_the_old_model(tmp_path, trained, monkeypatch):
    path = tmp_path / "model.joblib"
    save(trained, path)
    before = path.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(joblib, "dump", full_disk)
    with pytest.raises(ModelFileError, match="No space left"):
        save(trained, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.joblib", "model.joblib.table"]


def test_the_table_worked_out_beside_the_model_ties_to_it_and_passes_on_errors(
    tmp_path, trained, monkeypatch
):
    import threading

    from spamnb.table import load_table, model_identity

    path = tmp_path / "model.joblib"
    save(trained, path)
    # Worked out in a thread while the model was written, the table still names the
    # model file as written.
    table = load_table(path, path.with_name("model.joblib.table"), trust=False)
    assert table.header["model"] == model_identity(path.stat())
    model_written = threading.Event()

    def slow_and_broken(spam_filter):
        # Still working out when the model's write ends, and failing after it.
        model_written.wait(10)
        time.sleep(0.2)
        raise RuntimeError("no table")

    real_dump = joblib.dump

    def dump(*args, **kwargs):
        real_dump(*args, **kwargs)
        model_written.set()

    monkeypatch.setattr("spamnb.table.table_arrays", slow_and_broken)
    monkeypatch.setattr(joblib, "dump", dump)
    with pytest.raises(RuntimeError, match="no table"):
        save(trained, path)
    assert not any(t.name == "spamnb-table" for t in threading.enumerate())
    # A failed model write waits for the thread too, and its own error is the one told.
    model_written.clear()

    def failing_dump(*args, **kwargs):
        model_written.set()
        raise OSError(5, "EIO")

    monkeypatch.setattr(joblib, "dump", failing_dump)
    with pytest.raises(ModelFileError, match="EIO"):
        save(trained, path)
    assert not any(t.name == "spamnb-table" for t in threading.enumerate())


def test_missing_model_says_how_to_make_one(tmp_path):
    with pytest.raises(ModelFileError, match="spamnb train"):
        load(tmp_path / "nothing.joblib")


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(ModelFileError, match="directory"):
        load(tmp_path)


@pytest.mark.parametrize(
    "content",
    [b"", b"not a model at all\n", b"\x80\x04\x95garbage", b"\x00" * 100],
    ids=["empty", "text", "broken-pickle", "zeros"],
)
def test_foreign_bytes_are_refused_in_one_line(tmp_path, content):
    path = tmp_path / "model.joblib"
    path.write_bytes(content)
    with pytest.raises(ModelFileError) as caught:
        load(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_truncated_model_is_refused(tmp_path, trained):
    path = tmp_path / "model.joblib"
    save(trained, path)
    data = path.read_bytes()
    for cut in (1, len(data) // 3, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(ModelFileError):
            load(path)


def test_other_pickles_are_refused(tmp_path):
    path = tmp_path / "model.joblib"
    joblib.dump({"some": "other program's data"}, path)
    with pytest.raises(ModelFileError, match="not a spamnb model"):
        load(path)
    path.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(ModelFileError, match="not a spamnb model"):
        load(path)


def test_newer_format_is_refused_with_upgrade_advice(tmp_path, trained):
    path = tmp_path / "model.joblib"
    payload = to_payload(trained)
    payload["format_version"] = FORMAT_VERSION + 1
    joblib.dump(payload, path)
    with pytest.raises(ModelFileError, match="upgrade spamnb"):
        load(path)


def test_a_spamnb_that_knows_mail_by_the_older_digest_refuses_files_written_now(
    tmp_path, trained, monkeypatch
):
    # Format 4 readers digest mail as given, not with its mbox escapes read back: they
    # would take most mail a model holds now for new and count it again.
    path = tmp_path / "model.joblib"
    save(trained, path)
    monkeypatch.setattr("spamnb.store.FORMAT_VERSION", 4)
    with pytest.raises(ModelFileError, match="newer than this spamnb"):
        load(path)


def test_a_model_that_knows_crlf_mail_by_its_digest_now_is_format_7(tmp_path, trained, monkeypatch):
    # Formats 5 and 6 kept a body's CRLFs in its digest: their readers would take such
    # mail for new.  Only a model that may hold some is written in the format they refuse.
    path = tmp_path / "model.joblib"
    save(trained, path)
    assert load(path).read_format == 5 and not load(path).crlf_digests
    trained.crlf_digests = True
    save(trained, path)
    assert load(path).read_format == 7 and load(path).crlf_digests
    monkeypatch.setattr("spamnb.store.FORMAT_VERSION", 6)
    with pytest.raises(ModelFileError, match="newer than this spamnb"):
        load(path)
    monkeypatch.undo()
    # The record in a file of an older format is damage, not a model to trust.
    payload = to_payload(trained)
    payload["format_version"] = 6
    with open(path, "wb") as stream:
        dump_checksummed(payload, stream)
    with pytest.raises(ModelFileError, match=r"damaged.*CRLF digests"):
        load(path)


def test_damaged_payload_is_refused(tmp_path, trained):
    path = tmp_path / "model.joblib"
    payload = to_payload(trained)
    payload["vocabulary"]["count"] -= 1
    joblib.dump(payload, path)
    with pytest.raises(ModelFileError, match="damaged"):
        load(path)


def test_running_out_of_memory_while_loading_is_not_called_damage(tmp_path, trained, monkeypatch):
    # Under ulimit -v the pipe's road through the whole model said the sound model was
    # "not a spamnb model file, or it is damaged" (review 9).
    path = tmp_path / "model.joblib"
    save(trained, path)

    def no_memory(stream, where):
        raise MemoryError

    monkeypatch.setattr("spamnb.store.unpickle_payload", no_memory)
    with pytest.raises(ModelFileError, match=r"^not enough memory to load the model") as caught:
        load(path)
    assert "damaged" not in str(caught.value)


def test_counts_short_of_the_vocabulary_are_saved_and_read_as_zeros(tmp_path, trained):
    # Known mail read again with new tokens grows the vocabulary and counts nothing.
    counted = len(trained.vocabulary)
    trained.vocabulary.add("token-of-known-mail")
    assert trained.model.n_features == counted
    path = tmp_path / "model.joblib"
    save(trained, path)
    loaded = load(path)
    assert loaded.model.token_counts.shape == (2, counted + 1)
    assert not loaded.model.token_counts[:, counted:].any()
    assert not loaded.model.doc_counts[:, counted:].any()
    # A file written short of its vocabulary (as spamnb did before it widened them)
    # reads the same.
    payload = to_payload(trained)
    for name in ("token_counts", "doc_counts"):
        payload["model"][name] = payload["model"][name][:, :counted]
    with open(path, "wb") as stream:
        dump_checksummed(payload, stream)
    again = load(path)
    assert np.array_equal(again.model.token_counts, loaded.model.token_counts)
    assert np.array_equal(again.model.doc_counts, loaded.model.doc_counts)


def test_default_model_path(tmp_path):
    assert default_model_path({"SPAMNB_MODEL": "/x/m.joblib"}).as_posix() == "/x/m.joblib"
    xdg = default_model_path({"XDG_DATA_HOME": str(tmp_path)})
    assert xdg == tmp_path / "spamnb" / "model.joblib"
    assert default_model_path({}).parts[-4:] == (".local", "share", "spamnb", "model.joblib")
    # A relative XDG_DATA_HOME is invalid by the XDG specification, and ignored.
    assert default_model_path({"XDG_DATA_HOME": "rel"}) == default_model_path({})


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p["model"].update(classes=["spam"]),
        lambda p: p["model"].update(doc_counts=p["model"]["doc_counts"][:, :-1]),
        lambda p: p["model"].update(token_counts=-p["model"]["token_counts"]),
        lambda p: p["model"].update(alpha=float("nan")),
        lambda p: p["model"].update(event_model="gaussian"),
        lambda p: p["tokenizer"].update(min_word_length="x"),
        lambda p: p.update(format_version="1"),
        lambda p: p.update(format_version=0),
        lambda p: p.pop("model"),
        lambda p: p["model"].update(class_counts=[2**70, 1]),
    ],
    ids=[
        "classes",
        "doc-shape",
        "negative",
        "nan-alpha",
        "event-model",
        "setting",
        "version-str",
        "version-0",
        "missing",
        "huge-count",
    ],
)
def test_inconsistent_payloads_are_refused_at_load(tmp_path, trained, damage):
    path = tmp_path / "model.joblib"
    payload = to_payload(trained)
    damage(payload)
    # Written with a good checksum, as a crafted file would be: dumped plainly, every
    # case was refused for its missing checksum header before its own fault was seen.
    with open(path, "wb") as stream:
        dump_checksummed(payload, stream)
    with pytest.raises(ModelFileError, match="damaged") as caught:
        load(path)
    assert "\n" not in str(caught.value)
    assert "checksum" not in str(caught.value)


def test_save_through_a_symlink_updates_the_target(tmp_path, trained):
    target = tmp_path / "real" / "model.joblib"
    save(trained, target)
    link = tmp_path / "link.joblib"
    link.symlink_to(target)
    target.chmod(0o640)
    trained.train([b"Subject: more\n\nmore spam words"], ["spam"])
    save(trained, link)
    assert link.is_symlink()
    assert load(target).model.class_counts.sum() == 5
    assert target.stat().st_mode & 0o777 == 0o640


def test_new_models_are_private(tmp_path, trained):
    path = tmp_path / "model.joblib"
    save(trained, path)
    assert path.stat().st_mode & 0o777 == 0o600


def test_calibration_round_trip(tmp_path, trained):
    from spamnb.calibration import Calibration

    trained.calibration = Calibration(0.03, -0.2, 0.25, 0.93, 100)
    path = tmp_path / "model.joblib"
    save(trained, path)
    assert load(path).calibration == trained.calibration


def test_version_1_files_still_load(tmp_path, trained):
    """Before format 2 the vocabulary and the trained digests were plain lists and dicts."""
    path = tmp_path / "model.joblib"
    payload = to_payload(trained)
    payload["format_version"] = 1
    payload["vocabulary"] = list(trained.vocabulary.tokens)
    payload["trained"] = dict(trained.trained)
    joblib.dump(payload, path)
    loaded = load(path)
    assert loaded.vocabulary.tokens == trained.vocabulary.tokens
    assert loaded.vocabulary.index == trained.vocabulary.index
    assert loaded.trained == trained.trained
    assert loaded.read_format == 1


def test_a_current_payload_without_its_checksum_header_is_damaged(tmp_path, trained):
    # Loaded unchecked as a format 1 or 2 file: the SHA-256 protects nothing then.
    path = tmp_path / "model.joblib"
    save(trained, path)
    path.write_bytes(path.read_bytes()[HEADER_SIZE:])
    with pytest.raises(ModelFileError, match="without its checksum header"):
        load(path)


def test_packed_strings_survive_any_text():
    from spamnb.store import pack_strings, unpack_strings

    for strings in (
        [],
        [""],
        ["a", "", "b"],
        ["line\nbreak", "nul\x00", "plain"],
        ["line\nbreak", "nul\x00", "unit\x1fsep"],
        ["surrogate \udcff", "é"],
    ):
        assert unpack_strings(pack_strings(strings), "test") == strings


@pytest.mark.parametrize("slice_size", [1, 2, 3, 1 << 16])
def test_strings_packed_in_slices_are_the_bytes_of_the_whole_join(monkeypatch, slice_size):
    import random

    from spamnb.store import pack_strings, unpack_strings

    monkeypatch.setattr("spamnb.store._PACK_SLICE", slice_size)
    rng = random.Random(slice_size)
    alphabet = ["a", "é", "\n", "\x00", "\x1f", "\ud800", "\U0001f600"]
    for _ in range(500):
        strings = [
            "".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(rng.randint(0, 9))
        ]
        packed = pack_strings(strings)
        assert unpack_strings(packed, "test") == strings
        if "utf8" in packed:
            whole = packed["separator"].join(strings).encode("utf-8", "surrogatepass")
            assert packed["utf8"].tobytes() == whole
        else:
            assert all(any(sep in s for s in strings) for sep in ("\n", "\x00", "\x1f"))
    # Slices longer than those before them grow the array, which stays its own.
    strings = ["é" * (i // 3) for i in range(60)]
    packed = pack_strings(strings)["utf8"]
    assert packed.tobytes() == "\n".join(strings).encode() and packed.flags.owndata


def test_repeated_tokens_are_refused(tmp_path, trained):
    from spamnb.store import pack_strings

    path = tmp_path / "model.joblib"
    payload = to_payload(trained)
    tokens = list(trained.vocabulary.tokens)
    tokens[-1] = tokens[0]
    payload["vocabulary"] = pack_strings(tokens)
    joblib.dump(payload, path)
    with pytest.raises(ModelFileError, match="damaged"):
        load(path)


def test_a_saved_model_records_its_token_hashes_and_the_next_save_hashes_only_new_ones(
    tmp_path, trained, monkeypatch
):
    import spamnb.table
    from spamnb.paths import table_path
    from spamnb.table import load_table, token_hashes

    path = tmp_path / "model.joblib"
    save(trained, path)
    loaded = load(path)
    np.testing.assert_array_equal(loaded.vocabulary.hashes, token_hashes(trained.vocabulary.tokens))
    hashed = []
    real = spamnb.table.token_hashes

    def counted(tokens):
        hashed.extend(tokens)
        return real(tokens)

    monkeypatch.setattr(spamnb.table, "token_hashes", counted)
    before = len(loaded.vocabulary)
    loaded.train([b"Subject: fresh words\n\nzebra quokka narwhal"], ["spam"])
    save(loaded, path)
    assert hashed and hashed == loaded.vocabulary.tokens[before:]
    # The table written from the recorded hashes is the one hashing everything writes.
    monkeypatch.undo()

    def table_entries():
        table = load_table(path, table_path(path), trust=False)
        return bytes(table._hash_bytes), bytes(table._weight_bytes)

    incremental = table_entries()
    again = load(path)
    again.vocabulary.hashes = None
    save(again, path)
    assert table_entries() == incremental
    assert len(incremental[0]) == 8 * len(again.vocabulary)


@pytest.mark.parametrize(
    "recorded",
    [
        None,  # a model written before they were recorded
        lambda h: h[:-1],
        lambda h: h.astype(np.int64),
        lambda h: np.concatenate([[h[0] ^ 1], h[1:]]),
        lambda h: np.concatenate([h[:-1], [h[-1] ^ 1]]),
        lambda h: h.tolist(),
    ],
    ids=["absent", "short", "signed", "first-wrong", "last-wrong", "list"],
)
def test_token_hashes_that_are_not_right_are_hashed_again(tmp_path, trained, recorded):
    from spamnb.table import token_hashes

    path = tmp_path / "model.joblib"
    payload = to_payload(trained)
    if recorded is None:
        del payload["token_hashes"]
    else:
        payload["token_hashes"] = recorded(payload["token_hashes"])
    with open(path, "wb") as stream:
        dump_checksummed(payload, stream)
    loaded = load(path)
    assert loaded.vocabulary.hashes is None
    save(loaded, path)
    np.testing.assert_array_equal(
        load(path).vocabulary.hashes, token_hashes(loaded.vocabulary.tokens)
    )


class _Touches:
    """Unpickled, it creates its marker file: what a crafted model's code could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("where", ["bare", "checksummed", "in-an-object-array"])
def test_a_model_file_cannot_make_spamnb_run_code(tmp_path, trained, where):
    marker = tmp_path / "ran"
    path = tmp_path / "model.joblib"
    if where == "in-an-object-array":
        # joblib reads an array of objects with plain pickle, past the unpickler's checks.
        payload = to_payload(trained)
        payload["model"]["class_counts"] = np.array([_Touches(marker), 1], dtype=object)
    else:
        payload = {"format": "spamnb-model", "model": _Touches(marker)}
    if where == "bare":
        joblib.dump(payload, path)
    else:
        with open(path, "wb") as stream:
            dump_checksummed(payload, stream)
    with pytest.raises(ModelFileError, match="not a spamnb model file"):
        load(path)
    assert not marker.exists()
    # The same file unpickled by joblib itself runs the code: the test's file is live.
    with open(path, "rb") as stream:
        if where != "bare":
            stream.seek(HEADER_SIZE)
        joblib.load(stream)
    assert marker.exists()
