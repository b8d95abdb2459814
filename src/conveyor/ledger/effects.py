"""Idempotency keys of effects: the ``conveyor.effects`` rows, one per (item, step).

A step that changes something outside (a payment, a mail) claims each item's key before the
effect and completes it after; a retry or a cleared run finds the key done and skips the item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from conveyor.ledger.hashing import canonical_json


def claim(conn: psycopg.Connection, step: str, item_ids: Sequence[str], actor: str) -> list[str]:
    """Claim the (item, step) key for each item; returns only the items not already done.

    A claim left by a crashed attempt (state ``claimed``) is handed out again: the caller must
    make the effect itself idempotent on the key (see :func:`conveyor.ledger.hashing.effect_key`).
    """
    conn.execute(
        "INSERT INTO conveyor.effects (item_id, step, claimed_by)"
        " SELECT unnest(%s::text[]), %s, %s ON CONFLICT (item_id, step) DO NOTHING",
        (list(item_ids), step, actor),
    )
    rows = conn.execute(
        "SELECT item_id FROM conveyor.effects WHERE step = %s AND item_id = ANY(%s) AND state <> 'done'",
        (step, list(item_ids)),
    ).fetchall()
    return [r[0] for r in rows]


def complete(conn: psycopg.Connection, step: str, results: Mapping[str, Any]) -> int:
    """Mark the (item, step) keys done with their results; returns how many were open."""
    cur = conn.execute(
        "UPDATE conveyor.effects e SET state = 'done', completed_at = now(), result = r.result::jsonb"
        " FROM unnest(%s::text[], %s::text[]) AS r(item_id, result)"
        " WHERE e.item_id = r.item_id AND e.step = %s AND e.state <> 'done'",
        (list(results), [canonical_json(v) for v in results.values()], step),
    )
    return cur.rowcount


def read(conn: psycopg.Connection, step: str, item_ids: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """The recorded effects of a step (item id -> state, result, times)."""
    query = "SELECT item_id, state, result, claimed_by, claimed_at, completed_at FROM conveyor.effects WHERE step = %s"
    params: list[Any] = [step]
    if item_ids is not None:
        query += " AND item_id = ANY(%s)"
        params.append(list(item_ids))
    with conn.cursor(row_factory=dict_row) as cur:
        return {row.pop("item_id"): row for row in cur.execute(query, params).fetchall()}
