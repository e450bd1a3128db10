"""Where model files live and whether to trust them: standard library only.

Kept apart from the model file's reader (which needs numpy and joblib) because the
pipe filter's fast path resolves and checks model paths too, and must start fast.
"""

from __future__ import annotations

import os

# Without importing typing or pathlib, which cost the pipe filter's start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "ModelFileError",
    "check_trusted",
    "default_model_file",
    "default_model_path",
    "table_path",
]


class ModelFileError(Exception):
    """A model file that cannot be read or written; str(exc) is one line."""


def default_model_file(environ: dict[str, str] | None = None) -> str:
    """$SPAMNB_MODEL, else $XDG_DATA_HOME/spamnb/model.joblib (~/.local/share by default)."""
    env = os.environ if environ is None else environ
    if env.get("SPAMNB_MODEL"):
        return os.path.expanduser(env["SPAMNB_MODEL"])
    data_home = os.path.expanduser(env.get("XDG_DATA_HOME") or "")
    if not os.path.isabs(data_home):
        # The XDG specification: a relative path is invalid and to be ignored (it
        # would point wherever the command happens to run).
        data_home = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "spamnb", "model.joblib")


def default_model_path(environ: dict[str, str] | None = None) -> Path:
    from pathlib import Path

    return Path(default_model_file(environ))


def table_path(model_path: str | os.PathLike[str]) -> str:
    """The pipe filter's scoring table, written beside the model at every save."""
    return os.fspath(model_path) + ".table"


def check_trusted(status: os.stat_result, path: str | os.PathLike[str]) -> None:
    """Refuse a file another user owns or others may write (see store.load)."""
    if status.st_uid != os.getuid():
        raise ModelFileError(
            f"{path} belongs to another user; loading it would run their code "
            "(use --trust-model if you trust it)"
        )
    if status.st_mode & 0o022:
        raise ModelFileError(
            f"{path} is writable by others, who could make spamnb run their code; "
            f"chmod go-w it (or use --trust-model)"
        )
