"""One guarded, audited move of a chunk of items: the statement, its data, its deadlock retry.

:meth:`conveyor.ledger.store.Ledger.transition` cuts a move into chunks and decides the
transactions (one, or two lanes); each chunk is moved here by one statement that updates the
items still in an expected status and writes their audit rows, so neither exists without the other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from conveyor.ledger.changes import UNSET, ItemUpdate
from conveyor.ledger.hashing import canonical_json

if TYPE_CHECKING:
    from conveyor.workflow import Workflow

#: Attempts of one chunk's move when concurrent movers of the same items deadlock.
DEADLOCK_RETRIES = 5


# Optional per-item data of a move: (name, SQL array type, value of an ItemUpdate or None to keep,
# SET clause, the row it is written on). A column travels to the server only when some item of the
# chunk sets it, so the common bulk move (ids only) stays a lean statement that writes the narrow
# state row alone; the item's body (alias ``b``) is rewritten only by a move that carries new data.
_OPTIONAL_FIELDS: tuple[tuple[str, str, Callable[[ItemUpdate], Any], str, str], ...] = (
    (
        "ai_result",
        "text",
        lambda u: None if u.ai_result is UNSET else canonical_json(u.ai_result),
        "ai_result = COALESCE(src.ai_result::jsonb, b.ai_result)",
        "body",
    ),
    (
        "confidence", "float8", lambda u: u.confidence, "confidence = COALESCE(src.confidence, b.confidence)", "body",
    ),
    ("last_error", "text", lambda u: u.last_error, "last_error = COALESCE(src.last_error, i.last_error)", "state"),
    (
        "payload",
        "text",
        lambda u: None if u.payload is None else canonical_json(u.payload),
        "payload = COALESCE(src.payload::jsonb, b.payload), input_hash = CASE WHEN src.payload IS NULL"
        " THEN b.input_hash ELSE encode(sha256(convert_to(src.payload, 'UTF8')), 'hex') END",
        "body",
    ),
    ("review_target", "text", lambda u: u.review_target, "review_target = src.review_target", "state"),
    (
        "add_attempts", "int", lambda u: u.add_attempts or None,
        "attempts = i.attempts + COALESCE(src.add_attempts, 0)", "state",
    ),
    ("reason", "text", lambda u: u.reason, "reason = src.reason", "state"),
)


def move_statement(fields: Sequence[str], *, from_one: bool, versioned: bool = False) -> str:
    """The guarded move of one chunk, and the audit rows of the items it moved.

    :param from_one: every item must hold the one status ``%(from_status)s``. The move is then a
        plain guarded UPDATE, and the audit row's from-status is that status. Otherwise (several
        from-statuses) the rows are first locked in one global order, to read each one's status.
    :param versioned: items of the workflow versions in ``%(blocked_versions)s`` (whose chain does
        not allow this move) are left where they are.
    """
    columns = ["item_id", *fields]
    if fields:
        # Per-item data travels as one JSON document (see move_data): one parameter the server
        # parses in C, instead of an array per field that the client escapes element by element.
        rows = f"jsonb_to_recordset(%(data)s::jsonb) AS u({', '.join(f'{c} {_TYPES[c]}' for c in columns)})"
    else:
        rows = "unnest(%(item_id)s::text[]) AS u(item_id)"
    sets = [clause for name, _, _, clause, row in _OPTIONAL_FIELDS if name in fields and row == "state"]
    body_sets = [clause for name, _, _, clause, row in _OPTIONAL_FIELDS if name in fields and row == "body"]
    if "review_target" not in fields:
        sets.append("review_target = NULL")
    if "reason" not in fields:
        sets.append("reason = %(reason)s")
    audit_reason = "reason" if "reason" in fields else "%(reason)s"
    audit_detail = "detail::jsonb" if "detail" in fields else "NULL::jsonb"
    returned = "".join(f", src.{name}" for name in ("reason", "detail") if name in fields)
    update = f"""
    UPDATE conveyor.item_states i SET
        status = %(to_status)s,
        updated_at = now(),
        stage_times = CASE WHEN i.stage_times ? %(to_status)s THEN i.stage_times
                           ELSE i.stage_times || jsonb_build_object(%(to_status)s::text, now()) END,
        {", ".join(sets)}"""
    # The ids drive the statement: each one is looked up by primary key. The guard (workflow,
    # from-statuses) travels as columns of a materialized CTE, so the planner cannot estimate the
    # items "in status X" from statistics taken before a new run's items arrived: with 2M old items
    # that estimate is ~1 row and picks a nested loop rescanning all the ids for every item
    # (20 s for 10k ids instead of 0.1 s; see tests/ledger/test_plans.py).
    given = f"""src AS MATERIALIZED (
    SELECT u.*, %(workflow)s::text AS want_workflow, %(from_statuses)s::text[] AS want_statuses
    FROM {rows}
)"""
    # The body's new data, for the items the guarded update moved (a data-modifying CTE runs
    # whether or not it is read).
    bodies = (
        f""", bodies AS (
    UPDATE conveyor.item_bodies b SET {", ".join(body_sets)}
    FROM src JOIN moved m ON m.item_id = src.item_id
    WHERE b.item_id = src.item_id
)"""
        if body_sets else ""
    )
    version_guard = (
        " AND (i.workflow_version IS NULL OR i.workflow_version <> ALL(%(blocked_versions)s::int[]))"
        if versioned else ""
    )
    if from_one:
        # Concurrent movers of the same items cannot corrupt them: each waits for the other's row
        # lock, then re-checks the guard on the row as committed. They may deadlock (they lock in
        # their plans' orders); the loser is rolled back by the server and the caller retries it
        # with the ordered statement below.
        return f"""
WITH {given}, moved AS ({update}
    FROM src
    WHERE i.item_id = src.item_id AND i.workflow = src.want_workflow AND i.status = src.want_statuses[1]{version_guard}
    RETURNING i.item_id, i.run_id{returned}
){bodies}
INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, reason, detail)
SELECT item_id, run_id, %(workflow)s, %(from_status)s, %(to_status)s, %(actor)s, {audit_reason}, {audit_detail}
FROM moved
RETURNING item_id
"""
    return f"""
WITH {given}, locked AS (
    SELECT i.status AS old_status, src.*
    FROM src JOIN conveyor.item_states i
      ON i.item_id = src.item_id AND i.workflow = src.want_workflow AND i.status = ANY(src.want_statuses){version_guard}
    ORDER BY i.item_id  -- one global lock order: concurrent movers queue, they never deadlock
    FOR UPDATE OF i
), moved AS ({update}
    FROM locked src
    WHERE i.item_id = src.item_id
    RETURNING i.item_id, i.run_id, src.old_status{returned}
){bodies}
INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, reason, detail)
SELECT item_id, run_id, %(workflow)s, old_status, %(to_status)s, %(actor)s, {audit_reason}, {audit_detail}
FROM moved
RETURNING item_id
"""


def move_data(item_ids: Sequence[str], columns: Mapping[str, Sequence[Any]]) -> str:
    """The per-item data of a move as one JSON array of objects (for ``jsonb_to_recordset``)."""
    from conveyor.ledger.values import check_json_text

    names = ["item_id", *columns]
    rows = [dict(zip(names, values, strict=True)) for values in zip(item_ids, *columns.values(), strict=True)]
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    if "\\u0000" in text or "NaN" in text or "Infinity" in text:  # rare: name the item at fault
        for row in rows:
            check_json_text(json.dumps(row, ensure_ascii=False), row, item_id=row["item_id"])
    return text


_TYPES = {"item_id": "text", "detail": "text", **{name: kind for name, kind, _, _, _ in _OPTIONAL_FIELDS}}


def move_chunk(
    conn: psycopg.Connection,
    flow: Workflow,
    chunk: Sequence[str],
    updates: Mapping[str, ItemUpdate] | None,
    froms: Sequence[str],
    target: str,
    actor: str,
    reason: str | None,
    blocked: Sequence[int] = (),
) -> set[str]:
    """Move the items of ``chunk`` still in one of ``froms`` to ``target``, each with its audit row;
    returns the ids moved (the others hold another status, or are held back by their version).

    :param updates: item id -> the data written with its move; None moves ids only.
    :param blocked: workflow versions whose chain forbids this move (their items stay).
    """
    params: dict[str, Any] = {
        "item_id": list(chunk),
        "from_statuses": [str(status) for status in froms],
        "from_status": str(froms[0]),
        "to_status": target,
        "workflow": flow.name,
        "actor": actor,
        "reason": reason,
        "blocked_versions": list(blocked),
    }
    fields = []
    if updates is not None:  # per-item data travels only when some item of the chunk sets it
        chunk_updates = [updates[item_id] for item_id in chunk]
        for name, _, value_of, _, _ in _OPTIONAL_FIELDS:
            values = [value_of(update) for update in chunk_updates]
            if name == "reason" and len(set(values)) == 1:
                params["reason"] = values[0]  # one reason for the whole chunk: a scalar
            elif any(v is not None for v in values):
                fields.append(name)
                params[name] = values
        details = [None if u.detail is None else canonical_json(u.detail) for u in chunk_updates]
        if any(d is not None for d in details):  # audit data only: no column of the item
            fields.append("detail")
            params["detail"] = details
    if fields:
        params["data"] = move_data(chunk, {name: params.pop(name) for name in fields})
    statement = move_statement(fields, from_one=len(froms) == 1, versioned=bool(blocked))
    for attempt in range(DEADLOCK_RETRIES):
        try:
            with conn.transaction():  # a savepoint: a lost deadlock undoes this statement only
                rows = conn.execute(statement, params).fetchall()
            return {row[0] for row in rows}
        except psycopg.errors.DeadlockDetected:
            # A concurrent mover of the same items locked them in another order and won; go on
            # in the global lock order (its moves are then seen and not repeated).
            if attempt + 1 == DEADLOCK_RETRIES:
                raise
            statement = move_statement(fields, from_one=False, versioned=bool(blocked))
    raise AssertionError("unreachable")  # pragma: no cover


def current_statuses(conn: psycopg.Connection, item_ids: Sequence[str]) -> dict[str, str | None]:
    """item id -> its status now (None for an id the ledger does not hold)."""
    found: dict[str, str] = dict(
        conn.execute(
            "SELECT item_id, status FROM conveyor.item_states WHERE item_id = ANY(%s)", (list(item_ids),)
        ).fetchall()
    )
    return {item_id: found.get(item_id) for item_id in item_ids}


def chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``seq`` in slices of ``size``."""
    for start in range(0, len(seq), size):
        yield seq[start : start + size]
