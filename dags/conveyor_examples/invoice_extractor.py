"""The invoice example's offline field extractor: deterministic parsers for the inbox formats.

``.txt`` (a printed invoice: ``Key: value`` lines and ``- description | q x price = amount``
lines), ``.pdf`` (the same printed invoice, its text layer read by ``conveyor.document_text``),
``.json`` and ``.csv`` (one row per line item), as described in ``include/README.md``.

The confidence says how complete and how consistent the parse is, starting from a per-format
ceiling (a printed text is less certain than JSON) and losing a share for each problem found:

=============================================  =========
problem                                         penalty
=============================================  =========
a required field missing or unparseable          0.20 each
vendor id or due date missing                    0.05 each
a line whose amount is not quantity x price      0.15 each (0.45 at most)
line items not adding up to the stated total     0.30
a due date before the invoice date               0.15
a currency outside EUR, USD, GBP, CHF            0.10
a line-item-looking text line left unparsed      0.10 each
CSV rows disagreeing on an invoice-level field   0.10 per field
=============================================  =========

A clean document therefore scores 0.95-0.99; a document with one arithmetic error lands near
0.8, below the default threshold, and goes to review with the reason.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

CURRENCIES = ("EUR", "USD", "GBP", "CHF")

REQUIRED = ("vendor", "invoice_number", "invoice_date", "currency", "total")
OPTIONAL = ("vendor_id", "due_date")
_CEILING = {"json": 0.99, "csv": 0.98, "txt": 0.96, "pdf": 0.96}

_KEYS = {
    "vendor": ("vendor", "supplier", "vendor name", "from"),
    "vendor_id": ("vendor id", "vendor no", "vendor number", "supplier id"),
    "invoice_number": ("invoice number", "invoice no", "invoice #", "invoice id", "invoice"),
    "invoice_date": ("invoice date", "date", "issue date"),
    "due_date": ("due date", "payment due", "due"),
    "currency": ("currency",),
    "total": ("total", "total amount", "amount due", "grand total", "invoice total"),
}
_ALIASES = {alias: name for name, aliases in _KEYS.items() for alias in aliases}
_KEY_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z #.]*?)\s*:\s*(.+?)\s*$")
_LINE_ITEM = re.compile(
    r"^\s*[-*•]\s*(?P<description>.+?)\s*\|\s*(?P<quantity>[\d.,]+)\s*[x×*]\s*(?P<unit_price>[\d.,]+)"
    r"\s*=\s*(?P<amount>[\d.,]+)\s*$"
)


@dataclass
class Extraction:
    """The fields found, the confidence, and the problems that lowered it."""

    fields: dict[str, Any]
    confidence: float
    problems: list[str] = field(default_factory=list)


def parse_number(text: Any) -> float | None:
    """A number from ``1250.40``, ``1,250.40``, ``1.250,40`` or ``1250,40``; None if not one."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    if text is None:
        return None
    cleaned = re.sub(r"[^\d.,\-]", "", str(text))
    if not cleaned or not re.search(r"\d", cleaned):
        return None
    if "," in cleaned and "." in cleaned:
        if cleaned.rfind(",") > cleaned.rfind("."):
            cleaned = cleaned.replace(".", "").replace(",", ".")
        else:
            cleaned = cleaned.replace(",", "")
    elif "," in cleaned:
        head, _, tail = cleaned.rpartition(",")
        cleaned = f"{head.replace(',', '')}.{tail}" if len(tail) != 3 else cleaned.replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_date(text: Any) -> date | None:
    """An ISO date, or ``dd.mm.yyyy``; None if neither."""
    if text is None:
        return None
    value = str(text).strip()
    for fmt in ("%Y-%m-%d", "%d.%m.%Y", "%Y/%m/%d"):
        try:
            return datetime.strptime(value[:10], fmt).date()
        except ValueError:
            continue
    return None


def _empty() -> dict[str, Any]:
    return {k: None for k in (*REQUIRED, *OPTIONAL)} | {"line_items": []}


def _line(description: Any, quantity: Any, unit_price: Any, amount: Any) -> dict[str, Any] | None:
    q, p, a = parse_number(quantity), parse_number(unit_price), parse_number(amount)
    if not str(description or "").strip() or q is None or p is None or a is None:
        return None
    return {"description": str(description).strip(), "quantity": q, "unit_price": p, "amount": a}


def _parse_txt(content: str, problems: list[str]) -> dict[str, Any]:
    fields = _empty()
    for raw in content.splitlines():
        match = _LINE_ITEM.match(raw)
        if match:
            line = _line(**match.groupdict())
            if line:
                fields["line_items"].append(line)
                continue
        if raw.strip().startswith(("-", "*", "•")):
            problems.append(f"line not understood: {raw.strip()[:60]!r}")
            continue
        key_match = _KEY_LINE.match(raw)
        if key_match:
            name = _ALIASES.get(key_match.group(1).strip().lower())
            if name and fields.get(name) is None:
                fields[name] = key_match.group(2).strip()
    return fields


def _parse_json(content: str, problems: list[str]) -> dict[str, Any]:
    data = json.loads(content)
    if not isinstance(data, dict):
        raise ValueError("the JSON document is not an object")
    fields = _empty()
    for name in (*REQUIRED, *OPTIONAL):
        fields[name] = data.get(name)
    for number, raw in enumerate(data.get("line_items") or [], start=1):
        line = (
            _line(raw.get("description"), raw.get("quantity"), raw.get("unit_price"), raw.get("amount"))
            if (isinstance(raw, dict))
            else None
        )
        if line:
            fields["line_items"].append(line)
        else:
            problems.append(f"line item {number} is incomplete")
    return fields


def _parse_csv(content: str, problems: list[str]) -> dict[str, Any]:
    rows = list(csv.DictReader(io.StringIO(content)))
    if not rows:
        raise ValueError("the CSV document has no rows")
    fields = _empty()
    for name in ("invoice_number", "vendor", "vendor_id", "invoice_date", "due_date", "currency"):
        values = {(r.get(name) or "").strip() for r in rows} - {""}
        if len(values) > 1:
            problems.append(f"rows disagree on {name}: {', '.join(sorted(values))}")
        fields[name] = sorted(values)[0] if values else None
    for number, row in enumerate(rows, start=1):
        line = _line(row.get("description"), row.get("quantity"), row.get("unit_price"), row.get("amount"))
        if line:
            fields["line_items"].append(line)
        else:
            problems.append(f"row {number} is not a complete line item")
    # The CSV format states no total: it is the sum of its lines.
    if fields["line_items"]:
        fields["total"] = round(sum(li["amount"] for li in fields["line_items"]), 2)
    return fields


def extract(content: str, fmt: str) -> Extraction:
    """Parse one invoice document of format ``txt``, ``pdf`` (its text), ``json`` or ``csv``."""
    fmt = fmt.lower().lstrip(".")
    # A PDF's text layer reads like the printed text invoice; its ceiling is the same.
    parsers = {"txt": _parse_txt, "pdf": _parse_txt, "json": _parse_json, "csv": _parse_csv}
    if fmt not in parsers:
        return Extraction(_empty(), 0.0, [f"unknown document format {fmt!r}"])
    problems: list[str] = []
    try:
        fields = parsers[fmt](content, problems)
    except (ValueError, TypeError, KeyError) as exc:
        return Extraction(_empty(), 0.0, [f"the {fmt} document could not be read: {exc}"])
    penalty = 0.1 * sum(
        1 for p in problems if p.startswith(("line not understood", "row ", "line item", "rows "))
    )

    # Normalise types: numbers and ISO dates.
    fields["total"] = parse_number(fields["total"]) if fields["total"] is not None else None
    for name in ("invoice_date", "due_date"):
        if fields[name] is not None:
            parsed = parse_date(fields[name])
            if parsed is None:
                problems.append(f"{name} {fields[name]!r} is not a date")
            fields[name] = parsed.isoformat() if parsed else None
    for name in ("vendor", "vendor_id", "invoice_number", "currency"):
        if fields[name] is not None:
            fields[name] = str(fields[name]).strip() or None
    if fields["currency"]:
        fields["currency"] = fields["currency"].upper()

    missing = [n for n in REQUIRED if fields.get(n) in (None, "")]
    if not fields["line_items"]:
        missing.append("line_items")
    penalty += 0.2 * len(missing)
    if missing:
        problems.append(f"missing: {', '.join(missing)}")
    penalty += 0.05 * sum(1 for n in OPTIONAL if fields.get(n) in (None, ""))

    bad_lines = [
        li for li in fields["line_items"] if abs(li["quantity"] * li["unit_price"] - li["amount"]) > 0.011
    ]
    if bad_lines:
        penalty += min(0.45, 0.15 * len(bad_lines))
        problems.append(f"{len(bad_lines)} line(s) where quantity x unit price is not the amount")
    if fields["line_items"] and fields["total"] is not None:
        line_sum = sum(li["amount"] for li in fields["line_items"])
        if abs(line_sum - fields["total"]) > 0.011:
            penalty += 0.3
            problems.append(f"line items add up to {line_sum:.2f}, the total says {fields['total']:.2f}")
    if fields["invoice_date"] and fields["due_date"] and fields["due_date"] < fields["invoice_date"]:
        penalty += 0.15
        problems.append("due date before invoice date")
    if fields["currency"] and fields["currency"] not in CURRENCIES:
        penalty += 0.1
        problems.append(f"currency {fields['currency']} is not one of {', '.join(CURRENCIES)}")
    confidence = max(0.02, min(0.99, _CEILING[fmt] - penalty))
    return Extraction(fields, round(confidence, 4), problems)
