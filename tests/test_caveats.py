"""Tests for spamnb.caveats: each check on its own, then the warnings they add up to."""

from __future__ import annotations

import json

import pytest

from spamnb.caveats import data_warnings, host_of, looks_like_date, looks_like_id
from spamnb.tokens import tokenize

# --------------------------------------------------------------------------- dates


@pytest.mark.parametrize(
    "token",
    [
        "2002",
        "1999",
        "subject:2002",
        "2002-08-21",
        "2002/8/1",
        "20020821",
        "21/08/2002",
        "08-21-02",
        "21.08.2002",
        "aug 21",
        "21 aug",
        "subject:aug 21",
        "august 3",
        "aug21",
        "21-aug-2002",
        "oct2002",
        "10:32:05",
        "10:32",
        "9:05:59",
        "meeting 2002",
    ],
)
def test_dates(token):
    assert looks_like_date(token)


@pytest.mark.parametrize(
    "token",
    [
        "100",
        "1024",
        "5000",
        "12345",
        "may",
        "march",
        "subject:may",
        "aug",
        "21",
        "may be",
        "meeting",
        "3:16",
        "25:00",
        "1.2.10",  # a version number
        "6.00.2600.0000",
        "20021345",  # no 13th month
        "2002-13-01",
        "32 aug",
        "header:date",
        "header-count:20",
        "money:1e3",
        "received:10.12.20",  # an IP prefix, not 10 December 2020
        "charset:iso-8859-1",
        "x-mailer:microsoft outlook express 6.00.2600.0000",
        "x-mailer:microsoft cdo for windows 2000",  # a product's name
    ],
)
def test_not_dates(token):
    assert not looks_like_date(token)


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    "token",
    ["3d9f2a1b", "a1b2c3d4", "jm20020821ga1234", "subject:a1b2c3d4e5", "0e4f2c9a7b"],
)
def test_ids(token):
    assert looks_like_id(token)


@pytest.mark.parametrize(
    "token",
    [
        "windows2000",
        "mp3player",
        "deadbeef",  # hexadecimal, but a word
        "20020821",  # digits only
        "1234567890",
        "win32",
        "charset:iso-8859-1",
        "charset:windows-1252",
        "hello",
        "received:a1b2c3d4.example.com",  # a relay: host_of's business
        "from:addr:ab12cd34@example.com",
    ],
)
def test_not_ids(token):
    assert not looks_like_id(token)


# --------------------------------------------------------------------------- hosts


@pytest.mark.parametrize(
    "token, host",
    [
        ("received:mail.example.com", "mail.example.com"),
        ("received:example.com", "example.com"),
        ("received:10.1.2", "10.1.2"),
        ("received:10", "10"),
        ("message-id:host:lists.example.org", "lists.example.org"),
        ("from:domain:example.com", "example.com"),
        ("to:domain:enron.com", "enron.com"),
        ("from:addr:jm@example.co.uk", "example.co.uk"),
    ],
)
def test_host_of(token, host):
    assert host_of(token) == host


@pytest.mark.parametrize(
    "token",
    [
        "url:example.com",  # where spam links to is content
        "example.com",
        "subject:example.com",
        "from:name:john",
        "message-id:host:other",
        "received:localhost",
        "header:received",
        "2002",
    ],
)
def test_host_of_other_tokens(token):
    assert host_of(token) is None


def test_host_of_knows_the_tokenizers_header_tokens():
    mail = (
        b"Received: from relay.example.net (relay.example.net [192.0.2.7])\n"
        b"\tby mx.example.org; Wed, 21 Aug 2002 10:32:05 +0100\n"
        b"From: Jo <jo@example.com>\n"
        b"Message-ID: <abc@mailer.example.com>\n"
        b"Subject: hello\n\nbody text\n"
    )
    tokens = tokenize(mail)
    hosts = {host_of(t) for t in tokens} - {None}
    assert {"relay.example.net", "example.net", "192.0.2", "example.com"} <= hosts
    assert "mailer.example.com" in hosts
    assert not any(host_of(t) for t in tokens if t.startswith(("subject:", "header:")))


# --------------------------------------------------------------------------- warnings


def kinds(warnings):
    return [w["kind"] for w in warnings]


def test_enough_balanced_mail_gives_no_warnings():
    tokens = ["click here", "unsubscribe", "viagra", "money:1e6", "free", "100"]
    assert data_warnings({"spam": 1500, "ham": 2500}, tokens) == []


def test_small_class():
    warnings = data_warnings({"spam": 150, "ham": 1000})
    assert kinds(warnings) == ["small-class"]
    message = warnings[0]["message"]
    assert "'spam'" in message and "150" in message
    # 100 / 150 = 0.67 percentage points per error
    assert "0.667" in message
    assert data_warnings({"spam": 200, "ham": 200}) == []
    # A report without intervals (no spam class) is not pointed to them.
    (bare,) = data_warnings({"work": 150, "news": 1000}, intervals=False)
    assert bare["message"].endswith("are rough.") and "interval" not in bare["message"]
    assert kinds(data_warnings({"spam": 199, "ham": 199})) == ["small-class", "small-class"]


def test_empty_class():
    warnings = data_warnings({"spam": 0, "ham": 500})
    assert kinds(warnings) == ["small-class"]
    assert "0 messages" in warnings[0]["message"]


def test_class_ratio():
    warnings = data_warnings({"spam": 300, "ham": 3001})
    assert kinds(warnings) == ["class-ratio"]
    assert "'ham'" in warnings[0]["message"] and "'spam'" in warnings[0]["message"]
    assert "baseline" in warnings[0]["message"]
    # Exactly 10:1 is still allowed.
    assert data_warnings({"spam": 300, "ham": 3000}) == []


def test_source_tokens_dates_and_ids():
    tokens = ["free", "2002", "aug 21", "click", "3d9f2a1b", "10:32:05", "2001", "1999", "x"]
    warnings = data_warnings({"spam": 500, "ham": 500}, tokens)
    assert kinds(warnings) == ["source-tokens"]
    message = warnings[0]["message"]
    # At most five offending tokens are quoted, then how many more.
    assert message.count("'") == 2 * 5
    assert "and 1 more" in message
    assert "'free'" not in message and "'click'" not in message


def test_one_server_needs_three_tokens_of_one_class():
    two = ["received:mail.example.com", "received:example.com", "free"]
    assert data_warnings({"spam": 500, "ham": 500}, two) == []
    three = [*two, "message-id:host:lists.example.com"]
    warnings = data_warnings({"spam": 500, "ham": 500}, three)
    assert kinds(warnings) == ["source-tokens"]
    assert "example.com" in warnings[0]["message"]
    # Split between classes they are two and one: no single server per class.
    split = {"spam": two, "ham": ["message-id:host:lists.example.com"]}
    assert data_warnings({"spam": 500, "ham": 500}, split) == []
    per_class = data_warnings({"spam": 500, "ham": 500}, {"ham": three, "spam": ["free"]})
    assert kinds(per_class) == ["source-tokens"]
    assert "'ham'" in per_class[0]["message"]


def test_one_relays_ip_prefixes_count_as_one_server():
    tokens = ["received:192", "received:192.0", "received:192.0.2", "meeting"]
    warnings = data_warnings({"spam": 500, "ham": 500}, tokens)
    assert kinds(warnings) == ["source-tokens"]
    assert "192.*" in warnings[0]["message"]


def test_different_domains_are_different_servers():
    tokens = ["received:a.example.com", "received:b.example.org", "from:domain:example.net"]
    assert data_warnings({"spam": 500, "ham": 500}, tokens) == []


def test_url_hosts_are_content_not_source():
    tokens = ["url:example.com", "url:www.example.com", "url:shop.example.com"]
    assert data_warnings({"spam": 500, "ham": 500}, tokens) == []


def test_warnings_are_plain_json_in_a_fixed_order():
    tokens = ["2002", "received:x.example.com", "received:example.com", "to:domain:example.com"]
    warnings = data_warnings({"spam": 20, "ham": 5000}, tokens)
    assert kinds(warnings) == ["small-class", "class-ratio", "source-tokens", "source-tokens"]
    assert all(set(w) == {"kind", "message"} for w in warnings)
    assert json.loads(json.dumps(warnings)) == warnings


@pytest.mark.parametrize("counts", [{"spam": -1, "ham": 5}, {"spam": 1.5}, {"spam": True}])
def test_bad_counts(counts):
    with pytest.raises(ValueError):
        data_warnings(counts)
