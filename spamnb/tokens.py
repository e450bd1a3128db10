"""The tokens stage: one raw message (bytes) in, a list of string tokens out.

The tokenizer is a pipeline of small generators, one per kind of evidence (header
fields, body words, URLs, text patterns), joined by :func:`tokenize`.  It is a pure
function: no I/O, no global options; its settings travel in :class:`TokenizerSettings`,
which the model file stores so that a model is always scored with the tokenizer that
trained it.

Mail is written by adversaries, so nothing here may raise: a part that cannot be
parsed or decoded contributes what can be salvaged plus a token that says what went
wrong (such defects are themselves good spam evidence).
"""

from __future__ import annotations

import codecs
import email
import email.header
import email.message
import math
import re
from collections import namedtuple
from collections.abc import Iterator

__all__ = ["DEFAULT_SETTINGS", "TOKENIZER_VERSION", "TokenizerSettings", "tokenize"]


# Bump whenever a change makes the same message give other tokens: a model trained by
# an older tokenizer then scores with a vocabulary that partly no longer occurs.
TOKENIZER_VERSION = 2


# What the tokenizer emits; stored in the model so training and scoring agree.
# - version: the tokenizer that trained the model (set by the model file, not users).
# - min_word_length: shorter words are dropped.  Version 1 dropped two-letter words
#   too; with word pairs they help: 5-fold cross-validation on the training parts
#   of the 70/30 splits (boolean model, k=0.01) made 51 errors at length 2 against
#   54 at length 1 on Enron1 and 34 against 35 on SpamAssassin (at length 3 without
#   pairs: 71 and 36).
# - max_word_length: longer words become one coarse ``skip:`` token (first character
#   and length in tens).  SpamBayes reported that a cap near 12 loses almost nothing
#   while it stops base64 residue, hashes and encoded URLs flooding the vocabulary.
# - max_text_chars: a message's body is cut here before tokenizing: spam cannot buy
#   time with size, and the first 100 kB of text carry all the evidence in practice.
# - word_pairs: 1 adds each pair of adjacent words as a token ("click here"), the
#   phrases CRM114's sparse bigrams showed to be strong evidence.  In the same
#   cross-validation they cut Enron1's errors from 66 to 51 and its ROC AUC loss by
#   two thirds, and left SpamAssassin's even (36 and 34 errors); pairs at gaps of
#   2 or 3 words (full OSB) were no better than adjacent ones.  Models of tokenizer
#   version 1 have no pairs.
# A named tuple rather than a dataclass: importing dataclasses costs the pipe filter's
# start-up several milliseconds.
_SettingsFields = namedtuple(
    "_SettingsFields",
    ["version", "min_word_length", "max_word_length", "max_text_chars", "word_pairs"],
    defaults=(TOKENIZER_VERSION, 2, 12, 100_000, 1),
)

# What a stored setting meant before it was stored: a version-1 model has no pairs.
_LEGACY_SETTINGS = {"word_pairs": 0}


class TokenizerSettings(_SettingsFields):
    __slots__ = ()

    def to_dict(self) -> dict[str, int]:
        return dict(self._asdict())

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> TokenizerSettings:
        known = {**_LEGACY_SETTINGS, **{k: v for k, v in data.items() if k in cls._fields}}
        return cls(**known)


DEFAULT_SETTINGS = TokenizerSettings()

_WORD_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>*_-=~|/\\#%&+"
_URL_RE = re.compile(r"(?i)\b(?:https?|ftp)://([^\s/?#<>\"')\]]+)([^\s<>\"')\]]*)")
_WWW_RE = re.compile(r"(?i)\bwww\.([a-z0-9-]+(?:\.[a-z0-9-]+)+)")
_MONEY_RE = re.compile(
    r"(?i)(?:[$€£¥]\s?\d[\d,]*(?:\.\d+)?)"
    r"|(?:\b(?:usd|eur|gbp)\s?\d[\d,]*(?:\.\d+)?)"
    r"|(?:\b\d[\d,]*(?:\.\d+)?\s?(?:usd|eur|gbp|dollars|euros|pounds)\b)"
)
_HOST_RE = re.compile(r"(?i)\b[a-z0-9](?:[a-z0-9-]{0,62}\.)+[a-z]{2,24}\b")
_IPV4_RE = re.compile(r"\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b")
_ADDRESS_RE = re.compile(r"([a-z0-9._%+=-]+)@([a-z0-9.-]+\.[a-z]{2,24})", re.IGNORECASE)
_SPACE_RE = re.compile(r"\s+")


# ---------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------


# A free-standing run of punctuation ("!!!", "$$", "?") becomes a punct: token.  Enron1
# is pre-tokenized, so its "!" and the "?" that stand for non-Latin letters would
# otherwise vanish; in 5-fold cross-validation on its training part they cut the
# errors from 51 to 46 (SpamAssassin: 34 either way).  Longer runs are rules and art.
_MAX_PUNCTUATION_RUN = 4


def _words(text: str, settings: TokenizerSettings, prefix: str = "") -> Iterator[str]:
    """Whitespace-split words, edge punctuation stripped, case folded.

    Splitting on whitespace keeps in-word punctuation ("v1agra", "$99.95", "e-mail"),
    which SpamBayes found more telling than splitting on every non-letter.
    """
    shortest, longest = settings.min_word_length, settings.max_word_length
    pairs = settings.word_pairs
    previous = None
    for raw in text.split():
        word = raw.strip(_WORD_EDGE_PUNCTUATION)
        n = len(word)
        if n < shortest:
            if not word and len(raw) <= _MAX_PUNCTUATION_RUN:
                yield f"{prefix}punct:{raw}"
            continue
        word = word.casefold()
        if n > longest:
            word = f"skip:{word[0]} {n // 10 * 10}"
        yield prefix + word
        if pairs:
            # A space cannot occur inside a word, so a pair never equals a word.
            if previous is not None:
                yield f"{prefix}{previous} {word}"
            previous = word


def _text_patterns(text: str) -> Iterator[str]:
    """Features of how the text is written rather than which words it uses."""
    for match in _MONEY_RE.finditer(text):
        whole = re.sub(r"[^\d.]", "", match.group(0)).split(".")[0].lstrip("0")
        # Magnitude, not value: "$1,000,000" and "$2,500,000" are the same promise.
        yield f"money:1e{min(len(whole), 13) - 1}" if whole else "money:0"
    letters = upper = 0
    for raw in text.split():
        word = raw.strip(_WORD_EDGE_PUNCTUATION)
        if len(word) >= 3 and word.isalpha():
            letters += len(word)
            if word.isupper():
                upper += len(word)
                yield "caps:" + word.casefold()
    if letters >= 40:
        # Shouting is spam's register, but one acronym is not shouting: bucket the
        # share of capitalised letters in tenths, over texts long enough to judge.
        yield f"capsratio:{min(9, int(10 * upper / letters))}"


# A host yields itself and its parent domains; only the last few labels are kept, so
# a crafted host of thousands of labels cannot make thousands of long tokens.
_MAX_HOST_LABELS = 5


def _domain_suffixes(host: str) -> Iterator[str]:
    """A host and its parent domains down to two labels: a.b.example.com -> ..., example.com."""
    labels = host.strip(".").casefold().split(".")[-_MAX_HOST_LABELS:]
    for i in range(max(1, len(labels) - 1)):
        yield ".".join(labels[i:])


def _url_tokens(host: str, path: str) -> Iterator[str]:
    host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    if not host:
        return
    if _IPV4_RE.fullmatch(host):
        # Spam links to bare IP addresses to dodge domain blocklists.
        yield "url:ip"
    else:
        for suffix in _domain_suffixes(host):
            yield "url:" + suffix
    for piece in re.split(r"[/?&=.#_-]+", path.casefold()):
        if 3 <= len(piece) <= 20:
            yield "urlpath:" + piece


def _plain_urls(text: str) -> Iterator[str]:
    for match in _URL_RE.finditer(text):
        yield from _url_tokens(match.group(1), match.group(2))
    for match in _WWW_RE.finditer(text):
        yield from _url_tokens("www." + match.group(1), "")


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------


_html_parser_class = None


def _html_parser() -> object:
    """A parser for one HTML part (html.parser is imported only when mail has HTML)."""
    global _html_parser_class
    if _html_parser_class is None:
        from html.parser import HTMLParser

        class _HtmlText(HTMLParser):
            """Collects the visible text of an HTML part and the hosts of its links.

            Tags never become words ("font", "td", "nbsp" would otherwise dominate every HTML
            message); only what a reader sees, plus what a link points to, counts.
            """

            _INVISIBLE = frozenset({"script", "style", "head", "title"})
            _BREAKS = frozenset({"p", "br", "div", "tr", "td", "li", "table", "h1", "h2", "h3"})

            def __init__(self) -> None:
                super().__init__(convert_charrefs=True)
                self.chunks: list[str] = []
                self.links: list[tuple[str, str]] = []
                self.tags = 0
                self._hidden_depth = 0

            def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
                self.tags += 1
                if tag in self._INVISIBLE:
                    self._hidden_depth += 1
                if tag in self._BREAKS:
                    self.chunks.append(" ")
                for name, value in attrs:
                    if value and name in ("href", "src", "action", "background"):
                        match = _URL_RE.search(value)
                        if match:
                            self.links.append((match.group(1), match.group(2)))

            def handle_endtag(self, tag: str) -> None:
                if tag in self._INVISIBLE and self._hidden_depth:
                    self._hidden_depth -= 1
                if tag in self._BREAKS:
                    self.chunks.append(" ")

            def handle_data(self, data: str) -> None:
                if not self._hidden_depth:
                    self.chunks.append(data)

        _html_parser_class = _HtmlText
    return _html_parser_class()


def _html_to_text(markup: str) -> tuple[str, list[tuple[str, str]], int]:
    parser = _html_parser()
    try:
        parser.feed(markup)
        parser.close()
    except Exception:  # noqa: BLE001 - hostile markup must not stop tokenizing
        parser.chunks.append(" html:broken ")
    return " ".join(parser.chunks), parser.links, parser.tags


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def _decode_bytes(payload: bytes, charset: str | None) -> tuple[str, str | None]:
    """Decode a text part; returns the text and a token naming any decoding trouble.

    Declared charsets are often wrong or unknown, so fall back in the order that
    recovers most text: the declared one, UTF-8, then Windows-1252 (a superset of the
    Latin-1 that undeclared 8-bit mail mostly is), which cannot fail.
    """
    trouble = None
    if charset:
        try:
            codec = codecs.lookup(charset).name
        except (LookupError, ValueError):
            codec = None
            trouble = "charset:unknown"
        if codec:
            try:
                return payload.decode(codec), None
            except (UnicodeDecodeError, ValueError):
                trouble = "charset:lying"
            except LookupError:
                # A bytes-to-bytes codec such as base64 or rot13 named as a charset.
                trouble = "charset:unknown"
    try:
        return payload.decode("utf-8"), trouble
    except UnicodeDecodeError:
        return payload.decode("cp1252", errors="replace"), trouble or (
            "charset:undeclared-8bit" if charset is None else trouble
        )


def _header_text(value: object) -> str:
    """A header's value as text, RFC 2047 encoded words decoded, never raising."""
    if value is None:
        return ""
    raw = str(value) if not isinstance(value, email.header.Header) else value.encode()
    try:
        parts = email.header.decode_header(raw)
    except Exception:  # noqa: BLE001 - a broken encoded word is kept as written
        return raw
    out = []
    for chunk, charset in parts:
        if isinstance(chunk, bytes):
            chunk, _ = _decode_bytes(chunk, charset)
        out.append(chunk)
    return "".join(out) if len(parts) > 1 else (out[0] if out else "")


# ---------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------

_ADDRESS_FIELDS = ("from", "reply-to", "return-path", "sender")
_RECIPIENT_FIELDS = ("to", "cc")


def _address_tokens(field: str, text: str) -> Iterator[str]:
    for user, domain in _ADDRESS_RE.findall(text):
        domain = domain.casefold()
        yield f"{field}:addr:{user.casefold()}@{domain}"
        for suffix in _domain_suffixes(domain):
            yield f"{field}:domain:{suffix}"
    name = _ADDRESS_RE.sub(" ", text)
    for word in name.replace('"', " ").split():
        word = word.strip("<>()',").casefold()
        if len(word) >= 2:
            yield f"{field}:name:{word}"
    if not _ADDRESS_RE.search(text):
        yield f"{field}:no-address"


def _received_tokens(text: str) -> Iterator[str]:
    """Hosts and IP prefixes of one Received line: where the mail really came from."""
    text = text.casefold()
    for a, b, c, _d in _IPV4_RE.findall(text):
        # Prefixes, because spam hops between addresses in the same provider's block.
        yield f"received:{a}"
        yield f"received:{a}.{b}"
        yield f"received:{a}.{b}.{c}"
    for match in _HOST_RE.finditer(text):
        host = match.group(0)
        if not _IPV4_RE.fullmatch(host):
            for suffix in _domain_suffixes(host):
                yield "received:" + suffix


def _header_tokens(msg: email.message.Message, settings: TokenizerSettings) -> Iterator[str]:
    names = []
    for name, value in msg.items():
        field = name.strip().casefold()
        names.append(field)
        text = _header_text(value)
        if field == "subject":
            yield from _words(text, settings, prefix="subject:")
            yield from (f"subject:{t}" for t in _text_patterns(text))
        elif field in _ADDRESS_FIELDS:
            yield from _address_tokens(field, text)
        elif field in _RECIPIENT_FIELDS:
            count = len(_ADDRESS_RE.findall(text))
            yield f"{field}:count:{min(count, 10)}"
            for _user, domain in _ADDRESS_RE.findall(text):
                yield f"{field}:domain:{domain.casefold()}"
        elif field == "received":
            yield from _received_tokens(text)
        elif field in ("x-mailer", "user-agent"):
            yield f"x-mailer:{_SPACE_RE.sub(' ', text.strip().casefold())[:40]}"
        elif field == "content-type":
            yield "content-type:" + msg.get_content_type()
        elif field == "message-id":
            host = text.rsplit("@", 1)[-1].strip(" <>").casefold() if "@" in text else ""
            yield "message-id:host:" + (host if _HOST_RE.fullmatch(host) else "other")
    # Which fields a message carries, and how many, tells mailing lists from bulk
    # mailers better than most of their values.
    for field in dict.fromkeys(names):
        yield "header:" + field
    yield f"header-count:{min(len(names) // 5 * 5, 60)}"
    for defect in getattr(msg, "defects", ()):
        yield "defect:" + type(defect).__name__


# ---------------------------------------------------------------------------
# Body
# ---------------------------------------------------------------------------


def _part_payload(part: email.message.Message) -> bytes:
    try:
        payload = part.get_payload(decode=True)
    except Exception:  # noqa: BLE001 - broken transfer encodings fall back to the raw text
        payload = None
    if isinstance(payload, bytes):
        return payload
    raw = part.get_payload()
    return raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else b""


def _body_tokens(msg: email.message.Message, settings: TokenizerSettings) -> Iterator[str]:
    budget = settings.max_text_chars
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        maintype = part.get_content_maintype()
        filename = part.get_filename() if part.get("content-disposition") else None
        cte = str(part.get("content-transfer-encoding", "")).strip().casefold()
        if cte:
            yield "encoding:" + cte[:20]
        if part is not msg:
            yield "part:" + ctype
        charset = part.get_content_charset()
        if charset:
            yield "charset:" + charset[:30]
        if filename or maintype not in ("text", "message"):
            if filename:
                name = _header_text(filename).casefold()
                ext = name.rsplit(".", 1)[-1] if "." in name else ""
                yield "filename:ext:" + (ext[:10] if ext else "none")
            yield "attachment:" + ctype
            continue
        text, trouble = _decode_bytes(_part_payload(part), charset)
        if trouble:
            yield trouble
        text = text[:budget]
        budget -= len(text)
        if part.get_content_subtype() == "html":
            visible, links, tags = _html_to_text(text)
            for host, path in links:
                yield from _url_tokens(host, path)
            yield f"html:tags:{min(int(math.log2(tags + 1)), 12)}"
            text = visible
        else:
            yield from _plain_urls(text)
        yield from _words(text, settings)
        yield from _text_patterns(text)
        if budget <= 0:
            yield "body:truncated"
            break


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------


def _parse(data: bytes) -> email.message.Message:
    # The default compat32 policy parses lazily and tolerates broken headers; the
    # modern policy builds header objects eagerly, raises on some malformed ones, and
    # importing email.policy alone slows the pipe filter's start.
    return email.message_from_bytes(data)


def tokenize(data: bytes, settings: TokenizerSettings = DEFAULT_SETTINGS) -> list[str]:
    """All tokens of one raw message.  Never raises: any input yields a token list."""
    try:
        msg = _parse(data)
        tokens = list(_header_tokens(msg, settings))
        tokens.extend(_body_tokens(msg, settings))
        return tokens
    except Exception:  # noqa: BLE001 - last resort: the words of the raw bytes
        text = data[: settings.max_text_chars].decode("latin-1")
        return ["parse:failed", *_words(text, settings)]
