"""What a gate found row by row: the ``conveyor.gate_results`` rows (migration 0003).

What a finding means and which rows a gate run reports is :mod:`conveyor.gate`'s; this module
owns the statements. The functions take an open connection of the store, so a gate's
replacement of an earlier input's findings and the write of the new ones share one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from conveyor.ledger.hashing import canonical_json


@dataclass(frozen=True)
class ResultRow:
    """One row finding for ``conveyor.gate_results``.

    :param row_key: the row's business key (or its number, when the suite has none).
    :param item_id: the item the row became, when it became one.
    :param outcome: what the gate made of the row (``validated``, ``quarantined``, ...).
    :param failures: the row's failed checks (JSON-ready).
    :param row_data: the row as read, when kept.
    """

    row_key: str
    row_number: int | None
    item_id: str | None
    outcome: str
    failures: list[dict[str, Any]]
    row_data: Mapping[str, Any] | None


def forget_other_inputs(conn: psycopg.Connection, workflow: str, run_id: str, step: str, input_hash: str) -> None:
    """Drop the findings of the run and step that came from an input other than ``input_hash``."""
    conn.execute(
        "DELETE FROM conveyor.gate_results WHERE workflow = %s AND run_id = %s AND step = %s"
        " AND input_hash <> %s",
        (workflow, run_id, step, input_hash),
    )


def write(
    conn: psycopg.Connection,
    workflow: str,
    run_id: str,
    step: str,
    *,
    suite: str,
    input_hash: str,
    rows: Sequence[ResultRow],
) -> int:
    """Record findings (set-based); a finding written again unchanged is not rewritten. Returns rows written."""
    cur = conn.execute(
        """
                INSERT INTO conveyor.gate_results
                    (workflow, run_id, step, row_key, row_number, item_id, outcome, failures, row_data,
                     suite, input_hash)
                SELECT %(workflow)s, %(run_id)s, %(step)s, r.row_key, r.row_number, r.item_id, r.outcome,
                       r.failures::jsonb, r.row_data::jsonb, %(suite)s, %(input_hash)s
                FROM unnest(%(keys)s::text[], %(numbers)s::int[], %(items)s::text[], %(outcomes)s::text[],
                            %(failures)s::text[], %(data)s::text[])
                     AS r(row_key, row_number, item_id, outcome, failures, row_data)
                ON CONFLICT (workflow, run_id, step, row_key) DO UPDATE SET
                    row_number = EXCLUDED.row_number, item_id = EXCLUDED.item_id, outcome = EXCLUDED.outcome,
                    failures = EXCLUDED.failures, row_data = EXCLUDED.row_data, suite = EXCLUDED.suite,
                    input_hash = EXCLUDED.input_hash, created_at = now()
                WHERE (gate_results.outcome, gate_results.failures, gate_results.input_hash)
                      IS DISTINCT FROM (EXCLUDED.outcome, EXCLUDED.failures, EXCLUDED.input_hash)
                """,
        {
            "workflow": workflow,
            "run_id": run_id,
            "step": step,
            "suite": suite,
            "input_hash": input_hash,
            "keys": [r.row_key for r in rows],
            "numbers": [r.row_number for r in rows],
            "items": [r.item_id for r in rows],
            "outcomes": [r.outcome for r in rows],
            "failures": [canonical_json(r.failures) for r in rows],
            "data": [None if r.row_data is None else canonical_json(r.row_data) for r in rows],
        },
    )
    return cur.rowcount


def for_run(conn: psycopg.Connection, workflow: str, run_id: str, step: str | None = None) -> list[dict[str, Any]]:
    """Every finding of a run (of one gate step when given), in input order, as whole rows."""
    query = "SELECT * FROM conveyor.gate_results WHERE workflow = %s AND run_id = %s"
    params: list[Any] = [workflow, run_id]
    if step is not None:
        query += " AND step = %s"
        params.append(step)
    query += " ORDER BY row_number NULLS LAST, row_key"
    with conn.cursor(row_factory=dict_row) as cur:
        return list(cur.execute(query, params).fetchall())


def for_item(conn: psycopg.Connection, item_id: str) -> list[dict[str, Any]]:
    """The findings about one item (its own row and any repeats of its key), newest first, as whole rows."""
    with conn.cursor(row_factory=dict_row) as cur:
        return list(
            cur.execute(
                "SELECT * FROM conveyor.gate_results WHERE item_id = %s"
                " ORDER BY created_at DESC, row_number",
                (item_id,),
            ).fetchall()
        )


__all__ = ["ResultRow", "for_item", "for_run", "forget_other_inputs", "write"]
