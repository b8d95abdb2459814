"""Bulk review decisions: approve or reject many items with one comment, set-based.

Items are grouped by (workflow, current status, target status); each group moves in one guarded
ledger transition (:meth:`conveyor.ledger.Ledger.transition`, from-status guarded, one audit row
per item with the reviewer as actor and the comment as reason), so a thousand items cost a few
statements, not a thousand round trips. An item someone else decided first (a race lost, or a
decision taken earlier) is not moved and comes back in :attr:`BulkOutcome.already_decided` with
who decided it and when.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conveyor.ledger.actors import reviewer_actor
from conveyor.ledger.statuses import REVIEW_STATUSES, REVIEW_VALUES, Status, as_statuses
from conveyor.ledger.store import Item, Ledger
from conveyor.review.errors import InvalidDecision

#: The decisions a bulk call can take (a correction is one item's edit, never bulk).
BULK_ACTIONS = ("approve", "reject")
#: Most items one filter-based call decides (the caller repeats the call for more).
MAX_BULK = 10_000


@dataclass(frozen=True)
class QueueFilter:
    """Which items of the queue a filter-based bulk decision takes.

    :param workflows: only these workflows (the caller's permitted ones at least).
    :param run_id: only items of this run.
    :param status: only these review statuses (default both).
    """

    workflows: Collection[str]
    run_id: str | None = None
    status: str | Sequence[str] | None = None


@dataclass(frozen=True)
class Decided:
    """One item a bulk call decided."""

    item_id: str
    from_status: str
    to_status: str


@dataclass(frozen=True)
class Refused:
    """One item a bulk call did not decide, and why.

    :param status: its current status (None: no such item).
    :param decided_by: who decided it first (None when nobody did: not awaiting review, or unknown).
    :param decided_at: when.
    """

    item_id: str
    status: str | None
    decided_by: str | None = None
    decided_at: datetime | None = None


@dataclass
class BulkOutcome:
    """What a bulk decision did to each item."""

    action: str
    actor: str
    comment: str | None
    decided: list[Decided] = field(default_factory=list)
    #: someone else decided these first
    already_decided: list[Refused] = field(default_factory=list)
    #: on no queue and never decided (e.g. still being processed)
    not_awaiting_review: list[Refused] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        def refused(r: Refused) -> dict[str, Any]:
            return {
                "item_id": r.item_id,
                "status": r.status,
                "decided_by": r.decided_by,
                "decided_at": r.decided_at.isoformat() if r.decided_at else None,
            }

        return {
            "action": self.action,
            "actor": self.actor,
            "comment": self.comment,
            "decided": [d.__dict__ for d in self.decided],
            "already_decided": [refused(r) for r in self.already_decided],
            "not_awaiting_review": [refused(r) for r in self.not_awaiting_review],
            "unknown": list(self.unknown),
        }


def matching_sql(where: QueueFilter, *, limit: int = MAX_BULK) -> tuple[str, list[Any]]:
    """The query (and its parameters) selecting the ids of the queue's items matching ``where``,
    oldest first: what :func:`matching_ids` runs (the plan tests explain it).

    :raises InvalidDecision: a status that is not a review status.
    """
    statuses = REVIEW_VALUES if where.status is None else list(as_statuses(where.status))
    outside = [s for s in statuses if s not in REVIEW_STATUSES]
    if outside:
        raise InvalidDecision(f"status {outside[0]!r} is not a review status; use one of {REVIEW_VALUES}")
    query = "SELECT item_id FROM conveyor.items WHERE status = ANY(%s) AND workflow = ANY(%s)"
    params: list[Any] = [statuses, sorted(where.workflows)]
    if where.run_id:
        query += " AND run_id = %s"
        params.append(where.run_id)
    query += " ORDER BY updated_at, item_id LIMIT %s"
    params.append(limit)
    return query, params


def matching_ids(ledger: Ledger, where: QueueFilter, *, limit: int = MAX_BULK) -> list[str]:
    """The ids of the items on the queue matching ``where``, oldest first (at most ``limit``)."""
    if not where.workflows:
        return []
    query, params = matching_sql(where, limit=limit)
    with ledger.connect() as conn:
        return [r[0] for r in conn.execute(query, params).fetchall()]  # type: ignore[arg-type]


def last_decisions(ledger: Ledger, item_ids: Sequence[str]) -> dict[str, tuple[str, datetime]]:
    """Item id -> (actor, time) of its latest transition out of a review status, in one query."""
    if not item_ids:
        return {}
    with ledger.connect() as conn:
        rows = conn.execute(
            "SELECT DISTINCT ON (item_id) item_id, actor, at FROM conveyor.transitions"
            " WHERE item_id = ANY(%s) AND from_status = ANY(%s) ORDER BY item_id, id DESC",
            (list(item_ids), REVIEW_VALUES),
        ).fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


def decide_many(
    ledger: Ledger, item_ids: Sequence[str], action: str, *, reviewer: str, comment: str | None = None
) -> BulkOutcome:
    """Approve or reject ``item_ids``, each with its own guarded move and audit row.

    :param ledger: the item ledger.
    :param item_ids: the items (duplicates are taken once).
    :param action: ``approve`` or ``reject``.
    :param reviewer: the person deciding (recorded as ``reviewer:<name>``).
    :param comment: why, recorded as every item's reason.
    :raises InvalidDecision: an action other than approve/reject.
    """
    from conveyor.review.review_queue import _approval_target

    if action not in BULK_ACTIONS:
        raise InvalidDecision(
            f"a bulk decision is {' or '.join(BULK_ACTIONS)}, not {action!r}; correct items one at a time"
        )
    actor = reviewer_actor(reviewer)
    comment = comment.strip() if comment and comment.strip() else None
    outcome = BulkOutcome(action=action, actor=actor, comment=comment)
    wanted = sorted(set(item_ids))
    items = {item.item_id: item for item in ledger.items_by_id(wanted)}
    outcome.unknown = [i for i in wanted if i not in items]

    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    refused: list[Item] = []
    for item in items.values():
        if item.status not in REVIEW_STATUSES:
            refused.append(item)
            continue
        if action == "reject":
            target = str(Status.REJECTED)
        elif item.review_target or item.status == Status.QUARANTINED:
            target = _approval_target(item, (), ledger)
        else:  # routed without a review target: its history says which step to resume after
            target = _approval_target(item, ledger.history(item.item_id), ledger)
        groups[(item.workflow, item.status, target)].append(item.item_id)

    lost: dict[str, str | None] = {item.item_id: item.status for item in refused}
    for (workflow, from_status, target), ids in sorted(groups.items()):
        result = ledger.transition(
            workflow, ids, to_status=target, actor=actor, from_status=from_status, reason=comment
        )
        outcome.decided.extend(Decided(i, from_status, target) for i in sorted(result.moved))
        lost.update(result.not_moved)

    firsts = last_decisions(ledger, sorted(lost))
    for item_id in sorted(lost):
        status = lost[item_id]
        if status is None:
            outcome.unknown.append(item_id)
        elif item_id in firsts:
            by, at = firsts[item_id]
            outcome.already_decided.append(Refused(item_id, status, by, at))
        else:
            outcome.not_awaiting_review.append(Refused(item_id, status))
    return outcome
