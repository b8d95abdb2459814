"""Numbers as people type them into a correction: ``1936.40``, ``1.936,40``, ``R$ 1.936,40``.

A feed's ``1.234,56`` is a row failure the gate names (an export that changed its format must be
fixed at the source, :func:`conveyor.gate.columns.number_spelling`); a reviewer typing the amount
printed on a Brazilian invoice is not an export. What a person types is read here, once, for every
way to decide (the page's form, the API, the CLI), and only where the reading is certain:

* thousands grouped by ``.``, ``,``, a space or ``'`` and a decimal part after the other
  separator: ``1.936,40``, ``1,936.40``, ``1 936,40``, ``1'936.40``;
* a decimal comma without thousands: ``1936,40``, ``0,5``;
* a currency sign or code, before or after, when it is the item's currency (the column declares
  ``currency`` or ``currency_column`` in its suite): ``R$ 1.936,40`` on a BRL invoice, ``1.936,40 €``
  on a EUR one. Another currency, or a sign where the workflow declares none, is refused: a person
  who typed dollars on a euro invoice must be told, not converted.

``1,936`` could be 1936 or 1.936 and is refused naming both readings. ``1.936`` is what every
API client and script sends for one point nine three six, and stays that (the plain form wins).
"""

from __future__ import annotations

import re

from conveyor.errors import ReviewError

#: Signs a person may type for a currency (the ISO code is always accepted too).
CURRENCY_SIGNS: dict[str, tuple[str, ...]] = {
    "EUR": ("€",), "USD": ("$", "US$"), "GBP": ("£",), "BRL": ("R$",), "JPY": ("¥",), "CNY": ("¥", "CN¥"),
    "INR": ("₹",), "CHF": ("Fr",), "CAD": ("$", "CA$", "C$"), "AUD": ("$", "A$", "AU$"),
    "MXN": ("$", "MX$"), "SEK": ("kr",), "NOK": ("kr",), "DKK": ("kr",), "PLN": ("zł",),
}
_PLAIN = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
#: (a grouped spelling, its thousands separator): once that is taken out, the one separator left
#: is the decimal one, whichever it is.
_GROUPED = tuple((re.compile(pattern), re.compile(thousands)) for pattern, thousands in (
    (r"[0-9]{1,3}(?:\.[0-9]{3})+(?:,[0-9]+)?", r"\."),
    (r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?", ","),
    (r"[0-9]{1,3}(?:[ \u00a0\u202f][0-9]{3})+(?:[,.][0-9]+)?", "[ \u00a0\u202f]"),
    (r"[0-9]{1,3}(?:'[0-9]{3})+(?:\.[0-9]+)?", "'"),
))
_COMMA_DECIMAL = re.compile(r"[0-9]+,[0-9]+")
_AMBIGUOUS = re.compile(r"[0-9]{1,3},[0-9]{3}")
_SIGN_OR_CODE = re.compile(r"^(?P<lead>[^\s0-9+\-−.,]+)?\s*(?P<body>.*?)\s*(?P<trail>[^\s0-9.,]+)?$", re.S)


class NotANumber(ReviewError, ValueError):
    """What a person typed is not a number this reader is sure of; the message says why, for the field
    (:func:`conveyor.review.coercion.coerce_value` puts the field's name in front)."""


def typed_number(text: str, currency: str | None = None) -> float:
    """The number a person meant by ``text``.

    :param text: as typed (surrounding spaces, a leading or trailing minus, a currency sign allowed).
    :param currency: the item's ISO currency code, when its workflow declares one.
    :raises NotANumber: saying what was wrong (a foreign currency, an ambiguous separator...).
    """
    body = text.strip()
    if not body:
        raise NotANumber("is empty")
    negative = False
    if body[0] in "-−" or body[-1] in "-−":
        negative, body = True, (body[1:] if body[0] in "-−" else body[:-1]).strip()
    elif body[0] == "+":
        body = body[1:].strip()
    body = _without_currency(body, currency)
    if body[:1] in ("-", "−") and not negative:  # "R$ -12,50"
        negative, body = True, body[1:].strip()
    value = _unsigned(body)
    return -value if negative else value


def _without_currency(body: str, currency: str | None) -> str:
    parts = _SIGN_OR_CODE.match(body)
    if parts is None:  # (never: with re.S the pattern matches any text; for the type checker)
        return body
    marks = [m for m in (parts.group("lead"), parts.group("trail")) if m]
    if not marks:
        return body
    if not all(_is_currency_mark(m) for m in marks):
        raise NotANumber("is not a number")
    if len(marks) > 1:
        raise NotANumber(f"has two currency marks ({' and '.join(marks)})")
    [mark] = marks
    if currency is None:
        raise NotANumber(f"holds {mark!r}: type the number alone (this workflow declares no currency for it)")
    code = currency.upper()
    if mark.upper() != code and mark not in CURRENCY_SIGNS.get(code, ()):
        raise NotANumber(f"is in {mark!r}, but this item's amount is in {code}: type it in {code}, unconverted")
    return parts.group("body")


def _is_currency_mark(mark: str) -> bool:
    return (len(mark) == 3 and mark.isalpha() and mark.isupper()) or any(
        mark in signs for signs in CURRENCY_SIGNS.values())


def _unsigned(body: str) -> float:
    if _PLAIN.fullmatch(body):
        return float(body)
    if _AMBIGUOUS.fullmatch(body):
        whole, _, tail = body.partition(",")
        raise NotANumber(f"{body!r} could be {whole}{tail} or {whole}.{tail}: type {whole}{tail} or {whole}.{tail}")
    for pattern, thousands in _GROUPED:
        if pattern.fullmatch(body):
            return float(thousands.sub("", body).replace(",", "."))
    if _COMMA_DECIMAL.fullmatch(body):
        return float(body.replace(",", "."))
    raise NotANumber("is not a number")
