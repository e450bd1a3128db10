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
    "check_folders",
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
    """Refuse a file another user owns or others may write, or one in a folder where
    someone else could put another file in its place (see store.load)."""
    if status.st_uid != os.getuid():
        raise ModelFileError(
            f"{path} belongs to another user, who decides what it calls spam "
            "(use --trust-model if you trust them)"
        )
    if status.st_mode & 0o022:
        raise ModelFileError(
            f"{path} is writable by others, who could change what it calls spam; "
            f"chmod go-w it (or use --trust-model)"
        )
    check_folders(path)


def check_folders(path: str | os.PathLike[str]) -> None:
    """Each folder above the file, as named and as its links resolve, must belong to
    this user or root, and be writable by nobody else unless sticky (as /tmp is): the
    owner of a folder, or anyone who may write it, can rename another file over the
    model, or another folder over the one it is in."""
    seen = set()
    for start in (os.path.abspath(path), os.path.realpath(path)):
        folder = os.path.dirname(start)
        while folder not in seen:
            seen.add(folder)
            try:
                status = os.stat(folder)
            except OSError:
                return  # opening the file reports what is wrong with its path
            if status.st_uid not in (0, os.getuid()):
                raise ModelFileError(
                    f"{path} is inside {folder}, which belongs to another user, who could "
                    "put another model in its place (use --trust-model if you trust them)"
                )
            if _others_may_write_folder(status):
                raise ModelFileError(
                    f"{path} is inside {folder}, which others may write, so they could put "
                    f"another model in its place; chmod go-w it (or use --trust-model)"
                )
            folder = os.path.dirname(folder)


def _others_may_write_folder(status: os.stat_result) -> bool:
    if status.st_mode & 0o1000:
        return False  # sticky: only an entry's owner may rename or delete it
    if status.st_mode & 0o002:
        return True
    if not status.st_mode & 0o020:
        return False
    # Group write is harmless for a user's private group, which Debian and Ubuntu give
    # every user (umask 002 then makes each folder mkdir creates group-writable); it is
    # the rule Debian's OpenSSH applies to ~/.ssh.  The model file itself is written
    # 0600 by spamnb, so its own rule above needs no such exception.
    import grp
    import pwd

    try:
        group = grp.getgrgid(status.st_gid)
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return True
    return status.st_gid != os.getgid() or any(member != user for member in group.gr_mem)
