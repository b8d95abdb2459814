"""What the ledger returns: items and their audit records (plain dataclasses, no driver imports)."""

from __future__ import annotations

import json
from collections.abc import Sequence
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

#: The item's JSON columns (jsonb in the ledger).
_JSON_FIELDS = ("payload", "ai_result", "stage_times")
_JSON_POSITIONS = tuple(n for n, name in enumerate(Item.__dataclass_fields__) if name in _JSON_FIELDS)
#: :data:`ITEM_COLUMNS` with the JSON columns read as text, for :func:`items_from_text_rows`.
ITEM_TEXT_COLUMNS = ", ".join(
    f"{name}::text" if name in _JSON_FIELDS else name for name in Item.__dataclass_fields__
)
#: Rows whose JSON texts are parsed by one ``json.loads`` call (bounds the joined text's size).
_DECODE_ROWS = 10_000


def decode_json_columns(rows: Sequence[Sequence[Any]], positions: Sequence[int]) -> list[list[Any]]:
    """The rows as lists, with the JSON texts at ``positions`` (NULL: None) parsed.

    The driver parses each jsonb value with a ``json.loads`` call of its own, whose per-call cost
    dominated reading 100k items (publishing a run, loading an AI step's chunks); joined into one
    JSON array per slice of rows, the same texts parse in one call (a 100k-item read: 1.4-1.7x).
    """
    out: list[list[Any]] = []
    width = len(positions)
    for start in range(0, len(rows), _DECODE_ROWS):
        part = rows[start : start + _DECODE_ROWS]
        texts = [row[p] or "null" for row in part for p in positions]
        decoded = json.loads("[" + ",".join(texts) + "]")
        for n, row in enumerate(part):
            values = list(row)
            for k, p in enumerate(positions):
                values[p] = decoded[n * width + k]
            out.append(values)
    return out


def items_from_text_rows(rows: Sequence[Sequence[Any]]) -> list[Item]:
    """Items from rows of :data:`ITEM_TEXT_COLUMNS` (see :func:`decode_json_columns`)."""
    return [Item(*values) for values in decode_json_columns(rows, _JSON_POSITIONS)]


TRANSITION_COLUMNS = ", ".join(TransitionRecord.__dataclass_fields__)
