"""Approval routing: large amounts and doubtful results go to a person, the rest are approved.

Routing by amount is a routine approval (``pending_approval``), not an exception: monitoring
counts it apart from items that failed a check (``pending_review``).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from conveyor.ledger.actors import task_actor
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class ApprovalRoutingOperator(LedgerStepOperator):
    """Approve the run's items unless their amount exceeds a threshold or confidence is low.

    Items over the threshold wait in ``pending_approval``; doubtful ones (low confidence, an
    unreadable amount) in ``pending_review``. Either way a person's approval resumes at ``to_status``.

    :param workflow: the workflow's :class:`~conveyor.workflow.Workflow` (or its stored name).
    :param from_status: status of items to route (e.g. ``classified``).
    :param to_status: status of items approved automatically (e.g. ``approved``).
    :param amount_field: field of the item's AI result (then payload) holding the amount.
    :param threshold: amounts above it need a person (templated, e.g. from an Airflow Variable).
    :param min_confidence: results less confident than this need a person.
    """

    resumable = True  # only the run's items still waiting in its input status are worked on

    template_fields: Sequence[str] = ("threshold",)

    def __init__(
        self,
        *,
        from_status: str,
        to_status: str = "approved",
        amount_field: str = "total",
        threshold: str | float = 5000,
        min_confidence: float = 0.8,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.from_status = from_status
        self.to_status = to_status
        self.amount_field = amount_field
        self.threshold = threshold
        self.min_confidence = min_confidence

    def execute(self, context: Context) -> dict[str, int]:
        from conveyor.ledger.statuses import Status
        from conveyor.ledger.store import ItemUpdate

        try:
            threshold = Decimal(str(self.threshold))
        except InvalidOperation:
            raise ValueError(f"approval threshold {self.threshold!r} is not a number") from None
        ledger = self.ledger(context)
        items = ledger.items(workflow=self.workflow, run_id=context["run_id"], status=self.from_status, limit=None)
        auto: list[str] = []
        to_review: dict[str, ItemUpdate] = {}
        to_approve: dict[str, ItemUpdate] = {}
        for item in items:
            raw = (item.ai_result or {}).get(self.amount_field, item.payload.get(self.amount_field))
            try:
                amount = Decimal(str(raw))
            except InvalidOperation:
                to_review[item.item_id] = ItemUpdate(reason=f"no readable {self.amount_field}: {raw!r}",
                                                     review_target=self.to_status)
                continue
            doubts = []
            if item.confidence is not None and item.confidence < self.min_confidence:
                from conveyor.ai.confidence import distinct_figures

                shown, bound = distinct_figures(item.confidence, self.min_confidence)
                doubts.append(f"confidence {shown} is below {bound}")
            over = amount > threshold
            if over:
                doubts.insert(0, f"{self.amount_field} {amount:,.2f} is over the approval threshold {threshold:,.2f}")
            if doubts:
                # Over the threshold only: a routine approval. Any doubt about the data: an exception.
                target = to_approve if over and len(doubts) == 1 else to_review
                target[item.item_id] = ItemUpdate(reason="; ".join(doubts), review_target=self.to_status)
            else:
                auto.append(item.item_id)
        actor = task_actor(context)
        ledger.transition(self.workflow, auto, to_status=self.to_status, from_status=self.from_status,
                          actor=actor, reason="approved automatically: under threshold and confident")
        ledger.transition(self.workflow, to_approve, to_status=Status.PENDING_APPROVAL, from_status=self.from_status,
                          actor=actor)
        ledger.transition(self.workflow, to_review, to_status=Status.PENDING_REVIEW, from_status=self.from_status,
                          actor=actor)
        summary = {"approved": len(auto), "to_approval": len(to_approve), "to_review": len(to_review)}
        self.log.info("Approval routing: %s (threshold %s, min confidence %.2f)", summary, threshold,
                      self.min_confidence)
        return summary
