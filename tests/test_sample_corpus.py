"""Checks on the bundled sample corpus in corpora/sample/.

The corpus feeds the offline demo and the fast tokenizer tests, so these tests pin down
two things: that the Maildir and mbox copies are well-formed and identical, and that
the awkward real-world cases the corpus promises (encodings, charsets, broken headers,
attachments...) are really in it and have not been lost in an edit.
"""

from __future__ import annotations

import codecs
import email
import email.message
import email.policy
import importlib.util
import mailbox
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
SAMPLE = CORPORA / "sample"
MAILDIR_ROOT = SAMPLE / "maildir"
MBOX_DIR = SAMPLE / "mbox"
SCRIPT = CORPORA / "sample_mbox.py"
CLASSES = ("ham", "spam")


@dataclass(frozen=True)
class Sample:
    cls: str
    name: str
    raw: bytes
    msg: email.message.EmailMessage


def _load_script():
    spec = importlib.util.spec_from_file_location("sample_mbox", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _maildir_items(cls: str) -> list[tuple[str, bytes]]:
    box = mailbox.Maildir(MAILDIR_ROOT / cls, factory=None, create=False)
    try:
        return [(key, box.get_bytes(key)) for key in sorted(box.keys())]
    finally:
        box.close()


def _mbox_items(cls: str) -> list[tuple[str, bytes]]:
    box = mailbox.mbox(MBOX_DIR / f"{cls}.mbox", create=False)
    try:
        # Keys are assigned in file order, which is the order the script wrote them.
        return [(box.get_message(key).get_from(), box.get_bytes(key)) for key in sorted(box.keys())]
    finally:
        box.close()


def _parse(raw: bytes) -> email.message.EmailMessage:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    return msg


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return [
        Sample(cls, name, raw, _parse(raw)) for cls in CLASSES for name, raw in _maildir_items(cls)
    ]


def _leaf_parts(msg: email.message.Message) -> list[email.message.Message]:
    return [part for part in msg.walk() if not part.is_multipart()]


def _text_parts(msg: email.message.Message) -> list[email.message.Message]:
    return [p for p in _leaf_parts(msg) if p.get_content_maintype() == "text"]


def _decoded(part: email.message.Message) -> str:
    """Best-effort text of a part; tolerant of the corpus's deliberately bad charsets."""
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset() or "us-ascii"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:
        return payload.decode("latin-1")


def _all_text(sample: Sample) -> str:
    return "\n".join(_decoded(p) for p in _text_parts(sample.msg))


def _header_block(raw: bytes) -> bytes:
    end = re.search(rb"\r?\n\r?\n", raw)
    return raw[: end.start()] if end else raw


# --- structure -------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_maildir_layout_and_size(cls: str) -> None:
    root = MAILDIR_ROOT / cls
    for sub in ("cur", "new", "tmp"):
        assert (root / sub).is_dir(), f"{cls}/{sub} missing"
    cur = [p for p in (root / "cur").iterdir() if not p.name.startswith(".")]
    new = [p for p in (root / "new").iterdir() if not p.name.startswith(".")]
    # Readers must look in both cur/ and new/, so both must hold messages.
    assert cur and new
    assert all(":2," in p.name for p in cur)
    assert not any(":" in p.name for p in new)
    assert 25 <= len(_maildir_items(cls)) <= 40


@pytest.mark.parametrize("cls", CLASSES)
def test_mbox_parses_with_same_count(cls: str) -> None:
    assert len(_mbox_items(cls)) == len(_maildir_items(cls))


@pytest.mark.parametrize("cls", CLASSES)
def test_mbox_holds_same_messages_as_maildir(cls: str) -> None:
    for (name, md_raw), (_, mb_raw) in zip(_maildir_items(cls), _mbox_items(cls), strict=True):
        # mbox (mboxo) escapes body lines starting with "From "; that is the only change.
        assert mb_raw == md_raw.replace(b"\nFrom ", b"\n>From "), name
        md_msg, mb_msg = _parse(md_raw), _parse(mb_raw)
        assert str(mb_msg["subject"]) == str(md_msg["subject"]), name
        assert str(mb_msg["message-id"]) == str(md_msg["message-id"]), name
        md_payload = [p.get_payload(decode=True) for p in _leaf_parts(md_msg)]
        mb_payload = [
            re.sub(rb"(?m)^>From ", b"From ", p.get_payload(decode=True))
            for p in _leaf_parts(mb_msg)
        ]
        assert mb_payload == md_payload, name


@pytest.mark.parametrize("cls", CLASSES)
def test_mbox_from_lines_come_from_the_messages(cls: str) -> None:
    script = _load_script()
    for (_, raw), (from_, _) in zip(_maildir_items(cls), _mbox_items(cls), strict=True):
        sender, _, stamp = from_.partition(" ")
        assert sender == script.envelope_sender(raw)
        assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d 202[4-6]", stamp), from_


def test_mbox_rebuild_is_byte_identical(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    for cls in CLASSES:
        rebuilt = (tmp_path / f"{cls}.mbox").read_bytes()
        assert rebuilt == (MBOX_DIR / f"{cls}.mbox").read_bytes(), f"{cls}.mbox is stale"


def test_every_message_parses(samples: list[Sample]) -> None:
    for s in samples:
        for header in ("From", "Date", "Message-ID", "Subject", "Received"):
            assert s.msg[header] is not None, f"{s.cls}/{s.name} lacks {header}"
        assert email.utils.parsedate_to_datetime(str(s.msg["date"])).year in (2024, 2025, 2026)


def test_message_ids_are_unique(samples: list[Sample]) -> None:
    ids = [str(s.msg["message-id"]) for s in samples]
    assert len(ids) == len(set(ids))


# --- the tricky cases the corpus promises -----------------------------------------------


def _is_multipart_alternative(s: Sample) -> bool:
    return any(p.get_content_type() == "multipart/alternative" for p in s.msg.walk())


def _is_html_only(s: Sample) -> bool:
    return s.msg.get_content_type() == "text/html"


def _html_has_links_style_script_entities(s: Sample) -> bool:
    html = _all_text(s) if _is_html_only(s) else ""
    return all(x in html for x in ('<a href="http', "&amp;", "&nbsp;")) and (
        "<style" in html or "<script" in html
    )


def _html_has_hidden_text(s: Sample) -> bool:
    html = _all_text(s) if _is_html_only(s) else ""
    return bool(re.search(r"display:\s*none|color\s*[:=]\s*\"?#fff(fff)?\b|font-size:\s*1px", html))


def _has_cte(s: Sample, cte: str) -> bool:
    return any(p.get("content-transfer-encoding", "").lower() == cte for p in _text_parts(s.msg))


def _has_qp_soft_breaks_and_8bit_escapes(s: Sample) -> bool:
    return _has_cte(s, "quoted-printable") and b"=\n" in s.raw and b"=E9" in s.raw


def _has_8bit_latin(s: Sample) -> bool:
    for p in _text_parts(s.msg):
        if p.get_content_charset() in ("iso-8859-1", "iso-8859-15", "windows-1252"):
            payload = p.get_payload(decode=True) or b""
            if any(b >= 0x80 for b in payload) and re.search("[éèàçôû]", _decoded(p)):
                return True
    return False


def _has_cjk_or_cyrillic(s: Sample) -> bool:
    for p in _text_parts(s.msg):
        if p.get_content_charset() in ("gb2312", "gbk", "gb18030", "big5", "koi8-r") and re.search(
            r"[\u4e00-\u9fff\u0400-\u04ff]{4}", _decoded(p)
        ):
            return True
    return False


def _has_unknown_or_lying_charset(s: Sample) -> bool:
    for p in _text_parts(s.msg):
        charset = p.get_content_charset()
        if charset is None:
            continue
        try:
            codecs.lookup(charset)
        except LookupError:
            return True
        payload = p.get_payload(decode=True) or b""
        try:
            payload.decode(charset)
        except UnicodeDecodeError:
            return True
    return False


def _raw_subject(s: Sample) -> bytes:
    found = re.search(rb"^Subject:(.*(?:\r?\n[ \t].*)*)", _header_block(s.raw), re.M | re.I)
    return found.group(1) if found else b""


def _has_attachment(s: Sample, suffixes: tuple[str, ...]) -> bool:
    return any(
        p.is_attachment() and (p.get_filename() or "").lower().endswith(suffixes)
        for p in s.msg.walk()
    )


def _has_parser_defect(s: Sample) -> bool:
    if any(part.defects for part in s.msg.walk()):
        return True
    return any(getattr(s.msg[name], "defects", ()) for name in set(s.msg.keys()))


def _has_crlf_headers(s: Sample) -> bool:
    return b"\r\n" in _header_block(s.raw)


def _has_shouting(s: Sample) -> bool:
    return bool(re.search(r"\b[A-Z]{4,}(?:\W+[A-Z]{2,}){3,}", _all_text(s)))


def _has_plain_text_url(s: Sample) -> bool:
    return any(
        p.get_content_type() == "text/plain" and re.search(r"https?://\S+", _decoded(p))
        for p in _text_parts(s.msg)
    )


TRICKY: dict[str, tuple[Callable[[Sample], bool], tuple[str, ...]]] = {
    # name: (predicate, classes in which at least one message must satisfy it)
    "multipart/alternative": (_is_multipart_alternative, ("ham", "spam")),
    "html-only": (_is_html_only, ("ham", "spam")),
    "html links/style/script/entities": (_html_has_links_style_script_entities, ("ham", "spam")),
    "html hidden text": (_html_has_hidden_text, ("spam",)),
    "base64 text part": (lambda s: _has_cte(s, "base64"), ("ham", "spam")),
    "quoted-printable part": (_has_qp_soft_breaks_and_8bit_escapes, ("ham",)),
    "8-bit latin-1/windows-1252 text": (_has_8bit_latin, ("ham",)),
    "cjk or cyrillic spam": (_has_cjk_or_cyrillic, ("spam",)),
    "unknown or lying charset": (_has_unknown_or_lying_charset, ("ham", "spam")),
    "rfc2047 utf-8 B subject": (lambda s: b"=?utf-8?b?" in _raw_subject(s).lower(), ("ham",)),
    "rfc2047 latin-1 Q subject": (
        lambda s: b"=?iso-8859-1?q?" in _raw_subject(s).lower(),
        ("ham", "spam"),
    ),
    "pdf attachment": (lambda s: _has_attachment(s, (".pdf",)), ("ham",)),
    "suspicious attachment": (lambda s: _has_attachment(s, (".zip", ".exe")), ("spam",)),
    "parser defect": (_has_parser_defect, ("ham", "spam")),
    "crlf headers": (_has_crlf_headers, ("ham",)),
    "all-caps shouting": (_has_shouting, ("spam",)),
    "url in plain text": (_has_plain_text_url, ("ham", "spam")),
}


@pytest.mark.parametrize("case", sorted(TRICKY))
def test_tricky_case_is_present(samples: list[Sample], case: str) -> None:
    predicate, classes = TRICKY[case]
    for cls in classes:
        hits = [s.name for s in samples if s.cls == cls and predicate(s)]
        assert hits, f"no {cls} message exercises {case!r}"


def test_money_amounts_are_present(samples: list[Sample]) -> None:
    text = "\n".join(_all_text(s) for s in samples)
    for pattern in (r"\$1,000,000", r"USD ?250\b", "€49[.,]99"):
        assert re.search(pattern, text), pattern


def test_pdf_attachment_looks_like_a_pdf(samples: list[Sample]) -> None:
    pdfs = [
        p.get_payload(decode=True)
        for s in samples
        for p in s.msg.walk()
        if p.is_attachment() and (p.get_filename() or "").endswith(".pdf")
    ]
    assert pdfs and all(b.startswith(b"%PDF-") and b.rstrip().endswith(b"%%EOF") for b in pdfs)


def test_classes_are_not_split_by_a_single_word(samples: list[Sample]) -> None:
    # If one token appeared in every spam and no ham (or vice versa) the demo would be
    # trivially separable and useless for showing how evidence combines.
    def words(s: Sample) -> set[str]:
        return set(re.findall(r"[a-z]{3,}", _all_text(s).lower()))

    ham = [words(s) for s in samples if s.cls == "ham"]
    spam = [words(s) for s in samples if s.cls == "spam"]
    ham_any, spam_any = set().union(*ham), set().union(*spam)
    assert not (set.intersection(*spam) - ham_any)
    assert not (set.intersection(*ham) - spam_any)
