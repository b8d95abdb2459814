"""Bulk review decisions: approve or reject many items with one comment, set-based.

Items are grouped by (workflow, current status, target status); each group moves in one guarded
ledger transition (:meth:`conveyor.ledger.Ledger.transition`, from-status guarded, one audit row
per item with the reviewer as actor and the comment as reason), so a thousand items cost a few
statements, not a thousand round trips. An item someone else decided first (a race lost, or a
decision taken earlier) is not moved and comes back in :attr:`BulkOutcome.already_decided` with
who decided it and when.

This is the one path of approvals and rejections: the single-item decision, a selection, a
filter, the page, the CLI and the API all come here. So every way of deciding checks each item's
approval against its step's contract (:mod:`conveyor.review.blockers`: a blocked item is not
moved and comes back in :attr:`BulkOutcome.blocked` with what it needs), and every way wakes the
runs' review steps at once (NOTIFY) instead of on their next poll.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conveyor.ledger import bulk_reads
from conveyor.ledger.actors import reviewer_actor
from conveyor.ledger.statuses import REVIEW_STATUSES, REVIEW_VALUES, Status, as_statuses
from conveyor.ledger.store import Item, Ledger
from conveyor.review.blockers import Blocker, blockers_of
from conveyor.review.errors import InvalidDecision
from conveyor.review.labels import Decision, record_labels
from conveyor.review.undo import undoable

log = logging.getLogger(__name__)

#: The decisions a bulk call can take (a correction is one item's edit, never bulk).
BULK_ACTIONS = ("approve", "reject")
#: Items a filter-based decision reads and moves per round (it repeats rounds until none match).
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
    #: item id -> what stands in the way of approving it as it is (not moved)
    blocked: dict[str, list[Blocker]] = field(default_factory=dict)
    #: a filter's items still matching when the call stopped (0: it decided every one it could)
    remaining: int = 0

    def merge(self, other: BulkOutcome) -> None:
        """Add another round's outcome to this one."""
        self.decided.extend(other.decided)
        self.already_decided.extend(other.already_decided)
        self.not_awaiting_review.extend(other.not_awaiting_review)
        self.unknown.extend(other.unknown)
        self.blocked.update(other.blocked)

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
            "decided": [{**d.__dict__, "undoable": undoable(self.action, d.from_status, d.to_status)}
                        for d in self.decided],
            "already_decided": [refused(r) for r in self.already_decided],
            "not_awaiting_review": [refused(r) for r in self.not_awaiting_review],
            "unknown": list(self.unknown),
            "blocked": [
                {"item_id": i, "blockers": [b.as_json() for b in found]} for i, found in sorted(self.blocked.items())
            ],
            "remaining": self.remaining,
        }


def _statuses(where: QueueFilter) -> list[str]:
    """The review statuses ``where`` names (default both).

    :raises InvalidDecision: a status that is not a review status.
    """
    statuses = REVIEW_VALUES if where.status is None else list(as_statuses(where.status))
    outside = [s for s in statuses if s not in REVIEW_STATUSES]
    if outside:
        raise InvalidDecision(f"status {outside[0]!r} is not a review status; use one of {REVIEW_VALUES}")
    return statuses


def matching_sql(
    where: QueueFilter, *, limit: int = MAX_BULK, after: tuple[datetime, str] | None = None
) -> tuple[str, list[Any]]:
    """The query (and its parameters) selecting the ids of the queue's items matching ``where``,
    oldest first: what :func:`matching_ids` runs (the plan tests explain it).

    :param after: only items after this (updated_at, item_id) in that order: the next round of a
        filter-based decision (the items it could not move still match and are not read again).
    :raises InvalidDecision: a status that is not a review status.
    """
    return bulk_reads.matching_sql(_statuses(where), where.workflows, where.run_id, limit=limit, after=after)


def matching_ids(ledger: Ledger, where: QueueFilter, *, limit: int = MAX_BULK) -> list[str]:
    """The ids of the items on the queue matching ``where``, oldest first (at most ``limit``)."""
    return [item_id for item_id, _ in matching_page(ledger, where, limit=limit)]


def matching_page(
    ledger: Ledger, where: QueueFilter, *, limit: int = MAX_BULK, after: tuple[datetime, str] | None = None
) -> list[tuple[str, datetime]]:
    """(item id, updated_at) of the queue's items matching ``where`` after ``after``, oldest first."""
    if not where.workflows:
        return []
    statuses = _statuses(where)
    with ledger.connect() as conn:
        page = bulk_reads.matching_page(conn, statuses, where.workflows, where.run_id, limit=limit, after=after)
    return [(row.item_id, row.updated_at) for row in page]


def count_matching(ledger: Ledger, where: QueueFilter) -> int:
    """How many of the queue's items match ``where`` now."""
    if not where.workflows:
        return 0
    statuses = _statuses(where)
    with ledger.connect() as conn:
        return bulk_reads.count_matching(conn, statuses, where.workflows, where.run_id)


def decide_matching(
    ledger: Ledger,
    where: QueueFilter,
    action: str,
    *,
    reviewer: str,
    comment: str | None = None,
    max_items: int | None = None,
) -> BulkOutcome:
    """Decide every item on the queue matching ``where``, round after round of :data:`MAX_BULK`.

    :param max_items: stop after reading this many items (None: every one); what still matches
        then is counted in :attr:`BulkOutcome.remaining`.
    """
    outcome = BulkOutcome(action=action, actor=reviewer_actor(reviewer), comment=None)
    after: tuple[datetime, str] | None = None
    read = 0
    while max_items is None or read < max_items:
        size = MAX_BULK if max_items is None else min(MAX_BULK, max_items - read)
        page = matching_page(ledger, where, limit=size, after=after)
        if not page:
            break
        read += len(page)
        part = decide_many(ledger, [i for i, _ in page], action, reviewer=reviewer, comment=comment)
        outcome.comment = part.comment
        outcome.merge(part)
        after = (page[-1][1], page[-1][0])
        if len(page) < size:
            break
    outcome.remaining = max(count_matching(ledger, where) - len(outcome.blocked), 0) if max_items else 0
    return outcome


def last_decisions(ledger: Ledger, item_ids: Sequence[str]) -> dict[str, tuple[str, datetime]]:
    """Item id -> (actor, time) of its latest transition out of a review status, in one query."""
    if not item_ids:
        return {}
    with ledger.connect() as conn:
        moves = bulk_reads.last_moves_out_of(conn, item_ids, REVIEW_VALUES)
    return {item_id: (move.actor, move.at) for item_id, move in moves.items()}


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
    from conveyor.review.decisions import approval_target

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
    waiting = [item for item in items.values() if item.status in REVIEW_STATUSES]
    if action == "approve":
        outcome.blocked = blockers_of(ledger, waiting)
    for item in items.values():
        if item.status not in REVIEW_STATUSES:
            refused.append(item)
            continue
        if item.item_id in outcome.blocked:
            continue
        if action == "reject":
            target = str(Status.REJECTED)
        elif item.review_target or item.status == Status.QUARANTINED:
            target = approval_target(item, (), ledger)
        else:  # routed without a review target: its history says which step to resume after
            target = approval_target(item, ledger.history(item.item_id), ledger)
        groups[(item.workflow, item.status, target)].append(item.item_id)

    lost: dict[str, str | None] = {item.item_id: item.status for item in refused}
    woken: dict[str, set[str]] = defaultdict(set)
    answers: list[str] = []
    for (workflow, from_status, target), ids in sorted(groups.items()):
        result = ledger.transition(
            workflow, ids, to_status=target, actor=actor, from_status=from_status, reason=comment
        )
        outcome.decided.extend(Decided(i, from_status, target) for i in sorted(result.moved))
        woken[workflow].update(items[i].run_id for i in result.moved)
        lost.update(result.not_moved)
        if from_status == Status.PENDING_REVIEW:
            answers.extend(result.moved)
    # approve: the model's answer stood; reject: the input was bad (see conveyor.review.labels)
    record_labels(ledger, [Decision(i, "right" if action == "approve" else "bad_input") for i in answers], actor)
    wake(ledger, woken)

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


def wake(ledger: Ledger, runs: dict[str, set[str]]) -> None:
    """NOTIFY the review steps of these runs (workflow -> run ids): a person decided something, they
    look at the ledger at once instead of on their next poll tick.

    :param ledger: the ledger.
    :param runs: workflow -> the runs whose items were decided.
    """
    for workflow, run_ids in sorted(runs.items()):
        try:
            ledger.notify_review(workflow, run_ids)
        except Exception:  # the decisions are committed; the triggers' poll still sees them
            log.warning("could not notify the review steps of %s %s", workflow, sorted(run_ids)[:5], exc_info=True)
