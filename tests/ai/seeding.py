"""Items for the AI step's tests: real rows of the sample extract and inbox, put in the ledger."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from conveyor.ledger import Ledger, NewItem
from conveyor_examples.supplier_exceptions import ExceptionClassification

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "include" / "data"
EXTRACT = DATA / "supplier_exceptions" / "extract.csv"
LABELS = DATA / "supplier_exceptions" / "extract_labels.csv"
INBOX = DATA / "invoices" / "inbox"
#: the categories the supplier example's schema allows
SUPPLIER_CATEGORIES: tuple[str, ...] = tuple(
    ExceptionClassification.model_json_schema()["properties"]["category"]["enum"]
)
MALFORMED_INVOICES = DATA / "invoices" / "malformed"


def exception_rows(limit: int | None = None) -> list[dict[str, Any]]:
    with EXTRACT.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return rows[:limit] if limit else rows


def exception_labels() -> dict[str, str]:
    with LABELS.open(encoding="utf-8", newline="") as handle:
        return {r["exception_id"]: r["category"] for r in csv.DictReader(handle)}


def seed(
    ledger: Ledger,
    workflow: str,
    run_id: str,
    payloads: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    status: str = "validated",
) -> list[str]:
    """Receive (key, payload) items and walk them to ``status`` along the workflow's chain."""
    items = [NewItem(key, dict(payload)) for key, payload in payloads]
    ledger.receive(workflow, run_id, items, actor="test:seed")
    ids = [f"{workflow}:{i.business_key}" for i in items]
    chain = list(ledger.workflow(workflow).chain)
    for previous, step in zip(chain, chain[1:], strict=False):
        if previous == status:
            break
        ledger.transition(workflow, ids, to_status=step, from_status=previous, actor="test:seed")
    return ids


def seed_exceptions(ledger: Ledger, run_id: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return seed(ledger, "supplier_exceptions", run_id, [(r["exception_id"], r) for r in rows])


def invoice_payload(path: Path) -> dict[str, Any]:
    """What the inbox intake records for a document."""
    return {
        "path": str(path.resolve()),
        "name": path.name,
        "format": path.suffix.lstrip("."),
        "bytes": path.stat().st_size,
    }


def context(run_id: str, task_id: str = "ai_step", try_number: int = 1) -> dict[str, Any]:
    """The part of an Airflow task context the operator reads (who acts, which run)."""
    ti = SimpleNamespace(dag_id="ai_tests", task_id=task_id, try_number=try_number)
    return {"ti": ti, "run_id": run_id}
