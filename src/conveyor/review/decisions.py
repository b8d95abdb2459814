"""The decisions people take on review-queue items: one guarded ledger transition each.

A decision is one guarded ledger transition with its audit row (actor ``reviewer:<name>``, the
reviewer's comment as the reason):

* ``approve``: a ``pending_review`` item resumes its chain at the review target recorded when it
  was routed; a ``quarantined`` item is accepted as ``validated`` (unless a blocker stands in the
  way: :mod:`conveyor.review.blockers`);
* ``reject``: the item goes to ``rejected``;
* ``correct`` (see :mod:`conveyor.review.corrections`): the fields given are merged into the
  item's data and the field-level diff is recorded on the audit row. A ``quarantined`` item's
  correction lands in the field its gate validated (``payload``, or ``ai_result`` for a gate over
  extracted fields) and the item goes to ``corrected``: the run's review step validates it again
  with the same gate (to ``validated``, or back to ``quarantined``). A ``pending_review`` item's
  correction is of its AI answer (``ai_result``): it is checked against the AI task's output
  schema and rule checks, the model's answer is kept in the audit row, and the item resumes its
  chain as an approval would;
* ``retry_ai``, ``retry_effect``, ``done_elsewhere``: the ways on for a blocked item
  (:mod:`conveyor.review.ways_on`); ``undo``: one's own latest decision taken back
  (:mod:`conveyor.review.undo`).

Approvals and rejections of one item go through the bulk path (:mod:`conveyor.review.bulk`) as a
selection of one, so every way of deciding checks and wakes alike. Two reviewers deciding one item
at once: the ledger's from-status guard lets exactly one win; the other gets
:class:`~conveyor.review.errors.DecisionConflict` naming who decided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from conveyor.ledger.actors import reviewer_actor
from conveyor.ledger.statuses import REVIEW_STATUSES, Status
from conveyor.ledger.store import Item, ItemUpdate, Ledger, TransitionRecord
from conveyor.quarantine import QuarantineDetail
from conveyor.review.bulk import BulkOutcome, QueueFilter, decide_many, decide_matching, wake
from conveyor.review.claims import ReviewClaims
from conveyor.review.errors import ApprovalBlocked, DecisionConflict, InvalidDecision, NotAwaitingReview
from conveyor.review.labels import Decision, forget_labels, record_labels


class Action(StrEnum):
    """What a reviewer can decide."""

    APPROVE = "approve"
    REJECT = "reject"
    CORRECT = "correct"
    #: an item the AI step gave no usable answer: back through its gate and AI step, in its run
    RETRY_AI = "retry_ai"
    #: an item whose effect was refused: back to the effect step's input, to be tried again
    RETRY_EFFECT = "retry_effect"
    #: an item whose effect was refused: done by other means (``reference`` says where)
    DONE_ELSEWHERE = "done_elsewhere"
    #: the reviewer's own latest decision taken back, while the item has not moved on
    UNDO = "undo"


@dataclass(frozen=True)
class DecisionResult:
    """A decision that was applied."""

    item_id: str
    action: Action
    from_status: str
    to_status: str
    actor: str
    comment: str | None


class QueueDecisions:
    """Reviewers' decisions over one ledger (:class:`~conveyor.review.review_queue.ReviewQueue` adds the reads).

    :param ledger: the item ledger.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def decide(
        self,
        item_id: str,
        action: Action | str,
        *,
        reviewer: str,
        comment: str | None = None,
        changes: Mapping[str, Any] | None = None,
        payload: Mapping[str, Any] | None = None,
        reference: str | None = None,
    ) -> DecisionResult:
        """Apply a reviewer's decision as one guarded ledger transition with its audit row.

        :param item_id: the item.
        :param action: ``approve``, ``reject`` or ``correct``.
        :param reviewer: the person deciding (recorded as ``reviewer:<name>``).
        :param comment: why; recorded as the reason of the transition.
        :param changes: ``correct`` only: the corrected fields (a JSON object), merged field by field
            into the quarantined input, or into a pending item's AI answer.
        :param payload: the former name of ``changes`` (still accepted; merged too, not replacing).
        :param reference: ``done_elsewhere`` only: where the effect was done (a payment reference).
        :raises UnknownItem: no such item.
        :raises ApprovalBlocked: the approval would let the item past its step's contract; names
            each field and what it needs.
        :raises DecisionConflict: someone else decided it first; says who and when.
        :raises NotAwaitingReview: the item is not on the queue and was never decided.
        :raises InvalidDecision: the decision does not apply to this item.
        """
        try:
            action = Action(action)
        except ValueError:
            raise InvalidDecision(
                f"unknown decision {action!r}; use one of {', '.join(a.value for a in Action)}"
            ) from None
        actor = reviewer_actor(reviewer)
        comment = comment.strip() if comment and comment.strip() else None
        if changes is not None and payload is not None:
            raise InvalidDecision("give the corrected fields as 'changes' (or the older 'payload'), not both")
        changes = changes if changes is not None else payload
        if action is Action.CORRECT:
            if not isinstance(changes, Mapping):
                raise InvalidDecision("a correction needs the corrected fields as a JSON object ('changes')")
        elif changes is not None:
            raise InvalidDecision(f"corrected fields are only accepted with 'correct', not with {action.value!r}")

        if action is Action.DONE_ELSEWHERE and not (reference and reference.strip()):
            raise InvalidDecision("done_elsewhere needs a reference: where the effect was done (e.g. a payment id)")
        item = self.ledger.get(item_id)
        if action is Action.UNDO:
            from conveyor.review.undo import undo_plan

            target, update = undo_plan(item, self.ledger.history(item_id), actor)
            moved = self.ledger.transition(item.workflow, {item_id: update}, to_status=target, actor=actor,
                                           from_status=item.status)  # fmt: skip
            if item_id not in moved.moved:
                raise InvalidDecision(f"item {item_id!r} moved on meanwhile: the decision cannot be undone")
            forget_labels(self.ledger, [item_id])
            wake(self.ledger, {item.workflow: {item.run_id}})
            return DecisionResult(item_id, action, item.status, target, actor, comment)
        if item.status not in REVIEW_STATUSES:
            raise self._refusal(item_id, item.status)
        if action in (Action.APPROVE, Action.REJECT):
            # The one decision path: a single item is decided as a selection of one.
            outcome = decide_many(self.ledger, [item_id], action.value, reviewer=reviewer, comment=comment)
            if item_id in outcome.blocked:
                raise ApprovalBlocked(item_id, outcome.blocked[item_id])
            if not outcome.decided:
                current = self.ledger.get(item_id).status
                raise self._refusal(item_id, current)
            done = outcome.decided[0]
            return DecisionResult(item_id, action, done.from_status, done.to_status, actor, comment)
        if action in (Action.RETRY_AI, Action.RETRY_EFFECT, Action.DONE_ELSEWHERE):
            from conveyor.review.ways_on import way_on

            target, update = way_on(self.ledger, item, action.value, comment=comment, actor=actor, reference=reference)
        elif item.status == Status.QUARANTINED:
            target, update = self._input_correction(item, changes or {}, comment)
        elif item.status == Status.PENDING_REVIEW:
            target, update = self._answer_correction(item, changes or {}, comment, actor)
        else:
            raise InvalidDecision(
                f"item {item_id!r} is {item.status!r}: an approval is approved or rejected, not corrected"
            )

        result = self.ledger.transition(
            item.workflow, {item_id: update}, to_status=target, actor=actor, from_status=item.status
        )
        if item_id not in result.moved:
            current = result.not_moved.get(item_id) or item.status
            raise self._refusal(item_id, current)
        if action is Action.CORRECT and item.status == Status.PENDING_REVIEW:
            fields = tuple(str(c["field"]) for c in (update.detail or {}).get("changes", ()))
            # a correction that changed nothing left the model's answer standing
            record_labels(self.ledger, [Decision(item_id, "wrong" if fields else "right", fields)], actor)
        if action is Action.DONE_ELSEWHERE and update.detail:
            effect = str(update.detail["effect"])
            self.ledger.complete_effects(effect, {item_id: {"done_elsewhere": update.detail["reference"],
                                                            "recorded_by": actor}})  # fmt: skip
        # the run's review step wakes now, not on its next poll tick
        wake(self.ledger, {item.workflow: {item.run_id}})
        return DecisionResult(item_id, action, item.status, target, actor, comment)

    def _input_correction(self, item: Item, changes: Mapping[str, Any], comment: str | None) -> tuple[str, ItemUpdate]:
        """Quarantined input corrected: merged into the field its gate validated, to ``corrected``."""
        from conveyor.review.coercion import coerce_changes
        from conveyor.review.corrections import merge_changes

        found = quarantine_detail(self.ledger.history(item.item_id))
        field = found.field
        current = item.payload if field == "payload" else item.ai_result
        changes = coerce_changes(changes, found.contract, current if isinstance(current, Mapping) else None)
        merged, diff = merge_changes(current, changes, what="the payload" if field == "payload" else "the AI result")
        detail: dict[str, Any] = {"action": Action.CORRECT.value, "field": field, "changes": diff,
                  **{k: v for k, v in (("gate", found.gate), ("suite", found.suite)) if v is not None}}  # fmt: skip
        data: dict[str, Any] = {"payload": merged} if field == "payload" else {"ai_result": merged}
        update = ItemUpdate(reason=comment, review_target=item.review_target, detail=detail, **data)
        return Status.CORRECTED, update

    def _answer_correction(
        self, item: Item, changes: Mapping[str, Any], comment: str | None, actor: str
    ) -> tuple[str, ItemUpdate]:
        """A pending item's AI answer corrected: checked like a model's answer, then approved onward."""
        from conveyor.review.ai_answers import check_answer
        from conveyor.review.blockers import blockers_of
        from conveyor.review.coercion import check_values
        from conveyor.review.corrections import merge_changes

        # A corrected answer resumes the chain like an approval: for a refused effect that would be
        # the effect's status without the effect.
        for blocker in blockers_of(self.ledger, [item]).get(item.item_id, []):
            if blocker.code == "effect_refused":
                raise InvalidDecision(f"item {item.item_id!r}: {blocker.need}; a correction does not apply")
        check_values(changes)
        history = self.ledger.history(item.item_id)
        merged, diff = merge_changes(item.ai_result, changes, what="the AI result")
        checked = check_answer(self.ledger, item, history, merged, [c["field"] for c in diff])
        detail = {
            "action": Action.CORRECT.value,
            "field": "ai_result",
            "changes": diff,
            "model_answer": item.ai_result,
            "model_confidence": item.confidence,
            "corrected_by": actor,
            **checked,
        }
        target = approval_target(item, history, self.ledger)
        return target, ItemUpdate(reason=comment, ai_result=merged, detail=detail)

    def decide_many(
        self,
        item_ids: Sequence[str] | None,
        action: Action | str,
        *,
        reviewer: str,
        comment: str | None = None,
        where: QueueFilter | None = None,
        max_items: int | None = None,
    ) -> BulkOutcome:
        """Approve or reject many items with one comment (see :mod:`conveyor.review.bulk`).

        :param item_ids: the items; or None with ``where``: every item on the queue matching it.
        :param action: ``approve`` or ``reject``.
        :param reviewer: the person deciding.
        :param comment: why, recorded on every item.
        :param where: the filter, when no ids are given: every item matching it is decided (or,
            with ``max_items``, that many; the outcome's ``remaining`` counts the rest).
        :param max_items: with ``where``: decide at most this many.
        """
        if action not in (Action.APPROVE, Action.REJECT):
            raise InvalidDecision(f"a bulk decision is approve or reject, not {action!r}; correct items one at a time")
        if item_ids is None:
            if where is None:
                raise InvalidDecision("a bulk decision needs item ids or a filter")
            outcome = decide_matching(
                self.ledger, where, str(Action(action).value), reviewer=reviewer, comment=comment, max_items=max_items
            )
        else:
            outcome = decide_many(self.ledger, item_ids, str(Action(action).value), reviewer=reviewer, comment=comment)
        ReviewClaims(self.ledger, minutes=1).release([d.item_id for d in outcome.decided])
        return outcome

    def _refusal(self, item_id: str, status: str) -> NotAwaitingReview:
        """The error for a decision that cannot apply: who decided first, when known."""
        decision = last_decision(self.ledger.history(item_id))
        if decision is not None:
            return DecisionConflict(item_id, status, decision.actor, decision.at)
        return NotAwaitingReview(item_id, status)


def last_decision(history: Sequence[TransitionRecord]) -> TransitionRecord | None:
    """The latest transition that took the item out of a review status."""
    for record in reversed(history):
        if record.from_status is not None and record.from_status in REVIEW_STATUSES:
            return record
    return None


def quarantine_detail(history: Sequence[TransitionRecord]) -> QuarantineDetail:
    """What the latest move to ``quarantined`` recorded (the gate, its suite, the field it read)."""
    for record in reversed(history):
        if record.to_status == Status.QUARANTINED:
            return QuarantineDetail.from_json(record.detail)
    return QuarantineDetail()


def approval_target(item: Item, history: Sequence[TransitionRecord], ledger: Ledger) -> str:
    """Where an approval moves the item.

    The review target recorded when it was routed (the gate's output for quarantined input, the
    status after the step that doubted it). An item routed without one: quarantined input is
    accepted at the workflow's gate output, anything else resumes at the chain status after the
    step that routed it (read from its history).
    """
    if item.review_target:
        return item.review_target
    flow = ledger.workflow(item.workflow)
    if item.status == Status.QUARANTINED:
        return flow.gate_output
    for record in reversed(history):
        if record.to_status in REVIEW_STATUSES and record.from_status is not None and record.from_status in flow.chain:
            return flow.next_after(record.from_status)
    raise InvalidDecision(
        f"item {item.item_id!r} has no review target and its history does not say which step routed it; "
        "reject it or route it again with a review target"
    )
