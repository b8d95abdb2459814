"""Sign-off previews: the ``conveyor.signoff_previews`` rows (migration 0014), one per
(workflow, run id, sign-off task).

What a preview is, which files it holds and where it is served is :mod:`conveyor.review.previews`'s;
this module owns the statements. The functions take an open connection of the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg  # the ledger's modules load with the DAGs: the driver only when a statement runs



@dataclass(frozen=True)
class StoredPreview:
    """One stored preview, as written and as read back (the review's
    :class:`~conveyor.review.previews.Preview` is this record with what a preview means).

    :param workflow: the workflow (the DAG id).
    :param run_id: the DAG run.
    :param task_id: the sign-off task.
    :param source_task: the publish step whose rendering it is.
    :param files: output file name -> text, in the publish step's order.
    :param items: how many items the sign-off approves.
    :param rendered_by: the task attempt that stored it (``<dag>.<task>#<try>``).
    :param rendered_at: when (set by the database on write; None in a preview about to be written).
    """

    workflow: str
    run_id: str
    task_id: str
    source_task: str
    files: Mapping[str, str]
    items: int
    rendered_by: str | None = None
    rendered_at: datetime | None = field(default=None, compare=False)


def save(conn: psycopg.Connection, previews: Sequence[StoredPreview]) -> int:
    """Write ``previews`` in one statement, each replacing the row of its (workflow, run id, task
    id); returns how many were written. The keys must be distinct (one statement cannot touch a row
    twice)."""
    rows = [
        {
            "workflow": p.workflow,
            "run_id": p.run_id,
            "task_id": p.task_id,
            "source_task": p.source_task,
            "files": [{"name": n, "text": t} for n, t in p.files.items()],
            "items": p.items,
            "rendered_by": p.rendered_by,
        }
        for p in previews
    ]
    return conn.execute(
        "INSERT INTO conveyor.signoff_previews AS p"
        " (workflow, run_id, task_id, source_task, files, items, rendered_by, rendered_at)"
        " SELECT workflow, run_id, task_id, source_task, files, items, rendered_by, now()"
        " FROM jsonb_to_recordset(%s::jsonb) AS r(workflow text, run_id text, task_id text,"
        " source_task text, files jsonb, items integer, rendered_by text)"
        " ON CONFLICT (workflow, run_id, task_id) DO UPDATE SET source_task = EXCLUDED.source_task,"
        " files = EXCLUDED.files, items = EXCLUDED.items, rendered_by = EXCLUDED.rendered_by,"
        " rendered_at = EXCLUDED.rendered_at",
        (json.dumps(rows, ensure_ascii=False, separators=(",", ":")),),
    ).rowcount


def discard(conn: psycopg.Connection, keys: Sequence[tuple[str, str, str]]) -> int:
    """Remove the previews of these (workflow, run id, task id); returns how many were removed.

    :param keys: at least one key.
    """
    workflows, run_ids, task_ids = (list(column) for column in zip(*keys, strict=True))
    return conn.execute(
        "DELETE FROM conveyor.signoff_previews p USING unnest(%s::text[], %s::text[], %s::text[])"
        " AS k(workflow, run_id, task_id)"
        " WHERE p.workflow = k.workflow AND p.run_id = k.run_id AND p.task_id = k.task_id",
        (workflows, run_ids, task_ids),
    ).rowcount


def get(conn: psycopg.Connection, workflow: str, run_id: str, task_id: str) -> StoredPreview | None:
    """The stored preview of a sign-off task of a run (looked up by key), or None."""
    row = conn.execute(
        "SELECT source_task, files, items, rendered_by, rendered_at FROM conveyor.signoff_previews"
        " WHERE workflow = %s AND run_id = %s AND task_id = %s",
        (workflow, run_id, task_id),
    ).fetchone()
    if row is None:
        return None
    source_task, files, items, rendered_by, rendered_at = row
    return StoredPreview(
        workflow, run_id, task_id, source_task, {f["name"]: f["text"] for f in files}, items, rendered_by, rendered_at
    )


__all__ = ["StoredPreview", "discard", "get", "save"]
