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


def check_trusted(
    status: os.stat_result, path: str | os.PathLike[str], *, folders: bool = True
) -> None:
    """Refuse a file another user owns or others may write, or (unless ``folders`` is
    False: they were just checked for a file beside it) one in a folder where someone
    else could put another file in its place (see store.load)."""
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
    if folders:
        check_folders(path)


def check_folders(path: str | os.PathLike[str]) -> None:
    """Every folder in which a name on the way to the file is looked up, through each
    symbolic link at every hop, must belong to this user or root, and be writable by
    nobody else unless sticky (as /tmp is): the owner of such a folder, or anyone who
    may write it, can rename another file over the model, another folder over one on
    the way, or point a link elsewhere.  Group write counts as others', but for the
    user's own private group (see _private_group_only)."""
    folders, links = _looked_up_in(os.fspath(path))
    for link in links:
        try:
            owner = os.lstat(link).st_uid
        except OSError:
            continue
        if owner not in (0, os.getuid()):
            # (Linux's fs.protected_symlinks refuses to follow one in a sticky folder.)
            raise ModelFileError(
                f"{path} is reached through the link {link}, which belongs to another "
                "user, who could point it elsewhere (use --trust-model if you trust them)"
            )
    for folder in folders:
        try:
            status = os.stat(folder)
        except OSError:
            continue  # opening the file reports what is wrong with its path
        if status.st_uid not in (0, os.getuid()):
            raise ModelFileError(
                f"{path} is reached through {folder}, which belongs to another user, who "
                "could put another model in its place (use --trust-model if you trust them)"
            )
        others_write = status.st_mode & 0o002 or (
            status.st_mode & 0o020 and not _private_group_only(folder, status)
        )
        if others_write and not status.st_mode & 0o1000:
            raise ModelFileError(
                f"{path} is reached through {folder}, which others may write, so they could "
                f"put another model in its place; chmod go-w it (or use --trust-model)"
            )


def _private_group_only(folder: str, status: os.stat_result) -> bool:
    """Whether the folder's group is the user's private one, and no access control list
    lets anyone else in: named after the user, the user's primary group, no other
    member listed.  Debian, Ubuntu and Fedora give every user such a group and a umask
    of 002, so every folder a user makes is group-writable; refusing those stopped
    every procmail delivery after an upgrade.  A group can hold users its member list
    does not show (those whose primary group it is, named users of an ACL, which show
    in the group bits as its mask), so the name and the ACL are checked too; Debian's
    OpenSSH trusts such a group for ~/.ssh on the same grounds."""
    import grp
    import pwd

    try:
        group = grp.getgrgid(status.st_gid)
        user = pwd.getpwuid(os.getuid())
    except KeyError:
        return False
    if group.gr_name != user.pw_name or user.pw_gid != status.st_gid:
        return False
    if any(member != user.pw_name for member in group.gr_mem):
        return False
    try:
        os.getxattr(folder, "system.posix_acl_access")
    except OSError:
        return True  # no ACL (ENODATA), or none possible here
    return False


def _looked_up_in(path: str) -> tuple[list[str], list[str]]:
    """The folders in which the names of ``path`` are looked up, in order, as the
    kernel resolves it, and the links it follows: from / (or the working folder) down,
    each link's target in turn, ".." taken after the links before it (os.path.abspath
    would take it first, and "ww/link/../x" would then name another folder than the
    one opened)."""
    if not path.startswith("/"):
        path = os.getcwd() + "/" + path
    parts = path.split("/")
    parts.reverse()  # a stack: the next name on top
    current = "/"
    folders: list[str] = []
    links: list[str] = []
    hops = 0
    while parts:
        name = parts.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        if current not in folders:
            folders.append(current)
        candidate = os.path.join(current, name)
        try:
            target = os.readlink(candidate)
        except OSError:  # not a link, or not there: the open will say
            current = candidate
            continue
        links.append(candidate)
        hops += 1
        if hops > 40:  # the kernel's own limit
            break
        if target.startswith("/"):
            current = "/"
        parts.extend(reversed(target.split("/")))
    return folders, links
