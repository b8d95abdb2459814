"""The invoice workflow's own parts: its declaration, schemas, two AI tasks and its payment effect.

Everything here is built on ``conveyor``'s public API. ``example_erp.payments`` stands for the ERP
the invoices are paid through: this example's own table, created by its own step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from conveyor import (
    AITask,
    EffectOutcome,
    InputError,
    InRange,
    ItemEffectOperator,
    ItemView,
    ModelInput,
    OneOf,
    Prediction,
    Required,
    ReviewField,
    StepModel,
    TextClassifierModel,
    UnreadableDocument,
    Workflow,
    document_text,
    storage_path,
)

CURRENCIES = ("EUR", "USD", "GBP", "CHF")

INVOICES = Workflow(
    name="invoice_processing",
    chain=("received", "extracted", "validated", "classified", "approved", "paid", "archived"),
    description="Invoices from the inbox to payment and archive, each paid once",
    ai_outputs=("extracted", "classified"),
    source_field="vendor_id",
    review_card=(
        ReviewField("ai_result.vendor", "Vendor"),
        ReviewField("ai_result.invoice_number", "Invoice"),
        ReviewField("ai_result.total", "Total", "amount"),
        ReviewField("ai_result.due_date", "Due", "date"),
        ReviewField("ai_result.spend_category", "Category", "label"),
        ReviewField("confidence", "Confidence", "percent"),
    ),
    priority_field="ai_result.total",
)


class LineItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str
    quantity: float
    unit_price: float
    amount: float


class InvoiceFields(BaseModel):
    """The fields extracted from one invoice document; a field not found in the document is null."""

    model_config = ConfigDict(extra="forbid")

    vendor: str | None = Field(description="The vendor's name as printed.")
    vendor_id: str | None = Field(description="The vendor id, e.g. V-1001.")
    invoice_number: str | None
    invoice_date: date | None
    due_date: date | None
    currency: str | None = Field(description="ISO currency code, e.g. EUR.")
    line_items: list[LineItem]
    total: float | None = Field(description="The invoice total as printed.")


class SpendClassification(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: Literal["office_supplies", "it_hardware", "software", "logistics", "facilities",
                      "professional_services", "raw_materials", "travel"] = Field(
        description="The one spend category the invoice belongs to."
    )


def render_document(item: ItemView) -> dict[str, Any]:
    """The document's name, format and text, read from object storage (``payload.path``)."""
    payload = item.payload
    name = str(payload.get("name") or item.item_id)
    fmt = str(payload.get("format") or Path(name).suffix.lstrip("."))
    try:
        # A PDF is read through its text layer; a scan without one is refused with that reason.
        content = document_text(storage_path(payload["path"]).read_bytes(), fmt, name=f"document {name}")
    except KeyError:
        raise InputError("the item has no document path") from None
    except FileNotFoundError:
        raise InputError(f"document {payload['path']} not found (moved or deleted after intake)") from None
    except UnreadableDocument as exc:
        raise InputError(str(exc)) from None
    return {"name": name, "format": fmt, "content": content}


class InvoiceExtractorModel(StepModel):
    """Offline: the fields by the format's parser; confidence by completeness and consistency."""

    key = "local:invoice_extractor@1"

    def _predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        from conveyor_examples.invoice_extractor import extract

        predictions = []
        for i in inputs:
            result = extract(str(i.data.get("content") or ""), str(i.data.get("format") or ""))
            predictions.append(Prediction(output=result.fields, confidence=result.confidence, model=self.key,
                                          detail={"method": "parse_completeness", "problems": result.problems[:5]}))
        return predictions

    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        return await asyncio.to_thread(self._predict, inputs)


EXTRACT_FIELDS = AITask(
    name="extract_invoice_fields", workflow="invoice_processing", prompt_file="extract_invoice_fields.md",
    output_schema=InvoiceFields, render=render_document, default_model=InvoiceExtractorModel,
    checks=(Required(("vendor", "invoice_number", "invoice_date", "currency", "total", "line_items")),
            OneOf("currency", CURRENCIES), InRange("total", 0, 1_000_000)),
    from_status="received", to_status="extracted",
)


def render_spend(item: ItemView) -> dict[str, Any]:
    """Vendor, line descriptions and total from the extracted fields."""
    source: Mapping[str, Any] = item.ai_result if isinstance(item.ai_result, Mapping) else item.payload
    descriptions = [str(li.get("description")) for li in source.get("line_items") or []
                    if isinstance(li, Mapping) and li.get("description")]
    if not descriptions and not source.get("vendor"):
        raise InputError("no extracted vendor or line items to classify")
    return {"vendor": source.get("vendor"), "vendor_id": source.get("vendor_id"), "descriptions": descriptions,
            "total": source.get("total"), "currency": source.get("currency")}


def merge_spend(previous: Any, output: dict[str, Any]) -> Any:
    """The extracted fields stay; the category joins them as ``spend_category``."""
    return {**(dict(previous) if isinstance(previous, Mapping) else {}), "spend_category": output["category"]}


def spend_model() -> TextClassifierModel:
    return TextClassifierModel("spend_lines.csv", label_field="category",
                               text=lambda d: f"{d.get('vendor') or ''}: {'; '.join(d.get('descriptions') or [])}")


CLASSIFY_SPEND = AITask(
    name="classify_spend", workflow="invoice_processing", prompt_file="classify_spend.md",
    output_schema=SpendClassification, render=render_spend, default_model=spend_model,
    checks=(Required(("category",)),), label_field="category",
    from_status="validated", to_status="classified", merge=merge_spend,
)

_PAYMENTS_DDL = """
CREATE SCHEMA IF NOT EXISTS example_erp;
DO $$ BEGIN  -- payments made before the table became the example's own stay on record
  IF to_regclass('conveyor.payments') IS NOT NULL AND to_regclass('example_erp.payments') IS NULL THEN
    ALTER TABLE conveyor.payments SET SCHEMA example_erp;
  END IF;
END $$;
CREATE TABLE IF NOT EXISTS example_erp.payments (
    payment_id bigserial PRIMARY KEY, item_id text NOT NULL UNIQUE, vendor_id text NOT NULL,
    invoice_number text NOT NULL, amount numeric(14, 2) NOT NULL CHECK (amount > 0), currency text NOT NULL,
    idempotency_key text NOT NULL UNIQUE, run_id text NOT NULL, paid_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (vendor_id, invoice_number)
);
"""


class PayInvoicesOperator(ItemEffectOperator):
    """Pay each approved invoice once into ``example_erp.payments`` (unique per item and per vendor
    invoice number); an invoice number already paid under another item goes to a person."""

    effect = "pay"

    def apply(self, items, context) -> EffectOutcome:  # type: ignore[no-untyped-def]
        from conveyor import Ledger  # the database driver loads when the task runs, not at parse time

        outcome, rows = EffectOutcome(), []
        for item in items:
            fields = item.ai_result or {}
            missing = [f for f in ("vendor_id", "invoice_number", "total") if fields.get(f) in (None, "")]
            if missing:
                outcome.refused[item.item_id] = f"cannot pay: no {', '.join(missing)} extracted"
                continue
            rows.append((item.item_id, str(fields["vendor_id"]), str(fields["invoice_number"]), str(fields["total"]),
                         str(fields.get("currency") or "EUR"), item.idempotency_key, context["run_id"]))
        with Ledger(conn_id=self.ledger_conn_id).connect() as conn:
            conn.execute(_PAYMENTS_DDL)
            conn.execute(
                "INSERT INTO example_erp.payments (item_id, vendor_id, invoice_number, amount, currency,"
                " idempotency_key, run_id) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::numeric[],"
                " %s::text[], %s::text[], %s::text[]) ON CONFLICT DO NOTHING",
                [list(col) for col in zip(*rows, strict=True)] if rows else [[]] * 7,
            )
            paid = dict(conn.execute("SELECT item_id, payment_id FROM example_erp.payments WHERE item_id = ANY(%s)",
                                     ([r[0] for r in rows],)).fetchall())
        for item_id, vendor, number, *_ in rows:
            if item_id in paid:
                outcome.done[item_id] = {"payment_id": paid[item_id]}
            else:
                outcome.refused[item_id] = f"invoice {number} of vendor {vendor} is already paid under another item"
        return outcome
