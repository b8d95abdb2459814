"""Stored AI task declarations: what each AI step promises of its answers, readable without the DAG.

:meth:`conveyor.ledger.Ledger.declare_ai_task` stores one when an AI step runs (its output JSON
schema, rule checks and label field, see :meth:`conveyor.ai.definitions.AITask.declaration`),
keyed by the workflow and the status the step writes. A reviewer's correction of an AI answer is
checked against it (:mod:`conveyor.review.ai_answers`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg


def declare(
    conn: psycopg.Connection,
    workflow: str,
    to_status: str,
    definition: Mapping[str, Any],
    *,
    actor: str | None = None,
) -> None:
    """Store (or replace) the declaration of the AI step writing ``to_status`` in ``workflow``."""
    conn.execute(
        """
        INSERT INTO conveyor.ai_tasks (workflow, to_status, name, definition, declared_by)
        VALUES (%s, %s, %s, %s::jsonb, %s)
        ON CONFLICT (workflow, to_status) DO UPDATE SET
            name = EXCLUDED.name, definition = EXCLUDED.definition, declared_by = EXCLUDED.declared_by,
            updated_at = now()
        WHERE conveyor.ai_tasks.definition IS DISTINCT FROM EXCLUDED.definition
        """,
        (workflow, to_status, str(definition.get("name")), json.dumps(definition, sort_keys=True, default=str), actor),
    )


def declared(conn: psycopg.Connection, workflow: str) -> dict[str, dict[str, Any]]:
    """Every stored AI step declaration of ``workflow``: the status it writes -> its definition."""
    rows = conn.execute(
        "SELECT to_status, definition FROM conveyor.ai_tasks WHERE workflow = %s", (workflow,)
    ).fetchall()
    return {to_status: definition for to_status, definition in rows}
