"""The ledger store: set-based, guarded, audited writes of item statuses in PostgreSQL.

Every write moves many items in one statement. The statement is guarded by the status the
caller expects each item to have, so two workers racing on the same items move each item
exactly once; the loser learns which items it did not move and where they are now. The item's
new data and its audit row are written by the same statement, so neither exists without the
other.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from conveyor.ledger import ai_labels, alerts_sent, deliveries, faults, leases, migrate, receiving, reviewed
from conveyor.ledger import workflows as declarations
from conveyor.ledger.connection import describe, resolve_dsn
from conveyor.ledger.deliveries import Delivery, EarlierBatch, OutboxEntry
from conveyor.ledger.errors import IllegalTransition, LedgerUnavailable, UnknownItem
from conveyor.ledger.lookup import filters as _filters
from conveyor.ledger.lookup import items_query
from conveyor.ledger.receiving import Route
from conveyor.ledger.records import ITEM_COLUMNS as _ITEM_COLUMNS
from conveyor.ledger.records import ITEM_TEXT_COLUMNS, TRANSITION_COLUMNS, items_from_text_rows

# Re-exported: the records a Ledger method returns are imported from here by its callers.
from conveyor.ledger.records import Item as Item
from conveyor.ledger.records import TransitionRecord as TransitionRecord
from conveyor.ledger.reviewed import ReviewDecision
from conveyor.ledger.statuses import as_statuses
from conveyor.workflow import Workflow

#: Items per statement: large enough to be set-based, small enough to keep lock times short.
CHUNK_SIZE = 10_000
#: A move of at least twice this many chunks runs in two lanes (see :meth:`Ledger.transition`).
_MIN_CHUNKS_PER_LANE = 2
#: Attempts of one chunk's move when concurrent movers of the same items deadlock.
_DEADLOCK_RETRIES = 5

_UNSET: Any = object()


#: One encoder for every call: ``json.dumps`` with options builds a new encoder each time (a
#: third of the serialisation time of 100k small payloads).
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def canonical_json(value: Any) -> str:
    """The one JSON spelling of a payload that hashes and compares the same everywhere."""
    return _ENCODE(value)


def hash_text(text: str) -> str:
    """sha256 of an already canonical JSON text (see :func:`input_hash`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_hash(payload: Any) -> str:
    """sha256 of the canonical payload: what the cache and the idempotency checks key on."""
    return hash_text(canonical_json(payload))


def item_id_for(workflow: str, business_key: str) -> str:
    return f"{workflow}:{business_key}"


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
    ai_result: Any = _UNSET
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


# Optional per-item data of a move: (name, SQL array type, value of an ItemUpdate or None to keep,
# SET clause). A column travels to the server only when some item of the chunk sets it, so the
# common bulk move (ids only) stays a lean statement.
_OPTIONAL_FIELDS: tuple[tuple[str, str, Callable[[ItemUpdate], Any], str], ...] = (
    (
        "ai_result",
        "text",
        lambda u: None if u.ai_result is _UNSET else canonical_json(u.ai_result),
        "ai_result = COALESCE(src.ai_result::jsonb, i.ai_result)",
    ),
    ("confidence", "float8", lambda u: u.confidence, "confidence = COALESCE(src.confidence, i.confidence)"),
    ("last_error", "text", lambda u: u.last_error, "last_error = COALESCE(src.last_error, i.last_error)"),
    (
        "payload",
        "text",
        lambda u: None if u.payload is None else canonical_json(u.payload),
        "payload = COALESCE(src.payload::jsonb, i.payload), input_hash = CASE WHEN src.payload IS NULL"
        " THEN i.input_hash ELSE encode(sha256(convert_to(src.payload, 'UTF8')), 'hex') END",
    ),
    ("review_target", "text", lambda u: u.review_target, "review_target = src.review_target"),
    ("add_attempts", "int", lambda u: u.add_attempts or None, "attempts = i.attempts + COALESCE(src.add_attempts, 0)"),
    ("reason", "text", lambda u: u.reason, "reason = src.reason"),
)


def _move_statement(fields: Sequence[str], *, from_one: bool, versioned: bool = False) -> str:
    """The guarded move of one chunk, and the audit rows of the items it moved.

    :param from_one: every item must hold the one status ``%(from_status)s``. The move is then a
        plain guarded UPDATE, and the audit row's from-status is that status. Otherwise (several
        from-statuses) the rows are first locked in one global order, to read each one's status.
    :param versioned: items of the workflow versions in ``%(blocked_versions)s`` (whose chain does
        not allow this move) are left where they are.
    """
    columns = ["item_id", *fields]
    if fields:
        # Per-item data travels as one JSON document (see _move_data): one parameter the server
        # parses in C, instead of an array per field that the client escapes element by element.
        rows = f"jsonb_to_recordset(%(data)s::jsonb) AS u({', '.join(f'{c} {_TYPES[c]}' for c in columns)})"
    else:
        rows = "unnest(%(item_id)s::text[]) AS u(item_id)"
    sets = [clause for name, _, _, clause in _OPTIONAL_FIELDS if name in fields]
    if "review_target" not in fields:
        sets.append("review_target = NULL")
    if "reason" not in fields:
        sets.append("reason = %(reason)s")
    audit_reason = "reason" if "reason" in fields else "%(reason)s"
    audit_detail = "detail::jsonb" if "detail" in fields else "NULL::jsonb"
    returned = "".join(f", src.{name}" for name in ("reason", "detail") if name in fields)
    update = f"""
    UPDATE conveyor.items i SET
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
)
INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, reason, detail)
SELECT item_id, run_id, %(workflow)s, %(from_status)s, %(to_status)s, %(actor)s, {audit_reason}, {audit_detail}
FROM moved
RETURNING item_id
"""
    return f"""
WITH {given}, locked AS (
    SELECT i.status AS old_status, src.*
    FROM src JOIN conveyor.items i
      ON i.item_id = src.item_id AND i.workflow = src.want_workflow AND i.status = ANY(src.want_statuses){version_guard}
    ORDER BY i.item_id  -- one global lock order: concurrent movers queue, they never deadlock
    FOR UPDATE OF i
), moved AS ({update}
    FROM locked src
    WHERE i.item_id = src.item_id
    RETURNING i.item_id, i.run_id, src.old_status{returned}
)
INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, reason, detail)
SELECT item_id, run_id, %(workflow)s, old_status, %(to_status)s, %(actor)s, {audit_reason}, {audit_detail}
FROM moved
RETURNING item_id
"""


def _move_data(item_ids: Sequence[str], columns: Mapping[str, Sequence[Any]]) -> str:
    """The per-item data of a move as one JSON array of objects (for ``jsonb_to_recordset``)."""
    from conveyor.ledger.values import check_json_text

    names = ["item_id", *columns]
    rows = [dict(zip(names, values, strict=True)) for values in zip(item_ids, *columns.values(), strict=True)]
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    if "\\u0000" in text or "NaN" in text or "Infinity" in text:  # rare: name the item at fault
        for row in rows:
            check_json_text(json.dumps(row, ensure_ascii=False), row, item_id=row["item_id"])
    return text


_TYPES = {"item_id": "text", "detail": "text", **{name: kind for name, kind, _, _ in _OPTIONAL_FIELDS}}


class Ledger:
    """The item ledger in one PostgreSQL database.

    :param dsn: a libpq DSN or URI; when None, resolved from the Airflow connection ``conn_id``.
    :param conn_id: the Airflow connection id of the ledger (default ``[conveyor] ledger_conn_id``,
        itself ``conveyor_ledger`` by default).
    :param application_name: shown in ``pg_stat_activity``.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        conn_id: str | None = None,
        application_name: str = "conveyor",
        reconnect_seconds: float = 0.0,
    ) -> None:
        from conveyor import config

        self.dsn = resolve_dsn(dsn, conn_id=conn_id or config.ledger_conn_id())
        self.application_name = application_name
        self.reconnect_seconds = reconnect_seconds

    # -- connections -------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Ledger({describe(self.dsn)})"

    def _open(self) -> psycopg.Connection:
        """A new connection; while the server refuses (restarting, recovering from a crash) it is
        tried again for up to ``reconnect_seconds``, so a task rides out a short restart."""
        deadline = time.monotonic() + self.reconnect_seconds
        delay = 0.25
        while True:
            try:
                return psycopg.connect(
                    self.dsn, application_name=self.application_name, connect_timeout=10, autocommit=False
                )
            except psycopg.OperationalError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LedgerUnavailable(
                        f"cannot reach the ledger database at {describe(self.dsn)}: {faults.first_line(exc)}"
                    ) from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, 2.0)

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection]:
        """A connection to the ledger; commits on success, rolls back on error.

        A connection lost inside the block (the server restarted or crashed) raises
        :class:`LedgerUnavailable`, the ledger's one error for "away, try again later"; whatever the
        transaction had done is rolled back by the server.
        """
        conn = self._open()
        try:
            with conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise LedgerUnavailable(
                f"lost the ledger database at {describe(self.dsn)}: {faults.first_line(exc)}"
            ) from exc
        finally:
            conn.close()

    def upgrade(self, target: int | None = None) -> list[str]:
        """Apply pending schema migrations; returns the names applied (empty when up to date)."""
        with self.connect() as conn:
            conn.autocommit = True
            return migrate.upgrade(conn, target)

    def schema_version(self) -> int:
        with self.connect() as conn:
            return migrate.current_version(conn)

    # -- workflow declarations ---------------------------------------------------------------

    def declare(self, workflow: Workflow, *, actor: str | None = None) -> Workflow:
        """Store a workflow's declaration (a no-op when stored already); returns it with its version."""
        with self.connect() as conn:
            return declarations.declare(conn, self.dsn, workflow, actor=actor)

    def workflow(self, workflow: str | Workflow) -> Workflow:
        """The declaration of ``workflow``: the latest stored one for a name (declared first when
        given a :class:`~conveyor.workflow.Workflow`); raises :class:`UnknownWorkflow`."""
        if isinstance(workflow, Workflow):
            return workflow if workflow.version is not None else self.declare(workflow)
        return declarations.latest(self.connect, self.dsn, workflow)

    def workflow_versions(self, name: str) -> dict[int, Workflow]:
        """Every stored version of a workflow's declaration (oldest first)."""
        return declarations.versions(self.connect, self.dsn, name)

    def declare_ai_task(
        self, workflow: str, to_status: str, definition: Mapping[str, Any], *, actor: str | None = None
    ) -> None:
        """Store what the AI step writing ``to_status`` promises of its answers (see ``ledger.ai_tasks``)."""
        from conveyor.ledger import ai_tasks

        with self.connect() as conn:
            ai_tasks.declare(conn, workflow, to_status, definition, actor=actor)

    def ai_tasks(self, workflow: str) -> dict[str, dict[str, Any]]:
        """The stored AI step declarations of ``workflow``: the status each writes -> its definition."""
        from conveyor.ledger import ai_tasks

        with self.connect() as conn:
            return ai_tasks.declared(conn, workflow)

    def workflow_names(self) -> list[str]:
        """Every workflow with a stored declaration."""
        with self.connect() as conn:
            return declarations.names(conn)

    # -- writes ------------------------------------------------------------------------------

    def receive(
        self,
        workflow: str | Workflow,
        run_id: str,
        items: Iterable[NewItem],
        *,
        actor: str,
        reason: str | None = None,
        routes: Mapping[str, Route] | None = None,
    ) -> ReceiveResult:
        """Record new items in the workflow's first status (set-based, through COPY), each with its
        audit row, under the workflow's current version.

        Re-receiving an item with the same input is a no-op (``unchanged``); with different input
        it is a ``conflict`` and nothing is overwritten.

        :param routes: item id -> :class:`~conveyor.ledger.receiving.Route`: the move each newly
            inserted item makes right away, in the same write (its status, reason and error, and
            a second audit row). Items already in the ledger are not moved: the caller moves those
            it owns with :meth:`transition`, guarded as usual.
        :raises IllegalTransition: a route's status is not allowed from the first status.
        """
        flow = self.workflow(workflow)
        if routes:
            for target in {route.to_status for route in routes.values()}:
                if not flow.allows(flow.first, target):
                    illegal = {i: flow.first for i, r in routes.items() if r.to_status == target}
                    raise IllegalTransition(flow.name, target, illegal)
        result = ReceiveResult()
        given: dict[str, NewItem] = {}
        with receiving.no_gc():
            for item in items:
                item_id = item_id_for(flow.name, item.business_key)
                if item_id in given:
                    result.duplicates.append(item_id)
                else:
                    given[item_id] = item
            with self.connect() as conn:
                for chunk in _chunks(list(given.items()), receiving.CHUNK_ROWS):
                    # Rows are made as the COPY streams them: the server inserts one part while
                    # the next is serialised (each payload once: stored and hashed).
                    rows = receiving.LazyRows(chunk, canonical_json, hash_text)
                    self._receive_chunk(conn, flow, run_id, rows, actor, reason, routes, result)
                    conn.commit()
        return result

    def _receive_chunk(
        self,
        conn: psycopg.Connection,
        flow: Workflow,
        run_id: str,
        chunk: receiving.LazyRows,
        actor: str,
        reason: str | None,
        routes: Mapping[str, Route] | None,
        result: ReceiveResult,
    ) -> None:
        if receiving.copy_new(conn, flow, run_id, chunk, actor=actor, reason=reason, routes=routes):
            result.inserted.extend(row[0] for row in chunk)
            return
        new, existing = receiving.stage_and_insert(conn, flow, run_id, chunk, actor=actor, reason=reason)
        result.inserted.extend(row[0] for row in chunk if row[0] in new)
        for item_id, other_run, status, same in existing:
            if same:
                result.unchanged.append(item_id)
            else:
                result.conflicts[item_id] = (other_run, status)
        if routes:  # the new items of a chunk with conflicts make their move as a second statement
            by_status: dict[str, dict[str, ItemUpdate]] = {}
            for item_id in sorted(new & routes.keys()):
                route = routes[item_id]
                by_status.setdefault(route.to_status, {})[item_id] = ItemUpdate(
                    reason=route.reason, last_error=route.last_error, review_target=route.review_target,
                    detail=route.detail,
                )
            for to_status, updates in by_status.items():
                self._move_chunk(conn, flow, list(updates), updates, [flow.first], to_status, actor, None)

    def transition(
        self,
        workflow: str | Workflow,
        items: Iterable[str] | Mapping[str, ItemUpdate],
        *,
        to_status: str,
        actor: str,
        from_status: str | Sequence[str] | None = None,
        reason: str | None = None,
        atomic: bool = True,
    ) -> TransitionResult:
        """Move items to ``to_status``, set-based, with an audit row per item.

        :param workflow: the workflow (its name, or its declaration) whose table the move must obey.
        :param items: item ids, or item id -> :class:`ItemUpdate` to write data with the move.
        :param from_status: the status (or statuses) each item must hold now. An item that holds
            another one is not moved and comes back in ``not_moved`` with its current status (a
            race lost, or an item already moved). When None, every status from which the
            workflow allows ``to_status`` is accepted, and an item whose current status does not
            allow it raises :class:`IllegalTransition` and rolls the whole call back.
        :param reason: the reason for items without their own :class:`ItemUpdate`.
        :param atomic: the whole call is one transaction (the default). False, for a step that
            repeats a move until it is done (promote, publish): with ``from_status`` given, a move
            of more than 30k items (4+ chunks) runs in two lanes at once, each a connection and a transaction of
            its own; if one fails, the other lane's items stay moved (each with its audit row) and
            a repeat of the call moves the rest.
        :raises IllegalTransition: the workflow's table forbids the move (for the version of the
            workflow an item was received under); nothing is changed.
        """
        updates = dict(items) if isinstance(items, Mapping) else None
        ids = sorted(updates if updates is not None else set(items))  # sorted: one lock order
        if not ids:
            return TransitionResult()
        flow = self.workflow(workflow)
        target = str(to_status)
        explicit = from_status is not None
        if from_status is not None:
            froms = list(as_statuses(from_status))
            illegal = [s for s in froms if not flow.allows(s, target)]
            if illegal:
                raise IllegalTransition(flow.name, target, {item: illegal[0] for item in ids})
        else:
            froms = sorted({f for f, t in flow.transitions if t == target})
        blocked = self._blocked_versions(flow, froms, target)
        chunks = list(_chunks(ids, CHUNK_SIZE))
        if not atomic and explicit and not blocked and len(chunks) >= 2 * _MIN_CHUNKS_PER_LANE:
            # No item can make this call illegal (the statuses were checked above) and the caller
            # repeats it until done: two lanes keep two server processes moving (a move of 100k
            # items spends ~97% of its time waiting on the server, py-spy).
            lanes = [chunks[: len(chunks) // 2], chunks[len(chunks) // 2 :]]
            with ThreadPoolExecutor(len(lanes), thread_name_prefix="conveyor-move") as pool:
                parts = list(pool.map(lambda lane: self._move_lane(
                    flow, lane, updates, froms, target, actor, reason, explicit, blocked), lanes))
            result = TransitionResult()
            for part in parts:
                result.moved.extend(part.moved)
                result.not_moved.update(part.not_moved)
            return result
        # One transaction for the whole call (each chunk's statement in a savepoint of its own, for
        # the deadlock retry): an illegal item anywhere leaves every item where it was.
        return self._move_lane(flow, chunks, updates, froms, target, actor, reason, explicit, blocked)

    def _move_lane(
        self,
        flow: Workflow,
        chunks: Sequence[Sequence[str]],
        updates: Mapping[str, ItemUpdate] | None,
        froms: Sequence[str],
        target: str,
        actor: str,
        reason: str | None,
        explicit: bool,
        blocked: Sequence[int],
    ) -> TransitionResult:
        """Move ``chunks`` in one transaction; see :meth:`transition`."""
        result = TransitionResult()
        with self.connect() as conn, conn.transaction():
            for chunk in chunks:
                moved = self._move_chunk(conn, flow, chunk, updates, froms, target, actor, reason, blocked)
                result.moved.extend(moved)
                missing = [item_id for item_id in chunk if item_id not in moved]
                if missing:
                    current = self._current_statuses(conn, missing)
                    bad: dict[str, str] = {}
                    if not explicit:
                        bad = {i: s for i, s in current.items() if s is not None and not flow.allows(s, target)}
                    if blocked:  # held back by the chain of the version they were received under
                        bad.update({i: s for i, s in current.items() if s is not None and s in froms})
                    if bad:
                        raise IllegalTransition(flow.name, target, bad)
                    result.not_moved.update(current)
        return result

    def _blocked_versions(self, flow: Workflow, froms: Sequence[str], target: str) -> list[int]:
        """Older versions of the workflow whose chain forbids moving from ``froms`` to ``target``."""
        if flow.version is None or flow.version <= 1:
            return []
        return [
            version
            for version, older in self.workflow_versions(flow.name).items()
            if version != flow.version and any(not older.allows(f, target) for f in froms)
        ]

    def _move_chunk(
        self,
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
            for name, _, value_of, _ in _OPTIONAL_FIELDS:
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
            params["data"] = _move_data(chunk, {name: params.pop(name) for name in fields})
        statement = _move_statement(fields, from_one=len(froms) == 1, versioned=bool(blocked))
        for attempt in range(_DEADLOCK_RETRIES):
            try:
                with conn.transaction():  # a savepoint: a lost deadlock undoes this statement only
                    rows = conn.execute(statement, params).fetchall()
                return {row[0] for row in rows}
            except psycopg.errors.DeadlockDetected:
                # A concurrent mover of the same items locked them in another order and won; go on
                # in the global lock order (its moves are then seen and not repeated).
                if attempt + 1 == _DEADLOCK_RETRIES:
                    raise
                statement = _move_statement(fields, from_one=False, versioned=bool(blocked))
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _current_statuses(conn: psycopg.Connection, item_ids: Sequence[str]) -> dict[str, str | None]:
        found: dict[str, str] = dict(
            conn.execute(
                "SELECT item_id, status FROM conveyor.items WHERE item_id = ANY(%s)", (list(item_ids),)
            ).fetchall()
        )
        return {item_id: found.get(item_id) for item_id in item_ids}

    # -- change notifications ----------------------------------------------------------------

    #: The channel review decisions are announced on (see ``conveyor.review.pending_counter``).
    REVIEW_CHANNEL = "conveyor_review"

    def notify_review(self, workflow: str, run_ids: Iterable[str]) -> None:
        """Tell the review triggers of these runs that a person decided something (NOTIFY, no write):
        they look at the ledger at once instead of on their next poll tick."""
        runs = sorted(set(run_ids))
        if not runs:
            return
        with self.connect() as conn:
            conn.execute(
                "SELECT pg_notify(%s, %s::text || chr(31) || r) FROM unnest(%s::text[]) AS r",
                (self.REVIEW_CHANNEL, workflow, runs),
            )

    # -- alerts sent once ----------------------------------------------------------------------

    def claim_alert(self, key: str, subject: str, *, sent_by: str | None = None) -> bool:
        """Claim the right to send the alert ``key``: True once, False for every later claim."""
        with self.connect() as conn:
            return alerts_sent.claim(conn, key, subject, sent_by)

    def release_alert(self, key: str) -> None:
        """Give an alert's claim back (its sending failed): the next reporter of it sends."""
        with self.connect() as conn:
            alerts_sent.release(conn, key)

    # -- the guardrail measured (ledger.ai_labels) ---------------------------------------------

    def record_ai_tallies(self, tallies: Sequence[ai_labels.StepTally]) -> None:
        """Record what committed chunks of an AI step did (passed, spot-checked, routed; confidences)."""
        with self.connect() as conn:
            ai_labels.record_tallies(conn, tallies)

    def ai_tallies(
        self, workflow: str, *, since: datetime, until: datetime, step: str | None = None
    ) -> list[ai_labels.StepTally]:
        """The AI step tallies of ``workflow`` committed in ``[since, until)``, oldest first."""
        with self.connect() as conn:
            return ai_labels.read_tallies(conn, workflow, since=since, until=until, step=step)

    def record_ai_labels(self, decisions: Sequence[ai_labels.Decision], *, actor: str) -> int:
        """Label the decided AI answers (set-based); items no AI step routed are skipped."""
        with self.connect() as conn:
            return ai_labels.record_labels(conn, decisions, actor)

    def forget_ai_labels(self, item_ids: Sequence[str]) -> int:
        """Drop the labels of decisions taken back."""
        with self.connect() as conn:
            return ai_labels.forget_labels(conn, item_ids)

    def answer_labels(
        self, workflow: str, *, since: datetime, until: datetime, step: str | None = None
    ) -> list[ai_labels.AnswerLabel]:
        """The labels of ``workflow``'s answers routed to review in ``[since, until)``."""
        with self.connect() as conn:
            return ai_labels.read_labels(conn, workflow, since=since, until=until, step=step)

    def ai_steps(self, workflow: str) -> list[str]:
        """The AI steps of ``workflow`` that ever recorded a tally."""
        with self.connect() as conn:
            return ai_labels.steps_of(conn, workflow)

    # -- idempotency keys --------------------------------------------------------------------

    def claim_effects(self, step: str, item_ids: Sequence[str], *, actor: str) -> list[str]:
        """Claim the (item, step) key for each item; returns only the items not already done.

        A claim left by a crashed attempt (state ``claimed``) is handed out again: the caller
        must make the effect itself idempotent on the key (see :meth:`effect_key`).
        """
        with self.connect() as conn:
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

    def complete_effects(self, step: str, results: Mapping[str, Any]) -> int:
        """Mark the (item, step) keys done with their results; returns how many were open."""
        with self.connect() as conn:
            cur = conn.execute(
                "UPDATE conveyor.effects e SET state = 'done', completed_at = now(), result = r.result::jsonb"
                " FROM unnest(%s::text[], %s::text[]) AS r(item_id, result)"
                " WHERE e.item_id = r.item_id AND e.step = %s AND e.state <> 'done'",
                (list(results), [canonical_json(v) for v in results.values()], step),
            )
            return cur.rowcount

    def effects(self, step: str, item_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """The recorded effects of a step (item id -> state, result, times)."""
        query = (
            "SELECT item_id, state, result, claimed_by, claimed_at, completed_at FROM conveyor.effects WHERE step = %s"
        )
        params: list[Any] = [step]
        if item_ids is not None:
            query += " AND item_id = ANY(%s)"
            params.append(list(item_ids))
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return {row.pop("item_id"): row for row in cur.execute(query, params).fetchall()}

    @staticmethod
    def effect_key(item_id: str, step: str) -> str:
        """A stable idempotency key for an external system (payment API, mail server)."""
        return hashlib.sha256(f"{item_id}\x00{step}".encode()).hexdigest()[:32]

    # -- step leases (sharded steps) ---------------------------------------------------------

    def claim_chunk(
        self,
        *,
        workflow: str,
        run_id: str,
        status: str,
        step: str,
        holder: leases.Holder,
        limit: int,
        lease_seconds: float,
    ) -> leases.Claim:
        """Lease up to ``limit`` of the run's items in ``status`` that no live lease keeps, in one
        statement (``FOR UPDATE SKIP LOCKED``); see :mod:`conveyor.ledger.leases`."""
        with self.connect() as conn:
            return leases.claim(
                conn, workflow=workflow, run_id=run_id, status=status, step=step, holder=holder,
                limit=limit, lease_seconds=lease_seconds,
            )

    def renew_leases(self, step: str, holder: leases.Holder, lease_seconds: float) -> int:
        """Extend every lease this attempt holds on ``step``; returns how many."""
        with self.connect() as conn:
            return leases.renew(conn, step, holder, lease_seconds)

    def release_leases(self, step: str, holder: leases.Holder, item_ids: Sequence[str] | None = None) -> int:
        """Drop this attempt's leases on ``step`` (all, or those of ``item_ids``)."""
        with self.connect() as conn:
            return leases.release(conn, step, holder, item_ids)

    def leased_elsewhere(self, *, workflow: str, run_id: str, status: str, step: str, holder: leases.Holder) -> int:
        """How many of the run's items in ``status`` another holder's live lease keeps."""
        with self.connect() as conn:
            return leases.foreign_live(conn, workflow=workflow, run_id=run_id, status=status, step=step, holder=holder)

    # -- batches -----------------------------------------------------------------------------

    def record_batch(
        self,
        workflow: str,
        run_id: str,
        step: str,
        *,
        status: str,
        source: str | None = None,
        input_hash: str | None = None,
        reason: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Record what a step made of a whole input batch (one row per workflow, run and step)."""
        with self.connect() as conn:
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

    def get_batch(self, workflow: str, run_id: str, step: str) -> dict[str, Any] | None:
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                "SELECT * FROM conveyor.batches WHERE workflow = %s AND run_id = %s AND step = %s",
                (workflow, run_id, step),
            ).fetchone()

    def rejected_batches(self, workflow: str, run_id: str) -> list[dict[str, Any]]:
        """The run's batches a gate rejected (``quarantined``) or refused as a repeat, with their reasons."""
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                "SELECT step, status, source, reason, updated_at FROM conveyor.batches"
                " WHERE workflow = %s AND run_id = %s AND status IN ('quarantined', 'repeated') ORDER BY step",
                (workflow, run_id),
            ).fetchall()

    def accepted_elsewhere(self, workflow: str, step: str, input_hash: str, run_id: str) -> EarlierBatch | None:
        """The first other run whose gate ``step`` accepted an input with this hash (a re-sent file)."""
        with self.connect() as conn:
            return deliveries.accepted_elsewhere(conn, workflow, step, input_hash, run_id)

    def deliveries(self, workflow: str, *, run_id: str | None = None, limit: int = 50) -> list[Delivery]:
        """Every input the workflow's gates saw (accepted, rejected, repeated, empty), newest first."""
        with self.connect() as conn:
            return deliveries.read_deliveries(conn, workflow, run_id, limit)

    def outbox(self, workflow: str, *, run_id: str | None = None, limit: int = 100) -> list[OutboxEntry]:
        """What the workflow published or applied once (and what was begun), newest first."""
        with self.connect() as conn:
            return deliveries.read_outbox(conn, workflow, run_id, limit)

    def review_decisions(self, workflow: str, run_id: str) -> dict[str, ReviewDecision]:
        """item id -> the last decision a person made on it, for the run's items."""
        with self.connect() as conn:
            return reviewed.read_review_decisions(conn, workflow, run_id)

    # -- reads -------------------------------------------------------------------------------

    def get(self, item_id: str) -> Item:
        """One item; raises :class:`UnknownItem`."""
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(f"SELECT {_ITEM_COLUMNS} FROM conveyor.items WHERE item_id = %s", (item_id,)).fetchone()
        if row is None:
            raise UnknownItem(item_id)
        return Item(**row)

    def items_by_id(self, item_ids: Sequence[str]) -> list[Item]:
        """The items with these ids (those that exist), each looked up by key."""
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                f"SELECT {_ITEM_COLUMNS} FROM conveyor.items WHERE item_id = ANY(%s)", (list(item_ids),)
            ).fetchall()
        return [Item(**row) for row in rows]

    def history(self, item_id: str) -> list[TransitionRecord]:
        """Every transition of an item, oldest first; raises :class:`UnknownItem`."""
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                f"SELECT {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = %s ORDER BY id",
                (item_id,),
            ).fetchall()
            if (
                not rows
                and cur.execute("SELECT 1 FROM conveyor.items WHERE item_id = %s", (item_id,)).fetchone() is None
            ):
                raise UnknownItem(item_id)
        return [TransitionRecord(**row) for row in rows]

    def latest_moves(
        self, item_ids: Sequence[str], *, to_status: str | Sequence[str] | None = None
    ) -> dict[str, TransitionRecord]:
        """Each item's latest transition (into one of ``to_status`` when given), in one query read
        through the ``transitions_item`` index: what a bulk decision needs to know of each item
        (the checks its quarantine recorded, the step that routed it, its last decision).

        :param item_ids: the items (those with no such transition are absent from the answer).
        :param to_status: only moves into this status (or these statuses).
        """
        if not item_ids:
            return {}
        query = f"SELECT DISTINCT ON (item_id) {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = ANY(%s)"
        params: list[Any] = [list(item_ids)]
        if to_status is not None:
            query += " AND to_status = ANY(%s)"
            params.append(list(as_statuses(to_status)))
        query += " ORDER BY item_id, id DESC"
        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return {row["item_id"]: TransitionRecord(**row) for row in cur.execute(query, params).fetchall()}

    def items(
        self,
        *,
        workflow: str | None = None,
        run_id: str | None = None,
        status: str | Sequence[str] | None = None,
        limit: int | None = 1000,
        offset: int = 0,
    ) -> list[Item]:
        """Items matching every filter given, newest first."""
        query, params = items_query(
            workflow=workflow, run_id=run_id, status=status, limit=limit, offset=offset, columns=ITEM_TEXT_COLUMNS
        )
        # Plain tuples (a dict per row costs a tenth of a 100k-item read), JSON parsed in bulk.
        with self.connect() as conn:
            return items_from_text_rows(conn.execute(query, params).fetchall())

    def count_by_status(self, *, workflow: str | None = None, run_id: str | None = None) -> dict[str, int]:
        where, params = _filters(workflow, run_id, None)
        with self.connect() as conn:
            rows = conn.execute(
                f"SELECT status, count(*) FROM conveyor.items{where} GROUP BY status ORDER BY status", params
            ).fetchall()
        return {status: count for status, count in rows}

    def counts_by_workflow(self, run_id: str, *, workflow: str | None = None) -> dict[str, dict[str, int]]:
        """workflow -> status -> items of the run (a run id can be shared by several workflows' DAGs)."""
        where, params = _filters(workflow, run_id, None)
        with self.connect() as conn:
            rows = conn.execute(
                f"SELECT workflow, status, count(*) FROM conveyor.items{where} GROUP BY 1, 2", params
            ).fetchall()
        out: dict[str, dict[str, int]] = {}
        for name, status, count in rows:
            out.setdefault(name, {})[status] = count
        return out

    def item_ids(self, *, workflow: str, run_id: str, status: str | Sequence[str]) -> list[str]:
        """Just the ids (cheap): what a step works on."""
        where, params = _filters(workflow, run_id, status)
        with self.connect() as conn:
            rows = conn.execute(f"SELECT item_id FROM conveyor.items{where} ORDER BY item_id", params).fetchall()
        return [r[0] for r in rows]


def _chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(seq), size):
        yield seq[start : start + size]
