"""The supplier-exception report: what procurement reads, built from the run's approved items.

Pure functions (no Airflow, no I/O) so the content rules are tested on their own: a report
with no items, or a section whose text is empty, is refused here, before anything is written.
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from conveyor.ledger.records import Item


class BlankReportError(ValueError):
    """The report would say nothing (no items, or a section with empty text): never publish it."""


@dataclass(frozen=True)
class Section:
    """One supplier's part of the report."""

    key: str
    title: str
    summary: str
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Report:
    title: str
    run_id: str
    sections: list[Section]
    item_ids: list[str]

    def to_markdown(self) -> str:
        lines = [f"# {self.title}", "", f"Run `{self.run_id}` — {len(self.item_ids)} exception(s), "
                 f"{len(self.sections)} supplier(s).", ""]
        for section in self.sections:
            lines += [f"## {section.title}", "", section.summary, "",
                      "| exception | category | amount | draft |", "|---|---|---|---|"]
            for row in section.rows:
                cells = [row["key"], row["category"], row["amount"], row["draft"]]
                lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
            lines.append("")
        return "\n".join(lines)

    def to_html(self) -> str:
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
            f"<p>Run <code>{html.escape(self.run_id)}</code> — {len(self.item_ids)} exception(s), "
            f"{len(self.sections)} supplier(s).</p>",
        ]
        for section in self.sections:
            parts.append(f"<h2>{html.escape(section.title)}</h2><p>{html.escape(section.summary)}</p>")
            parts.append("<table><tr><th>exception</th><th>category</th><th>amount</th><th>draft</th></tr>")
            for row in section.rows:
                cells = "".join(
                    f"<td>{html.escape(str(row[k]))}</td>" for k in ("key", "category", "amount", "draft")
                )
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</table>")
        parts.append("</body></html>")
        return "\n".join(parts)


def _md_cell(value: Any) -> str:
    # A feed's text must not break the table or smuggle in a formula.
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return "'" + text if text[:1] in {"=", "+", "-", "@"} else text


def _amount(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def _text(result: Any, *keys: str) -> str:
    if isinstance(result, dict):
        for key in keys:
            value = result.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def build_report(
    title: str, run_id: str, items: Sequence[Item], *, group_by: str = "supplier_id",
    group_title: str = "supplier_name",
) -> Report:
    """Group the approved items per supplier and draft each section.

    :raises BlankReportError: no items, or an item whose draft is empty.
    """
    if not items:
        raise BlankReportError(f"run {run_id!r} has no approved items: a blank report is never published")
    empty = [i.item_id for i in items if not _text(i.ai_result, "draft", "summary")]
    if empty:
        raise BlankReportError(
            f"{len(empty)} approved item(s) have an empty draft, e.g. {', '.join(empty[:3])}: "
            "the report is not published"
        )
    groups: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        groups[str(item.payload.get(group_by) or "unknown")].append(item)
    sections = []
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda i: i.business_key)
        name = str(members[0].payload.get(group_title) or key)
        categories = Counter(_text(i.ai_result, "category") or "other" for i in members)
        total = sum((_amount(i.payload.get("amount")) for i in members), Decimal(0))
        currency = members[0].payload.get("currency") or ""
        top = ", ".join(f"{n} {cat.replace('_', ' ')}" for cat, n in categories.most_common())
        worst = max(members, key=lambda i: _amount(i.payload.get("amount")))
        summary = (
            f"{name} ({key}) had {len(members)} exception(s) worth {total:,.2f} {currency} in total: {top}. "
            f"Largest: {worst.business_key} ({_amount(worst.payload.get('amount')):,.2f} {currency}) — "
            f"{_text(worst.ai_result, 'draft', 'summary')}"
        ).strip()
        rows = [
            {
                "key": i.business_key,
                "category": _text(i.ai_result, "category") or "other",
                "amount": f"{_amount(i.payload.get('amount')):,.2f} {i.payload.get('currency') or ''}".strip(),
                "draft": _text(i.ai_result, "draft", "summary"),
            }
            for i in members
        ]
        sections.append(Section(key=key, title=f"{name} ({key})", summary=summary, rows=rows))
    return Report(title=title, run_id=run_id, sections=sections, item_ids=sorted(i.item_id for i in items))
