"""The ledger store: set-based, guarded, audited writes of item statuses in PostgreSQL.

Every write moves many items in one statement. The statement is guarded by the status the
caller expects each item to have, so two workers racing on the same items move each item
exactly once; the loser learns which items it did not move and where they are now. The item's
new data and its audit row are written by the same statement, so neither exists without the
other.

:class:`Ledger` is the facade: it owns the connection and the transactions, and each of its
methods calls the ledger module that holds the statements (:mod:`~conveyor.ledger.moves`,
:mod:`~conveyor.ledger.receiving`, :mod:`~conveyor.ledger.item_reads`, :mod:`~conveyor.ledger.effects`,
:mod:`~conveyor.ledger.batches` ...); what a step records beside the statuses (effects, leases, AI
labels, alerts) is the part of the facade in :mod:`~conveyor.ledger.step_records`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from conveyor.ledger import batches, deliveries, item_reads, migrate, receiving, reviewed, sessions, transitions
from conveyor.ledger import workflows as declarations

# Re-exported: what a Ledger method takes and returns is imported from here by its callers.
from conveyor.ledger.changes import ItemUpdate as ItemUpdate
from conveyor.ledger.changes import NewItem as NewItem
from conveyor.ledger.changes import ReceiveResult as ReceiveResult
from conveyor.ledger.changes import TransitionResult as TransitionResult
from conveyor.ledger.connection import describe, resolve_dsn
from conveyor.ledger.deliveries import Delivery, EarlierBatch, OutboxEntry
from conveyor.ledger.errors import IllegalTransition
from conveyor.ledger.hashing import canonical_json as canonical_json
from conveyor.ledger.hashing import hash_text as hash_text
from conveyor.ledger.hashing import input_hash as input_hash
from conveyor.ledger.hashing import item_id_for as item_id_for
from conveyor.ledger.receiving import Route
from conveyor.ledger.records import Item as Item
from conveyor.ledger.records import TransitionRecord as TransitionRecord
from conveyor.ledger.reviewed import ReviewDecision
from conveyor.ledger.step_records import StepRecords
from conveyor.workflow import Workflow


class Ledger(StepRecords):
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

    def open_connection(self) -> psycopg.Connection:
        """A new connection of the caller's own, outside the pool (the caller closes it); while the
        server refuses (restarting, recovering from a crash) it is tried again for up to
        ``reconnect_seconds``, so a task rides out a short restart."""
        return sessions.open_connection(self.dsn, self.application_name, self.reconnect_seconds)

    def connect(self) -> AbstractContextManager[psycopg.Connection]:
        """A connection to the ledger; commits on success, rolls back on error.

        The connection is one of this process's idle ones when one answers (see
        :mod:`conveyor.ledger.pool`), and goes back to them after a clean end. A connection lost
        inside the block (the server restarted or crashed) raises :class:`LedgerUnavailable`, the
        ledger's one error for "away, try again later"; whatever the transaction had done is
        rolled back by the server.
        """
        return sessions.session(self.dsn, self.application_name, self.reconnect_seconds)

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
        return receiving.receive_items(self.connect, flow, run_id, items, actor=actor, reason=reason, routes=routes)

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
        return transitions.move_items(
            self.connect, self.workflow(workflow), ids, updates, to_status=to_status, actor=actor,
            from_status=from_status, reason=reason, atomic=atomic, versions=self.workflow_versions,
        )

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
            batches.record(
                conn, workflow, run_id, step, status=status, source=source, input_hash=input_hash, reason=reason,
                detail=detail,
            )

    def get_batch(self, workflow: str, run_id: str, step: str) -> dict[str, Any] | None:
        """The batch row the step recorded in the run, or None."""
        with self.connect() as conn:
            return batches.read(conn, workflow, run_id, step)

    def rejected_batches(self, workflow: str, run_id: str) -> list[dict[str, Any]]:
        """The run's batches a gate rejected (``quarantined``) or refused as a repeat, with their reasons."""
        with self.connect() as conn:
            return batches.rejected(conn, workflow, run_id)

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
        with self.connect() as conn:
            return item_reads.get(conn, item_id)

    def items_by_id(self, item_ids: Sequence[str]) -> list[Item]:
        """The items with these ids (those that exist), each looked up by key."""
        with self.connect() as conn:
            return item_reads.by_id(conn, item_ids)

    def history(self, item_id: str) -> list[TransitionRecord]:
        """Every transition of an item, oldest first; raises :class:`UnknownItem`."""
        with self.connect() as conn:
            return item_reads.history(conn, item_id)

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
        with self.connect() as conn:
            return item_reads.latest_moves(conn, item_ids, to_status)

    def items(
        self,
        *,
        workflow: str | None = None,
        run_id: str | None = None,
        status: str | Sequence[str] | None = None,
        limit: int | None = 1000,
        offset: int = 0,
    ) -> list[Item]:
        """Items matching every filter given, the newest received first."""
        with self.connect() as conn:
            return item_reads.matching(
                conn, workflow=workflow, run_id=run_id, status=status, limit=limit, offset=offset
            )

    def count_by_status(self, *, workflow: str | None = None, run_id: str | None = None) -> dict[str, int]:
        """status -> items (of the workflow and run, when given)."""
        with self.connect() as conn:
            return item_reads.count_by_status(conn, workflow, run_id)

    def counts_by_workflow(self, run_id: str, *, workflow: str | None = None) -> dict[str, dict[str, int]]:
        """workflow -> status -> items of the run (a run id can be shared by several workflows' DAGs)."""
        with self.connect() as conn:
            return item_reads.counts_by_workflow(conn, run_id, workflow)

    def item_ids(self, *, workflow: str, run_id: str, status: str | Sequence[str]) -> list[str]:
        """Just the ids (cheap): what a step works on."""
        with self.connect() as conn:
            return item_reads.ids_in(conn, workflow, run_id, status)
