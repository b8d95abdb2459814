"""The supplier example's offline drafter: one factual report sentence per exception.

The sentence names the supplier, the PO, what went wrong (from the category and the quantities),
the amount at stake and the note itself, so the rule checks (mentions the PO and the supplier,
one sentence, not vague) hold by construction unless the input itself is empty or vague.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_WHAT = {
    "late_delivery": "delivered late",
    "short_shipment": "short-shipped",
    "price_variance": "invoiced at a price that differs from the order",
    "quality": "delivered goods with quality defects",
    "documentation": "delivered with missing or wrong documents",
    "other": "raised an exception",
}


def _int(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _money(value: Any, currency: Any) -> str | None:
    try:
        amount = float(value)
    except (TypeError, ValueError):
        return None
    return f"{amount:,.2f} {currency or ''}".strip()


def _note(text: Any) -> str:
    note = " ".join(str(text or "").split()).rstrip(".!?;:, ")
    # The draft stays one sentence: inner sentence ends become semicolons.
    note = re.sub(r"[.!?]+\s+(?=\S)", "; ", note)
    return note[:160].rstrip() + ("…" if len(note) > 160 else "")


def draft(category: str, row: Mapping[str, Any]) -> str:
    """One sentence for the procurement report.

    :param category: the exception's category.
    :param row: the exception (extract columns of ``include/README.md``).
    """
    supplier = str(row.get("supplier_name") or row.get("supplier_id") or "The supplier").strip()
    supplier_id = str(row.get("supplier_id") or "").strip()
    who = f"{supplier} ({supplier_id})" if supplier_id and supplier_id not in supplier else supplier
    po = str(row.get("po_number") or "").strip()
    what = _WHAT.get(category, _WHAT["other"])
    parts = [f"{who} {what} on {po}" if po else f"{who} {what}"]
    ordered, received = _int(row.get("quantity_ordered")), _int(row.get("quantity_received"))
    if category == "short_shipment" and ordered is not None and received is not None and received < ordered:
        parts.append(f"{received:,} of {ordered:,} units received ({ordered - received:,} short)")
    note = _note(row.get("notes"))
    if note:
        parts.append(f"note: {note}")
    money = _money(row.get("amount"), row.get("currency"))
    if money:
        parts.append(f"{money} at stake")
    return ", ".join(parts[:1]) + (": " + "; ".join(parts[1:]) if len(parts) > 1 else "") + "."
