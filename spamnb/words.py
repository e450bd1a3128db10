"""How reports and errors put classes and numbers into words: standard library only,
so that the pipe filter and both report writers (terminal and HTML) can share it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from . import SPAM

__all__ = ["class_list", "decimals", "p_value_text", "printable", "rest_of_mail"]


def class_list(classes: Sequence[str]) -> str:
    """A model's classes for an error message: "spam, ham", or "no class"."""
    return ", ".join(classes) or "no class"


# Characters that reorder or break the text around them: bidirectional controls
# (a right-to-left override shows "\u202egnp.exe" as "exe.png") and the line and
# paragraph separators.
_REORDERING = frozenset(
    [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
)


def printable(text: str) -> str:
    """``text`` with what a terminal or a browser would act on shown as escapes:
    control characters (a token or class name from mail can hold a terminal's control
    sequences), bidirectional controls, line separators, and lone surrogates (bytes
    no codec could read).  Joiners, non-breaking spaces and soft hyphens stay, as
    Persian, Indic and emoji text needs them (str.isprintable() would escape those
    too; review 15)."""
    if text.isprintable():
        return text
    from unicodedata import category

    return "".join(
        ascii(c)[1:-1] if ord(c) in _REORDERING or category(c) in ("Cc", "Cs") else c for c in text
    )


def rest_of_mail(classes: Sequence[str]) -> str:
    """What the spam measures set spam against, in words: the one other class, or
    "other mail" when there are more (the JSON calls that side "ham" throughout)."""
    others = [label for label in classes if label != SPAM]
    return others[0] if len(others) == 1 else "other mail"


def decimals(value: float, digits: int, ends: tuple[float, float] = (0.0, 1.0)) -> int:
    """``digits``, or more (up to 8) when that many would round ``value`` to one of the
    ``ends`` of its range that it is not: an AUC of 0.99996 shown as 1.0000, or a
    precision of 99.996% as 100.00%, hides an error."""
    while digits < 8 and value not in ends and round(value, digits) in ends:
        digits += 1
    return digits


def p_value_text(p_value: float, log10_p_value: float | None, digits: int) -> str:
    """A p-value to ``digits`` significant digits; one too small for a float (0 in
    ``p_value``) is written from its logarithm, as 3.2e-390, not as 0."""
    if p_value > 0 or log10_p_value is None or not math.isfinite(log10_p_value):
        return f"{p_value:.{digits}g}"
    exponent = math.floor(log10_p_value)
    mantissa = 10 ** (log10_p_value - exponent)
    if round(mantissa, digits - 1) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.{digits}g}e{exponent}"
