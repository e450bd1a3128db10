"""Warnings for when the evaluation numbers are likely to mislead.

Three things make a spam filter's accuracy look better or surer than it is: too few
messages of a class (every error is a big step in its rate), one class swamping the other
(accuracy then mostly measures the big class), and spam and ham that came from different
places (the filter learns the dates, message ids and servers of each collection instead of
what spam says).  The last shows in the tokens with the highest odds, so the checks here
look at those.

Each check is a small pure function of strings; :func:`data_warnings` joins them into
``[{"kind", "message"}]`` for the report.  Keeping false alarms rare matters more than
catching every case: a warning that fires on ordinary words teaches people to ignore it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

__all__ = [
    "MAX_CLASS_RATIO",
    "MIN_CLASS_MESSAGES",
    "MIN_SAME_HOST_TOKENS",
    "data_warnings",
    "host_of",
    "looks_like_date",
    "looks_like_id",
]

# Below this a single error moves a class's error rate by more than half a percent.
MIN_CLASS_MESSAGES = 200
# Beyond this ratio of largest to smallest class, accuracy mostly reflects the big class.
MAX_CLASS_RATIO = 10.0
# Top tokens of one class naming one host or domain before it counts as "one server".
MIN_SAME_HOST_TOKENS = 3
# Offending tokens quoted in a message.
MAX_QUOTED = 5

# A field prefix of a token ("subject:", "from:domain:", "url:").  It must start with a
# letter, so a time such as "10:32:05" is not taken for a prefix.
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]*:")

_MONTHS = {
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "january", "february", "march", "april", "june", "july", "august", "september",
    "october", "november", "december",
}  # fmt: skip
_MONTH_ALT = "|".join(sorted(_MONTHS, key=len, reverse=True))
# Years of e-mail: wide enough for old corpora and new mail, narrow enough that most
# four-digit numbers (prices, counts, 1024, 4000) are not years.
_YEAR = r"(?:19[89]\d|20[0-3]\d)"
_YEAR_RE = re.compile(_YEAR)
_ISO_DATE_RE = re.compile(rf"{_YEAR}[-/.](\d{{1,2}})[-/.](\d{{1,2}})")
_COMPACT_DATE_RE = re.compile(rf"{_YEAR}(\d\d)(\d\d)")
# 21/08/2002, 08-21-02, 21.08.2002; dots only with a four-digit year, since "1.2.10" is
# far more often a version number than a date.
_DMY_RE = re.compile(
    rf"(\d{{1,2}})([-/])(\d{{1,2}})\2(?:\d\d|{_YEAR})|(\d{{1,2}})\.(\d{{1,2}})\.{_YEAR}"
)
# 21-aug-2002, 21aug2002, aug-21-2002, aug21
_DAY_MONTH_RE = re.compile(rf"(\d{{1,2}})-?(?:{_MONTH_ALT})(?:-?(?:\d{{2}}|\d{{4}}))?")
_MONTH_DAY_RE = re.compile(rf"(?:{_MONTH_ALT})-?(\d{{1,2}})(?:-?(?:\d{{2}}|\d{{4}}))?")
_TIME_RE = re.compile(r"(\d{1,2}):([0-5]\d)(?::([0-5]\d))?(?:am|pm)?")

_HEX_RE = re.compile(r"[0-9a-f]+")
_ID_CHARS_RE = re.compile(r"[a-z0-9._$=+-]+")
_IPV4_PREFIX_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){0,3}")
_HOST_RE = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,24}")
# Token prefixes whose value is where the mail came from or went to, not what it says:
# relays, the Message-ID's host, and the address fields' domains.  Body URLs (url:) are
# left out: the hosts spam links to are content.
_HOST_PREFIXES = (
    "received:",
    "message-id:host:",
    *(f"{field}:domain:" for field in ("from", "reply-to", "return-path", "sender", "to", "cc")),
)
_ADDRESS_PREFIXES = tuple(
    f"{field}:addr:" for field in ("from", "reply-to", "return-path", "sender")
)
# Tokens whose value is a software name, in which numbers are versions, not dates or ids.
_NAME_PREFIXES = ("x-mailer:",)
# Second-level labels under which registrars sell names (example.co.uk).
_PUBLIC_SECOND_LEVEL = {"co", "com", "net", "org", "ac", "gov", "edu", "ne", "or", "go"}


def _value(token: str) -> str:
    """The token without its field prefixes: "subject:aug 21" -> "aug 21"."""
    value = token.casefold()
    while True:
        match = _PREFIX_RE.match(value)
        if match is None or match.end() == len(value):
            return value
        value = value[match.end() :]


def _is_day(text: str) -> bool:
    return 1 <= int(text) <= 31


def _is_date_piece(piece: str) -> bool:
    """One whitespace-free piece: a year, a numeric date, a month with its day, a time."""
    if _YEAR_RE.fullmatch(piece):
        return True
    match = _ISO_DATE_RE.fullmatch(piece)
    if match:
        return 1 <= int(match.group(1)) <= 12 and _is_day(match.group(2))
    match = _COMPACT_DATE_RE.fullmatch(piece)
    if match:
        return 1 <= int(match.group(1)) <= 12 and _is_day(match.group(2))
    match = _DMY_RE.fullmatch(piece)
    if match:
        first, second = (match.group(1), match.group(3)) if match.group(1) else match.group(4, 5)
        # Day and month in either order (European or American).
        return (_is_day(first) and 1 <= int(second) <= 12) or (
            1 <= int(first) <= 12 and _is_day(second)
        )
    match = _DAY_MONTH_RE.fullmatch(piece) or _MONTH_DAY_RE.fullmatch(piece)
    if match:
        return _is_day(match.group(1))
    match = _TIME_RE.fullmatch(piece)
    if match:
        # A colon alone ("3:16", a verse or a ratio) is too common; a time needs seconds
        # or an hour that a clock shows with two digits.
        hour = int(match.group(1))
        return hour <= 23 and (match.group(3) is not None or len(match.group(1)) == 2)
    return False


def looks_like_date(token: str) -> bool:
    """Whether a token is a date or time: "2002", "2002-08-21", "21/08/2002", "aug 21",
    "21-aug-2002", "10:32:05".

    A month name alone is not a date ("may", "march" are ordinary words) and neither is a
    day number alone or a number such as "100" or "1024"; a month counts only next to a
    day, in one word ("aug21") or in a word pair ("aug 21", "21 aug").
    """
    if host_of(token) is not None or token.casefold().startswith(_NAME_PREFIXES):
        # "received:10.12.20" is an IP prefix, not 10 December 2020, and the 2000 of
        # "x-mailer:microsoft cdo for windows 2000" is part of a product's name.
        return False
    pieces = _value(token).split()
    if any(_is_date_piece(piece) for piece in pieces):
        return True
    for first, second in pairwise(pieces):
        if first in _MONTHS and second.isdigit() and _is_day(second):
            return True
        if second in _MONTHS and first.isdigit() and _is_day(first):
            return True
    return False


def _letter_digit_switches(text: str) -> int:
    kinds = [c.isdigit() for c in text if c.isalnum()]
    return sum(1 for a, b in pairwise(kinds) if a != b)


def looks_like_id(token: str) -> bool:
    """Whether a token looks like a message id or another machine-made identifier.

    That is a word of at least 8 characters, mixing at least two digits with at least two
    letters, that is either hexadecimal ("3d9f2a1b") or switches between letters and digits
    at least three times ("jm20020821ga1234", "a1b2c3d4").  Words that merely end in a
    number ("windows2000", "mp3player") and numbers alone are not ids.
    """
    if host_of(token) is not None or token.casefold().startswith(_NAME_PREFIXES):
        return False  # relays are judged by host_of; mailers' versions are names
    for piece in _value(token).split():
        if len(piece) < 8 or not _ID_CHARS_RE.fullmatch(piece):
            continue
        alnum = [c for c in piece if c.isalnum()]
        digits = sum(c.isdigit() for c in alnum)
        letters = len(alnum) - digits
        if digits < 2 or letters < 2:
            continue
        if _HEX_RE.fullmatch(piece) or _letter_digit_switches(piece) >= 3:
            return True
    return False


def host_of(token: str) -> str | None:
    """The host, domain or IP prefix a header token names, else None.

    Only tokens of where the mail travelled count: ``received:`` (relays' host names and
    IP prefixes), ``message-id:host:``, and the address fields' ``...:domain:`` and
    ``...:addr:`` tokens.  Words in the body, URLs and other headers give None.
    """
    text = token.casefold()
    value: str | None = None
    for prefix in _HOST_PREFIXES:
        if text.startswith(prefix):
            value = text[len(prefix) :]
            break
    else:
        for prefix in _ADDRESS_PREFIXES:
            if text.startswith(prefix) and "@" in text:
                value = text.rsplit("@", 1)[1]
                break
    if not value:
        return None
    value = value.strip(".")
    if _IPV4_PREFIX_RE.fullmatch(value) or _HOST_RE.fullmatch(value):
        return value
    return None


def _site(host: str) -> str:
    """What counts as "the same server" for a host: its registered domain, or for an IP
    prefix its first octet (the tokenizer emits the /8, /16 and /24 of every relay)."""
    if _IPV4_PREFIX_RE.fullmatch(host):
        return host.split(".", 1)[0] + ".*"
    labels = host.split(".")
    keep = 3 if len(labels) >= 3 and labels[-2] in _PUBLIC_SECOND_LEVEL else 2
    return ".".join(labels[-keep:])


def _quoted(tokens: Sequence[str]) -> str:
    shown = ", ".join(repr(t) for t in tokens[:MAX_QUOTED])
    more = len(tokens) - MAX_QUOTED
    return shown + (f" and {more} more" if more > 0 else "")


def _source_warnings(tokens: Sequence[str], whose: str) -> list[dict[str, str]]:
    warnings = []
    dated = [t for t in tokens if looks_like_date(t)]
    ids = [t for t in tokens if looks_like_id(t) and t not in dated]
    if dated or ids:
        kinds = " and ".join(
            k for k, found in (("dates or times", dated), ("message ids or codes", ids)) if found
        )
        warnings.append(
            {
                "kind": "source-tokens",
                "message": (
                    f"Among {whose} top tokens are {kinds}: {_quoted(dated + ids)}. "
                    "The classes were probably collected at different times or from "
                    "different systems, and the filter may be telling the collections "
                    "apart rather than spam from ham."
                ),
            }
        )
    by_site: dict[str, list[str]] = defaultdict(list)
    for token in tokens:
        host = host_of(token)
        if host is not None:
            by_site[_site(host)].append(token)
    for site, named in by_site.items():
        if len(named) >= MIN_SAME_HOST_TOKENS:
            warnings.append(
                {
                    "kind": "source-tokens",
                    "message": (
                        f"{len(named)} of {whose} top tokens name the server or domain "
                        f"{site}: {_quoted(named)}. The mail of that class probably came "
                        "through one system, so the filter may be learning where mail was "
                        "collected rather than what spam says."
                    ),
                }
            )
    return warnings


def data_warnings(
    class_counts: Mapping[str, int],
    top_tokens: Sequence[str] | Mapping[str, Sequence[str]] = (),
    *,
    intervals: bool = True,
) -> list[dict[str, str]]:
    """Warnings ``{"kind", "message"}`` about data that make the numbers misleading.

    ``class_counts`` maps each class to its number of messages (of the part the numbers
    come from).  ``top_tokens`` are the highest-odds tokens, either one list or a mapping
    of class to that class's list (so that "three tokens naming one server" is counted
    within a class).  ``intervals``: whether the report shows the rates' intervals,
    which the small-class warning then points to.  Kinds, in this order:

    - ``small-class``: a class has fewer than 200 messages;
    - ``class-ratio``: the largest class is more than 10 times the smallest;
    - ``source-tokens``: top tokens that look like dates, ids, or name one server three or
      more times (per class when a mapping is given).
    """
    counts: dict[str, int] = {}
    for label, count in class_counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"the count of class {label!r} must be an integer >= 0, not {count!r}")
        counts[str(label)] = count
    warnings: list[dict[str, str]] = []
    for label, count in counts.items():
        if count < MIN_CLASS_MESSAGES:
            step = 100.0 / count if count else None
            moves = (
                f"one error moves its rate by {step:.3g} percentage points"
                if step is not None
                else "its rates cannot be measured at all"
            )
            warnings.append(
                {
                    "kind": "small-class",
                    "message": (
                        f"Class {label!r} has only {count} message{'s' if count != 1 else ''}: "
                        f"{moves}, so its error rates are rough"
                        + (" (see their intervals)." if intervals else ".")
                    ),
                }
            )
    present = {label: count for label, count in counts.items() if count > 0}
    if len(present) >= 2:
        largest = max(present, key=lambda c: (present[c], c))
        smallest = min(present, key=lambda c: (present[c], c))
        ratio = present[largest] / present[smallest]
        if ratio > MAX_CLASS_RATIO:
            warnings.append(
                {
                    "kind": "class-ratio",
                    "message": (
                        f"Class {largest!r} has {ratio:.0f} times as many messages as "
                        f"{smallest!r} ({present[largest]} against {present[smallest]}): "
                        f"accuracy mostly measures {largest!r}. Look at each class's error "
                        "rate and at the majority baseline instead."
                    ),
                }
            )
    groups: Iterable[tuple[str, Sequence[str]]]
    if isinstance(top_tokens, Mapping):
        groups = [(f"the {label!r}", list(tokens)) for label, tokens in top_tokens.items()]
    else:
        groups = [("the", list(top_tokens))]
    for whose, tokens in groups:
        warnings.extend(_source_warnings(tokens, whose))
    return warnings
