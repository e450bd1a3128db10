"""The model file: one versioned joblib file, written atomically.

The file holds plain data only (strings, numbers, numpy arrays): the counts are the
state, so a newer spamnb can read an older file and rebuild everything else.  A
write goes to a temporary file in the same directory which then replaces the old
file in one rename, so a reader sees either the old model or the new one, never a
half-written file, even if the writer dies.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from . import __version__
from .counts import Vocabulary
from .filter import SpamFilter
from .model import NaiveBayes
from .tokens import TokenizerSettings

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "ModelFileError", "default_model_path", "load", "save"]

FORMAT_NAME = "spamnb-model"
# Bump when a reader of the previous version could misread the new file.
FORMAT_VERSION = 1


class ModelFileError(Exception):
    """A model file that cannot be read or written; str(exc) is one line."""


def default_model_path(environ: dict[str, str] | None = None) -> Path:
    """$SPAMNB_MODEL, else $XDG_DATA_HOME/spamnb/model.joblib (~/.local/share by default)."""
    env = os.environ if environ is None else environ
    if env.get("SPAMNB_MODEL"):
        return Path(env["SPAMNB_MODEL"]).expanduser()
    data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "spamnb" / "model.joblib"


def to_payload(spam_filter: SpamFilter) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "spamnb_version": __version__,
        "created": spam_filter.created,
        "updated": spam_filter.updated,
        "tokenizer": spam_filter.settings.to_dict(),
        "vocabulary": spam_filter.vocabulary.tokens,
        "model": spam_filter.model.to_state(),
    }


def from_payload(payload: object, path: Path) -> SpamFilter:
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path} is not a spamnb model file")
    version = payload.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model format {version}, newer than this spamnb "
            f"({__version__}, format {FORMAT_VERSION}) reads; upgrade spamnb"
        )
    try:
        model = NaiveBayes.from_state(payload["model"])
        vocabulary = Vocabulary(payload["vocabulary"])
        if len(vocabulary) != model.n_features:
            raise ValueError("vocabulary and counts disagree")
        return SpamFilter(
            model=model,
            vocabulary=vocabulary,
            settings=TokenizerSettings.from_dict(payload["tokenizer"]),
            created=payload["created"],
            updated=payload["updated"],
            written_by=payload["spamnb_version"],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path} is a damaged spamnb model file ({exc})") from None


def load(path: Path) -> SpamFilter:
    import joblib

    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"no model at {path}; train one with 'spamnb train -m {path} ...'")
    if path.is_dir():
        raise ModelFileError(f"{path} is a directory, not a model file")
    try:
        payload = joblib.load(path)
    except OSError as exc:
        raise ModelFileError(f"cannot read model {path}: {exc.strerror or exc}") from None
    except Exception:  # noqa: BLE001 - truncated or foreign files fail in many ways inside pickle
        raise ModelFileError(f"{path} is not a spamnb model file, or it is damaged") from None
    return from_payload(payload, path)


def save(spam_filter: SpamFilter, path: Path) -> int:
    """Write the model atomically; returns its size in bytes."""
    import joblib

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ModelFileError(f"cannot write model {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as tmp:
            joblib.dump(to_payload(spam_filter), tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise ModelFileError(f"cannot write model {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path.stat().st_size
