"""The item ledger: one explicit, validated, audited status per business item, in PostgreSQL.

Names are resolved lazily so that importing ``conveyor.ledger.errors`` or the fast lookup path
does not import the database driver the store uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.ledger.errors import IllegalTransition, LedgerError, LedgerUnavailable, UnknownItem, UnknownWorkflow
    from conveyor.ledger.receiving import Route
    from conveyor.ledger.records import Item, TransitionRecord
    from conveyor.ledger.statuses import Status
    from conveyor.ledger.store import ItemUpdate, Ledger, NewItem, ReceiveResult, TransitionResult

_EXPORTS = {
    "IllegalTransition": "errors",
    "LedgerError": "errors",
    "LedgerUnavailable": "errors",
    "UnknownItem": "errors",
    "UnknownWorkflow": "errors",
    "Item": "records",
    "TransitionRecord": "records",
    "Status": "statuses",
    "ItemUpdate": "store",
    "Ledger": "store",
    "NewItem": "store",
    "ReceiveResult": "store",
    "Route": "receiving",
    "TransitionResult": "store",
}

__all__ = [
    "IllegalTransition",
    "Item",
    "ItemUpdate",
    "Ledger",
    "LedgerError",
    "LedgerUnavailable",
    "NewItem",
    "ReceiveResult",
    "Route",
    "Status",
    "TransitionRecord",
    "TransitionResult",
    "UnknownItem",
    "UnknownWorkflow",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'conveyor.ledger' has no attribute {name!r}")
    return getattr(importlib.import_module(f"conveyor.ledger.{_EXPORTS[name]}"), name)
