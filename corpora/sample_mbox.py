"""Rebuild the mbox copies of the sample corpus from its Maildirs.

The Maildirs in ``corpora/sample/maildir/{ham,spam}`` are the canonical copy of the
sample corpus; this script writes ``ham.mbox`` and ``spam.mbox`` next to them so that
both mailbox formats can be exercised offline.

Usage::

    python corpora/sample_mbox.py [--maildir-root DIR] [OUT_DIR]

The output is deterministic: messages are written in order of their Maildir unique
name (the file name without the ``:2,`` info suffix), and each ``From_`` line is built
from the message's own envelope sender and ``Date`` header instead of the current time,
so running the script twice yields byte-identical files.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import email.utils
import mailbox
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MAILDIR_ROOT = HERE / "sample" / "maildir"
DEFAULT_OUT_DIR = HERE / "sample" / "mbox"
CLASSES = ("ham", "spam")

# Used when a message has no usable Date header; any fixed value keeps output stable.
_FALLBACK_DATE = datetime(1970, 1, 1, tzinfo=timezone.utc)
# compat32 is the most forgiving parser for broken headers, and we only need two values.
_HEADER_PARSER = email.parser.BytesHeaderParser(policy=email.policy.compat32)


def envelope_sender(raw: bytes) -> str:
    """Return the address for a ``From_`` line: Return-Path, else From, else MAILER-DAEMON."""
    headers = _HEADER_PARSER.parsebytes(raw)
    for name in ("Return-Path", "From"):
        value = headers.get(name)
        if value is None:
            continue
        _, addr = email.utils.parseaddr(str(value))
        # A From_ line is split on spaces by readers, and must be ASCII.
        addr = "".join(ch for ch in addr if 32 < ord(ch) < 127)
        if addr:
            return addr
    return "MAILER-DAEMON"


def envelope_date(raw: bytes) -> datetime:
    """Return the message's Date header as an aware UTC datetime (fixed fallback if bad)."""
    value = _HEADER_PARSER.parsebytes(raw).get("Date")
    if value is None:
        return _FALLBACK_DATE
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return _FALLBACK_DATE
    if when.tzinfo is None:
        # RFC 5322 "-0000" means UTC with unknown local zone; Python returns it naive.
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def from_line(raw: bytes) -> bytes:
    """Build the mbox ``From_`` line (without newline) for a raw message."""
    stamp = time.asctime(envelope_date(raw).timetuple())
    return f"From {envelope_sender(raw)} {stamp}".encode("ascii")


def maildir_messages(maildir: Path) -> list[tuple[str, bytes]]:
    """Return ``(unique_name, raw_bytes)`` for every message in a Maildir, sorted by name."""
    box = mailbox.Maildir(maildir, factory=None, create=False)
    try:
        return [(key, box.get_bytes(key)) for key in sorted(box.keys())]
    finally:
        box.close()


def write_mbox(messages: list[bytes], path: Path) -> None:
    """Write ``messages`` to a fresh mbox file at ``path``, replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # mailbox.mbox appends to an existing file, so always build into a new one.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        box = mailbox.mbox(tmp, create=True)
        try:
            for raw in messages:
                # Passing bytes that start with "From " makes mailbox use our From_ line
                # verbatim instead of stamping the current time.
                box.add(from_line(raw) + b"\n" + raw)
            box.flush()
        finally:
            box.close()
        tmp.chmod(0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def build(
    maildir_root: Path = DEFAULT_MAILDIR_ROOT, out_dir: Path = DEFAULT_OUT_DIR
) -> dict[str, tuple[Path, int]]:
    """Write ``<class>.mbox`` into ``out_dir`` for each class Maildir; return paths by class."""
    written: dict[str, tuple[Path, int]] = {}
    for cls in CLASSES:
        messages = [raw for _, raw in maildir_messages(maildir_root / cls)]
        target = out_dir / f"{cls}.mbox"
        write_mbox(messages, target)
        written[cls] = (target, len(messages))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out_dir",
        nargs="?",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help=f"where to write ham.mbox and spam.mbox (default: {DEFAULT_OUT_DIR})",
    )
    parser.add_argument(
        "--maildir-root",
        type=Path,
        default=DEFAULT_MAILDIR_ROOT,
        help="directory holding the ham/ and spam/ Maildirs",
    )
    args = parser.parse_args(argv)
    try:
        written = build(args.maildir_root, args.out_dir)
    except (OSError, mailbox.Error) as exc:
        print(f"sample_mbox.py: error: {exc}", file=sys.stderr)
        return 1
    for target, count in written.values():
        print(f"wrote {target} ({count} messages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
