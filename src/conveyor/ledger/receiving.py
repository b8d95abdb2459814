"""How :meth:`conveyor.ledger.Ledger.receive` writes new items: a transaction per chunk
(:func:`receive_items`), each chunk written one of two ways, tried in this order:

1. **Straight COPY.** When none of the chunk's items is in the ledger yet (a new delivery: the
   common case), the items are copied straight into ``conveyor.item_bodies`` and
   ``conveyor.item_states`` and their audit rows straight into ``conveyor.transitions``, in a
   savepoint. No staging table, no ``ON CONFLICT`` pass, no ``RETURNING``: the cost is that of a
   raw COPY of the rows plus their audit rows.
2. **Staging.** When one item exists already (a re-run, a re-sent delivery), the primary key
   refuses the COPY, the savepoint undoes it and the chunk goes through a staging table with the
   conflict rules (``unchanged`` when the input is the same, ``conflict`` when it differs).

A :class:`Route` per item lets the caller write the item's next move in the same write: the item
is inserted directly at the route's status, with both audit rows (received, then the move). The
gate routes every row this way: receiving and routing 1M rows is one write, not three.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from conveyor.ledger.changes import NewItem, ReceiveResult
    from conveyor.workflow import Workflow


@dataclass(frozen=True)
class Route:
    """Where a new item goes right after it is received, in the same write.

    :param to_status: the status the item is inserted at; the workflow must allow the move from
        its first status.
    :param reason: why it holds that status (the audit row's reason too).
    :param last_error: the error text written with the move.
    :param review_target: where an approval of the item resumes.
    :param detail: what the move's audit row records besides its reason (e.g. the gate that
        quarantined the item, which validates a correction of it again).
    """

    to_status: str
    reason: str | None = None
    last_error: str | None = None
    review_target: str | None = None
    detail: Mapping[str, Any] | None = None


#: Items per receive transaction. A receive inserts rows and locks no existing one, so its chunk
#: can be larger than a move's: at 50k instead of 10k, 100k items are received in 0.80x the time
#: (fewer commits and COPY starts, more of the client's formatting overlapped with the server's
#: inserts); 100k per chunk gained nothing more and holds twice the rows in memory.
CHUNK_ROWS = 50_000

#: A chunk row: item id, business key, canonical payload JSON, input hash, priority.
Row = tuple[str, str, str, str, int]


class LazyRows:
    """A chunk's rows, each made (payload serialised and hashed) the first time it is iterated.

    :param chunk: (item id, :class:`~conveyor.ledger.store.NewItem`) pairs.
    :param encode: the canonical JSON of a payload.
    :param hash_text: the input hash of a canonical JSON text.
    """

    def __init__(self, chunk: Sequence[tuple[str, Any]], encode: Any, hash_text: Any) -> None:
        self._chunk = chunk
        self._encode = encode
        self._hash = hash_text
        self._rows: list[Row] = []

    def __len__(self) -> int:
        return len(self._chunk)

    def __iter__(self) -> Iterator[Row]:
        if len(self._rows) == len(self._chunk):
            yield from self._rows
            return
        self._rows = []
        from conveyor.ledger.values import check_json_text

        encode, hashed, rows = self._encode, self._hash, self._rows
        for item_id, item in self._chunk:
            text = encode(item.payload)
            check_json_text(text, item.payload, item_id=item_id)  # a named refusal, not a COPY error
            row = (item_id, item.business_key, text, item.input_hash or hashed(text), item.priority)
            rows.append(row)
            yield row


@contextmanager
def no_gc() -> Iterator[None]:
    """Bulk passes allocate millions of small objects that all live to the end of the pass: the
    cyclic collector would walk them again and again for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _text(value: str | None) -> str:
    """A value in COPY's text format."""
    if value is None:
        return "\\N"
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def _texts(values: Sequence[str]) -> Sequence[str]:
    """Values in COPY's text format: one scan of them all, a pass per value only when one needs
    escaping (item ids, keys and canonical JSON seldom do)."""
    joined = "".join(values)
    if "\\" in joined or "\t" in joined or "\n" in joined or "\r" in joined:
        return [_text(value) for value in values]
    return values


#: Rows per ``write()`` of a COPY: one string of a few MB instead of a call per row.
_WRITE_ROWS = 5000


def copy_new(
    conn: psycopg.Connection,
    flow: Workflow,
    run_id: str,
    rows: Iterable[Row],
    *,
    actor: str,
    reason: str | None,
    routes: Mapping[str, Route] | None,
) -> bool:
    """COPY a chunk of items none of which is in the ledger yet; False (nothing written) when one is.

    Rows are written in COPY's text format directly: what varies per item (id, key, payload,
    hash, priority) is escaped per row, what a route shares (status, reason, error, stage times,
    and the audit row's fixed columns) is formatted once per distinct route.

    :param rows: the chunk's rows, see :data:`Row`.
    :param routes: item id -> its route (items without one stay in the workflow's first status).
    """
    import psycopg

    from conveyor.ledger.hashing import canonical_json

    first = flow.first
    # now() is the transaction's start: the same instant the server's defaults write.
    clock = conn.execute("SELECT to_jsonb(now())::text").fetchone()
    assert clock is not None  # a SELECT without FROM returns one row
    (now,) = clock
    version = "\\N" if flow.version is None else str(flow.version)
    fixed = f"\t{_text(flow.name)}\t{_text(run_id)}"
    first_times = _text(f"{{{canonical_json(first)}:{now}}}")
    received_tail = f"{fixed}\t{_text(first)}\t{_text(reason)}\t\\N\t\\N\t{first_times}\t{version}\n"
    received_audit = (
        f"\t{_text(run_id)}\t{_text(flow.name)}\t\\N\t{_text(first)}\t{_text(actor)}\t{_text(reason)}\t\\N\n"
    )
    tails: dict[int, tuple[str, str]] = {}

    def tails_of(route: Route) -> tuple[str, str]:
        times = _text(f"{{{canonical_json(first)}:{now},{canonical_json(route.to_status)}:{now}}}")
        item = (
            f"{fixed}\t{_text(route.to_status)}\t{_text(route.reason)}\t{_text(route.last_error)}"
            f"\t{_text(route.review_target)}\t{times}\t{version}\n"
        )
        audit = (
            f"\t{_text(run_id)}\t{_text(flow.name)}\t{_text(first)}\t{_text(route.to_status)}\t{_text(actor)}"
            f"\t{_text(route.reason)}\t{_text(None if route.detail is None else canonical_json(route.detail))}\n"
        )
        return item, audit

    routes = routes or {}
    # A chunk is three COPYs, one after the other on the connection: the item bodies streamed as
    # they are made, then the state rows and the audit rows, formatted meanwhile (small next to
    # the payloads). A body already in the ledger stops the first COPY, before anything else is sent.
    states: list[str] = []  # the chunk's state rows, in parts of _WRITE_ROWS items
    audit: list[str] = []  # the chunk's audit rows, likewise
    try:
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy("COPY conveyor.item_bodies (item_id, business_key, payload, input_hash) FROM STDIN") as cp:
                stream = iter(rows)
                while batch := list(islice(stream, _WRITE_ROWS)):
                    item_ids, keys, payloads, hashes, priorities = zip(*batch, strict=True)
                    idents = _texts(item_ids)
                    if not routes:
                        item_tails: Sequence[str] = [received_tail] * len(batch)
                        audit.append(received_audit.join(idents) + received_audit)
                    else:
                        item_tails, moved = [], []
                        for item_id, ident in zip(item_ids, idents, strict=True):
                            route = routes.get(item_id)
                            if route is None:
                                item_tails.append(received_tail)
                                moved.append(ident + received_audit)
                                continue
                            both = tails.get(id(route))
                            if both is None:
                                both = tails[id(route)] = tails_of(route)
                            item_tails.append(both[0])
                            # Each item's move right after its received row: the audit table's
                            # indexes are written in item order (grouping the moves after all
                            # received rows cost the server 15% more CPU).
                            moved.append(f"{ident}{received_audit}{ident}{both[1]}")
                        audit.append("".join(moved))
                    cp.write(
                        "".join([
                            f"{ident}\t{key}\t{payload}\t{hashed}\n"
                            for ident, key, payload, hashed in zip(
                                idents, _texts(keys), _texts(payloads), hashes, strict=True
                            )
                        ])
                    )
                    states.append(
                        "".join([
                            f"{ident}\t{priority}{tail}"
                            for ident, priority, tail in zip(idents, priorities, item_tails, strict=True)
                        ])
                    )
            with cur.copy(
                "COPY conveyor.item_states (item_id, priority, workflow, run_id, status, reason, last_error,"
                " review_target, stage_times, workflow_version) FROM STDIN"
            ) as cp:
                for part in states:
                    cp.write(part)
            with cur.copy(
                "COPY conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, reason, detail)"
                " FROM STDIN"
            ) as cp:
                for part in audit:
                    cp.write(part)
    except psycopg.errors.UniqueViolation:
        return False
    return True


def stage_and_insert(
    conn: psycopg.Connection,
    flow: Workflow,
    run_id: str,
    rows: LazyRows,
    *,
    actor: str,
    reason: str | None,
) -> tuple[set[str], list[tuple[str, str, str, bool]]]:
    """Insert the chunk's items that are not in the ledger yet, through a staging table.

    :returns: the ids inserted, and for each item already there: (id, its run, its status,
        whether its input hash is the same).
    """
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS incoming (item_id text, business_key text, payload text,"
        " input_hash text, priority int) ON COMMIT DELETE ROWS"
    )
    with conn.cursor() as cur:
        with cur.copy("COPY incoming (item_id, business_key, payload, input_hash, priority) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        inserted = cur.execute(
            """
            WITH ins AS (
                INSERT INTO conveyor.item_bodies (item_id, business_key, payload, input_hash)
                SELECT item_id, business_key, payload::jsonb, input_hash FROM incoming
                ON CONFLICT (item_id) DO NOTHING
                RETURNING item_id
            ), states AS (
                INSERT INTO conveyor.item_states (item_id, workflow, run_id, status, priority, reason, stage_times,
                                                  workflow_version)
                SELECT n.item_id, %(workflow)s, %(run_id)s, %(first)s, n.priority, %(reason)s,
                       jsonb_build_object(%(first)s::text, now()), %(version)s
                FROM ins JOIN incoming n USING (item_id)
            )
            INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, reason)
            SELECT item_id, %(run_id)s, %(workflow)s, NULL, %(first)s, %(actor)s, %(reason)s FROM ins
            RETURNING item_id
            """,
            {"workflow": flow.name, "run_id": run_id, "actor": actor, "reason": reason, "first": flow.first,
             "version": flow.version},
        ).fetchall()
        new = {row[0] for row in inserted}
        existing: list[Any] = []
        if len(new) < len(rows):
            existing = cur.execute(
                "SELECT i.item_id, i.run_id, i.status, i.input_hash = n.input_hash"
                " FROM conveyor.items i JOIN incoming n USING (item_id)"
                " WHERE NOT (i.item_id = ANY(%s))",
                (list(new),),
            ).fetchall()
    return new, existing


def receive_items(
    connect: Callable[[], AbstractContextManager[psycopg.Connection]],
    flow: Workflow,
    run_id: str,
    items: Iterable[NewItem],
    *,
    actor: str,
    reason: str | None,
    routes: Mapping[str, Route] | None,
) -> ReceiveResult:
    """Record ``items`` in ``flow``'s first status, a transaction per :data:`CHUNK_ROWS`; see
    :meth:`Ledger.receive` (which checked the routes against the workflow's table).

    :param connect: opens the connection (:meth:`Ledger.connect`).
    """
    from conveyor.ledger.changes import ReceiveResult
    from conveyor.ledger.hashing import canonical_json, hash_text, item_id_for
    from conveyor.ledger.moves import chunks

    result = ReceiveResult()
    given: dict[str, NewItem] = {}
    with no_gc():
        for item in items:
            item_id = item_id_for(flow.name, item.business_key)
            if item_id in given:
                result.duplicates.append(item_id)
            else:
                given[item_id] = item
        with connect() as conn:
            for chunk in chunks(list(given.items()), CHUNK_ROWS):
                # Rows are made as the COPY streams them: the server inserts one part while the
                # next is serialised (each payload once: stored and hashed).
                rows = LazyRows(chunk, canonical_json, hash_text)
                _receive_chunk(conn, flow, run_id, rows, actor, reason, routes, result)
                conn.commit()
    return result


def _receive_chunk(
    conn: psycopg.Connection,
    flow: Workflow,
    run_id: str,
    rows: LazyRows,
    actor: str,
    reason: str | None,
    routes: Mapping[str, Route] | None,
    result: ReceiveResult,
) -> None:
    if copy_new(conn, flow, run_id, rows, actor=actor, reason=reason, routes=routes):
        result.inserted.extend(row[0] for row in rows)
        return
    new, existing = stage_and_insert(conn, flow, run_id, rows, actor=actor, reason=reason)
    result.inserted.extend(row[0] for row in rows if row[0] in new)
    for item_id, other_run, status, same in existing:
        if same:
            result.unchanged.append(item_id)
        else:
            result.conflicts[item_id] = (other_run, status)
    if routes:  # the new items of a chunk with conflicts make their move as a second statement
        from conveyor.ledger.changes import ItemUpdate
        from conveyor.ledger.moves import move_chunk

        by_status: dict[str, dict[str, ItemUpdate]] = {}
        for item_id in sorted(new & routes.keys()):
            route = routes[item_id]
            by_status.setdefault(route.to_status, {})[item_id] = ItemUpdate(
                reason=route.reason, last_error=route.last_error, review_target=route.review_target,
                detail=route.detail,
            )
        for to_status, updates in by_status.items():
            move_chunk(conn, flow, list(updates), updates, [flow.first], to_status, actor, None)
