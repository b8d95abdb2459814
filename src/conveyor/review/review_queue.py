"""The review queue: every item waiting for a person, read page by page, and the facade people decide through.

An item is on the queue while it is ``quarantined`` (it failed the validation gate) or
``pending_review`` (doubtful AI output, an approval threshold, a refused effect). The queue is
ordered by priority (highest first), then by how long the item has been waiting (oldest first).

:class:`ReviewQueue` holds the reads (this module) and the decisions
(:class:`conveyor.review.decisions.QueueDecisions`: approve, reject, correct, the ways on, undo).
"""

from __future__ import annotations

import builtins  # `builtins.list` in annotations below `ReviewQueue.list`, which shadows it there
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conveyor.ledger import review_queue_reads
from conveyor.ledger.errors import UnknownWorkflow
from conveyor.ledger.review_queue_reads import page_sql
from conveyor.ledger.statuses import REVIEW_STATUSES, REVIEW_VALUES, Status, as_statuses
from conveyor.ledger.store import Item, TransitionRecord
from conveyor.review.blockers import Blocker, blockers_of
from conveyor.review.cards import CardField, card_of, priority_sql
from conveyor.review.decisions import Action, DecisionResult, QueueDecisions, approval_target, last_decision
from conveyor.review.form_fields import FormField, form_of
from conveyor.workflow import Workflow

__all__ = ["MAX_PAGE", "Action", "DecisionResult", "ItemView", "QueueEntry", "QueuePage", "ReviewQueue", "page_sql"]

#: Most rows one page of the queue returns.
MAX_PAGE = 500

_REVIEW_VALUES: list[str] = REVIEW_VALUES


@dataclass(frozen=True)
class QueueEntry:
    """One item on the queue, with what a reviewer needs to decide.

    :param item: the item as the ledger holds it (payload, AI result, confidence, reason...).
    :param waiting_since: when it entered its review status.
    :param age_seconds: how long it has been waiting, measured by the database clock.
    """

    item: Item
    waiting_since: datetime
    age_seconds: float
    #: the value of the workflow's ``priority_field`` (None: no such field, or no number there)
    priority_value: float | None = None


@dataclass(frozen=True)
class QueuePage:
    """One page of the queue and the number of entries matching the filters."""

    entries: list[QueueEntry]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True)
class ItemView:
    """An item, its history, and what a reviewer may do with it now.

    :param awaiting_review: the item is on the queue.
    :param actions: the decisions that apply to it now (empty when not awaiting review).
    :param approve_to: the status an approval would move it to.
    :param last_decision: the latest transition out of a review status, if any.
    """

    item: Item
    history: list[TransitionRecord]
    awaiting_review: bool
    actions: list[Action]
    approve_to: str | None
    last_decision: TransitionRecord | None
    #: what stands in the way of approving it as it is (empty: an approval may go ahead)
    blockers: list[Blocker] = field(default_factory=list)
    #: the fields a correction may change, typed, the failing ones marked (empty: no correction)
    form: list[FormField] = field(default_factory=list)


class ReviewQueue(QueueDecisions):
    """Reads of the review queue and reviewers' decisions, over one ledger.

    :param ledger: the item ledger.
    """

    # -- reads -------------------------------------------------------------------------------

    def workflows(self) -> list[str]:
        """Workflows that have at least one item waiting for a person."""
        with self.ledger.connect() as conn:
            return review_queue_reads.workflows_with(conn, _REVIEW_VALUES)

    def list(
        self,
        *,
        workflows: Collection[str] | None = None,
        run_id: str | None = None,
        status: str | Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> QueuePage:
        """One page of the queue, highest priority first, then oldest first.

        Priority is the item's ``priority`` column, then the value of its workflow's declared
        ``priority_field`` (larger first, items without one after), computed in the query.

        :param workflows: only these workflows (None: every workflow; empty: nothing).
        :param run_id: only items carried by this run.
        :param status: only ``quarantined`` or only ``pending_review``; must be review statuses.
        :param limit: at most this many entries (1 to :data:`MAX_PAGE`).
        :param offset: skip this many entries.
        """
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
        if offset < 0:
            raise ValueError("offset must not be negative")
        statuses = _REVIEW_VALUES if status is None else list(as_statuses(status))
        outside = [s for s in statuses if s not in REVIEW_STATUSES]
        if outside:
            raise ValueError(f"status {outside[0]!r} is not a review status; use one of {_REVIEW_VALUES}")
        if workflows is not None and not workflows:
            return QueuePage([], 0, limit, offset)
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        clause = review_queue_reads.queue_clause(params, statuses=statuses, workflows=workflows, run_id=run_id)
        order_value = priority_sql(self._declarations(workflows), params)
        with self.ledger.connect() as conn:
            total, rows = review_queue_reads.page(conn, clause, order_value, params)
        entries = [
            QueueEntry(
                item=row.item,
                waiting_since=row.item.updated_at,
                age_seconds=max(row.age_seconds, 0.0),
                priority_value=row.priority_value,
            )
            for row in rows
        ]
        return QueuePage(entries, total, limit, offset)

    def _declarations(self, workflows: Collection[str] | None) -> dict[str, Workflow]:
        """The stored declarations of ``workflows`` (None: every workflow with items waiting)."""
        found: dict[str, Workflow] = {}
        for name in sorted(workflows) if workflows is not None else self.workflows():
            try:
                found[name] = self.ledger.workflow(name)
            except UnknownWorkflow:
                continue
        return found

    def view(self, item_id: str) -> ItemView:
        """An item with its history and the decisions open to it; raises ``UnknownItem``."""
        item = self.ledger.get(item_id)
        history = self.ledger.history(item_id)
        awaiting = item.status in REVIEW_STATUSES
        actions: list[Action] = []
        approve_to: str | None = None
        blockers: list[Blocker] = []
        if awaiting:
            blockers = blockers_of(self.ledger, [item]).get(item_id, [])
            actions = [Action.APPROVE, Action.REJECT]
            refused = any(b.code == "effect_refused" for b in blockers)
            if item.status in (Status.QUARANTINED, Status.PENDING_REVIEW) and not refused:
                actions.append(Action.CORRECT)
            for extra in dict.fromkeys(a for b in blockers for a in b.actions):
                if extra not in actions:
                    actions.append(Action(extra))
            approve_to = approval_target(item, history, self.ledger)
        form = form_of(self.ledger, item, history, blockers) if Action.CORRECT in actions else []
        return ItemView(item, history, awaiting, actions, approve_to, last_decision(history), blockers, form)

    def blockers(self, items: Sequence[Item]) -> dict[str, builtins.list[Blocker]]:
        """Item id -> what stands in the way of approving it as it is (for a page of the queue)."""
        return blockers_of(self.ledger, items)

    def search(self, text: str, *, workflows: Collection[str] | None = None, limit: int = 20) -> builtins.list[Item]:
        """Where is item X: items whose id or business key is exactly ``text``, newest first.

        :param text: an item id (``<workflow>:<key>``) or a business key.
        :param workflows: only these workflows (None: every workflow).
        """
        text = text.strip()
        if not text or (workflows is not None and not workflows):
            return []
        with self.ledger.connect() as conn:
            return review_queue_reads.search(conn, text, workflows=workflows, limit=max(1, min(limit, MAX_PAGE)))

    def card(self, item: Item) -> builtins.list[CardField]:
        """The item's review card, from its workflow's stored declaration (empty when undeclared)."""
        try:
            flow = self.ledger.workflow(item.workflow)
        except UnknownWorkflow:
            return []
        return card_of(item, flow.card_fields)
