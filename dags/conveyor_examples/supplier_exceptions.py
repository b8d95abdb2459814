"""The supplier-exception workflow's own parts: its declaration, output schema, AI task and model.

Everything here is built on ``conveyor``'s public API; the report is ``supplier_report.*.j2``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from conveyor import (
    AITask,
    InputError,
    ItemView,
    Mentions,
    NotVague,
    OneSentence,
    Required,
    ReviewField,
    TextClassifierModel,
    Workflow,
)

SUPPLIER_EXCEPTIONS = Workflow(
    name="supplier_exceptions",
    chain=("received", "validated", "ai_processed", "approved", "published"),
    description="Daily supplier-exception report for procurement",
    source_field="supplier_id",
    review_card=(
        ReviewField("supplier_name", "Supplier"),
        ReviewField("po_number", "PO"),
        ReviewField("amount", "Amount", "amount"),
        ReviewField("notes", "Notes", "long"),
        ReviewField("ai_result.category", "Category", "label"),
        ReviewField("ai_result.draft", "Draft", "long"),
        ReviewField("confidence", "Confidence", "percent"),
    ),
    priority_field="amount",
)


class ExceptionClassification(BaseModel):
    """A supplier exception's category and the sentence the procurement report will carry."""

    model_config = ConfigDict(extra="forbid")

    category: Literal["late_delivery", "short_shipment", "price_variance", "quality", "documentation", "other"] = (
        Field(description="The one category that best describes the exception.")
    )
    draft: str = Field(
        description="One factual sentence for the procurement report: the supplier, the PO number, what went "
        "wrong and the amount at stake."
    )


_FIELDS = ("exception_id", "supplier_id", "supplier_name", "po_number", "exception_date", "amount", "currency",
           "quantity_ordered", "quantity_received", "notes")


def render_exception(item: ItemView) -> dict[str, Any]:
    """The extract row's columns; an exception without notes has nothing to classify."""
    data = {k: item.payload.get(k) for k in _FIELDS if k in item.payload}
    if not str(data.get("notes") or "").strip():
        raise InputError("the exception has no notes: there is nothing to classify")
    return data


def exception_model() -> TextClassifierModel:
    """Offline: the category from a classifier trained on labelled notes, the draft from the drafter."""
    from conveyor_examples.supplier_drafter import draft

    return TextClassifierModel(
        "supplier_exception_notes.csv", text="notes", label_field="category",
        extra=lambda label, data: {"draft": draft(label, data)},
    )


CLASSIFY_EXCEPTION = AITask(
    name="classify_exception",
    workflow="supplier_exceptions",
    prompt_file="classify_exception.md",
    prompt_version="v1",
    output_schema=ExceptionClassification,
    render=render_exception,
    default_model=exception_model,
    checks=(
        Required(("category", "draft")),
        NotVague("draft"),
        OneSentence("draft"),
        Mentions("draft", ("po_number", "supplier_name"), labels={"po_number": "PO", "supplier_name": "supplier"}),
    ),
    label_field="category",
    from_status="validated",
    to_status="ai_processed",
)
