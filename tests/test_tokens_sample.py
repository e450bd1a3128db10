"""The tokenizer on the sample corpus's tricky messages (see corpora/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spamnb.tokens import tokenize

MAILDIR = Path(__file__).resolve().parents[1] / "corpora" / "sample" / "maildir"


def tokens_of(key: str) -> list[str]:
    (path,) = MAILDIR.glob(f"*/*/{key}*")
    return tokenize(path.read_bytes())


def test_every_sample_message_tokenizes_to_something():
    paths = [p for p in MAILDIR.glob("*/*/*") if not p.name.startswith(".")]
    assert len(paths) == 60
    for path in paths:
        tokens = tokenize(path.read_bytes())
        assert len(tokens) > 20, path
        assert "parse:failed" not in tokens, path


def test_eight_bit_latin1_body():
    tokens = tokens_of("1727266670")
    assert {"réunion", "préparation", "françois", "subject:réunion"} <= set(tokens)


def test_quoted_printable_windows_1252():
    tokens = tokens_of("1718005346")
    assert "encoding:quoted-printable" in tokens
    assert {"réservation", "séjour", "arrivée"} <= set(tokens)


def test_base64_utf8_part():
    tokens = tokens_of("1743715858")
    assert "encoding:base64" in tokens and "naïve" in tokens


def test_gb2312_base64_spam_decodes_to_chinese():
    tokens = tokens_of("1730871520")
    assert "charset:gb2312" in tokens and "from:name:王经理" in tokens
    assert any("发票" in t for t in tokens if t.startswith("subject:"))


def test_koi8r_spam_decodes_to_cyrillic():
    tokens = tokens_of("1739257524")
    assert {"subject:семинар", "subject:налоги"} <= set(tokens)


@pytest.mark.parametrize(
    "key, trouble", [("1719498364", "charset:unknown"), ("1727038499", "charset:lying")]
)
def test_unknown_or_lying_charsets(key, trouble):
    tokens = tokens_of(key)
    assert trouble in tokens
    # The text is still recovered, not lost to the bad label.
    assert len([t for t in tokens if ":" not in t]) > 30


def test_lying_utf8_label_still_yields_accented_words():
    assert {"crème", "brûlée"} <= set(tokens_of("1727038499"))


def test_html_only_messages_give_text_and_link_hosts_not_markup():
    for key in ("1723755795", "1726314718"):
        tokens = tokens_of(key)
        assert any(t.startswith("url:") for t in tokens)
        assert not {"div", "span", "table", "href", "style", "nbsp"} & set(tokens)
    assert "url:fernhilloutdoor.test" in tokens_of("1723755795")


def test_attachments():
    assert {"filename:ext:pdf", "attachment:application/pdf"} <= set(tokens_of("1739906801"))
    assert {"filename:ext:zip", "attachment:application/zip"} <= set(tokens_of("1733127269"))


def test_broken_headers_are_defects_not_crashes():
    assert "defect:MissingHeaderBodySeparatorDefect" in tokens_of("1733392934")
    assert "charset:unknown" in tokens_of("1705704069")
    # The Subject with an unterminated encoded word is kept as written.
    assert any(t.startswith("subject:") for t in tokens_of("1713653231"))
    assert any(t.startswith("defect:") for t in tokens_of("1727644305"))


def test_encoded_word_subject_in_japanese():
    assert "subject:京都の写真" in tokens_of("1731208358")
