"""What a step made of a whole input batch: the ``conveyor.batches`` rows, one per workflow, run and step.

A gate records each input it saw (accepted, quarantined, repeated, empty) with its source, hash
and reason; a repeat of the run reads its own row back, the review and health pages read the
rejected ones. :mod:`conveyor.ledger.deliveries` reads the same rows for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row

from conveyor.ledger.hashing import canonical_json


def record(
    conn: psycopg.Connection,
    workflow: str,
    run_id: str,
    step: str,
    *,
    status: str,
    source: str | None,
    input_hash: str | None,
    reason: str | None,
    detail: Mapping[str, Any] | None,
) -> None:
    """Write the batch row (a repeat of the step replaces it)."""
    conn.execute(
        """
        INSERT INTO conveyor.batches (workflow, run_id, step, status, source, input_hash, reason, detail)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb)
        ON CONFLICT (workflow, run_id, step) DO UPDATE SET
            status = EXCLUDED.status, source = EXCLUDED.source, input_hash = EXCLUDED.input_hash,
            reason = EXCLUDED.reason, detail = EXCLUDED.detail, updated_at = now()
        """,
        (workflow, run_id, step, status, source, input_hash, reason, canonical_json(detail or {})),
    )


def read(conn: psycopg.Connection, workflow: str, run_id: str, step: str) -> dict[str, Any] | None:
    """The batch row of the step in the run, every column; None when the step recorded none."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT * FROM conveyor.batches WHERE workflow = %s AND run_id = %s AND step = %s",
            (workflow, run_id, step),
        ).fetchone()


def rejected(conn: psycopg.Connection, workflow: str, run_id: str) -> list[dict[str, Any]]:
    """The run's batches a gate rejected (``quarantined``) or refused as a repeat, with their reasons."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT step, status, source, reason, updated_at FROM conveyor.batches"
            " WHERE workflow = %s AND run_id = %s AND status IN ('quarantined', 'repeated') ORDER BY step",
            (workflow, run_id),
        ).fetchall()
