"""What the ledger returns: items and their audit records (plain dataclasses, no driver imports)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Item:
    item_id: str
    workflow: str
    business_key: str
    run_id: str
    status: str
    payload: dict[str, Any]
    input_hash: str
    schema_version: int
    attempts: int
    last_error: str | None
    ai_result: Any
    confidence: float | None
    reason: str | None
    review_target: str | None
    priority: int
    stage_times: dict[str, str]
    created_at: datetime
    updated_at: datetime
    #: the version of the workflow's declaration the item was received under (None: before versions)
    workflow_version: int | None = None


@dataclass(frozen=True)
class TransitionRecord:
    item_id: str
    run_id: str
    from_status: str | None
    to_status: str
    at: datetime
    actor: str
    reason: str | None
    #: what the move recorded besides its reason (a correction's field diff, the gate that quarantined)
    detail: Any = None


ITEM_COLUMNS = ", ".join(Item.__dataclass_fields__)
TRANSITION_COLUMNS = ", ".join(TransitionRecord.__dataclass_fields__)
