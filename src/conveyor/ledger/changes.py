"""What a caller hands the ledger with a write, and what the write answers.

:class:`NewItem` enters the ledger, :class:`ItemUpdate` travels with a status change;
:class:`ReceiveResult` and :class:`TransitionResult` say what happened to each item.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.ledger.hashing import input_hash

#: An :class:`ItemUpdate` field left unset (None is a value: "clear it").
UNSET: Any = object()


@dataclass(frozen=True)
class NewItem:
    """An item entering the ledger.

    :param business_key: the item's key in the business (PO number, invoice number...).
    :param payload: the item's data, stored as JSON.
    :param input_hash: defaults to the hash of the canonical payload.
    """

    business_key: str
    payload: Mapping[str, Any]
    input_hash: str | None = None
    priority: int = 0

    def hashed(self) -> str:
        return self.input_hash or input_hash(self.payload)


@dataclass(frozen=True)
class ItemUpdate:
    """Data written together with a status change; fields left unset keep their value.

    ``reason`` always replaces the previous reason (None clears it). ``detail`` is not item data: it
    is written on the move's audit row (``conveyor.transitions.detail``, e.g. a correction's diff).
    """

    reason: str | None = None
    ai_result: Any = UNSET
    confidence: float | None = None
    last_error: str | None = None
    payload: Mapping[str, Any] | None = None
    review_target: str | None = None
    add_attempts: int = 0
    detail: Mapping[str, Any] | None = None


@dataclass
class ReceiveResult:
    """What :meth:`Ledger.receive` did with each business key."""

    inserted: list[str] = field(default_factory=list)
    #: already in the ledger with the same input (a re-run): nothing changed
    unchanged: list[str] = field(default_factory=list)
    #: already in the ledger with different input: item id -> (its run, its status)
    conflicts: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: the same business key more than once in this batch (the first occurrence was kept)
    duplicates: list[str] = field(default_factory=list)


@dataclass
class TransitionResult:
    """Which items moved and where the others are."""

    moved: list[str] = field(default_factory=list)
    #: item id -> its current status (None when the item does not exist)
    not_moved: dict[str, str | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.moved)
