"""The item ledger: one explicit, validated, audited status per business item, in PostgreSQL."""

from __future__ import annotations

from conveyor.ledger.errors import IllegalTransition, LedgerError, LedgerUnavailable, UnknownItem
from conveyor.ledger.statuses import Status, Workflow, get_workflow, register_workflow
from conveyor.ledger.store import Ledger, NewItem, ReceiveResult, TransitionResult

__all__ = [
    "IllegalTransition",
    "Ledger",
    "LedgerError",
    "LedgerUnavailable",
    "NewItem",
    "ReceiveResult",
    "Status",
    "TransitionResult",
    "UnknownItem",
    "Workflow",
    "get_workflow",
    "register_workflow",
]
