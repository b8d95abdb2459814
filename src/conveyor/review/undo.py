"""Undo: a reviewer takes back their own decision while the item has not moved on.

A wrong key press must not be final. The item goes back to the review status it was decided from,
as long as the decision is still the item's latest move (no step has picked it up since) and it
was the same reviewer's. The undo is a move of its own with its audit row (``detail.action =
"undo"``, naming the decision undone), so the history keeps both.

What can be undone: an approval (the item back on the queue), a correction of quarantined input
(its previous values restored, from the correction's recorded diff) and a send-back to the AI step.
A rejection cannot: ``rejected`` is final in every workflow's table, and the run's review step may
already have counted it. A correction of an AI answer is taken back by correcting it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from conveyor.ledger.statuses import REVIEW_STATUSES, Status
from conveyor.ledger.store import Item, ItemUpdate, TransitionRecord
from conveyor.review.errors import InvalidDecision

#: Decisions (``detail.action`` of their move; None: an approval) an undo takes back.
UNDOABLE = (None, "approve", "correct", "retry_ai")


def undoable(action: str | None, from_status: str, to_status: str) -> bool:
    """Whether a decision (``action``, None: an approval) moving an item ``from_status`` ->
    ``to_status`` is one its reviewer can take back: the rule :func:`undo_plan` applies, told with
    each decision's answer so the page offers Undo only where it works."""
    if to_status == Status.REJECTED or action not in UNDOABLE:
        return False
    # a correction of an AI answer is taken back by correcting it again; of quarantined input, by undo
    return action != "correct" or from_status == Status.QUARANTINED


def undo_plan(item: Item, history: Sequence[TransitionRecord], actor: str) -> tuple[str, ItemUpdate]:
    """Where the undo moves the item, and what it writes.

    :param item: the item now.
    :param history: its transitions, oldest first.
    :param actor: who asks (``reviewer:<name>``): only their own decision can be undone.
    :raises InvalidDecision: nothing of theirs to undo, or the item has moved on; says which.
    """
    last = history[-1] if history else None
    if last is None or last.from_status not in REVIEW_STATUSES:
        raise InvalidDecision(f"item {item.item_id!r} has no decision to undo: its latest move is not a decision "
                              "(it has moved on, or was never decided)")  # fmt: skip
    if last.actor != actor:
        raise InvalidDecision(f"item {item.item_id!r} was last decided by {last.actor}: only they can undo it")
    if item.status != last.to_status:  # pragma: no cover - history and status are written together
        raise InvalidDecision(f"item {item.item_id!r} has moved on to {item.status!r}: the decision cannot be undone")
    detail = dict(last.detail) if isinstance(last.detail, Mapping) else {}
    kind = detail.get("action")
    if last.to_status == Status.REJECTED:
        raise InvalidDecision(f"item {item.item_id!r} was rejected: a rejection is final and cannot be undone")
    if not undoable(kind, str(last.from_status), str(last.to_status)):
        raise InvalidDecision(f"a {kind} decision cannot be undone; correct the item again instead")
    data: dict[str, Any] = {}
    if kind == "correct":
        field = detail.get("field") or "payload"
        current = dict((item.payload if field == "payload" else item.ai_result) or {})
        for change in detail.get("changes") or ():
            if change.get("added"):
                current.pop(change["field"], None)
            else:
                current[change["field"]] = change.get("before")
        data = {"payload": current} if field == "payload" else {"ai_result": current}
    undone = {"to_status": last.to_status, "at": last.at.isoformat(), "action": kind or "approve"}
    update = ItemUpdate(reason=f"undo by {actor} of the decision to {last.to_status}", review_target=item.review_target,
                        detail={"action": "undo", "undoes": undone}, **data)  # fmt: skip
    return str(last.from_status), update
