"""The declared output schemas of the AI steps (what a model must return, per item).

Every model, local or remote, answers in one of these shapes; an LLM gets the schema as its
structured-output format, and its answer is validated against it before any check runs. The
categories are the contract in ``include/README.md``.
"""

from __future__ import annotations

from datetime import date
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

SupplierCategory = Literal[
    "late_delivery", "short_shipment", "price_variance", "quality", "documentation", "other"
]
SpendCategory = Literal[
    "office_supplies",
    "it_hardware",
    "software",
    "logistics",
    "facilities",
    "professional_services",
    "raw_materials",
    "travel",
]

SUPPLIER_CATEGORIES: tuple[str, ...] = get_args(SupplierCategory)
SPEND_CATEGORIES: tuple[str, ...] = get_args(SpendCategory)
CURRENCIES: tuple[str, ...] = ("EUR", "USD", "GBP", "CHF")


class ExceptionClassification(BaseModel):
    """A supplier exception's category and the sentence the procurement report will carry."""

    model_config = ConfigDict(extra="forbid")

    category: SupplierCategory = Field(description="The one category that best describes the exception.")
    draft: str = Field(
        description=(
            "One factual sentence for the procurement report: the supplier, the PO number, what went "
            "wrong and the amount at stake."
        )
    )


class LineItem(BaseModel):
    """One line of an invoice."""

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
    """The spend category of an invoice."""

    model_config = ConfigDict(extra="forbid")

    category: SpendCategory = Field(description="The one spend category the invoice belongs to.")
