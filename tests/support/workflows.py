"""The workflow declarations the library's tests write items of (stored by the ``ledger`` fixture).

They mirror the bundled examples' chains, so tests read like the workflows users see; the library
itself knows neither.
"""

from __future__ import annotations

from conveyor import Workflow

SUPPLIER = Workflow(name="supplier_exceptions", source_field="supplier_id")
INVOICES = Workflow(
    name="invoice_processing",
    chain=("received", "extracted", "validated", "classified", "approved", "paid", "archived"),
    ai_outputs=("extracted", "classified"),
    source_field="vendor_id",
)
DECLARED = (SUPPLIER, INVOICES)


def declare_all(ledger) -> None:  # type: ignore[no-untyped-def]
    for workflow in DECLARED:
        ledger.declare(workflow, actor="tests")


def declaration(name: str) -> Workflow:
    """The test declaration of ``name``: one of :data:`DECLARED`, else the common chain with its
    items' source in ``supplier_id`` (the monitoring scenarios' ``wf_*`` workflows)."""
    for workflow in DECLARED:
        if workflow.name == name:
            return workflow
    return Workflow(name=name, source_field="supplier_id")
