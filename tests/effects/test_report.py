"""The report content rules: grouped per supplier, escaped, and never blank."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conveyor.effects.report import BlankReportError, build_report
from conveyor.ledger.records import Item


def item(key: str, supplier: str, amount: float, draft: str, category: str = "late_delivery") -> Item:
    now = datetime.now(UTC)
    return Item(
        item_id=f"supplier_exceptions:{key}",
        workflow="supplier_exceptions",
        business_key=key,
        run_id="r",
        status="approved",
        payload={"supplier_id": supplier, "supplier_name": f"Name {supplier}", "amount": amount, "currency": "EUR"},
        input_hash="h",
        schema_version=1,
        attempts=0,
        last_error=None,
        ai_result={"category": category, "draft": draft},
        confidence=0.9,
        reason=None,
        review_target=None,
        priority=0,
        stage_times={},
        created_at=now,
        updated_at=now,
    )


def test_sections_per_supplier_with_totals_and_categories():
    report = build_report(
        "Exceptions",
        "r",
        [
            item("EX-1", "SUP-1", 100, "Truck late."),
            item("EX-2", "SUP-1", 250.5, "Short by 3.", "short_shipment"),
            item("EX-3", "SUP-2", 10, "Label missing.", "documentation"),
        ],
    )
    assert [s.key for s in report.sections] == ["SUP-1", "SUP-2"]
    first = report.sections[0]
    assert "2 exception(s) worth 350.50 EUR" in first.summary
    assert "1 late delivery" in first.summary and "1 short shipment" in first.summary
    assert "Largest: EX-2" in first.summary
    markdown = report.to_markdown()
    assert "## Name SUP-1 (SUP-1)" in markdown and "| EX-3 | documentation | 10.00 EUR | Label missing. |" in markdown


def test_no_items_is_a_blank_report():
    with pytest.raises(BlankReportError, match="no approved items"):
        build_report("Exceptions", "r", [])


def test_an_empty_draft_blocks_the_report():
    with pytest.raises(BlankReportError, match="empty draft, e.g. supplier_exceptions:EX-2"):
        build_report("Exceptions", "r", [item("EX-1", "S", 1, "ok"), item("EX-2", "S", 1, "   ")])


def test_feed_text_is_escaped_in_html_and_neutralised_in_markdown():
    report = build_report(
        "Exceptions", "r", [item("EX-1", "S", 1, '=HYPERLINK("http://x") <script>alert(1)</script> | pipe')]
    )
    assert "<script>" not in report.to_html()
    assert "&lt;script&gt;" in report.to_html()
    assert "'=HYPERLINK" in report.to_markdown()
    assert "\\| pipe" in report.to_markdown()
